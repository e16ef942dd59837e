//! The records of `__transaction_state`, in Kafka's key and value schemas.
//!
//! A key is an int16 version, 0 (`TransactionLogKey`, which Kafka also
//! calls coordinator record type 0), then the transactional id as a classic
//! string (int16 length, UTF-8 bytes). A value is an int16 version, then
//! `TransactionLogValue`:
//!
//! * v0, classic encoding: `producer_id` int64, `producer_epoch` int16,
//!   `transaction_timeout_ms` int32, `transaction_status` int8 (the
//!   [`TransactionState`] id), `transaction_partitions` as a nullable array
//!   (int32 count, -1 for null) of `{topic: string, partition_ids: [int32]}`,
//!   `transaction_last_update_timestamp_ms` int64,
//!   `transaction_start_timestamp_ms` int64.
//! * v1, flexible encoding (KIP-890 part 2): the same fields with compact
//!   lengths (unsigned varint of length plus one, 0 for null) and a tagged
//!   field section after each partition entry and after the value. The
//!   value's tagged fields are 0 `previous_producer_id` int64 (default -1),
//!   1 `next_producer_id` int64 (default -1), 2 `client_transaction_version`
//!   int16 (default 0) and, in Kafka's newer sources (two-phase commit,
//!   KIP-939), 3 `next_producer_epoch` int16 (default -1). A tagged field is written
//!   only when it differs from its default; unknown tags are skipped.
//!
//! A null value (a tombstone) means the transactional id expired. Kafka
//! writes no partitions (null) for an `Empty` transaction, and v1 when the
//! cluster's `transaction.version` is 1 or more.
//!
//! Decoding reads exactly one record: bytes after the last field are an
//! error, as is every length that the rest of the input cannot hold.

use crate::error::{DecodeError, EncodeError};
use crate::state::TransactionState;
use crate::wire::{Reader, Writer};

/// The only key version, `TransactionLogKey`.
pub const KEY_VERSION: i16 = 0;
/// The highest value version Strom reads and writes.
pub const HIGHEST_VALUE_VERSION: i16 = 1;

/// Tag of `previous_producer_id` in value v1.
const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
/// Tag of `next_producer_id` in value v1.
const TAG_NEXT_PRODUCER_ID: u32 = 1;
/// Tag of `client_transaction_version` in value v1.
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;
/// Tag of `next_producer_epoch` in value v1.
const TAG_NEXT_PRODUCER_EPOCH: u32 = 3;

/// The smallest encoded partition entry: an empty topic name and an empty
/// partition list (three bytes in either encoding), used to bound counts.
const MIN_PARTITIONS_ENTRY_BYTES: usize = 3;

/// Encodes the key of `transactional_id`'s records.
pub fn encode_key(transactional_id: &str) -> Result<Vec<u8>, EncodeError> {
    let mut writer = Writer::default();
    writer.i16(KEY_VERSION);
    writer.string(false, transactional_id, "transactional_id")?;
    Ok(writer.into_bytes())
}

/// Decodes a key into its transactional id.
pub fn decode_key(input: &[u8]) -> Result<String, DecodeError> {
    let mut reader = Reader::new(input);
    let version = reader.i16("key version")?;
    if version != KEY_VERSION {
        return Err(DecodeError::UnknownKeyVersion { version });
    }
    let transactional_id = reader.string(false, "transactional_id")?;
    reader.finish()?;
    Ok(transactional_id)
}

/// The partitions of one topic in a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic's name.
    pub topic: String,
    /// The partition indexes.
    pub partition_ids: Vec<i32>,
}

/// `TransactionLogValue`: what the coordinator knows about a transactional
/// id, as written to `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id of the last committed transaction, -1 if none (v1).
    pub previous_producer_id: i64,
    /// The producer id handed to the producer when its epoch ran out, -1 if
    /// none (v1).
    pub next_producer_id: i64,
    /// The epoch of `producer_id`.
    pub producer_epoch: i16,
    /// The epoch that goes with `next_producer_id`, -1 if none (v1, tag 3).
    pub next_producer_epoch: i16,
    /// The transaction timeout in milliseconds.
    pub transaction_timeout_ms: i32,
    /// The transaction's state.
    pub transaction_status: TransactionState,
    /// The partitions in the transaction; null when `Empty`.
    pub transaction_partitions: Option<Vec<TopicPartitions>>,
    /// When the transaction was last updated, in wall-clock milliseconds.
    pub transaction_last_update_timestamp_ms: i64,
    /// When the transaction started, in wall-clock milliseconds (-1 if none).
    pub transaction_start_timestamp_ms: i64,
    /// The client's transaction version (v1): 0 or 1 for KIP-98's
    /// protocol, 2 for KIP-890 part 2's.
    pub client_transaction_version: i16,
}

