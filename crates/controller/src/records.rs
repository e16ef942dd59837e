//! Metadata records: the entries of the metadata log.
//!
//! Every change to cluster metadata is one [`MetadataRecord`], encoded with
//! `prost`. The types here are written by hand with `prost`'s derive macros
//! (no `protoc`, no build script); `docs/controller.md` and
//! `proto/metadata.proto` in this crate document the same schema in
//! `.proto` syntax, for reading only.
//!
//! Field conventions follow Kafka's KRaft records: broker ids and partition
//! indexes are `int32`, epochs `int32` (leader, partition) or `int64`
//! (broker), UUIDs are 16 raw bytes, and "no leader" is [`NO_LEADER`] (-1).
//! Records are validated when applied to a
//! [`MetadataImage`](crate::image::MetadataImage), not when decoded, so a
//! decoder never rejects a record only because it makes no sense.

use prost::Message as _;
use uuid::Uuid;

use crate::error::RecordError;
pub use crate::quota_records::{ClientQuotaRecord, QuotaEntityData};
pub use crate::security_records::{
    AccessControlEntryRecord, RemoveAccessControlEntryRecord, RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
};

/// The record version this build writes and the highest it reads.
pub const CURRENT_RECORD_VERSION: u32 = 1;

/// The leader value that means "no leader" (Kafka's `-1`).
pub const NO_LEADER: i32 = -1;

/// One entry of the metadata log: a version and exactly one record.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MetadataRecord {
    /// Record format version; readers reject versions above
    /// [`CURRENT_RECORD_VERSION`].
    #[prost(uint32, tag = "1")]
    pub version: u32,
    /// The record itself; `None` only when decoding a record kind this build
    /// does not know (rejected when applied).
    #[prost(
        oneof = "Record",
        tags = "2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16"
    )]
    pub record: Option<Record>,
}

/// The record kinds of the metadata log.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum Record {
    /// A broker registered (or re-registered with a new incarnation).
    #[prost(message, tag = "2")]
    RegisterBroker(RegisterBrokerRecord),
    /// A broker was removed from the cluster.
    #[prost(message, tag = "3")]
    UnregisterBroker(UnregisterBrokerRecord),
    /// A broker's session expired (or it asked to be fenced).
    #[prost(message, tag = "4")]
    FenceBroker(FenceBrokerRecord),
    /// A fenced broker caught up and may lead and follow again.
    #[prost(message, tag = "5")]
    UnfenceBroker(UnfenceBrokerRecord),
    /// A topic was created.
    #[prost(message, tag = "6")]
    Topic(TopicRecord),
    /// A partition was created, with its full state.
    #[prost(message, tag = "7")]
    Partition(PartitionRecord),
    /// A partition's replicas, ISR or leader changed.
    #[prost(message, tag = "8")]
    PartitionChange(PartitionChangeRecord),
    /// A configuration key was set or deleted.
    #[prost(message, tag = "9")]
    Config(ConfigRecord),
    /// A topic and all its partitions were removed.
    #[prost(message, tag = "10")]
    RemoveTopic(RemoveTopicRecord),
    /// A block of producer ids was handed to a broker.
    #[prost(message, tag = "11")]
    ProducerIds(ProducerIdsRecord),
    /// A user's SCRAM credential was set.
    #[prost(message, tag = "12")]
    UserScramCredential(UserScramCredentialRecord),
    /// A user's SCRAM credential was deleted.
    #[prost(message, tag = "13")]
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// An ACL binding was added.
    #[prost(message, tag = "14")]
    AccessControlEntry(AccessControlEntryRecord),
    /// An ACL binding was removed.
    #[prost(message, tag = "15")]
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    /// A client quota was set or removed (Kafka's `ClientQuotaRecord`).
    #[prost(message, tag = "16")]
    ClientQuota(ClientQuotaRecord),
}

