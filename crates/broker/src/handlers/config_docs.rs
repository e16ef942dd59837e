//! Kafka's `ConfigSource` codes for DescribeConfigs. The types and
//! descriptions of topic-level keys come from the table in
//! [`strom_protocol::topic_config`].

/// `DescribeConfigsResponse.ConfigSource` codes.
pub mod source {
    /// A per-topic override (`TOPIC_CONFIG` / `DYNAMIC_TOPIC_CONFIG`).
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    /// A dynamic config of one broker.
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    /// A dynamic config of every broker (the cluster default).
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    /// A value from the broker's properties file or command line.
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    /// Kafka's built-in default.
    pub const DEFAULT_CONFIG: i8 = 5;
}
