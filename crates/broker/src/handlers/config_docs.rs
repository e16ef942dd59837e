//! Kafka's `ConfigSource` codes for DescribeConfigs. The types and
//! descriptions of topic-level keys come from the table in
//! [`strom_protocol::topic_config`].

/// `DescribeConfigsResponse.ConfigSource` codes.
pub use strom_protocol::config_source as source;
