//! Kafka's `ConfigSource` and `ConfigType` codes for DescribeConfigs, and a
//! one-line description of each topic-level configuration (written for
//! Strom; the meaning follows Kafka's documentation of the same key).

use strom_controller::config::{ConfigDefinition, ConfigKind};

/// `DescribeConfigsResponse.ConfigSource` codes.
pub mod source {
    /// A per-topic override (`TOPIC_CONFIG` / `DYNAMIC_TOPIC_CONFIG`).
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    /// A value from the broker's properties file or command line.
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    /// Kafka's built-in default.
    pub const DEFAULT_CONFIG: i8 = 5;
}

/// `DescribeConfigsResponse.ConfigType` codes.
pub mod config_type {
    /// A boolean.
    pub const BOOLEAN: i8 = 1;
    /// A string.
    pub const STRING: i8 = 2;
    /// A 32-bit integer.
    pub const INT: i8 = 3;
    /// A 64-bit integer.
    pub const LONG: i8 = 5;
    /// A floating-point number.
    pub const DOUBLE: i8 = 6;
    /// A comma-separated list.
    pub const LIST: i8 = 7;
}

/// The Kafka config type of a topic-level definition.
pub fn type_of(definition: &ConfigDefinition) -> i8 {
    match definition.kind {
        ConfigKind::Int { .. } => config_type::INT,
        ConfigKind::Long { .. } => config_type::LONG,
        ConfigKind::Double { .. } => config_type::DOUBLE,
        ConfigKind::Boolean => config_type::BOOLEAN,
        ConfigKind::OneOf(_) | ConfigKind::Text => config_type::STRING,
        ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas => config_type::LIST,
    }
}

/// A one-line description of a topic-level key (`None` for keys this table
/// does not describe).
pub fn documentation(name: &str) -> Option<&'static str> {
    let text = match name {
        "cleanup.policy" => "How old segments are discarded: delete them, compact by key, or both.",
        "compression.gzip.level" => "Compression level used when compression.type is gzip.",
        "compression.lz4.level" => "Compression level used when compression.type is lz4.",
        "compression.type" => "Codec for stored batches; producer keeps the codec the producer used.",
        "compression.zstd.level" => "Compression level used when compression.type is zstd.",
        "delete.retention.ms" => "How long delete tombstones stay readable in a compacted topic.",
        "file.delete.delay.ms" => "Delay before a segment removed from the log is deleted from disk.",
        "flush.messages" => "Force an fsync after this many appended messages.",
        "flush.ms" => "Force an fsync when this much time has passed since the last one.",
        "follower.replication.throttled.replicas" => "Replicas whose follower fetches are throttled.",
        "index.interval.bytes" => "Bytes of log between two offset index entries.",
        "leader.replication.throttled.replicas" => "Replicas whose leader-side reads are throttled.",
        "max.compaction.lag.ms" => "Longest time a record may stay uncompacted.",
        "max.message.bytes" => "Largest record batch the topic accepts, in bytes.",
        "message.downconversion.enable" => "Whether fetches may down-convert batches for old clients.",
        "message.format.version" => "Legacy message format version (ignored by recent brokers).",
        "message.timestamp.after.max.ms" => "How far in the future a CreateTime timestamp may lie.",
        "message.timestamp.before.max.ms" => "How far in the past a CreateTime timestamp may lie.",
        "message.timestamp.difference.max.ms" => "Largest allowed gap between a CreateTime timestamp and the broker's clock.",
        "message.timestamp.type" => "Whether records keep the producer's timestamp (CreateTime) or get the append time (LogAppendTime).",
        "min.cleanable.dirty.ratio" => "Share of uncompacted log that makes a partition eligible for compaction.",
        "min.compaction.lag.ms" => "Shortest time a record stays uncompacted.",
        "min.insync.replicas" => "Fewest in-sync replicas an acks=all write needs.",
        "preallocate" => "Whether new segment files are preallocated.",
        "retention.bytes" => "Largest size of a partition before old segments are deleted; -1 for no limit.",
        "retention.ms" => "How long segments are kept before deletion; -1 for no limit.",
        "segment.bytes" => "Size at which a new log segment is started.",
        "segment.index.bytes" => "Size of a segment's offset and time indexes.",
        "segment.jitter.ms" => "Random delay subtracted from segment.ms to spread segment rolls.",
        "segment.ms" => "Age at which a new log segment is started.",
        "unclean.leader.election.enable" => "Whether a replica outside the ISR may become leader (risking data loss).",
        _ => return None,
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use strom_controller::config::TOPIC_CONFIGS;

    use super::*;

    #[test]
    fn every_topic_config_is_documented() {
        for definition in TOPIC_CONFIGS {
            assert!(
                documentation(definition.name).is_some(),
                "{}",
                definition.name
            );
        }
        assert_eq!(documentation("no.such.key"), None);
    }
}
