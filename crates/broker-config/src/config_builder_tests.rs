//! Tests of the typed broker configuration builder.

use super::*;
use crate::error::ConfigError;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

/// Two configurations are equal when every field is; `BrokerConfig` keeps
/// no state outside its fields, which its `Debug` lists (the given
/// properties included).
fn assert_same(built: &BrokerConfig, parsed: &BrokerConfig) {
    assert_eq!(format!("{built:#?}"), format!("{parsed:#?}"));
}

fn from_strings(pairs: &[(&str, &str)]) -> BrokerConfig {
    let (config, warnings) = BrokerConfig::from_map(&map(pairs)).expect("valid properties");
    assert!(warnings.is_empty(), "{warnings:?}");
    config
}

fn invalid_key(error: BuildError) -> String {
    match error {
        BuildError::Invalid(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an invalid broker setting, got {other:?}"),
    }
}

#[test]
fn defaults_equal_the_property_string_defaults() {
    let built = BrokerConfig::builder().build().expect("defaults are valid");
    assert_same(&built, &BrokerConfig::defaults());
    assert!(built.properties().is_empty());
    let built = BrokerConfig::builder()
        .listener("127.0.0.1:0")
        .log_dir("/tmp/strom")
        .build()
        .expect("valid");
    let parsed = from_strings(&[
        ("listeners", "PLAINTEXT://127.0.0.1:0"),
        ("log.dirs", "/tmp/strom"),
    ]);
    assert_same(&built, &parsed);
}

#[test]
fn broker_setters_write_their_kafka_properties() {
    let built = BrokerConfig::builder()
        .listener("127.0.0.1:0")
        .named_listener("SASL_PLAINTEXT", "127.0.0.1:9094")
        .advertised_listener("localhost:9093")
        .log_dir("/a")
        .log_dir("/b")
        .node_id(7)
        .num_partitions(3)
        .default_replication_factor(2)
        .auto_create_topics(false)
        .delete_topic_enable(false)
        .socket_request_max_size(ByteSize::mib(10))
        .connections_max_idle(Duration::from_secs(30))
        .max_connections(100)
        .offsets_topic_num_partitions(5)
        .offsets_topic_replication_factor(2)
        .offsets_retention(Duration::from_secs(2 * 60 * 60))
        .group_initial_rebalance_delay(Duration::ZERO)
        .group_min_session_timeout(Duration::from_millis(1_500))
        .group_max_session_timeout(Duration::from_secs(60))
        .group_max_size(10)
        .replica_lag_time_max(Duration::from_secs(10))
        .build()
        .expect("valid");
    let parsed = from_strings(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:9094",
        ),
        ("advertised.listeners", "PLAINTEXT://localhost:9093"),
        ("log.dirs", "/a,/b"),
        ("node.id", "7"),
        ("num.partitions", "3"),
        ("default.replication.factor", "2"),
        ("auto.create.topics.enable", "false"),
        ("delete.topic.enable", "false"),
        ("socket.request.max.bytes", "10485760"),
        ("connections.max.idle.ms", "30000"),
        ("max.connections", "100"),
        ("offsets.topic.num.partitions", "5"),
        ("offsets.topic.replication.factor", "2"),
        ("offsets.retention.minutes", "120"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("group.min.session.timeout.ms", "1500"),
        ("group.max.session.timeout.ms", "60000"),
        ("group.max.size", "10"),
        ("replica.lag.time.max.ms", "10000"),
    ]);
    assert_same(&built, &parsed);
    assert_eq!(built.offsets_retention, Duration::from_secs(7_200));
}

#[test]
fn log_setters_write_their_kafka_properties() {
    let built = BrokerConfig::builder()
        .log_retention_check_interval(Duration::from_secs(1))
        .log_flush_scheduler_interval(Duration::from_secs(2))
        .log_flush_offset_checkpoint_interval(Duration::from_secs(3))
        .log_flush_start_offset_checkpoint_interval(Duration::from_secs(4))
        .replica_high_watermark_checkpoint_interval(Duration::from_secs(5))
        .log_cleaner_enable(false)
        .log_cleaner_backoff(Duration::from_millis(250))
        .num_recovery_threads_per_data_dir(4)
        .max_incremental_fetch_session_cache_slots(10)
        .log_writeback_interval(ByteSize::kib(512))
        .log_page_cache_retain(ByteSize::gib(1))
        .build()
        .expect("valid");
    let parsed = from_strings(&[
        ("log.retention.check.interval.ms", "1000"),
        ("log.flush.scheduler.interval.ms", "2000"),
        ("log.flush.offset.checkpoint.interval.ms", "3000"),
        ("log.flush.start.offset.checkpoint.interval.ms", "4000"),
        ("replica.high.watermark.checkpoint.interval.ms", "5000"),
        ("log.cleaner.enable", "false"),
        ("log.cleaner.backoff.ms", "250"),
        ("num.recovery.threads.per.data.dir", "4"),
        ("max.incremental.fetch.session.cache.slots", "10"),
        ("strom.log.writeback.interval.bytes", "524288"),
        ("strom.log.page.cache.retain.bytes", "1073741824"),
    ]);
    assert_same(&built, &parsed);
    assert_eq!(built.log_page_cache_retain_bytes, Some(1 << 30));
}

