//! The records of `__consumer_offsets`, in Kafka's key and value schemas.
//!
//! Every record key starts with an int16 key version that names its type:
//! 0 and 1 are `OffsetCommitKey` (group, topic, partition), 2 is
//! `GroupMetadataKey` (group), 3 to 8 are the consumer-protocol (KIP-848)
//! group records ([`crate::consumer_records`]). Versions 9 and up belong to
//! record types this coordinator does not use (share groups) and are
//! skipped on load. Every value starts with an int16 value version:
//!
//! * `OffsetCommitValue` v0: offset, metadata, commit timestamp; v1 adds an
//!   expire timestamp; v2 drops it; v3 adds the leader epoch after the offset;
//!   v4 is v3 in the flexible encoding (compact strings, tagged fields).
//! * `GroupMetadataValue` v0: protocol type, generation, protocol, leader,
//!   members (member id, client id, host, session timeout, subscription,
//!   assignment); v1 adds each member's rebalance timeout; v2 the
//!   group's current state timestamp; v3 each member's group instance id; v4
//!   is v3 in the flexible encoding.
//!
//! A null value is a tombstone: the offset or group was deleted. Strom writes
//! `OffsetCommitValue` v3 (v1 when an explicit expire timestamp is set) and
//! `GroupMetadataValue` v3, as Kafka 3.x does, and reads every version.

use bytes::Bytes;

use crate::consumer_records::{
    ConsumerRecord, FIRST_CONSUMER_KEY_VERSION, LAST_CONSUMER_KEY_VERSION,
};
use crate::error::RecordError;
use crate::log::LogRecord;
use crate::wire::{Reader, Writer};

/// The key version of `OffsetCommitKey` that Strom writes.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// The key version of `GroupMetadataKey`.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    /// A committed offset of one partition for a group.
    OffsetCommit {
        /// Group id.
        group: String,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
    /// A group's metadata.
    GroupMetadata {
        /// Group id.
        group: String,
    },
    /// A record type this coordinator does not handle (key version 3+).
    Other {
        /// The key version.
        version: i16,
    },
}

impl RecordKey {
    /// Encodes the key (non-flexible, as both key schemas are).
    pub fn encode(&self) -> Bytes {
        let mut writer = Writer::new(false);
        match self {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                writer.int16(OFFSET_COMMIT_KEY_VERSION);
                writer.string(group);
                writer.string(topic);
                writer.int32(*partition);
            }
            RecordKey::GroupMetadata { group } => {
                writer.int16(GROUP_METADATA_KEY_VERSION);
                writer.string(group);
            }
            RecordKey::Other { version } => writer.int16(*version),
        }
        writer.finish()
    }

    /// Decodes a key.
    pub fn decode(input: &[u8]) -> Result<RecordKey, RecordError> {
        let mut reader = Reader::new(input, false);
        let version = reader.int16("key version")?;
        let key = match version {
            0 | 1 => RecordKey::OffsetCommit {
                group: reader.string("group")?,
                topic: reader.string("topic")?,
                partition: reader.int32("partition")?,
            },
            2 => RecordKey::GroupMetadata {
                group: reader.string("group")?,
            },
            3.. => return Ok(RecordKey::Other { version }),
            _ => {
                return Err(RecordError::UnknownVersion {
                    schema: "key",
                    version,
                })
            }
        };
        reader.finish()?;
        Ok(key)
    }
}

/// A committed offset as stored in `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// The committed offset.
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 if unknown (v3+).
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When the commit happened.
    pub commit_timestamp_ms: i64,
    /// Explicit expiry (v1 only), -1 if none.
    pub expire_timestamp_ms: i64,
}

impl OffsetCommitValue {
    /// The version Strom writes for this value: 1 when it carries an explicit
    /// expire timestamp, 3 otherwise.
    pub fn preferred_version(&self) -> i16 {
        if self.expire_timestamp_ms >= 0 {
            1
        } else {
            3
        }
    }

    /// Encodes the value at `version` (0 to 4; others are clamped into range).
    pub fn encode(&self, version: i16) -> Bytes {
        let version = version.clamp(0, 4);
        let mut writer = Writer::new(version >= 4);
        writer.int16(version);
        writer.int64(self.offset);
        if version >= 3 {
            writer.int32(self.leader_epoch);
        }
        writer.string(&self.metadata);
        writer.int64(self.commit_timestamp_ms);
        if version == 1 {
            writer.int64(self.expire_timestamp_ms);
        }
        writer.tagged_fields();
        writer.finish()
    }

