//! The `__consumer_offsets` records of consumer-protocol groups (KIP-848),
//! in Kafka's schemas.
//!
//! | Key version | Key | Value (version 0, flexible) |
//! |---|---|---|
//! | 3 | `ConsumerGroupMetadataKey` (group) | epoch |
//! | 4 | `ConsumerGroupPartitionMetadataKey` (group) | subscribed topics: id, name, partition count, per-partition racks |
//! | 5 | `ConsumerGroupMemberMetadataKey` (group, member) | instance id, rack, client id and host, subscribed names and regex, rebalance timeout, server assignor (+ tagged classic metadata) |
//! | 6 | `ConsumerGroupTargetAssignmentMetadataKey` (group) | assignment epoch |
//! | 7 | `ConsumerGroupTargetAssignmentMemberKey` (group, member) | target partitions by topic id |
//! | 8 | `ConsumerGroupCurrentMemberAssignmentKey` (group, member) | member epoch, previous epoch, state, assigned and pending-revocation partitions |
//!
//! Keys are non-flexible (an int16 version, then strings); values start
//! with an int16 version and use the flexible encoding. Unknown tagged
//! fields (Kafka's classic member metadata) are skipped on read. A null
//! value is a tombstone.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use uuid::Uuid;

use crate::consumer_assignor::Assignment;
use crate::error::RecordError;
use crate::wire::{Reader, Writer};

/// The first key version of a consumer-group record.
pub const FIRST_CONSUMER_KEY_VERSION: i16 = 3;
/// The last key version of a consumer-group record.
pub const LAST_CONSUMER_KEY_VERSION: i16 = 8;

/// `ConsumerGroupMemberMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// The client's rack.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed topic regex.
    pub subscribed_topic_regex: Option<String>,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The server assignor the member asked for.
    pub server_assignor: Option<String>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentAssignmentValue {
    /// The member epoch.
    pub member_epoch: i32,
    /// The previous member epoch.
    pub previous_member_epoch: i32,
    /// The member state's byte (see `MemberState::code`).
    pub state: i8,
    /// Partitions the member owns.
    pub assigned: Assignment,
    /// Partitions it must give up.
    pub pending_revocation: Assignment,
}

/// A subscribed topic in `ConsumerGroupPartitionMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribedTopic {
    /// The topic id.
    pub topic_id: Uuid,
    /// The topic name.
    pub name: String,
    /// Its partition count.
    pub partitions: i32,
}

/// A consumer-group record; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// Key 3: the group epoch.
    GroupMetadata {
        /// Group id.
        group: String,
        /// The epoch.
        epoch: Option<i32>,
    },
    /// Key 4: the subscribed topics' metadata.
    PartitionMetadata {
        /// Group id.
        group: String,
        /// The topics.
        topics: Option<Vec<SubscribedTopic>>,
    },
    /// Key 5: a member's metadata.
    MemberMetadata {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
        /// The metadata.
        value: Option<MemberMetadataValue>,
    },
    /// Key 6: the target assignment's epoch.
    TargetAssignmentMetadata {
        /// Group id.
        group: String,
        /// The assignment epoch.
        epoch: Option<i32>,
    },
    /// Key 7: a member's target assignment.
    TargetAssignmentMember {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
        /// The target partitions.
        partitions: Option<Assignment>,
    },
    /// Key 8: a member's current assignment.
    CurrentMemberAssignment {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
        /// The assignment.
        value: Option<CurrentAssignmentValue>,
    },
}

impl ConsumerRecord {
    /// The record's group.
    pub fn group(&self) -> &str {
        match self {
            ConsumerRecord::GroupMetadata { group, .. }
            | ConsumerRecord::PartitionMetadata { group, .. }
            | ConsumerRecord::MemberMetadata { group, .. }
            | ConsumerRecord::TargetAssignmentMetadata { group, .. }
            | ConsumerRecord::TargetAssignmentMember { group, .. }
            | ConsumerRecord::CurrentMemberAssignment { group, .. } => group,
        }
    }

