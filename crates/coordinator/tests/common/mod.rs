//! Shared helpers for the coordinator's integration tests.
#![allow(dead_code)]

use bytes::{BufMut, Bytes, BytesMut};
use strom_coordinator::{
    Completion, CoordinatorConfig, CoordinatorCore, GroupConfig, GroupError, HeartbeatRequest,
    InMemoryOffsetsLog, JoinRequest, JoinResponse, Protocol, Reply, SyncRequest, SyncResponse,
};

/// The group used by most tests.
pub const GROUP: &str = "group-a";

/// A coordinator owning its single `__consumer_offsets` partition.
pub fn core_with(group: GroupConfig) -> CoordinatorCore {
    let config = CoordinatorConfig {
        group,
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let mut core = CoordinatorCore::new(config, seeded());
    core.begin_loading(0);
    core.load_partition(&InMemoryOffsetsLog::new(), 0, 0)
        .expect("empty log loads");
    core
}

/// A random source with a fixed seed: member ids repeat from run to run.
pub fn seeded() -> std::sync::Arc<dyn strom_clock::Random> {
    std::sync::Arc::new(strom_clock::SeededRandom::new(17))
}

/// Group settings without an initial rebalance delay.
pub fn no_delay() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

/// A consumer subscription (ConsumerProtocolSubscription v0) for `topics`.
pub fn subscription(topics: &[&str]) -> Bytes {
    let mut buffer = BytesMut::new();
    buffer.put_i16(0);
    buffer.put_i32(topics.len() as i32);
    for topic in topics {
        buffer.put_i16(topic.len() as i16);
        buffer.put_slice(topic.as_bytes());
    }
    buffer.put_i32(-1);
    buffer.freeze()
}

/// Protocols with the given names, each with a subscription to `topic-x`.
pub fn protocols(names: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|name| Protocol {
            name: (*name).to_owned(),
            metadata: subscription(&["topic-x"]),
        })
        .collect()
}

/// A JoinGroup as a v4+ consumer sends it.
pub fn join_request(request_id: u64, member_id: &str, client_id: &str) -> JoinRequest {
    JoinRequest {
        request_id,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        client_id: client_id.to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".to_owned(),
        protocols: protocols(&["range"]),
        require_known_member_id: true,
    }
}

/// A static member's JoinGroup.
pub fn static_join(request_id: u64, member_id: &str, instance_id: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance_id.to_owned()),
        ..join_request(request_id, member_id, "static-client")
    }
}

/// Joins a new dynamic member through the MEMBER_ID_REQUIRED round trip;
/// returns its member id. The second join is parked.
pub fn join_new(
    core: &mut CoordinatorCore,
    request_id: u64,
    client_id: &str,
    now_ms: i64,
) -> String {
    let member_id = match core.join_group(GROUP, join_request(request_id, "", client_id), now_ms) {
        Err(GroupError::MemberIdRequired { member_id }) => member_id,
        other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
    };
    let reply = core
        .join_group(
            GROUP,
            join_request(request_id, &member_id, client_id),
            now_ms,
        )
        .expect("second join accepted");
    assert_eq!(reply, Reply::Pending);
    member_id
}

/// The join completions, by request id.
pub fn join_results(completions: &[Completion]) -> Vec<(u64, Result<JoinResponse, GroupError>)> {
    completions
        .iter()
        .filter_map(|completion| match completion {
            Completion::Join { request_id, result } => Some((*request_id, result.clone())),
            Completion::Sync { .. } => None,
        })
        .collect()
}

/// The sync completions, by request id.
pub fn sync_results(completions: &[Completion]) -> Vec<(u64, Result<SyncResponse, GroupError>)> {
    completions
        .iter()
        .filter_map(|completion| match completion {
            Completion::Sync { request_id, result } => Some((*request_id, result.clone())),
            Completion::Join { .. } => None,
        })
        .collect()
}

/// The successful join response of `request_id` among completions.
pub fn joined(completions: &[Completion], request_id: u64) -> JoinResponse {
    join_results(completions)
        .into_iter()
        .find(|(id, _)| *id == request_id)
        .map(|(_, result)| result.expect("join succeeded"))
        .unwrap_or_else(|| panic!("no join completion for request {request_id}"))
}