    /// Decodes a value of any version 0 to 4.
    pub fn decode(input: &[u8]) -> Result<OffsetCommitValue, RecordError> {
        let mut reader = Reader::new(input, false);
        let version = reader.int16("value version")?;
        if !(0..=4).contains(&version) {
            return Err(RecordError::UnknownVersion {
                schema: "OffsetCommitValue",
                version,
            });
        }
        reader.set_flexible(version >= 4);
        let offset = reader.int64("offset")?;
        let leader_epoch = if version >= 3 {
            reader.int32("leader epoch")?
        } else {
            -1
        };
        let metadata = reader.string("metadata")?;
        let commit_timestamp_ms = reader.int64("commit timestamp")?;
        let expire_timestamp_ms = if version == 1 {
            reader.int64("expire timestamp")?
        } else {
            -1
        };
        reader.tagged_fields()?;
        reader.finish()?;
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
            expire_timestamp_ms,
        })
    }
}

/// One member in a `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` (v3+).
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout (v1+; v0 records use the session timeout).
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Metadata for the group's protocol.
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// A group's metadata as stored in `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// Protocol type.
    pub protocol_type: String,
    /// Generation.
    pub generation: i32,
    /// Selected protocol.
    pub protocol: Option<String>,
    /// Leader member id.
    pub leader: Option<String>,
    /// When the group entered its state (v2+), -1 if unknown.
    pub current_state_timestamp_ms: i64,
    /// Members.
    pub members: Vec<MemberMetadata>,
}

/// The version Strom writes for `GroupMetadataValue`.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

impl GroupMetadataValue {
    /// Encodes the value at `version` (0 to 4; others are clamped into range).
    pub fn encode(&self, version: i16) -> Bytes {
        let version = version.clamp(0, 4);
        let mut writer = Writer::new(version >= 4);
        writer.int16(version);
        writer.string(&self.protocol_type);
        writer.int32(self.generation);
        writer.nullable_string(self.protocol.as_deref());
        writer.nullable_string(self.leader.as_deref());
        if version >= 2 {
            writer.int64(self.current_state_timestamp_ms);
        }
        writer.array_length(self.members.len());
        for member in &self.members {
            encode_member(&mut writer, member, version);
        }
        writer.tagged_fields();
        writer.finish()
    }

    /// Decodes a value of any version 0 to 4.
    pub fn decode(input: &[u8]) -> Result<GroupMetadataValue, RecordError> {
        let mut reader = Reader::new(input, false);
        let version = reader.int16("value version")?;
        if !(0..=4).contains(&version) {
            return Err(RecordError::UnknownVersion {
                schema: "GroupMetadataValue",
                version,
            });
        }
        reader.set_flexible(version >= 4);
        let protocol_type = reader.string("protocol type")?;
        let generation = reader.int32("generation")?;
        let protocol = reader.nullable_string("protocol")?;
        let leader = reader.nullable_string("leader")?;
        let current_state_timestamp_ms = if version >= 2 {
            reader.int64("current state timestamp")?
        } else {
            -1
        };
        let count = reader.array_length("members")?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            members.push(decode_member(&mut reader, version)?);
        }
        reader.tagged_fields()?;
        reader.finish()?;
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp_ms,
            members,
        })
    }
}

fn encode_member(writer: &mut Writer, member: &MemberMetadata, version: i16) {
    writer.string(&member.member_id);
    if version >= 3 {
        writer.nullable_string(member.group_instance_id.as_deref());
    }
    writer.string(&member.client_id);
    writer.string(&member.client_host);
    if version >= 1 {
        writer.int32(member.rebalance_timeout_ms);
    }
    writer.int32(member.session_timeout_ms);
    writer.bytes(&member.subscription);
    writer.bytes(&member.assignment);
    writer.tagged_fields();
}

fn decode_member(reader: &mut Reader<'_>, version: i16) -> Result<MemberMetadata, RecordError> {
    let member_id = reader.string("member id")?;
    let group_instance_id = if version >= 3 {
        reader.nullable_string("group instance id")?
    } else {
        None
    };
    let client_id = reader.string("client id")?;
    let client_host = reader.string("client host")?;
    let rebalance_timeout_ms = if version >= 1 {
        Some(reader.int32("rebalance timeout")?)
    } else {
        None
    };
    let session_timeout_ms = reader.int32("session timeout")?;
    let subscription = reader.bytes("subscription")?;
    let assignment = reader.bytes("assignment")?;
    reader.tagged_fields()?;
    Ok(MemberMetadata {
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms: rebalance_timeout_ms.unwrap_or(session_timeout_ms),
        session_timeout_ms,
        subscription,
        assignment,
    })
}