impl TransactionLogValue {
    /// Encodes the value, version first, in `version` (0 or 1). Version 0
    /// cannot carry the tagged fields: asking for it with one of them set
    /// to other than its default is an error, as in Kafka.
    pub fn encode(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        let flexible = match version {
            0 => {
                self.check_no_tagged_fields()?;
                false
            }
            1 => true,
            _ => return Err(EncodeError::UnsupportedVersion { version }),
        };
        let mut writer = Writer::default();
        writer.i16(version);
        writer.i64(self.producer_id);
        writer.i16(self.producer_epoch);
        writer.i32(self.transaction_timeout_ms);
        writer.i8(self.transaction_status.id());
        self.encode_partitions(&mut writer, flexible)?;
        writer.i64(self.transaction_last_update_timestamp_ms);
        writer.i64(self.transaction_start_timestamp_ms);
        if flexible {
            self.encode_tagged_fields(&mut writer);
        }
        Ok(writer.into_bytes())
    }

    /// The size in bytes of [`Self::encode`]'s output in `version` (0 or
    /// 1), for sizing a batch before writing it.
    pub fn encoded_len(&self, version: i16) -> usize {
        let flexible = version >= 1;
        let count_len = |count: usize| {
            if flexible {
                unsigned_varint_len(count as u64 + 1)
            } else {
                4
            }
        };
        let partitions = self.transaction_partitions.as_deref();
        let mut length = 2 + 8 + 2 + 4 + 1 + 8 + 8;
        length += count_len(partitions.map_or(0, <[_]>::len));
        for entry in partitions.unwrap_or_default() {
            length += if flexible {
                unsigned_varint_len(entry.topic.len() as u64 + 1)
            } else {
                2
            };
            length += entry.topic.len();
            length += count_len(entry.partition_ids.len()) + 4 * entry.partition_ids.len();
            length += usize::from(flexible);
        }
        if flexible {
            let (previous, next) = (self.previous_producer_id != -1, self.next_producer_id != -1);
            let (client, epoch) = (
                self.client_transaction_version != 0,
                self.next_producer_epoch != -1,
            );
            length += 1 + 10 * usize::from(previous) + 10 * usize::from(next);
            length += 4 * usize::from(client) + 4 * usize::from(epoch);
        }
        length
    }

    fn check_no_tagged_fields(&self) -> Result<(), EncodeError> {
        let set = [
            ("previous_producer_id", self.previous_producer_id != -1),
            ("next_producer_id", self.next_producer_id != -1),
            ("next_producer_epoch", self.next_producer_epoch != -1),
            (
                "client_transaction_version",
                self.client_transaction_version != 0,
            ),
        ];
        match set.into_iter().find(|(_, is_set)| *is_set) {
            Some((field, _)) => Err(EncodeError::FieldNotInVersion { field }),
            None => Ok(()),
        }
    }

    fn encode_partitions(&self, writer: &mut Writer, flexible: bool) -> Result<(), EncodeError> {
        let partitions = self.transaction_partitions.as_deref();
        writer.array_count(
            flexible,
            partitions.map(<[_]>::len),
            "transaction_partitions",
        )?;
        for entry in partitions.unwrap_or_default() {
            writer.string(flexible, &entry.topic, "topic")?;
            writer.array_count(flexible, Some(entry.partition_ids.len()), "partition_ids")?;
            for partition in &entry.partition_ids {
                writer.i32(*partition);
            }
            if flexible {
                writer.unsigned_varint(0);
            }
        }
        Ok(())
    }