/// A SyncGroup.
pub fn sync_request(
    request_id: u64,
    member_id: &str,
    generation_id: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        request_id,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        generation_id,
        protocol_type: Some("consumer".to_owned()),
        protocol_name: Some("range".to_owned()),
        assignments,
    }
}

/// A Heartbeat.
pub fn heartbeat(member_id: &str, generation_id: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member_id.to_owned(),
        group_instance_id: None,
        generation_id,
    }
}

/// Brings one dynamic member to Stable (no initial delay configured);
/// returns its member id and the generation.
pub fn stable_single(core: &mut CoordinatorCore, now_ms: i64) -> (String, i32) {
    let member_id = join_new(core, 1, "solo", now_ms);
    let response = joined(&core.take_completions(), 1);
    let reply = core
        .sync_group(
            GROUP,
            sync_request(
                2,
                &member_id,
                response.generation_id,
                vec![(member_id.clone(), Bytes::from_static(b"a"))],
            ),
            now_ms,
        )
        .expect("sync accepted");
    assert_eq!(reply, Reply::Pending);
    let synced = sync_results(&core.take_completions());
    assert_eq!(synced.len(), 1);
    (member_id, response.generation_id)
}

/// An in-memory log a test controls: it refuses appends once told to,
/// panics on an append once `panic_armed` is set (a panic while the
/// coordinator holds its group state), has committed only up to
/// `committed` when that is set, and, when gated, lets a commit through
/// only when [`release_commits`](Self::release_commits) is called (the
/// in-sync replicas catching up) or fails it with `commit_failure`.
#[derive(Default)]
pub struct ControlledLog {
    pub inner: InMemoryOffsetsLog,
    pub refuse_appends: bool,
    pub panic_armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub committed: Option<i64>,
    pub commit_gate: Option<std::sync::Arc<tokio::sync::Notify>>,
    pub commit_failure: Option<strom_coordinator::LogError>,
}

impl ControlledLog {
    /// A log whose commits wait for [`release_commits`](Self::release_commits).
    pub fn gated() -> ControlledLog {
        ControlledLog {
            commit_gate: Some(std::sync::Arc::default()),
            ..ControlledLog::default()
        }
    }

    /// Lets the commits waiting now through.
    pub fn release_commits(&self) {
        if let Some(gate) = &self.commit_gate {
            gate.notify_waiters();
        }
    }
}

impl strom_coordinator::OffsetsLog for ControlledLog {
    fn append(
        &mut self,
        partition: i32,
        records: &[strom_coordinator::LogRecord],
    ) -> Result<i64, strom_coordinator::LogError> {
        if self.panic_armed.load(std::sync::atomic::Ordering::SeqCst) {
            panic!("injected panic while the group state is locked");
        }
        if self.refuse_appends {
            return Err(strom_coordinator::LogError::Backend {
                operation: strom_coordinator::LogOperation::Append,
                source: strom_coordinator::BackendError::new(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "disk full",
                )),
            });
        }
        self.inner.append(partition, records)
    }

    fn append_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: &[strom_coordinator::LogRecord],
    ) -> Result<i64, strom_coordinator::LogError> {
        if self.refuse_appends {
            return Err(strom_coordinator::LogError::NotLeader { partition });
        }
        self.inner
            .append_transactional(partition, producer_id, producer_epoch, records)
    }

    fn committed_offset(&self, _partition: i32) -> Result<i64, strom_coordinator::LogError> {
        Ok(self.committed.unwrap_or(i64::MAX))
    }

    fn wait_committed(&self, _partition: i32, _last_offset: i64) -> strom_coordinator::CommitWait {
        let gate = self.commit_gate.clone();
        let failure = self.commit_failure.clone();
        Box::pin(async move {
            if let Some(error) = failure {
                return Err(error);
            }
            if let Some(gate) = gate {
                gate.notified().await;
            }
            Ok(())
        })
    }

    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<strom_coordinator::StoredRecord>, strom_coordinator::LogError> {
        self.inner.read(partition, from_offset, max_records)
    }
}