    fn key_version(&self) -> i16 {
        match self {
            ConsumerRecord::GroupMetadata { .. } => 3,
            ConsumerRecord::PartitionMetadata { .. } => 4,
            ConsumerRecord::MemberMetadata { .. } => 5,
            ConsumerRecord::TargetAssignmentMetadata { .. } => 6,
            ConsumerRecord::TargetAssignmentMember { .. } => 7,
            ConsumerRecord::CurrentMemberAssignment { .. } => 8,
        }
    }

    fn member(&self) -> Option<&str> {
        match self {
            ConsumerRecord::MemberMetadata { member, .. }
            | ConsumerRecord::TargetAssignmentMember { member, .. }
            | ConsumerRecord::CurrentMemberAssignment { member, .. } => Some(member),
            _ => None,
        }
    }

    /// Encodes the key.
    pub fn encode_key(&self) -> Bytes {
        let mut writer = Writer::new(false);
        writer.int16(self.key_version());
        writer.string(self.group());
        if let Some(member) = self.member() {
            writer.string(member);
        }
        writer.finish()
    }

    /// Encodes the value (version 0), `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Bytes> {
        let mut writer = Writer::new(true);
        writer.int16(0);
        match self {
            ConsumerRecord::GroupMetadata { epoch, .. }
            | ConsumerRecord::TargetAssignmentMetadata { epoch, .. } => {
                writer.int32((*epoch)?);
            }
            ConsumerRecord::PartitionMetadata { topics, .. } => {
                write_topics(&mut writer, topics.as_ref()?);
            }
            ConsumerRecord::MemberMetadata { value, .. } => {
                write_member(&mut writer, value.as_ref()?);
            }
            ConsumerRecord::TargetAssignmentMember { partitions, .. } => {
                write_assignment(&mut writer, partitions.as_ref()?);
            }
            ConsumerRecord::CurrentMemberAssignment { value, .. } => {
                let value = value.as_ref()?;
                writer.int32(value.member_epoch);
                writer.int32(value.previous_member_epoch);
                writer.int8(value.state);
                write_assignment(&mut writer, &value.assigned);
                write_assignment(&mut writer, &value.pending_revocation);
            }
        }
        writer.tagged_fields();
        Some(writer.finish())
    }

    /// Decodes the rest of a key whose `version` (3 to 8) was read, and
    /// its value.
    pub(crate) fn decode(
        version: i16,
        key: &mut Reader<'_>,
        value: Option<&[u8]>,
    ) -> Result<ConsumerRecord, RecordError> {
        let group = key.string("group")?;
        let member = if matches!(version, 5 | 7 | 8) {
            Some(key.string("member")?)
        } else {
            None
        };
        let mut reader = value.map(|bytes| Reader::new(bytes, true));
        if let Some(reader) = reader.as_mut() {
            let value_version = reader.int16("value version")?;
            if value_version != 0 {
                return Err(RecordError::UnknownVersion {
                    schema: "consumer group value",
                    version: value_version,
                });
            }
        }
        let record = decode_body(version, group, member.unwrap_or_default(), reader.as_mut())?;
        if let Some(mut reader) = reader {
            reader.tagged_fields()?;
            reader.finish()?;
        }
        Ok(record)
    }
}

fn decode_body(
    version: i16,
    group: String,
    member: String,
    reader: Option<&mut Reader<'_>>,
) -> Result<ConsumerRecord, RecordError> {
    Ok(match version {
        3 => ConsumerRecord::GroupMetadata {
            group,
            epoch: reader.map(|r| r.int32("epoch")).transpose()?,
        },
        4 => ConsumerRecord::PartitionMetadata {
            group,
            topics: reader.map(read_topics).transpose()?,
        },
        5 => ConsumerRecord::MemberMetadata {
            group,
            member,
            value: reader.map(read_member).transpose()?,
        },
        6 => ConsumerRecord::TargetAssignmentMetadata {
            group,
            epoch: reader.map(|r| r.int32("assignment epoch")).transpose()?,
        },
        7 => ConsumerRecord::TargetAssignmentMember {
            group,
            member,
            partitions: reader.map(read_assignment).transpose()?,
        },
        8 => ConsumerRecord::CurrentMemberAssignment {
            group,
            member,
            value: reader.map(read_current).transpose()?,
        },
        _ => {
            return Err(RecordError::UnknownVersion {
                schema: "key",
                version,
            })
        }
    })
}

