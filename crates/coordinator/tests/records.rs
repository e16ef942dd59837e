//! `__consumer_offsets` record schemas: byte fixtures laid out by hand from
//! Kafka's JSON schemas, proptest round trips, and malformed input.

use bytes::Bytes;
use proptest::prelude::*;
use strom_coordinator::records::{
    GroupMetadataValue, MemberMetadata, OffsetCommitValue, OffsetsRecord, RecordKey,
};
use strom_coordinator::{java_string_hash_code, partition_for_group, LogRecord, RecordError};

#[test]
fn java_string_hash_code_matches_java() {
    assert_eq!(java_string_hash_code(""), 0);
    assert_eq!(java_string_hash_code("a"), 97);
    assert_eq!(java_string_hash_code("hello"), 99_162_322);
    assert_eq!(java_string_hash_code("Aa"), 2_112);
    assert_eq!(java_string_hash_code("BB"), 2_112);
    assert_eq!(java_string_hash_code("polygenelubricants"), i32::MIN);
    assert_eq!(java_string_hash_code("é"), 233);
    // U+1F600 is two UTF-16 code units: 0xD83D * 31 + 0xDE00.
    assert_eq!(java_string_hash_code("\u{1F600}"), 1_772_899);
}

#[test]
fn group_partition_is_kafkas() {
    assert_eq!(partition_for_group("hello", 50), 99_162_322 % 50);
    assert_eq!(partition_for_group("polygenelubricants", 50), 0);
    assert_eq!(partition_for_group("a", 50), 47);
    // "hello world".hashCode() is 1794106052.
    assert_eq!(java_string_hash_code("hello world"), 1_794_106_052);
    assert_eq!(partition_for_group("hello world", 50), 2);
    for group in ["x", "consumer-group", "\u{1F600}", ""] {
        let partition = partition_for_group(group, 7);
        assert!((0..7).contains(&partition));
    }
}

#[test]
fn offset_commit_key_fixture() {
    let key = RecordKey::OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 2,
    };
    let bytes: &[u8] = &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2];
    assert_eq!(key.encode().as_ref(), bytes);
    assert_eq!(RecordKey::decode(bytes), Ok(key.clone()));
    let version_zero: &[u8] = &[0, 0, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2];
    assert_eq!(RecordKey::decode(version_zero), Ok(key));
}

#[test]
fn group_metadata_key_fixture() {
    let key = RecordKey::GroupMetadata {
        group: "grp".into(),
    };
    let bytes: &[u8] = &[0, 2, 0, 3, b'g', b'r', b'p'];
    assert_eq!(key.encode().as_ref(), bytes);
    assert_eq!(RecordKey::decode(bytes), Ok(key));
}

#[test]
fn other_record_types_are_recognised_and_bad_versions_refused() {
    assert_eq!(
        RecordKey::decode(&[0, 3, 1, 2, 3]),
        Ok(RecordKey::Other { version: 3 })
    );
    assert_eq!(
        RecordKey::decode(&[0xff, 0xff]),
        Err(RecordError::UnknownVersion {
            schema: "key",
            version: -1
        })
    );
}

fn offset_value() -> OffsetCommitValue {
    OffsetCommitValue {
        offset: 5,
        leader_epoch: 7,
        metadata: "m".into(),
        commit_timestamp_ms: 1_000,
        expire_timestamp_ms: -1,
    }
}

#[test]
fn offset_commit_value_v3_fixture() {
    let bytes: &[u8] = &[
        0, 3, // version
        0, 0, 0, 0, 0, 0, 0, 5, // offset
        0, 0, 0, 7, // leader epoch
        0, 1, b'm', // metadata
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // commit timestamp
    ];
    assert_eq!(offset_value().encode(3).as_ref(), bytes);
    assert_eq!(OffsetCommitValue::decode(bytes), Ok(offset_value()));
    assert_eq!(offset_value().preferred_version(), 3);
}

#[test]
fn offset_commit_value_v1_fixture_with_expiry() {
    let value = OffsetCommitValue {
        leader_epoch: -1,
        expire_timestamp_ms: 2_000,
        ..offset_value()
    };
    let bytes: &[u8] = &[
        0, 1, // version
        0, 0, 0, 0, 0, 0, 0, 5, // offset
        0, 1, b'm', // metadata
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // commit timestamp
        0, 0, 0, 0, 0, 0, 0x07, 0xd0, // expire timestamp
    ];
    assert_eq!(value.preferred_version(), 1);
    assert_eq!(value.encode(1).as_ref(), bytes);
    assert_eq!(OffsetCommitValue::decode(bytes), Ok(value));
}

