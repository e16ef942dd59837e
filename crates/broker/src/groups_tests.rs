//! The group service over a replicated `__consumer_offsets`: commits wait
//! for the in-sync replicas, the coordinator follows the partition's
//! leadership, and a new leader loads the whole log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strom_clock::SystemClock;
use strom_controller::image::MetadataImage;
use strom_controller::records::{
    uuid_to_bytes, BrokerEndpoint, MetadataRecord, PartitionChangeRecord, PartitionRecord, Record,
    RegisterBrokerRecord, TopicRecord,
};
use strom_coordinator::records::{OffsetCommitValue, OffsetsRecord};
use strom_coordinator::{GroupError, LogError, OffsetCommitPartition, OffsetCommitRequest};
use strom_protocol::records::{Compression, RecordBatchBuilder};
use strom_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};
use uuid::Uuid;

use super::{offsets_topic_replication_factor, GroupService, OFFSETS_TOPIC};
use crate::config::BrokerConfig;
use crate::replica_manager::{FollowerFetch, ReplicaManager};

const OFFSETS_TOPIC_ID: u128 = 50;

/// Metadata as the controller would write it, applied record by record.
struct Metadata {
    image: MetadataImage,
    next_offset: u64,
}

impl Metadata {
    fn new() -> Metadata {
        Metadata {
            image: MetadataImage::empty(),
            next_offset: 0,
        }
    }

    fn apply(&mut self, record: Record) -> &MetadataImage {
        self.image = self
            .image
            .apply(self.next_offset, &MetadataRecord::new(record))
            .expect("valid record");
        self.next_offset += 1;
        &self.image
    }

    fn register(&mut self, broker_id: i32) {
        self.apply(Record::RegisterBroker(RegisterBrokerRecord {
            broker_id,
            incarnation_id: uuid_to_bytes(Uuid::from_u128(broker_id as u128)),
            broker_epoch: 1,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092 + broker_id as u32,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: None,
            fenced: false,
        }));
    }

    /// `__consumer_offsets` with one partition on `replicas`, led by the
    /// first, all in sync.
    fn offsets_topic(&mut self, replicas: &[i32]) {
        let topic_id = uuid_to_bytes(Uuid::from_u128(OFFSETS_TOPIC_ID));
        self.apply(Record::Topic(TopicRecord {
            name: OFFSETS_TOPIC.into(),
            topic_id: topic_id.clone(),
        }));
        self.apply(Record::Partition(PartitionRecord {
            topic_id,
            partition_index: 0,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader: replicas[0],
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionRecord::default()
        }));
    }

    /// Moves the partition's leadership to `leader`.
    fn lead(&mut self, leader: i32) -> &MetadataImage {
        self.apply(Record::PartitionChange(PartitionChangeRecord {
            topic_id: uuid_to_bytes(Uuid::from_u128(OFFSETS_TOPIC_ID)),
            partition_index: 0,
            isr: None,
            leader: Some(leader),
            ..PartitionChangeRecord::default()
        }))
    }
}

/// Broker 1 with the given settings, on a fresh directory.
struct Node {
    replicas: Arc<ReplicaManager>,
    groups: GroupService,
    _dir: tempfile::TempDir,
}