    fn encode_tagged_fields(&self, writer: &mut Writer) {
        let fields = [
            (TAG_PREVIOUS_PRODUCER_ID, self.previous_producer_id != -1),
            (TAG_NEXT_PRODUCER_ID, self.next_producer_id != -1),
            (
                TAG_CLIENT_TRANSACTION_VERSION,
                self.client_transaction_version != 0,
            ),
            (TAG_NEXT_PRODUCER_EPOCH, self.next_producer_epoch != -1),
        ];
        let count = fields.iter().filter(|(_, is_set)| *is_set).count();
        // At most four fields.
        writer.unsigned_varint(count as u32);
        for (tag, is_set) in fields {
            if !is_set {
                continue;
            }
            writer.unsigned_varint(tag);
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => long_field(writer, self.previous_producer_id),
                TAG_NEXT_PRODUCER_ID => long_field(writer, self.next_producer_id),
                TAG_CLIENT_TRANSACTION_VERSION => {
                    short_field(writer, self.client_transaction_version)
                }
                _ => short_field(writer, self.next_producer_epoch),
            }
        }
    }

    /// Decodes a value, version first.
    pub fn decode(input: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = Reader::new(input);
        let version = reader.i16("value version")?;
        let flexible = match version {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::UnknownValueVersion { version }),
        };
        let producer_id = reader.i64("producer_id")?;
        let producer_epoch = reader.i16("producer_epoch")?;
        let transaction_timeout_ms = reader.i32("transaction_timeout_ms")?;
        let status = reader.i8("transaction_status")?;
        let transaction_status =
            TransactionState::from_id(status).ok_or(DecodeError::UnknownStatus { id: status })?;
        let transaction_partitions = decode_partitions(&mut reader, flexible)?;
        let mut value = Self {
            producer_id,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch,
            next_producer_epoch: -1,
            transaction_timeout_ms,
            transaction_status,
            transaction_partitions,
            transaction_last_update_timestamp_ms: reader
                .i64("transaction_last_update_timestamp_ms")?,
            transaction_start_timestamp_ms: reader.i64("transaction_start_timestamp_ms")?,
            client_transaction_version: 0,
        };
        if flexible {
            value.decode_tagged_fields(&mut reader)?;
        }
        reader.finish()?;
        Ok(value)
    }

    fn decode_tagged_fields(&mut self, reader: &mut Reader<'_>) -> Result<(), DecodeError> {
        let count = reader.unsigned_varint("tagged fields")?;
        for _ in 0..count {
            let tag = reader.unsigned_varint("tag")?;
            let size = reader.unsigned_varint("tagged field size")?;
            let expected = match tag {
                TAG_PREVIOUS_PRODUCER_ID | TAG_NEXT_PRODUCER_ID => 8,
                TAG_CLIENT_TRANSACTION_VERSION | TAG_NEXT_PRODUCER_EPOCH => 2,
                _ => {
                    reader.take(size as usize, "unknown tagged field")?;
                    continue;
                }
            };
            if size != expected {
                return Err(DecodeError::TaggedFieldSize {
                    tag,
                    size,
                    expected,
                });
            }
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => {
                    self.previous_producer_id = reader.i64("previous_producer_id")?
                }
                TAG_NEXT_PRODUCER_ID => self.next_producer_id = reader.i64("next_producer_id")?,
                TAG_CLIENT_TRANSACTION_VERSION => {
                    self.client_transaction_version = reader.i16("client_transaction_version")?
                }
                _ => self.next_producer_epoch = reader.i16("next_producer_epoch")?,
            }
        }
        Ok(())
    }
}

fn unsigned_varint_len(value: u64) -> usize {
    let bits = 64 - value.max(1).leading_zeros() as usize;
    bits.div_ceil(7)
}

fn long_field(writer: &mut Writer, value: i64) {
    writer.unsigned_varint(8);
    writer.i64(value);
}

fn short_field(writer: &mut Writer, value: i16) {
    writer.unsigned_varint(2);
    writer.i16(value);
}

fn decode_partitions(
    reader: &mut Reader<'_>,
    flexible: bool,
) -> Result<Option<Vec<TopicPartitions>>, DecodeError> {
    let Some(count) = reader.array_count(
        flexible,
        MIN_PARTITIONS_ENTRY_BYTES,
        "transaction_partitions",
    )?
    else {
        return Ok(None);
    };
    let mut partitions = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = reader.string(flexible, "topic")?;
        let ids = reader.array_count(flexible, 4, "partition_ids")?.ok_or(
            DecodeError::InvalidLength {
                field: "partition_ids",
                length: -1,
            },
        )?;
        let mut partition_ids = Vec::with_capacity(ids);
        for _ in 0..ids {
            partition_ids.push(reader.i32("partition_ids")?);
        }
        if flexible {
            skip_tagged_fields(reader)?;
        }
        partitions.push(TopicPartitions {
            topic,
            partition_ids,
        });
    }
    Ok(Some(partitions))
}

