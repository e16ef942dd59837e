use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

use super::*;
use crate::records::{MetadataRecord, Record, TopicRecord};

fn topic(name: &str, id: u8) -> MetadataRecord {
    MetadataRecord::new(Record::Topic(TopicRecord {
        name: name.to_string(),
        topic_id: vec![id; 16],
    }))
}

fn entry(index: u64, base_offset: u64, records: Vec<MetadataRecord>) -> Entry<QuorumTypes> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(MetadataBatch {
            base_offset,
            records,
        }),
    }
}

#[tokio::test]
async fn a_batch_planned_on_another_image_is_skipped() {
    let directory = tempfile::tempdir().expect("tempdir");
    let mut machine = QuorumStateMachine::open(directory.path()).expect("open");
    let outcomes = machine
        .apply(vec![
            entry(1, 0, vec![topic("a", 1), topic("b", 2)]),
            // Planned at offset 1, but the image's next offset is 2.
            entry(2, 1, vec![topic("c", 3)]),
            entry(3, 2, vec![topic("d", 4)]),
        ])
        .await
        .expect("apply");
    assert_eq!(
        outcomes,
        vec![
            ApplyOutcome::Applied { base_offset: 0 },
            ApplyOutcome::Stale {
                planned_offset: 1,
                next_offset: 2
            },
            ApplyOutcome::Applied { base_offset: 2 },
        ]
    );
    let image = machine.image();
    assert!(image.topic_by_name("c").is_none());
    assert!(image.topic_by_name("d").is_some());
    assert_eq!(image.last_offset(), Some(2));
    assert_eq!(machine.last_applied().map(|id| id.index), Some(3));
}

#[tokio::test]
async fn a_batch_that_does_not_apply_leaves_the_image_unchanged() {
    let directory = tempfile::tempdir().expect("tempdir");
    let mut machine = QuorumStateMachine::open(directory.path()).expect("open");
    let duplicate_name = vec![topic("a", 1), topic("a", 2)];
    let outcomes = machine
        .apply(vec![entry(1, 0, duplicate_name)])
        .await
        .expect("apply");
    assert_eq!(
        outcomes,
        vec![ApplyOutcome::Inapplicable { planned_offset: 0 }]
    );
    assert_eq!(machine.image().topic_count(), 0);
}

#[tokio::test]
async fn a_snapshot_rebuilds_the_image_on_another_node_and_after_a_restart() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let mut leader = QuorumStateMachine::open(leader_dir.path()).expect("open");
    leader
        .apply(vec![entry(1, 0, vec![topic("a", 1), topic("b", 2)])])
        .await
        .expect("apply");
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("snapshot");

    let follower_dir = tempfile::tempdir().expect("tempdir");
    let mut follower = QuorumStateMachine::open(follower_dir.path()).expect("open");
    let images = follower.subscribe();
    follower
        .install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .expect("install");
    assert!(images.has_changed().expect("open channel"));
    assert_eq!(*follower.image(), *leader.image());
    assert_eq!(follower.last_applied(), leader.last_applied());

    let restarted = QuorumStateMachine::open(follower_dir.path()).expect("reopen");
    assert_eq!(*restarted.image(), *leader.image());
    assert_eq!(restarted.last_applied().map(|id| id.index), Some(1));
}