#[test]
fn topic_default_setters_write_their_kafka_properties() {
    let built = BrokerConfig::builder()
        .log_segment_size(ByteSize::mib(64))
        .log_roll_interval(Duration::from_secs(3_600))
        .log_retention(Duration::from_secs(86_400))
        .log_retention_size(ByteSize::gib(2))
        .log_cleanup_policy(CleanupPolicy {
            delete: true,
            compact: true,
        })
        .compression_type(CompressionType::Zstd)
        .log_message_timestamp_type(MessageTimestampType::LogAppendTime)
        .message_max_size(ByteSize::mib(2))
        .min_insync_replicas(2)
        .build()
        .expect("valid");
    let parsed = from_strings(&[
        ("log.segment.bytes", "67108864"),
        ("log.roll.ms", "3600000"),
        ("log.retention.ms", "86400000"),
        ("log.retention.bytes", "2147483648"),
        ("log.cleanup.policy", "delete,compact"),
        ("compression.type", "zstd"),
        ("log.message.timestamp.type", "LogAppendTime"),
        ("message.max.bytes", "2097152"),
        ("min.insync.replicas", "2"),
    ]);
    assert_same(&built, &parsed);
    let log = LogConfig::from_properties(built.topic_defaults()).expect("valid");
    assert_eq!(log.config.segment_bytes, 64 << 20);
    assert_eq!(log.config.compression_type, CompressionType::Zstd);
    assert!(log.config.cleanup_policy.compact && log.config.cleanup_policy.delete);
    let forever = BrokerConfig::builder().log_retention_forever().build();
    assert_eq!(
        forever.expect("valid").topic_defaults()["retention.ms"],
        "-1"
    );
}

#[test]
fn every_compression_type_is_written_as_storage_parses_it() {
    for compression in [
        CompressionType::Producer,
        CompressionType::Uncompressed,
        CompressionType::Gzip,
        CompressionType::Snappy,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ] {
        let built = BrokerConfig::builder()
            .compression_type(compression)
            .build()
            .expect("valid");
        let log = LogConfig::from_properties(built.topic_defaults()).expect("valid");
        assert_eq!(log.config.compression_type, compression);
    }
}

#[test]
fn values_the_rules_refuse_name_their_key() {
    let refused = [
        (BrokerConfig::builder().num_partitions(0), "num.partitions"),
        (BrokerConfig::builder().node_id(-1), "node.id"),
        (
            BrokerConfig::builder().offsets_topic_num_partitions(0),
            "offsets.topic.num.partitions",
        ),
        (
            BrokerConfig::builder().num_recovery_threads_per_data_dir(0),
            "num.recovery.threads.per.data.dir",
        ),
        (
            BrokerConfig::builder().group_min_session_timeout(Duration::from_secs(3_600)),
            "group.min.session.timeout.ms",
        ),
        (BrokerConfig::builder().listener("127.0.0.1"), "listeners"),
        (
            BrokerConfig::builder().listener("example.com:9092"),
            "listeners",
        ),
        (
            BrokerConfig::builder().advertised_listener("127.0.0.1:99999"),
            "advertised.listeners",
        ),
        (
            BrokerConfig::builder().property("num.partitions", "many"),
            "num.partitions",
        ),
    ];
    for (builder, key) in refused {
        let error = builder.build().expect_err(key);
        assert!(error.to_string().contains(key), "{error}");
        assert_eq!(invalid_key(error), key);
    }
}

#[test]
fn topic_defaults_are_checked_when_building() {
    // The string form refuses an out-of-range topic default at parse time,
    // and so does the builder, naming the key.
    assert!(BrokerConfig::from_map(&map(&[("log.segment.bytes", "10")])).is_err());
    let error = BrokerConfig::builder()
        .log_segment_size(ByteSize::bytes(10))
        .build()
        .expect_err("segments must hold a batch header");
    assert!(error.to_string().contains("segment.bytes"), "{error:?}");
    let error = BrokerConfig::builder()
        .log_segment_size(ByteSize::gib(8))
        .build()
        .expect_err("segment.bytes is a 32-bit integer");
    assert!(error.to_string().contains("segment.bytes"), "{error:?}");
}