/// A listener a broker advertises to clients and to other brokers.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct BrokerEndpoint {
    /// Listener name, e.g. `PLAINTEXT`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Advertised host name or address.
    #[prost(string, tag = "2")]
    pub host: String,
    /// Advertised port; values above 65535 are rejected when applied.
    #[prost(uint32, tag = "3")]
    pub port: u32,
    /// Security protocol name, e.g. `PLAINTEXT`.
    #[prost(string, tag = "4")]
    pub security_protocol: String,
}

/// A broker registration. A new incarnation replaces the previous one.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RegisterBrokerRecord {
    /// The broker's `node.id`.
    #[prost(int32, tag = "1")]
    pub broker_id: i32,
    /// Random id of this broker process run (16 bytes).
    #[prost(bytes = "vec", tag = "2")]
    pub incarnation_id: Vec<u8>,
    /// The broker epoch the controller assigned to this registration.
    #[prost(int64, tag = "3")]
    pub broker_epoch: i64,
    /// Advertised listeners.
    #[prost(message, repeated, tag = "4")]
    pub endpoints: Vec<BrokerEndpoint>,
    /// The broker's rack, if configured.
    #[prost(string, optional, tag = "5")]
    pub rack: Option<String>,
    /// Whether the broker starts fenced (it does until its first heartbeat).
    #[prost(bool, tag = "6")]
    pub fenced: bool,
}

/// Removal of a broker registration.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct UnregisterBrokerRecord {
    /// The broker's `node.id`.
    #[prost(int32, tag = "1")]
    pub broker_id: i32,
    /// The epoch of the registration being removed.
    #[prost(int64, tag = "2")]
    pub broker_epoch: i64,
}

/// A broker is fenced: it may not lead, and it leaves ISRs.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct FenceBrokerRecord {
    /// The broker's `node.id`.
    #[prost(int32, tag = "1")]
    pub broker_id: i32,
    /// The epoch of the registration being fenced.
    #[prost(int64, tag = "2")]
    pub broker_epoch: i64,
}

/// A broker is unfenced: it may lead and follow again.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct UnfenceBrokerRecord {
    /// The broker's `node.id`.
    #[prost(int32, tag = "1")]
    pub broker_id: i32,
    /// The epoch of the registration being unfenced.
    #[prost(int64, tag = "2")]
    pub broker_epoch: i64,
}

/// A topic: its name and its UUID topic id.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct TopicRecord {
    /// Topic name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Topic id (16 bytes).
    #[prost(bytes = "vec", tag = "2")]
    pub topic_id: Vec<u8>,
}

/// A new partition with its complete state.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct PartitionRecord {
    /// Id of the topic the partition belongs to (16 bytes).
    #[prost(bytes = "vec", tag = "1")]
    pub topic_id: Vec<u8>,
    /// Partition index; partitions of a topic are created in order from 0.
    #[prost(int32, tag = "2")]
    pub partition_index: i32,
    /// Assigned replicas, preferred leader first.
    #[prost(int32, repeated, tag = "3")]
    pub replicas: Vec<i32>,
    /// In-sync replicas, a subset of `replicas`.
    #[prost(int32, repeated, tag = "4")]
    pub isr: Vec<i32>,
    /// Leader broker id, or [`NO_LEADER`].
    #[prost(int32, tag = "5")]
    pub leader: i32,
    /// Leader epoch; grows by one each time the leader changes.
    #[prost(int32, tag = "6")]
    pub leader_epoch: i32,
    /// Partition epoch; grows by one with every change of the partition.
    #[prost(int32, tag = "7")]
    pub partition_epoch: i32,
    /// Replicas an ongoing reassignment adds (empty when none is ongoing).
    /// Absent in records written before reassignment existed, which decode
    /// as empty.
    #[prost(int32, repeated, tag = "8")]
    pub adding_replicas: Vec<i32>,
    /// Replicas an ongoing reassignment removes (empty when none is
    /// ongoing).
    #[prost(int32, repeated, tag = "9")]
    pub removing_replicas: Vec<i32>,
}