fn skip_tagged_fields(reader: &mut Reader<'_>) -> Result<(), DecodeError> {
    let count = reader.unsigned_varint("tagged fields")?;
    for _ in 0..count {
        reader.unsigned_varint("tag")?;
        let size = reader.unsigned_varint("tagged field size")?;
        reader.take(size as usize, "unknown tagged field")?;
    }
    Ok(())
}

/// One decoded `__transaction_state` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionLogRecord {
    /// The state of a transactional id.
    Transaction {
        /// The transactional id.
        transactional_id: String,
        /// Its state.
        value: TransactionLogValue,
    },
    /// A tombstone: the transactional id expired.
    Tombstone {
        /// The transactional id.
        transactional_id: String,
    },
}

impl TransactionLogRecord {
    /// Decodes a record from its key and value (`None` for a null value).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, DecodeError> {
        let transactional_id = decode_key(key)?;
        Ok(match value {
            None => Self::Tombstone { transactional_id },
            Some(value) => Self::Transaction {
                transactional_id,
                value: TransactionLogValue::decode(value)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{
        decode_key, encode_key, TopicPartitions, TransactionLogRecord, TransactionLogValue,
    };
    use crate::error::{DecodeError, EncodeError};
    use crate::state::TransactionState;

    fn ongoing() -> TransactionLogValue {
        TransactionLogValue {
            producer_id: 1000,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 5,
            next_producer_epoch: -1,
            transaction_timeout_ms: 60_000,
            transaction_status: TransactionState::Ongoing,
            transaction_partitions: Some(vec![TopicPartitions {
                topic: "t".to_owned(),
                partition_ids: vec![0, 2],
            }]),
            transaction_last_update_timestamp_ms: 2,
            transaction_start_timestamp_ms: 1,
            client_transaction_version: 0,
        }
    }

    /// `ongoing()` in v0, written field by field from the schema.
    const ONGOING_V0: &[u8] = &[
        0, 0, // version 0
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // producer_id 1000
        0, 5, // producer_epoch
        0, 0, 0xea, 0x60, // transaction_timeout_ms 60000
        1,    // transaction_status Ongoing
        0, 0, 0, 1, // one topic
        0, 1, b't', // topic "t"
        0, 0, 0, 2, // two partitions
        0, 0, 0, 0, 0, 0, 0, 2, // 0, 2
        0, 0, 0, 0, 0, 0, 0, 2, // transaction_last_update_timestamp_ms
        0, 0, 0, 0, 0, 0, 0, 1, // transaction_start_timestamp_ms
    ];

    /// `ongoing()` in v1 with the producer id rotated and transaction
    /// version 2, written field by field from the schema.
    const ONGOING_V1: &[u8] = &[
        0, 1, // version 1
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // producer_id 1000
        0, 5, // producer_epoch
        0, 0, 0xea, 0x60, // transaction_timeout_ms 60000
        1,    // transaction_status Ongoing
        2,    // one topic (compact: count + 1)
        2, b't', // topic "t"
        3,    // two partitions
        0, 0, 0, 0, 0, 0, 0, 2, // 0, 2
        0, // the partition entry's tagged fields
        0, 0, 0, 0, 0, 0, 0, 2, // transaction_last_update_timestamp_ms
        0, 0, 0, 0, 0, 0, 0, 1, // transaction_start_timestamp_ms
        3, // three tagged fields
        0, 8, 0, 0, 0, 0, 0, 0, 0x03, 0xe7, // previous_producer_id 999
        1, 8, 0, 0, 0, 0, 0, 0, 0x03, 0xe9, // next_producer_id 1001
        2, 2, 0, 2, // client_transaction_version 2
    ];

    fn ongoing_v1() -> TransactionLogValue {
        TransactionLogValue {
            previous_producer_id: 999,
            next_producer_id: 1001,
            client_transaction_version: 2,
            ..ongoing()
        }
    }

    #[test]
    fn key_matches_the_schema() {
        let key = encode_key("tx").unwrap();
        assert_eq!(key, [0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(&key), Ok("tx".to_owned()));
    }

    #[test]
    fn value_v0_matches_the_schema() {
        assert_eq!(ongoing().encode(0).unwrap(), ONGOING_V0);
        assert_eq!(ongoing().encoded_len(0), ONGOING_V0.len());
        assert_eq!(TransactionLogValue::decode(ONGOING_V0), Ok(ongoing()));
    }

    #[test]
    fn value_v1_matches_the_schema() {
        assert_eq!(ongoing_v1().encode(1).unwrap(), ONGOING_V1);
        assert_eq!(ongoing_v1().encoded_len(1), ONGOING_V1.len());
        assert_eq!(TransactionLogValue::decode(ONGOING_V1), Ok(ongoing_v1()));
    }

    #[test]
    fn an_empty_transaction_has_null_partitions() {
        let empty = TransactionLogValue {
            transaction_status: TransactionState::Empty,
            transaction_partitions: None,
            ..ongoing()
        };
        let v0 = empty.encode(0).unwrap();
        assert_eq!(&v0[17..21], (-1_i32).to_be_bytes());
        let v1 = empty.encode(1).unwrap();
        assert_eq!(v1[17], 0);
        for bytes in [v0, v1] {
            assert_eq!(TransactionLogValue::decode(&bytes), Ok(empty.clone()));
        }
    }

    #[test]
    fn unknown_tags_are_skipped_and_next_producer_epoch_is_read() {
        let mut value = ongoing();
        value.next_producer_epoch = 0;
        let mut expected = value.encode(1).unwrap();
        assert_eq!(&expected[expected.len() - 5..], [1, 3, 2, 0, 0]);
        // Add an unknown tag 9 with three bytes before tag 3.
        let at = expected.len() - 5;
        expected.splice(at..at + 1, [2, 9, 3, 0xaa, 0xbb, 0xcc]);
        assert_eq!(TransactionLogValue::decode(&expected), Ok(value));
    }

    #[test]
    fn a_tombstone_expires_the_transactional_id() {
        let key = encode_key("tx").unwrap();
        assert_eq!(
            TransactionLogRecord::decode(&key, None),
            Ok(TransactionLogRecord::Tombstone {
                transactional_id: "tx".to_owned()
            })
        );
        assert_eq!(
            TransactionLogRecord::decode(&key, Some(ONGOING_V0)),
            Ok(TransactionLogRecord::Transaction {
                transactional_id: "tx".to_owned(),
                value: ongoing()
            })
        );
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        for bytes in [ONGOING_V0, ONGOING_V1] {
            for length in 0..bytes.len() {
                let error = TransactionLogValue::decode(&bytes[..length]).unwrap_err();
                assert!(
                    matches!(
                        error,
                        DecodeError::Truncated { .. } | DecodeError::LengthOverInput { .. }
                    ),
                    "{length}: {error}"
                );
            }
        }
        let key = encode_key("tx").unwrap();
        for length in 0..key.len() {
            assert!(decode_key(&key[..length]).is_err());
        }
    }

    #[test]
    fn bad_lengths_versions_and_statuses_are_typed_errors() {
        let mut huge = ONGOING_V0.to_vec();
        huge[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            TransactionLogValue::decode(&huge),
            Err(DecodeError::LengthOverInput {
                field: "transaction_partitions",
                ..
            })
        ));
        let mut negative = ONGOING_V0.to_vec();
        negative[17..21].copy_from_slice(&(-5_i32).to_be_bytes());
        assert_eq!(
            TransactionLogValue::decode(&negative),
            Err(DecodeError::InvalidLength {
                field: "transaction_partitions",
                length: -5
            })
        );
        let mut negative_topic = ONGOING_V0.to_vec();
        negative_topic[21..23].copy_from_slice(&(-1_i16).to_be_bytes());
        assert_eq!(
            TransactionLogValue::decode(&negative_topic),
            Err(DecodeError::InvalidLength {
                field: "topic",
                length: -1
            })
        );
        let mut status = ONGOING_V0.to_vec();
        status[16] = 8;
        assert_eq!(
            TransactionLogValue::decode(&status),
            Err(DecodeError::UnknownStatus { id: 8 })
        );
        let mut version = ONGOING_V0.to_vec();
        version[1] = 2;
        assert_eq!(
            TransactionLogValue::decode(&version),
            Err(DecodeError::UnknownValueVersion { version: 2 })
        );
        assert_eq!(
            decode_key(&[0, 1, 0, 0]),
            Err(DecodeError::UnknownKeyVersion { version: 1 })
        );
        let mut trailing = ONGOING_V0.to_vec();
        trailing.push(0);
        assert_eq!(
            TransactionLogValue::decode(&trailing),
            Err(DecodeError::TrailingBytes { remaining: 1 })
        );
    }

    #[test]
    fn a_known_tag_of_the_wrong_size_is_refused() {
        let mut bytes = ongoing_v1().encode(1).unwrap();
        let at = bytes.len() - 4; // tag 2, size 2, then the value
        bytes[at + 1] = 1;
        bytes.pop();
        assert_eq!(
            TransactionLogValue::decode(&bytes),
            Err(DecodeError::TaggedFieldSize {
                tag: 2,
                size: 1,
                expected: 2
            })
        );
    }

    #[test]
    fn version_0_cannot_carry_tagged_fields() {
        assert_eq!(
            ongoing_v1().encode(0),
            Err(EncodeError::FieldNotInVersion {
                field: "previous_producer_id"
            })
        );
        assert_eq!(
            ongoing().encode(2),
            Err(EncodeError::UnsupportedVersion { version: 2 })
        );
        let long = "x".repeat(usize::try_from(i16::MAX).unwrap() + 1);
        assert!(matches!(
            encode_key(&long),
            Err(EncodeError::StringTooLong { .. })
        ));
    }

    fn any_state() -> impl Strategy<Value = TransactionState> {
        proptest::sample::select(TransactionState::ALL.to_vec())
    }

    fn any_partitions() -> impl Strategy<Value = Option<Vec<TopicPartitions>>> {
        let entry = (".{0,12}", proptest::collection::vec(any::<i32>(), 0..6)).prop_map(
            |(topic, partition_ids)| TopicPartitions {
                topic,
                partition_ids,
            },
        );
        proptest::option::of(proptest::collection::vec(entry, 0..5))
    }

    prop_compose! {
        fn any_value(flexible: bool)(
            producer_id in any::<i64>(),
            producer_epoch in any::<i16>(),
            tagged in (any::<i64>(), any::<i64>(), any::<i16>(), any::<i16>()),
            transaction_timeout_ms in any::<i32>(),
            transaction_status in any_state(),
            transaction_partitions in any_partitions(),
            timestamps in (any::<i64>(), any::<i64>()),
        ) -> TransactionLogValue {
            let (previous, next, next_epoch, client_version) =
                if flexible { tagged } else { (-1, -1, -1, 0) };
            TransactionLogValue {
                producer_id,
                previous_producer_id: previous,
                next_producer_id: next,
                producer_epoch,
                next_producer_epoch: next_epoch,
                transaction_timeout_ms,
                transaction_status,
                transaction_partitions,
                transaction_last_update_timestamp_ms: timestamps.0,
                transaction_start_timestamp_ms: timestamps.1,
                client_transaction_version: client_version,
            }
        }
    }

    proptest! {
        #[test]
        fn values_round_trip_in_v0(value in any_value(false)) {
            let bytes = value.encode(0).unwrap();
            prop_assert_eq!(bytes.len(), value.encoded_len(0));
            prop_assert_eq!(TransactionLogValue::decode(&bytes), Ok(value));
        }

        #[test]
        fn values_round_trip_in_v1(value in any_value(true)) {
            let bytes = value.encode(1).unwrap();
            prop_assert_eq!(bytes.len(), value.encoded_len(1));
            prop_assert_eq!(TransactionLogValue::decode(&bytes), Ok(value));
        }

        #[test]
        fn keys_round_trip(transactional_id in ".{0,40}") {
            let bytes = encode_key(&transactional_id).unwrap();
            prop_assert_eq!(bytes.len(), 4 + transactional_id.len());
            prop_assert_eq!(decode_key(&bytes), Ok(transactional_id));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = TransactionLogValue::decode(&bytes);
            let _ = decode_key(&bytes);
        }

        #[test]
        fn mutated_values_never_panic(
            value in any_value(true),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = value.encode(1).unwrap();
            for (index, byte) in flips {
                let at = index.index(bytes.len());
                bytes[at] = byte;
            }
            let _ = TransactionLogValue::decode(&bytes);
        }
    }
}