#[test]
fn durations_must_be_whole_units_of_their_property() {
    let error = BrokerConfig::builder()
        .connections_max_idle(Duration::from_micros(1_500))
        .build()
        .expect_err("sub-millisecond");
    assert!(
        matches!(
            &error,
            BuildError::NotWholeUnit { key, unit: "milliseconds", nanos: 1_500_000 }
                if key == "connections.max.idle.ms"
        ),
        "{error:?}"
    );
    let error = BrokerConfig::builder()
        .offsets_retention(Duration::from_secs(90))
        .build()
        .expect_err("not whole minutes");
    assert!(
        matches!(&error, BuildError::NotWholeUnit { key, unit: "minutes", .. }
            if key == "offsets.retention.minutes"),
        "{error:?}"
    );
}

#[test]
fn values_beyond_a_long_are_refused() {
    let error = BrokerConfig::builder()
        .log_retention(Duration::from_secs(u64::MAX))
        .build()
        .expect_err("too long");
    assert!(
        matches!(&error, BuildError::TooLarge { key, .. } if key == "log.retention.ms"),
        "{error:?}"
    );
    let error = BrokerConfig::builder()
        .log_retention_size(ByteSize::bytes(u64::MAX))
        .build()
        .expect_err("too large");
    assert!(
        matches!(&error, BuildError::TooLarge { key, value, .. }
            if key == "log.retention.bytes" && *value == u128::from(u64::MAX)),
        "{error:?}"
    );
    // Too large for the broker's own range: the rules of the string form.
    let error = BrokerConfig::builder()
        .socket_request_max_size(ByteSize::gib(4))
        .build()
        .expect_err("beyond an int");
    assert_eq!(invalid_key(error), "socket.request.max.bytes");
}

#[test]
fn log_dirs_that_the_property_cannot_express_are_refused() {
    for path in ["/a,b", " /a", "/a ", ""] {
        let error = BrokerConfig::builder()
            .log_dir(path)
            .build()
            .expect_err(path);
        assert!(
            matches!(&error, BuildError::LogDir { path: refused } if refused == Path::new(path)),
            "{error:?}"
        );
    }
}

#[test]
fn unknown_and_ignored_properties_are_refused() {
    let error = BrokerConfig::builder()
        .property("log.retension.hours", "1")
        .build()
        .expect_err("typo");
    assert!(
        matches!(&error, BuildError::UnknownProperty { key } if key == "log.retension.hours"),
        "{error:?}"
    );
    let error = BrokerConfig::builder()
        .property("num.io.threads", "8")
        .build()
        .expect_err("no effect");
    assert!(
        matches!(&error, BuildError::IgnoredProperty { key } if key == "num.io.threads"),
        "{error:?}"
    );
    let built = BrokerConfig::builder()
        .property("log.flush.interval.messages", "1000")
        .build()
        .expect("a known key without a typed setter");
    assert_eq!(built.topic_defaults()["flush.messages"], "1000");
}

#[test]
fn the_last_value_of_a_setting_wins() {
    let built = BrokerConfig::builder()
        .listener("127.0.0.1:1")
        .listener("127.0.0.1:2")
        .num_partitions(2)
        .property("num.partitions", "4")
        .build()
        .expect("valid");
    assert_eq!(built.listeners.len(), 1);
    assert_eq!(built.listeners[0].port, 2);
    assert_eq!(built.num_partitions, 4);
    let address: std::net::SocketAddr = "[::1]:0".parse().expect("address");
    let built = BrokerConfig::builder()
        .listener(address)
        .build()
        .expect("IPv6");
    assert_eq!(built.listeners[0].bind_address().expect("valid"), address);
}

#[test]
fn byte_sizes_count_binary_units_and_saturate() {
    assert_eq!(ByteSize::kib(3).as_bytes(), 3 * 1024);
    assert_eq!(ByteSize::mib(3).as_bytes(), 3 * 1024 * 1024);
    assert_eq!(ByteSize::gib(3).as_bytes(), 3 << 30);
    assert_eq!(ByteSize::gib(u64::MAX).as_bytes(), u64::MAX);
    assert_eq!(ByteSize::bytes(5).to_string(), "5 bytes");
}
