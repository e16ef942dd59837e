//! A broker of fixed state behind [`BrokerView`], for the collector's and
//! the console's tests: node 1 of two brokers (2 is fenced), topic
//! `orders` with two partitions (0 led here and under-replicated, 1 led by
//! broker 2 and offline here), and group `readers` with committed offsets.
//! Its users are `alice`, `bob` and the super user `root`, each with the
//! password `NAME-secret`; what they may do is [`FakeBroker::grants`].

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::topics::TopicCounts;
use crate::view::{
    BrokerState, BrokerView, ClusterState, CommittedOffset, EndpointState, GroupDescription,
    GroupListing, HostedPartition, IsrChanges, LogState, PartitionState, QuorumState, Registration,
    TopicState, TransactionSummary, Viewer,
};

/// One permission of the fake authorizer: user, operation, resource type
/// and resource name.
pub(crate) type Grant = (&'static str, i8, i8, &'static str);

/// The fixed broker.
#[derive(Debug, Default)]
pub(crate) struct FakeBroker {
    /// What [`BrokerView::registration`] answers.
    pub(crate) fenced: bool,
    /// What [`BrokerView::authorize`] allows users other than `root`.
    pub(crate) grants: Vec<Grant>,
    /// The record batches of `orders`-0, in offset order (empty by
    /// default): what [`BrokerView::read_records`] reads.
    pub(crate) batches: Vec<Bytes>,
}

fn led_log() -> LogState {
    LogState {
        log_start_offset: 2,
        log_end_offset: 12,
        high_watermark: 10,
        last_stable_offset: 8,
        open_transactions: 1,
        size_bytes: 100,
        segments: 1,
        log_dir: Some("/data".to_owned()),
    }
}

impl BrokerView for FakeBroker {
    fn client_quotas(&self) -> Vec<crate::view::ClientQuotaState> {
        vec![crate::view::ClientQuotaState {
            key: "producer_byte_rate",
            user: String::new(),
            client_id: "app".to_owned(),
            limit: 1_048_576.0,
            usage: 1_100_000.4,
            throttle_time_ms_total: 2_500,
            throttled_total: 3,
        }]
    }

    fn node_id(&self) -> i32 {
        1
    }

    fn cluster_id(&self) -> &str {
        "fake-cluster"
    }

    fn registration(&self) -> Registration {
        if self.fenced {
            Registration::Fenced
        } else {
            Registration::Unfenced
        }
    }

    fn cluster(&self) -> ClusterState {
        let broker = |broker_id, fenced| BrokerState {
            broker_id,
            epoch: 7,
            endpoints: vec![EndpointState {
                name: "PLAINTEXT".to_owned(),
                host: "127.0.0.1".to_owned(),
                port: 9092,
            }],
            rack: None,
            fenced,
        };
        ClusterState {
            brokers: vec![broker(1, false), broker(2, true)],
            topic_count: 1,
            partition_count: 2,
            metadata_end_offset: 42,
        }
    }

    fn quorum(&self) -> Option<QuorumState> {
        None
    }

    fn topics(&self) -> Vec<TopicState> {
        self.topic("orders").into_iter().collect()
    }

    fn topic(&self, name: &str) -> Option<TopicState> {
        (name == "orders").then(|| TopicState {
            name: "orders".to_owned(),
            id: "00000000-0000-0000-0000-000000000001".to_owned(),
            min_insync_replicas: 2,
            partitions: vec![
                PartitionState {
                    replicas: vec![1, 2],
                    isr: vec![1],
                    leader: Some(1),
                    leader_epoch: 3,
                    ..PartitionState::default()
                },
                PartitionState {
                    replicas: vec![1, 2],
                    isr: vec![2, 1],
                    leader: Some(2),
                    leader_epoch: 4,
                    ..PartitionState::default()
                },
            ],
        })
    }

    fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        let mut configs = BTreeMap::new();
        if name == "orders" {
            configs.insert("min.insync.replicas".to_owned(), "2".to_owned());
        }
        configs
    }

    fn topic_counts(&self) -> Vec<(String, TopicCounts)> {
        let counts = TopicCounts {
            messages_in: 10,
            bytes_in: 1000,
            bytes_out: 500,
            ..TopicCounts::default()
        };
        vec![("orders".to_owned(), counts)]
    }

    fn isr_changes(&self) -> IsrChanges {
        IsrChanges {
            shrinks: 1,
            expands: 0,
        }
    }

    fn hosted_partitions(&self) -> Vec<HostedPartition> {
        vec![
            HostedPartition {
                topic: "orders".to_owned(),
                partition: 0,
                follower_lags: vec![(2, 5)],
                log: Some(led_log()),
            },
            HostedPartition {
                topic: "orders".to_owned(),
                partition: 1,
                follower_lags: Vec::new(),
                log: None,
            },
        ]
    }

    fn led_partition_log(&self, topic: &str, partition: i32) -> Option<LogState> {
        (topic == "orders" && partition == 0).then(led_log)
    }

    fn read_records(
        &self,
        topic: &str,
        partition: i32,
        from: i64,
        max_bytes: u64,
    ) -> Option<Bytes> {
        if topic != "orders" || partition != 0 {
            return None;
        }
        // As the log reads: whole batches from the one holding `from`,
        // at least one, at most `max_bytes` otherwise.
        let mut read = Vec::new();
        for batch in &self.batches {
            let header = strom_protocol::records::BatchHeader::decode(batch).ok()?;
            if header.next_offset() <= from {
                continue;
            }
            if !read.is_empty() && (read.len() + batch.len()) as u64 > max_bytes {
                break;
            }
            read.extend_from_slice(batch);
        }
        Some(Bytes::from(read))
    }

    fn offset_for_timestamp(&self, topic: &str, partition: i32, timestamp_ms: i64) -> Option<i64> {
        if topic != "orders" || partition != 0 {
            return None;
        }
        self.batches.iter().find_map(|batch| {
            let batch = strom_protocol::records::RecordBatch::parse(batch.clone()).ok()?;
            let records = batch.records_with_limit(1 << 20).ok()?;
            records
                .map_while(Result::ok)
                .find(|record| batch.record_timestamp(record) >= timestamp_ms)
                .map(|record| record.offset(batch.base_offset()))
        })
    }

    fn group_states(&self) -> Vec<&'static str> {
        vec![
            "Empty",
            "PreparingRebalance",
            "CompletingRebalance",
            "Stable",
            "Dead",
        ]
    }

    fn transactions(&self) -> Vec<TransactionSummary> {
        vec![TransactionSummary {
            transactional_id: "payments-app".to_owned(),
            producer_id: 4000,
            state: "Ongoing",
            start_timestamp_ms: 1_700_000_000_000,
        }]
    }

    fn groups(&self) -> Vec<GroupListing> {
        vec![GroupListing {
            group: "readers".to_owned(),
            protocol_type: "consumer".to_owned(),
            state: "Stable",
        }]
    }

    fn describe_group(&self, group: &str) -> Option<GroupDescription> {
        (group == "readers").then(|| GroupDescription {
            state: "Stable",
            protocol_type: "consumer".to_owned(),
            protocol_name: "range".to_owned(),
            members: Vec::new(),
        })
    }

    fn committed_offsets(&self, group: &str) -> Vec<CommittedOffset> {
        if group != "readers" {
            return Vec::new();
        }
        let offset = |partition, offset| CommittedOffset {
            topic: "orders".to_owned(),
            partition,
            offset,
        };
        vec![offset(0, 7), offset(1, 3), offset(2, -1)]
    }

    fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.led_partition_log(topic, partition)
            .map(|log| log.high_watermark)
    }

    fn now_ms(&self) -> i64 {
        1_000
    }

    fn authenticate(&self, user: &str, password: &str) -> bool {
        ["alice", "bob", "root"].contains(&user) && password == format!("{user}-secret")
    }

    fn authorize(&self, viewer: &Viewer, operation: i8, resource_type: i8, name: &str) -> bool {
        viewer.user == "root"
            || self.grants.iter().any(|grant| {
                *grant == (viewer.user.as_str(), operation, resource_type, name)
                    || (viewer.user == grant.0
                        && operation == strom_protocol::acl::operation::DESCRIBE
                        && grant.1 == strom_protocol::acl::operation::READ
                        && (resource_type, name) == (grant.2, grant.3))
            })
    }
}