/// A decoded `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsRecord {
    /// A committed offset, or its tombstone (`value: None`).
    OffsetCommit {
        /// Group id.
        group: String,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
        /// The offset, `None` for a tombstone.
        value: Option<OffsetCommitValue>,
    },
    /// A group's metadata, or its tombstone (`value: None`).
    GroupMetadata {
        /// Group id.
        group: String,
        /// The metadata, `None` for a tombstone.
        value: Option<GroupMetadataValue>,
    },
    /// A consumer-protocol (KIP-848) group record (key versions 3 to 8).
    Consumer(ConsumerRecord),
    /// A record of a type this coordinator does not handle.
    Other {
        /// Its key version.
        key_version: i16,
    },
}

impl OffsetsRecord {
    /// The group the record belongs to, if it is one this coordinator handles.
    pub fn group(&self) -> Option<&str> {
        match self {
            OffsetsRecord::OffsetCommit { group, .. }
            | OffsetsRecord::GroupMetadata { group, .. } => Some(group),
            OffsetsRecord::Consumer(record) => Some(record.group()),
            OffsetsRecord::Other { .. } => None,
        }
    }

    /// Encodes the record as a key and an optional value.
    pub fn to_log_record(&self) -> LogRecord {
        match self {
            OffsetsRecord::OffsetCommit {
                group,
                topic,
                partition,
                value,
            } => LogRecord {
                key: RecordKey::OffsetCommit {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                }
                .encode(),
                value: value
                    .as_ref()
                    .map(|value| value.encode(value.preferred_version())),
            },
            OffsetsRecord::GroupMetadata { group, value } => LogRecord {
                key: RecordKey::GroupMetadata {
                    group: group.clone(),
                }
                .encode(),
                value: value
                    .as_ref()
                    .map(|value| value.encode(GROUP_METADATA_VALUE_VERSION)),
            },
            OffsetsRecord::Consumer(record) => LogRecord {
                key: record.encode_key(),
                value: record.encode_value(),
            },
            OffsetsRecord::Other { key_version } => LogRecord {
                key: RecordKey::Other {
                    version: *key_version,
                }
                .encode(),
                value: None,
            },
        }
    }

    /// Decodes a key and optional value.
    pub fn from_log_record(record: &LogRecord) -> Result<OffsetsRecord, RecordError> {
        let mut key = Reader::new(&record.key, false);
        let version = key.int16("key version")?;
        if (FIRST_CONSUMER_KEY_VERSION..=LAST_CONSUMER_KEY_VERSION).contains(&version) {
            let decoded = ConsumerRecord::decode(version, &mut key, record.value.as_deref())?;
            key.finish()?;
            return Ok(OffsetsRecord::Consumer(decoded));
        }
        match RecordKey::decode(&record.key)? {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => Ok(OffsetsRecord::OffsetCommit {
                group,
                topic,
                partition,
                value: record
                    .value
                    .as_deref()
                    .map(OffsetCommitValue::decode)
                    .transpose()?,
            }),
            RecordKey::GroupMetadata { group } => Ok(OffsetsRecord::GroupMetadata {
                group,
                value: record
                    .value
                    .as_deref()
                    .map(GroupMetadataValue::decode)
                    .transpose()?,
            }),
            RecordKey::Other { version } => Ok(OffsetsRecord::Other {
                key_version: version,
            }),
        }
    }
}

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16
/// code units, with 32-bit wrapping arithmetic.
pub fn java_string_hash_code(text: &str) -> i32 {
    text.encode_utf16().fold(0_i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The `__consumer_offsets` partition that owns `group_id`, as Kafka
/// computes it: `(hashCode & 0x7fffffff) % partitions`. `partitions` must be
/// positive (it is `offsets.topic.num.partitions`).
pub fn partition_for_group(group_id: &str, partitions: i32) -> i32 {
    assert!(
        partitions > 0,
        "offsets.topic.num.partitions must be positive"
    );
    (java_string_hash_code(group_id) & 0x7fff_ffff) % partitions
}