impl Node {
    fn new(settings: &[(&str, &str)], topic_defaults: &[(&str, &str)]) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = LogManagerConfig::new(vec![dir.path().to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let defaults = topic_defaults
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let replicas = Arc::new(ReplicaManager::new(
            1,
            logs,
            Arc::new(SystemClock),
            defaults,
        ));
        let mut map: BTreeMap<String, String> = [("offsets.topic.num.partitions", "1")]
            .into_iter()
            .chain(settings.iter().copied())
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        map.insert("node.id".to_owned(), "1".to_owned());
        let (config, _warnings) = BrokerConfig::from_map(&map).expect("valid config");
        let groups = GroupService::new(
            &config,
            Arc::clone(&replicas),
            Arc::new(strom_clock::SeededRandom::new(3)),
        );
        Node {
            replicas,
            groups,
            _dir: dir,
        }
    }

    /// What the broker does with each new image.
    fn apply(&self, image: &MetadataImage) {
        self.replicas.apply_image(image);
        self.groups.apply_image(image);
    }

    /// Follower 2 fetches from the leader's log end: the HW follows.
    fn follower_catches_up(&self) {
        let replica = self
            .replicas
            .get(&TopicPartition::new(OFFSETS_TOPIC.to_owned(), 0))
            .expect("led here");
        let log_end_offset = replica.log_end.current();
        let fetch = FollowerFetch {
            replica: 2,
            fetch_offset: log_end_offset,
            last_fetched_epoch: None,
        };
        replica
            .read_for_follower(&fetch, 1024, true, self.replicas.now_ms())
            .expect("follower fetch");
        assert_eq!(replica.high_watermark.current(), log_end_offset);
    }

    fn committed(&self, topic_partition: i32) -> Result<i64, GroupError> {
        let topics = [("events".to_owned(), vec![topic_partition])];
        let offsets = self
            .groups
            .coordinator
            .fetch_offsets("readers", Some(&topics), false)?;
        Ok(offsets[0].offset)
    }
}

fn commit(partition: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: "readers".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![OffsetCommitPartition {
            topic: "events".into(),
            partition,
            offset,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    }
}

fn replicated_offsets_topic() -> Metadata {
    let mut metadata = Metadata::new();
    metadata.register(1);
    metadata.register(2);
    metadata.offsets_topic(&[1, 2]);
    metadata
}

#[tokio::test]
async fn a_commit_is_answered_once_the_in_sync_follower_has_it() {
    let node = Node::new(&[], &[]);
    let metadata = replicated_offsets_topic();
    node.apply(&metadata.image);
    let coordinator = node.groups.coordinator.clone();
    let waiting = tokio::spawn(async move { coordinator.commit_offsets(&commit(0, 42)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "answered before the follower had the commit"
    );
    node.follower_catches_up();
    let results = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("answered once the HW passed the commit")
        .expect("task")
        .expect("committed");
    assert!(results.iter().all(|(_, result)| result.is_ok()));
    assert_eq!(node.committed(0), Ok(42));
}

#[tokio::test]
async fn losing_leadership_fails_waiting_commits_and_unloads_the_groups() {
    let node = Node::new(&[], &[]);
    let mut metadata = replicated_offsets_topic();
    node.apply(&metadata.image);
    let coordinator = node.groups.coordinator.clone();
    let waiting = tokio::spawn(async move { coordinator.commit_offsets(&commit(0, 42)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    node.apply(metadata.lead(2));
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("answered when leadership moved")
        .expect("task");
    assert_eq!(
        answer,
        Err(GroupError::LogAppendFailed {
            source: LogError::NotLeader { partition: 0 }
        })
    );
    assert_eq!(
        node.committed(0),
        Err(GroupError::NotCoordinator { partition: 0 }),
        "the groups of the partition are unloaded at once"
    );
    assert_eq!(
        node.groups.coordinator.commit_offsets(&commit(0, 50)).await,
        Err(GroupError::NotCoordinator { partition: 0 })
    );
}

#[tokio::test]
async fn a_new_leader_loads_the_whole_log_and_answers_its_tail_once_the_high_watermark_passes_it() {
    let node = Node::new(&[("offsets.commit.timeout.ms", "50")], &[]);
    let mut metadata = replicated_offsets_topic();
    node.apply(&metadata.image);
    node.groups
        .coordinator
        .commit_offsets(&commit(0, 10))
        .await
        .expect_err("no follower fetched: not committed in time");
    // The record is in the log past the HW. Leadership moves away and back:
    // the partition is reloaded, from the whole log (as leader, this log
    // is what the followers will hold). Its tail past the HW may hold a
    // commit an earlier coordinator acknowledged, so OffsetFetch waits
    // until the followers have it.
    node.apply(metadata.lead(2));
    assert!(node.committed(0).is_err());
    node.apply(metadata.lead(1));
    assert_eq!(
        node.committed(0),
        Err(GroupError::CoordinatorLoadInProgress { partition: 0 })
    );
    node.follower_catches_up();
    assert_eq!(node.committed(0), Ok(10));
}

/// A batch of one offset commit of `readers`, as another leader wrote it.
fn commit_batch(base_offset: i64, leader_epoch: i32, partition: i32, offset: i64) -> Bytes {
    let record = OffsetsRecord::OffsetCommit {
        group: "readers".into(),
        topic: "events".into(),
        partition,
        value: Some(OffsetCommitValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
            expire_timestamp_ms: -1,
        }),
    }
    .to_log_record();
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_base_offset(base_offset)
        .with_partition_leader_epoch(leader_epoch);
    builder
        .append(1, Some(&record.key), record.value.as_deref(), &[])
        .expect("record");
    builder.build().expect("batch")
}

#[tokio::test]
async fn led_again_at_a_newer_epoch_the_partition_is_reloaded() {
    let node = Node::new(&[("offsets.commit.timeout.ms", "50")], &[]);
    let mut metadata = replicated_offsets_topic();
    node.apply(&metadata.image);
    node.groups
        .coordinator
        .commit_offsets(&commit(0, 5))
        .await
        .expect_err("no follower: times out");
    // Leadership moves to broker 2 and comes back before the coordinator
    // sees an image in between; meanwhile broker 2 wrote a commit that this
    // replica fetched as its follower.
    node.replicas.apply_image(metadata.lead(2));
    let topic_partition = TopicPartition::new(OFFSETS_TOPIC.to_owned(), 0);
    let log = node
        .replicas
        .logs()
        .get(&topic_partition)
        .expect("log kept");
    log.write()
        .expect("log")
        .append_as_follower(commit_batch(1, 1, 1, 77), 1)
        .expect("follower append");
    node.apply(metadata.lead(1));
    assert_eq!(
        node.committed(0),
        Err(GroupError::CoordinatorLoadInProgress { partition: 0 })
    );
    node.follower_catches_up();
    assert_eq!(node.committed(0), Ok(5));
    assert_eq!(
        node.committed(1),
        Ok(77),
        "the commit written under the other leader is loaded"
    );
}

#[tokio::test]
async fn a_commit_not_committed_in_time_times_out() {
    let node = Node::new(&[("offsets.commit.timeout.ms", "100")], &[]);
    let metadata = replicated_offsets_topic();
    node.apply(&metadata.image);
    let answer = node.groups.coordinator.commit_offsets(&commit(0, 42)).await;
    assert_eq!(
        answer,
        Err(GroupError::LogAppendFailed {
            source: LogError::ReplicationTimeout {
                partition: 0,
                timeout_ms: 100
            }
        })
    );
}

#[tokio::test]
async fn too_few_in_sync_replicas_refuse_the_commit_before_the_append() {
    let node = Node::new(&[], &[("min.insync.replicas", "2")]);
    let mut metadata = Metadata::new();
    metadata.register(1);
    metadata.offsets_topic(&[1]);
    node.apply(&metadata.image);
    let answer = node.groups.coordinator.commit_offsets(&commit(0, 42)).await;
    assert_eq!(
        answer,
        Err(GroupError::LogAppendFailed {
            source: LogError::NotEnoughReplicas {
                partition: 0,
                in_sync: 1,
                after_append: false
            }
        })
    );
    assert_eq!(node.committed(0), Ok(-1), "the refused commit is not kept");
    let log_end = node
        .replicas
        .get(&TopicPartition::new(OFFSETS_TOPIC.to_owned(), 0))
        .expect("led")
        .log_end
        .current();
    assert_eq!(log_end, 0, "nothing was appended");
}

#[test]
fn the_offsets_topic_has_three_replicas_capped_to_the_live_brokers() {
    let (defaults, _) = BrokerConfig::from_map(&BTreeMap::new()).expect("defaults");
    assert_eq!(defaults.offsets_topic_replication_factor, 3);
    let mut metadata = Metadata::new();
    assert_eq!(
        offsets_topic_replication_factor(&defaults, &metadata.image),
        1,
        "no broker registered yet (the embedded controller): one replica"
    );
    for (broker_id, expected) in [(1, 1), (2, 2), (3, 3), (4, 3)] {
        metadata.register(broker_id);
        assert_eq!(
            offsets_topic_replication_factor(&defaults, &metadata.image),
            expected
        );
    }
}

#[tokio::test]
async fn transactional_commits_are_transactional_batches_with_the_next_sequence() {
    use strom_coordinator::{BatchContext, OffsetsLog, TxnOffsetCommitRequest};
    let node = Node::new(&[], &[]);
    let mut metadata = Metadata::new();
    metadata.register(1);
    metadata.offsets_topic(&[1]);
    node.apply(&metadata.image);
    let coordinator = node.groups.coordinator.clone();
    let request = |producer_epoch, offset| TxnOffsetCommitRequest {
        group_id: "readers".into(),
        producer_id: 9,
        producer_epoch,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: commit(0, offset).partitions,
    };
    // Two batches of one epoch, then the first of the next: each gets the
    // sequence the partition's producer state expects.
    for (producer_epoch, offset) in [(0, 1), (0, 2), (1, 3)] {
        let results = coordinator
            .commit_transactional_offsets(&request(producer_epoch, offset))
            .await
            .expect("appended and committed");
        assert!(results.iter().all(|(_, result)| result.is_ok()));
    }
    let stored = coordinator.with_log(|log| log.read(0, 0, 100).expect("reads"));
    let batches: Vec<BatchContext> = stored.iter().map(|record| record.batch).collect();
    assert_eq!(
        batches,
        vec![
            BatchContext::transactional(9, 0),
            BatchContext::transactional(9, 0),
            BatchContext::transactional(9, 1),
        ]
    );
    // The log fences the older epoch.
    assert!(matches!(
        coordinator
            .commit_transactional_offsets(&request(0, 4))
            .await,
        Err(GroupError::LogAppendFailed { .. })
    ));
    let topics = [("events".to_owned(), vec![0])];
    let answers = coordinator
        .fetch_offsets("readers", Some(&topics), true)
        .expect("served");
    assert_eq!(answers[0].error, Some(GroupError::UnstableOffsetCommit));
    assert_eq!(node.committed(0), Ok(-1));
}