/// A list of broker ids, so that a change record can tell "unchanged"
/// (absent) from "changed to empty".
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct ReplicaList {
    /// Broker ids.
    #[prost(int32, repeated, tag = "1")]
    pub broker_ids: Vec<i32>,
}

/// A change to an existing partition. Absent fields are unchanged. Applying
/// it bumps the partition epoch; changing the leader also bumps the leader
/// epoch.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct PartitionChangeRecord {
    /// Id of the topic the partition belongs to (16 bytes).
    #[prost(bytes = "vec", tag = "1")]
    pub topic_id: Vec<u8>,
    /// Partition index.
    #[prost(int32, tag = "2")]
    pub partition_index: i32,
    /// New ISR, if it changes.
    #[prost(message, optional, tag = "3")]
    pub isr: Option<ReplicaList>,
    /// New leader (or [`NO_LEADER`]), if it changes.
    #[prost(int32, optional, tag = "4")]
    pub leader: Option<i32>,
    /// New replica assignment, if it changes (reassignment).
    #[prost(message, optional, tag = "5")]
    pub replicas: Option<ReplicaList>,
    /// New replicas being added by a reassignment, if that changes (an
    /// empty list ends the reassignment).
    #[prost(message, optional, tag = "6")]
    pub adding_replicas: Option<ReplicaList>,
    /// New replicas being removed by a reassignment, if that changes.
    #[prost(message, optional, tag = "7")]
    pub removing_replicas: Option<ReplicaList>,
}

/// The kind of resource a configuration belongs to. The numbers are Kafka's
/// `ConfigResource.Type` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum ConfigResourceType {
    /// Not a valid resource type (the protobuf default).
    Unknown = 0,
    /// A topic, named by topic name.
    Topic = 2,
    /// A broker, named by broker id; the empty name is the cluster default.
    Broker = 4,
}

/// One configuration key set (value present) or deleted (value absent).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct ConfigRecord {
    /// Resource type, a [`ConfigResourceType`] code.
    #[prost(enumeration = "ConfigResourceType", tag = "1")]
    pub resource_type: i32,
    /// Resource name: a topic name or a broker id.
    #[prost(string, tag = "2")]
    pub resource_name: String,
    /// Configuration key, e.g. `retention.ms`.
    #[prost(string, tag = "3")]
    pub name: String,
    /// New value; absent means the key is deleted (back to its default).
    #[prost(string, optional, tag = "4")]
    pub value: Option<String>,
}

/// A block of producer ids handed to a broker (Kafka's ProducerIdsRecord):
/// ids below `next_producer_id` are taken, so no two brokers of a cluster
/// hand out the same id to idempotent producers.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct ProducerIdsRecord {
    /// The broker the block went to (-1 in a snapshot).
    #[prost(int32, tag = "1")]
    pub broker_id: i32,
    /// That broker's epoch when it asked.
    #[prost(int64, tag = "2")]
    pub broker_epoch: i64,
    /// The first id not yet handed out.
    #[prost(int64, tag = "3")]
    pub next_producer_id: i64,
}

/// Removal of a topic with all its partitions and configuration.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct RemoveTopicRecord {
    /// Id of the topic to remove (16 bytes).
    #[prost(bytes = "vec", tag = "1")]
    pub topic_id: Vec<u8>,
}

/// The payload of one frame of the metadata log: the records one command
/// produced, written and recovered together.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MetadataBatch {
    /// Offset of the first record; the others follow consecutively.
    #[prost(uint64, tag = "1")]
    pub base_offset: u64,
    /// The records, in order.
    #[prost(message, repeated, tag = "2")]
    pub records: Vec<MetadataRecord>,
}