#[test]
fn offset_commit_value_v0_and_v4_fixtures() {
    let v0: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 1, b'm', 0, 0, 0, 0, 0, 0, 0x03, 0xe8,
    ];
    let decoded = OffsetCommitValue::decode(v0).expect("v0 decodes");
    assert_eq!(decoded.leader_epoch, -1);
    assert_eq!(decoded.offset, 5);
    let v4: &[u8] = &[
        0, 4, // version
        0, 0, 0, 0, 0, 0, 0, 5, // offset
        0, 0, 0, 7, // leader epoch
        2, b'm', // compact string
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // commit timestamp
        0,    // no tagged fields
    ];
    assert_eq!(offset_value().encode(4).as_ref(), v4);
    assert_eq!(OffsetCommitValue::decode(v4), Ok(offset_value()));
    // A tagged field (tag 5, two bytes) is skipped.
    let mut tagged = v4[..v4.len() - 1].to_vec();
    tagged.extend_from_slice(&[1, 5, 2, 0xaa, 0xbb]);
    assert_eq!(OffsetCommitValue::decode(&tagged), Ok(offset_value()));
}

fn group_value() -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 3,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp_ms: 9,
        members: vec![MemberMetadata {
            member_id: "m1".into(),
            group_instance_id: Some("i".into()),
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 300,
            session_timeout_ms: 100,
            subscription: Bytes::from_static(&[1, 2]),
            assignment: Bytes::from_static(&[3]),
        }],
    }
}

#[test]
fn group_metadata_value_v3_fixture() {
    let bytes: &[u8] = &[
        0, 3, // version
        0, 8, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol type
        0, 0, 0, 3, // generation
        0, 5, b'r', b'a', b'n', b'g', b'e', // protocol
        0, 2, b'm', b'1', // leader
        0, 0, 0, 0, 0, 0, 0, 9, // current state timestamp
        0, 0, 0, 1, // one member
        0, 2, b'm', b'1', // member id
        0, 1, b'i', // group instance id
        0, 1, b'c', // client id
        0, 1, b'h', // client host
        0, 0, 1, 0x2c, // rebalance timeout 300
        0, 0, 0, 100, // session timeout
        0, 0, 0, 2, 1, 2, // subscription
        0, 0, 0, 1, 3, // assignment
    ];
    assert_eq!(group_value().encode(3).as_ref(), bytes);
    assert_eq!(GroupMetadataValue::decode(bytes), Ok(group_value()));
}

#[test]
fn group_metadata_value_v0_fixture_with_null_protocol_and_leader() {
    let bytes: &[u8] = &[
        0, 0, // version
        0, 8, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol type
        0, 0, 0, 4, // generation
        0xff, 0xff, // null protocol
        0xff, 0xff, // null leader
        0, 0, 0, 0, // no members
    ];
    let value = GroupMetadataValue::decode(bytes).expect("v0 decodes");
    assert_eq!(value.generation, 4);
    assert_eq!(value.protocol, None);
    assert_eq!(value.leader, None);
    assert_eq!(value.current_state_timestamp_ms, -1);
    assert!(value.members.is_empty());
    assert_eq!(value.encode(0).as_ref(), bytes);
}

#[test]
fn group_metadata_value_v4_is_flexible() {
    let encoded = group_value().encode(4);
    assert_eq!(
        &encoded[..4],
        &[0, 4, 9, b'c'],
        "compact string length is n + 1"
    );
    assert_eq!(GroupMetadataValue::decode(&encoded), Ok(group_value()));
}