fn write_topics(writer: &mut Writer, topics: &[SubscribedTopic]) {
    writer.array_length(topics.len());
    for topic in topics {
        writer.uuid(topic.topic_id);
        writer.string(&topic.name);
        writer.int32(topic.partitions);
        // Per-partition racks: Strom does not do rack-aware assignment.
        writer.array_length(0);
        writer.tagged_fields();
    }
}

fn read_topics(reader: &mut Reader<'_>) -> Result<Vec<SubscribedTopic>, RecordError> {
    let count = reader.array_length("topics")?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let topic_id = reader.uuid("topic id")?;
        let name = reader.string("topic name")?;
        let partitions = reader.int32("partitions")?;
        let racked = reader.array_length("partition metadata")?;
        for _ in 0..racked {
            reader.int32("partition")?;
            let racks = reader.array_length("racks")?;
            for _ in 0..racks {
                reader.string("rack")?;
            }
            reader.tagged_fields()?;
        }
        reader.tagged_fields()?;
        topics.push(SubscribedTopic {
            topic_id,
            name,
            partitions,
        });
    }
    Ok(topics)
}

fn write_member(writer: &mut Writer, value: &MemberMetadataValue) {
    writer.nullable_string(value.instance_id.as_deref());
    writer.nullable_string(value.rack_id.as_deref());
    writer.string(&value.client_id);
    writer.string(&value.client_host);
    writer.array_length(value.subscribed_topic_names.len());
    for name in &value.subscribed_topic_names {
        writer.string(name);
    }
    writer.nullable_string(value.subscribed_topic_regex.as_deref());
    writer.int32(value.rebalance_timeout_ms);
    writer.nullable_string(value.server_assignor.as_deref());
}

fn read_member(reader: &mut Reader<'_>) -> Result<MemberMetadataValue, RecordError> {
    let instance_id = reader.nullable_string("instance id")?;
    let rack_id = reader.nullable_string("rack id")?;
    let client_id = reader.string("client id")?;
    let client_host = reader.string("client host")?;
    let count = reader.array_length("subscribed topic names")?;
    let mut subscribed_topic_names = Vec::with_capacity(count);
    for _ in 0..count {
        subscribed_topic_names.push(reader.string("subscribed topic name")?);
    }
    Ok(MemberMetadataValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex: reader.nullable_string("subscribed topic regex")?,
        rebalance_timeout_ms: reader.int32("rebalance timeout")?,
        server_assignor: reader.nullable_string("server assignor")?,
    })
}

fn write_assignment(writer: &mut Writer, assignment: &Assignment) {
    let topics: Vec<(&Uuid, &BTreeSet<i32>)> = assignment
        .iter()
        .filter(|(_, partitions)| !partitions.is_empty())
        .collect();
    writer.array_length(topics.len());
    for (topic_id, partitions) in topics {
        writer.uuid(*topic_id);
        writer.array_length(partitions.len());
        for partition in partitions {
            writer.int32(*partition);
        }
        writer.tagged_fields();
    }
}

fn read_assignment(reader: &mut Reader<'_>) -> Result<Assignment, RecordError> {
    let count = reader.array_length("topic partitions")?;
    let mut assignment = BTreeMap::new();
    for _ in 0..count {
        let topic_id = reader.uuid("topic id")?;
        let partitions = reader.array_length("partitions")?;
        let mut set = BTreeSet::new();
        for _ in 0..partitions {
            set.insert(reader.int32("partition")?);
        }
        reader.tagged_fields()?;
        if !set.is_empty() {
            assignment
                .entry(topic_id)
                .or_insert_with(BTreeSet::new)
                .extend(set);
        }
    }
    Ok(assignment)
}

fn read_current(reader: &mut Reader<'_>) -> Result<CurrentAssignmentValue, RecordError> {
    Ok(CurrentAssignmentValue {
        member_epoch: reader.int32("member epoch")?,
        previous_member_epoch: reader.int32("previous member epoch")?,
        state: reader.int8("state")?,
        assigned: read_assignment(reader)?,
        pending_revocation: read_assignment(reader)?,
    })
}