impl MetadataBatch {
    /// Decodes a batch, checking the version of every record.
    pub fn decode_from(bytes: &[u8]) -> Result<Self, RecordError> {
        let batch = Self::decode(bytes).map_err(|source| RecordError::Decode { source })?;
        check_versions(&batch.records)?;
        Ok(batch)
    }
}

fn check_versions(records: &[MetadataRecord]) -> Result<(), RecordError> {
    match records
        .iter()
        .find(|record| record.version > CURRENT_RECORD_VERSION)
    {
        Some(record) => Err(RecordError::UnsupportedVersion {
            version: record.version,
            max_supported: CURRENT_RECORD_VERSION,
        }),
        None => Ok(()),
    }
}

/// A snapshot of a metadata image: the records that rebuild it, and the
/// offset of the last log record it includes.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MetadataSnapshot {
    /// Offset of the last log record the snapshot covers.
    #[prost(uint64, tag = "1")]
    pub last_offset: u64,
    /// Records that, applied to an empty image, rebuild the image.
    #[prost(message, repeated, tag = "2")]
    pub records: Vec<MetadataRecord>,
}

impl MetadataRecord {
    /// Wraps `record` at the [`CURRENT_RECORD_VERSION`].
    pub fn new(record: Record) -> Self {
        Self {
            version: CURRENT_RECORD_VERSION,
            record: Some(record),
        }
    }

    /// Encodes the record into a new buffer.
    pub fn encode_to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Decodes one record from exactly `bytes`, checking its version.
    pub fn decode_from(bytes: &[u8]) -> Result<Self, RecordError> {
        let record = Self::decode(bytes).map_err(|source| RecordError::Decode { source })?;
        if record.version > CURRENT_RECORD_VERSION {
            return Err(RecordError::UnsupportedVersion {
                version: record.version,
                max_supported: CURRENT_RECORD_VERSION,
            });
        }
        Ok(record)
    }

    /// The record kind's name, for logs.
    pub fn kind(&self) -> &'static str {
        match &self.record {
            None => "unknown",
            Some(Record::RegisterBroker(_)) => "RegisterBroker",
            Some(Record::UnregisterBroker(_)) => "UnregisterBroker",
            Some(Record::FenceBroker(_)) => "FenceBroker",
            Some(Record::UnfenceBroker(_)) => "UnfenceBroker",
            Some(Record::Topic(_)) => "Topic",
            Some(Record::Partition(_)) => "Partition",
            Some(Record::PartitionChange(_)) => "PartitionChange",
            Some(Record::Config(_)) => "Config",
            Some(Record::RemoveTopic(_)) => "RemoveTopic",
            Some(Record::ProducerIds(_)) => "ProducerIds",
            Some(Record::UserScramCredential(_)) => "UserScramCredential",
            Some(Record::RemoveUserScramCredential(_)) => "RemoveUserScramCredential",
            Some(Record::AccessControlEntry(_)) => "AccessControlEntry",
            Some(Record::RemoveAccessControlEntry(_)) => "RemoveAccessControlEntry",
            Some(Record::ClientQuota(_)) => "ClientQuota",
        }
    }
}

impl MetadataSnapshot {
    /// Decodes a snapshot, checking the version of every record.
    pub fn decode_from(bytes: &[u8]) -> Result<Self, RecordError> {
        let snapshot = Self::decode(bytes).map_err(|source| RecordError::Decode { source })?;
        check_versions(&snapshot.records)?;
        Ok(snapshot)
    }
}

/// Reads a 16-byte UUID field.
pub fn uuid_from_bytes(field: &'static str, bytes: &[u8]) -> Result<Uuid, RecordError> {
    Uuid::from_slice(bytes).map_err(|_| RecordError::InvalidUuid {
        field,
        length: bytes.len(),
    })
}

/// Writes a UUID as its 16 bytes.
pub fn uuid_to_bytes(id: Uuid) -> Vec<u8> {
    id.as_bytes().to_vec()
}

