//! Kafka's `DescribeConfigsResponse.ConfigSource` codes and their names.

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
/// A broker logger's level (not served by Strom).
pub const DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;
/// A client metrics subscription (not served by Strom).
pub const CLIENT_METRICS_CONFIG: i8 = 7;
/// A group's config (not served by Strom).
pub const GROUP_CONFIG: i8 = 8;

/// Kafka's name of a source code (`UNKNOWN` for any other).
pub fn name(code: i8) -> &'static str {
    match code {
        DYNAMIC_TOPIC_CONFIG => "DYNAMIC_TOPIC_CONFIG",
        DYNAMIC_BROKER_CONFIG => "DYNAMIC_BROKER_CONFIG",
        DYNAMIC_DEFAULT_BROKER_CONFIG => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        STATIC_BROKER_CONFIG => "STATIC_BROKER_CONFIG",
        DEFAULT_CONFIG => "DEFAULT_CONFIG",
        DYNAMIC_BROKER_LOGGER_CONFIG => "DYNAMIC_BROKER_LOGGER_CONFIG",
        CLIENT_METRICS_CONFIG => "CLIENT_METRICS_CONFIG",
        GROUP_CONFIG => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}
