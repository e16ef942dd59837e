//! Benchmarks of the sans-IO coordinator core.
//!
//! * `rebalance/N`: a Stable group of N members rebalances. The setup parks
//!   N-1 rejoins; the measured part is the last JoinGroup, the join
//!   completions, every member's SyncGroup (followers first, then the
//!   leader's assignment) until the group is Stable again.
//! * `commit/100 partitions`: OffsetCommit requests of 100 partitions each,
//!   with the `__consumer_offsets` records encoded; throughput is reported in
//!   committed offsets per second.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput};
use strom_coordinator::{
    Completion, CoordinatorConfig, CoordinatorCore, GroupConfig, GroupState, InMemoryOffsetsLog,
    JoinRequest, OffsetCommitPartition, OffsetCommitRequest, Protocol, Reply, SyncRequest,
};

const GROUP: &str = "bench-group";

fn core() -> CoordinatorCore {
    let config = CoordinatorConfig {
        group: GroupConfig {
            initial_rebalance_delay_ms: 1,
            ..GroupConfig::default()
        },
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let mut core = CoordinatorCore::new(
        config,
        std::sync::Arc::new(strom_clock::SeededRandom::new(1)),
    );
    core.begin_loading(0);
    core.load_partition(&InMemoryOffsetsLog::new(), 0, 0)
        .expect("empty log loads");
    core
}

fn join(request_id: u64, member_id: &str) -> JoinRequest {
    JoinRequest {
        request_id,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        client_id: "bench".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: 45_000,
        rebalance_timeout_ms: 300_000,
        protocol_type: "consumer".to_owned(),
        protocols: vec![Protocol {
            name: "range".to_owned(),
            metadata: Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 5, b't', b'o', b'p', b'i', b'c']),
        }],
        require_known_member_id: false,
    }
}

/// Joins and syncs every member; returns member ids (leader first) and the
/// generation.
fn complete_rebalance(core: &mut CoordinatorCore, member_ids: &[String], now_ms: i64) -> i32 {
    let completions = core.take_completions();
    let mut generation = 0;
    let mut leader = String::new();
    for completion in &completions {
        if let Completion::Join {
            result: Ok(response),
            ..
        } = completion
        {
            generation = response.generation_id;
            leader.clone_from(&response.leader_id);
        }
    }
    assert!(generation > 0, "the join phase completed");
    let mut request_id = 1_000_000;
    for member_id in member_ids.iter().filter(|id| **id != leader) {
        request_id += 1;
        let request = sync(request_id, member_id, generation, Vec::new());
        let reply = core
            .sync_group(GROUP, request, now_ms)
            .expect("follower sync");
        assert_eq!(reply, Reply::Pending);
    }
    let assignments = member_ids
        .iter()
        .map(|id| (id.clone(), Bytes::from_static(b"assignment")))
        .collect();
    core.sync_group(
        GROUP,
        sync(request_id + 1, &leader, generation, assignments),
        now_ms,
    )
    .expect("leader sync");
    let synced = core.take_completions().len();
    assert_eq!(synced, member_ids.len());
    assert_eq!(
        core.group(GROUP).map(|group| group.state()),
        Some(GroupState::Stable)
    );
    generation
}

fn sync(
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
        protocol_type: None,
        protocol_name: None,
        assignments,
    }
}

/// A Stable group of `members` members in which a rebalance started and
/// every member but the last rejoined. Returns member ids (leader first).
fn group_awaiting_last_join(members: usize) -> (CoordinatorCore, Vec<String>) {
    let mut core = core();
    for index in 0..members {
        let reply = core
            .join_group(GROUP, join(index as u64, ""), 0)
            .expect("join");
        assert_eq!(reply, Reply::Pending);
    }
    // The initial delay (1 ms) is extended once because members joined.
    core.tick(1);
    core.tick(2);
    let mut member_ids: Vec<String> = core
        .group(GROUP)
        .map(|group| {
            group
                .members()
                .map(|member| member.member_id.clone())
                .collect()
        })
        .unwrap_or_default();
    let leader = core
        .group(GROUP)
        .and_then(|group| group.leader_id())
        .map(str::to_owned)
        .expect("a leader");
    member_ids.retain(|id| *id != leader);
    member_ids.insert(0, leader);
    complete_rebalance(&mut core, &member_ids, 3);
    core.take_records();
    // The leader's rejoin starts a rebalance; all but the last member rejoin.
    for (index, member_id) in member_ids.iter().take(members - 1).enumerate() {
        let reply = core.join_group(GROUP, join(20_000 + index as u64, member_id), 4);
        assert_eq!(reply, Ok(Reply::Pending));
    }
    assert_eq!(
        core.group(GROUP).map(|group| group.state()),
        Some(GroupState::PreparingRebalance)
    );
    (core, member_ids)
}

fn rebalance(criterion: &mut Criterion) {
    let mut bench = criterion.benchmark_group("rebalance");
    bench.warm_up_time(Duration::from_millis(500));
    bench.measurement_time(Duration::from_secs(2));
    bench.sample_size(20);
    for members in [10_usize, 100] {
        bench.bench_function(format!("{members} members"), |bencher| {
            bencher.iter_batched(
                || group_awaiting_last_join(members),
                |(mut core, member_ids)| {
                    let last = member_ids.last().expect("members");
                    core.join_group(GROUP, join(99_999, last), 4)
                        .expect("last join");
                    black_box(complete_rebalance(&mut core, &member_ids, 5));
                    // Dropped by criterion outside the measurement.
                    (core, member_ids)
                },
                BatchSize::SmallInput,
            );
        });
    }
    bench.finish();
}

fn commit(criterion: &mut Criterion) {
    const PARTITIONS: i32 = 100;
    let mut bench = criterion.benchmark_group("commit");
    bench.warm_up_time(Duration::from_millis(500));
    bench.measurement_time(Duration::from_secs(2));
    bench.sample_size(20);
    bench.throughput(Throughput::Elements(PARTITIONS as u64));
    let mut core = core();
    let mut offset = 0_i64;
    bench.bench_function("100 partitions", |bencher| {
        bencher.iter(|| {
            offset += 1;
            let request = OffsetCommitRequest {
                group_id: GROUP.to_owned(),
                generation_id: -1,
                member_id: String::new(),
                group_instance_id: None,
                retention_time_ms: None,
                partitions: (0..PARTITIONS)
                    .map(|partition| OffsetCommitPartition {
                        topic: "topic".to_owned(),
                        partition,
                        offset,
                        leader_epoch: Some(1),
                        metadata: None,
                        commit_timestamp_ms: None,
                    })
                    .collect(),
            };
            let results = core.commit_offsets(&request, offset).expect("committed");
            black_box(results);
            black_box(core.take_records());
        });
    });
    bench.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    rebalance(&mut criterion);
    commit(&mut criterion);
    criterion.final_summary();
}