impl From<Vec<i32>> for ReplicaList {
    fn from(broker_ids: Vec<i32>) -> Self {
        Self { broker_ids }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::collection::vec;
    use proptest::option;
    use proptest::prelude::*;

    use super::*;

    fn broker_ids() -> impl Strategy<Value = Vec<i32>> {
        vec(any::<i32>(), 0..8)
    }

    fn uuid_bytes() -> impl Strategy<Value = Vec<u8>> {
        any::<[u8; 16]>().prop_map(|bytes| bytes.to_vec())
    }

    fn endpoint() -> impl Strategy<Value = BrokerEndpoint> {
        (".{0,12}", ".{0,20}", any::<u32>(), ".{0,12}").prop_map(
            |(name, host, port, security_protocol)| BrokerEndpoint {
                name,
                host,
                port,
                security_protocol,
            },
        )
    }

    fn register_broker() -> impl Strategy<Value = Record> {
        (
            any::<i32>(),
            uuid_bytes(),
            any::<i64>(),
            vec(endpoint(), 0..3),
            option::of(".{0,10}"),
            any::<bool>(),
        )
            .prop_map(
                |(broker_id, incarnation_id, broker_epoch, endpoints, rack, fenced)| {
                    Record::RegisterBroker(RegisterBrokerRecord {
                        broker_id,
                        incarnation_id,
                        broker_epoch,
                        endpoints,
                        rack,
                        fenced,
                    })
                },
            )
    }

    fn partition() -> impl Strategy<Value = Record> {
        (
            (uuid_bytes(), any::<i32>(), broker_ids(), broker_ids()),
            (any::<i32>(), any::<i32>(), any::<i32>()),
            (broker_ids(), broker_ids()),
        )
            .prop_map(
                |(
                    (topic_id, partition_index, replicas, isr),
                    (leader, leader_epoch, partition_epoch),
                    (adding_replicas, removing_replicas),
                )| {
                    Record::Partition(PartitionRecord {
                        topic_id,
                        partition_index,
                        replicas,
                        isr,
                        leader,
                        leader_epoch,
                        partition_epoch,
                        adding_replicas,
                        removing_replicas,
                    })
                },
            )
    }

    fn partition_change() -> impl Strategy<Value = Record> {
        (
            uuid_bytes(),
            any::<i32>(),
            option::of(broker_ids()),
            option::of(any::<i32>()),
            option::of(broker_ids()),
            (option::of(broker_ids()), option::of(broker_ids())),
        )
            .prop_map(
                |(topic_id, partition_index, isr, leader, replicas, (adding, removing))| {
                    Record::PartitionChange(PartitionChangeRecord {
                        topic_id,
                        partition_index,
                        isr: isr.map(ReplicaList::from),
                        leader,
                        replicas: replicas.map(ReplicaList::from),
                        adding_replicas: adding.map(ReplicaList::from),
                        removing_replicas: removing.map(ReplicaList::from),
                    })
                },
            )
    }

    fn config() -> impl Strategy<Value = Record> {
        (
            prop_oneof![
                Just(ConfigResourceType::Topic),
                Just(ConfigResourceType::Broker)
            ],
            ".{0,20}",
            ".{0,20}",
            option::of(".{0,20}"),
        )
            .prop_map(|(resource_type, resource_name, name, value)| {
                Record::Config(ConfigRecord {
                    resource_type: resource_type as i32,
                    resource_name,
                    name,
                    value,
                })
            })
    }

    fn broker_state() -> impl Strategy<Value = Record> {
        (0..3u8, any::<i32>(), any::<i64>()).prop_map(
            |(kind, broker_id, broker_epoch)| match kind {
                0 => Record::UnregisterBroker(UnregisterBrokerRecord {
                    broker_id,
                    broker_epoch,
                }),
                1 => Record::FenceBroker(FenceBrokerRecord {
                    broker_id,
                    broker_epoch,
                }),
                _ => Record::UnfenceBroker(UnfenceBrokerRecord {
                    broker_id,
                    broker_epoch,
                }),
            },
        )
    }

    pub(crate) fn any_record() -> impl Strategy<Value = MetadataRecord> {
        prop_oneof![
            register_broker(),
            broker_state(),
            (".{0,30}", uuid_bytes())
                .prop_map(|(name, topic_id)| Record::Topic(TopicRecord { name, topic_id })),
            partition(),
            partition_change(),
            config(),
            uuid_bytes().prop_map(|topic_id| Record::RemoveTopic(RemoveTopicRecord { topic_id })),
        ]
        .prop_map(MetadataRecord::new)
    }

    proptest! {
        #[test]
        fn record_round_trips(record in any_record()) {
            let bytes = record.encode_to_bytes();
            prop_assert_eq!(bytes.len(), record.encoded_len());
            let decoded = MetadataRecord::decode_from(&bytes).unwrap();
            prop_assert_eq!(decoded, record);
        }

        #[test]
        fn snapshot_round_trips(last_offset in any::<u64>(), records in vec(any_record(), 0..10)) {
            let snapshot = MetadataSnapshot { last_offset, records };
            let bytes = snapshot.encode_to_vec();
            prop_assert_eq!(bytes.len(), snapshot.encoded_len());
            prop_assert_eq!(MetadataSnapshot::decode_from(&bytes).unwrap(), snapshot);
        }

        #[test]
        fn batch_round_trips(base_offset in any::<u64>(), records in vec(any_record(), 0..10)) {
            let batch = MetadataBatch { base_offset, records };
            let bytes = batch.encode_to_vec();
            prop_assert_eq!(bytes.len(), batch.encoded_len());
            prop_assert_eq!(MetadataBatch::decode_from(&bytes).unwrap(), batch);
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in vec(any::<u8>(), 0..64)) {
            let _ = MetadataRecord::decode_from(&bytes);
        }
    }

    #[test]
    fn change_record_tells_absent_from_empty() {
        let change = PartitionChangeRecord {
            topic_id: vec![0; 16],
            partition_index: 0,
            isr: Some(ReplicaList::default()),
            leader: None,
            replicas: None,
            adding_replicas: None,
            removing_replicas: Some(ReplicaList::default()),
        };
        let decoded = PartitionChangeRecord::decode(change.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded.isr, Some(ReplicaList::default()));
        assert_eq!(decoded.leader, None);
        assert_eq!(decoded.replicas, None);
        assert_eq!(decoded.adding_replicas, None);
        assert_eq!(decoded.removing_replicas, Some(ReplicaList::default()));
    }

    #[test]
    fn newer_version_is_rejected() {
        let mut record = MetadataRecord::new(Record::RemoveTopic(RemoveTopicRecord {
            topic_id: vec![1; 16],
        }));
        record.version = CURRENT_RECORD_VERSION + 1;
        let error = MetadataRecord::decode_from(&record.encode_to_bytes()).unwrap_err();
        assert!(matches!(
            error,
            RecordError::UnsupportedVersion { version, .. } if version == CURRENT_RECORD_VERSION + 1
        ));
    }

    #[test]
    fn unknown_record_kind_decodes_as_none() {
        // Field 99, length-delimited, empty: a record kind from a newer build.
        let bytes = [0x08, 0x01, 0x9a, 0x06, 0x00];
        let decoded = MetadataRecord::decode_from(&bytes).unwrap();
        assert_eq!(decoded.record, None);
        assert_eq!(decoded.kind(), "unknown");
    }

    #[test]
    fn uuid_field_must_be_sixteen_bytes() {
        assert!(matches!(
            uuid_from_bytes("topic_id", &[1, 2, 3]),
            Err(RecordError::InvalidUuid {
                field: "topic_id",
                length: 3
            })
        ));
        let id = Uuid::from_u128(0x1234);
        assert_eq!(uuid_from_bytes("topic_id", &uuid_to_bytes(id)).unwrap(), id);
    }
}