#[test]
fn malformed_values_are_errors() {
    let good = offset_value().encode(3);
    for cut in 0..good.len() {
        assert!(
            OffsetCommitValue::decode(&good[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let mut trailing = good.to_vec();
    trailing.push(0);
    assert_eq!(
        OffsetCommitValue::decode(&trailing),
        Err(RecordError::TrailingBytes { remaining: 1 })
    );
    assert_eq!(
        OffsetCommitValue::decode(&[0, 9]),
        Err(RecordError::UnknownVersion {
            schema: "OffsetCommitValue",
            version: 9
        })
    );
    // A member count far beyond the input is refused before allocating.
    let mut huge = group_value().encode(3)[..40].to_vec();
    let count_at = 2 + 10 + 4 + 7 + 4 + 8;
    huge[count_at..count_at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        GroupMetadataValue::decode(&huge),
        Err(RecordError::InvalidLength {
            field: "members",
            ..
        })
    ));
    let invalid_utf8: &[u8] = &[0, 2, 0, 1, 0xff];
    assert_eq!(
        RecordKey::decode(invalid_utf8),
        Err(RecordError::InvalidUtf8 { field: "group" })
    );
}

#[test]
fn tombstones_decode_to_none() {
    let record = OffsetsRecord::GroupMetadata {
        group: "g".into(),
        value: None,
    };
    let log_record = record.to_log_record();
    assert_eq!(log_record.value, None);
    assert_eq!(OffsetsRecord::from_log_record(&log_record), Ok(record));
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9._\\-é😀]{0,24}"
}

fn member() -> impl Strategy<Value = MemberMetadata> {
    (
        text(),
        proptest::option::of(text()),
        text(),
        text(),
        any::<i32>(),
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..32),
        proptest::collection::vec(any::<u8>(), 0..32),
    )
        .prop_map(
            |(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance,
                session,
                sub,
                assign,
            )| {
                MemberMetadata {
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms: rebalance,
                    session_timeout_ms: session,
                    subscription: Bytes::from(sub),
                    assignment: Bytes::from(assign),
                }
            },
        )
}

fn group_metadata() -> impl Strategy<Value = GroupMetadataValue> {
    (
        text(),
        any::<i32>(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        any::<i64>(),
        proptest::collection::vec(member(), 0..4),
    )
        .prop_map(
            |(protocol_type, generation, protocol, leader, timestamp, members)| {
                GroupMetadataValue {
                    protocol_type,
                    generation,
                    protocol,
                    leader,
                    current_state_timestamp_ms: timestamp,
                    members,
                }
            },
        )
}

/// What survives an encoding at `version`.
fn group_at_version(mut value: GroupMetadataValue, version: i16) -> GroupMetadataValue {
    if version < 2 {
        value.current_state_timestamp_ms = -1;
    }
    for member in &mut value.members {
        if version < 3 {
            member.group_instance_id = None;
        }
        if version < 1 {
            member.rebalance_timeout_ms = member.session_timeout_ms;
        }
    }
    value
}

fn offset_at_version(mut value: OffsetCommitValue, version: i16) -> OffsetCommitValue {
    if version < 3 {
        value.leader_epoch = -1;
    }
    if version != 1 {
        value.expire_timestamp_ms = -1;
    }
    value
}

proptest! {
    #[test]
    fn offset_commit_values_round_trip(
        offset in any::<i64>(),
        leader_epoch in any::<i32>(),
        metadata in text(),
        commit in any::<i64>(),
        expire in any::<i64>(),
        version in 0_i16..=4,
    ) {
        let value = OffsetCommitValue {
            offset, leader_epoch, metadata, commit_timestamp_ms: commit, expire_timestamp_ms: expire,
        };
        let encoded = value.encode(version);
        prop_assert_eq!(OffsetCommitValue::decode(&encoded), Ok(offset_at_version(value, version)));
    }

    #[test]
    fn group_metadata_values_round_trip(value in group_metadata(), version in 0_i16..=4) {
        let encoded = value.encode(version);
        prop_assert_eq!(GroupMetadataValue::decode(&encoded), Ok(group_at_version(value, version)));
    }

    #[test]
    fn keys_round_trip(group in text(), topic in text(), partition in any::<i32>()) {
        let offset_key = RecordKey::OffsetCommit { group: group.clone(), topic, partition };
        prop_assert_eq!(RecordKey::decode(&offset_key.encode()), Ok(offset_key));
        let group_key = RecordKey::GroupMetadata { group };
        prop_assert_eq!(RecordKey::decode(&group_key.encode()), Ok(group_key));
    }

    #[test]
    fn arbitrary_bytes_never_panic(key in proptest::collection::vec(any::<u8>(), 0..64),
                                   value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..128))) {
        let record = LogRecord { key: Bytes::from(key), value: value.map(Bytes::from) };
        let _ = OffsetsRecord::from_log_record(&record);
        if let Some(value) = &record.value {
            let _ = GroupMetadataValue::decode(value);
            let _ = OffsetCommitValue::decode(value);
        }
    }
}
