use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

use super::*;
use crate::records::{MetadataBatch, MetadataRecord, Record, TopicRecord};

fn log_id(term: u64, index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64) -> Entry<QuorumTypes> {
    let record = MetadataRecord::new(Record::Topic(TopicRecord {
        name: format!("topic-{index}"),
        topic_id: vec![index as u8; 16],
    }));
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(MetadataBatch {
            base_offset: index,
            records: vec![record],
        }),
    }
}

async fn append(store: &mut QuorumLogStore, entries: Vec<Entry<QuorumTypes>>) {
    store.blocking_append(entries).await.expect("append");
}

async fn indexes(store: &mut QuorumLogStore) -> Vec<u64> {
    store
        .try_get_log_entries(0..u64::MAX)
        .await
        .expect("read")
        .iter()
        .map(|entry| entry.log_id.index)
        .collect()
}

#[tokio::test]
async fn appended_entries_and_the_vote_survive_a_reopen() {
    let directory = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = QuorumLogStore::open(directory.path()).expect("open");
        append(&mut store, (1..=5).map(|index| entry(1, index)).collect()).await;
        store
            .save_vote(&Vote::new_committed(3, 2))
            .await
            .expect("vote");
    }
    let (mut store, recovery) = QuorumLogStore::open(directory.path()).expect("reopen");
    assert_eq!(recovery.entries, 5);
    assert_eq!(indexes(&mut store).await, vec![1, 2, 3, 4, 5]);
    assert_eq!(
        store.read_vote().await.expect("vote"),
        Some(Vote::new_committed(3, 2))
    );
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    assert_eq!(state.last_purged_log_id, None);
}

#[tokio::test]
async fn truncation_removes_the_suffix_on_disk_too() {
    let directory = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = QuorumLogStore::open(directory.path()).expect("open");
        append(&mut store, (1..=5).map(|index| entry(1, index)).collect()).await;
        store.truncate(log_id(1, 3)).await.expect("truncate");
        assert_eq!(indexes(&mut store).await, vec![1, 2]);
        append(&mut store, vec![entry(2, 3)]).await;
    }
    let (mut store, _) = QuorumLogStore::open(directory.path()).expect("reopen");
    assert_eq!(indexes(&mut store).await, vec![1, 2, 3]);
    assert_eq!(store.last_log_id(), Some(log_id(2, 3)));
}

#[tokio::test]
async fn a_purged_prefix_stays_purged_after_a_reopen() {
    let directory = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = QuorumLogStore::open(directory.path()).expect("open");
        append(&mut store, (1..=6).map(|index| entry(1, index)).collect()).await;
        store.purge(log_id(1, 4)).await.expect("purge");
        append(&mut store, vec![entry(1, 7)]).await;
    }
    let (mut store, _) = QuorumLogStore::open(directory.path()).expect("reopen");
    assert_eq!(indexes(&mut store).await, vec![5, 6, 7]);
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 4)));
    store.purge(log_id(1, 7)).await.expect("purge all");
    let state = store.get_log_state().await.expect("state");
    assert_eq!(
        state.last_log_id,
        Some(log_id(1, 7)),
        "the last purged id stands in for an empty log"
    );
}

#[tokio::test]
async fn a_torn_last_frame_is_dropped_and_damage_before_the_end_is_refused() {
    let directory = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = QuorumLogStore::open(directory.path()).expect("open");
        append(&mut store, (1..=3).map(|index| entry(1, index)).collect()).await;
    }
    let path = directory.path().join(QUORUM_LOG_FILE_NAME);
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() - 5]).expect("tear");
    let (mut store, recovery) = QuorumLogStore::open(directory.path()).expect("torn tail recovers");
    assert!(recovery.truncated_bytes > 0);
    assert_eq!(indexes(&mut store).await, vec![1, 2]);
    drop(store);

    let mut damaged = std::fs::read(&path).expect("read");
    damaged[10] ^= 0xFF;
    std::fs::write(&path, &damaged).expect("damage");
    assert!(matches!(
        QuorumLogStore::open(directory.path()),
        Err(LogError::CrcMismatch { .. })
    ));
}

#[tokio::test]
async fn entries_that_skip_an_index_are_refused_at_recovery() {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join(QUORUM_LOG_FILE_NAME);
    let mut bytes = encode_entry_frame(&entry(1, 1)).expect("frame");
    bytes.extend(encode_entry_frame(&entry(1, 3)).expect("frame"));
    std::fs::write(&path, bytes).expect("write");
    assert!(matches!(
        QuorumLogStore::open(directory.path()),
        Err(LogError::OffsetGap {
            expected: 2,
            found: 3,
            ..
        })
    ));
}

struct TempStores;

impl
    openraft::testing::StoreBuilder<
        QuorumTypes,
        QuorumLogStore,
        crate::quorum::state_machine::QuorumStateMachine,
        tempfile::TempDir,
    > for TempStores
{
    async fn build(
        &self,
    ) -> Result<
        (
            tempfile::TempDir,
            QuorumLogStore,
            crate::quorum::state_machine::QuorumStateMachine,
        ),
        openraft::StorageError<NodeId>,
    > {
        let directory = tempfile::tempdir().expect("tempdir");
        let (store, _) = QuorumLogStore::open(directory.path()).expect("open log");
        let machine = crate::quorum::state_machine::QuorumStateMachine::open(directory.path())
            .expect("open state machine");
        Ok((directory, store, machine))
    }
}

/// openraft's own conformance suite for log storage and state machines.
#[test]
fn the_stores_pass_openraft_s_storage_suite() {
    openraft::testing::Suite::test_all(TempStores).expect("suite");
}

#[tokio::test]
async fn the_last_whole_vote_stands_and_a_torn_one_was_never_granted() {
    let directory = tempfile::tempdir().expect("tempdir");
    {
        let (mut store, _) = QuorumLogStore::open(directory.path()).expect("open");
        store.save_vote(&Vote::new(1, 1)).await.expect("vote");
        store.save_vote(&Vote::new(2, 3)).await.expect("vote");
        store
            .save_vote(&Vote::new_committed(2, 3))
            .await
            .expect("vote");
    }
    let (mut store, _) = QuorumLogStore::open(directory.path()).expect("reopen");
    assert_eq!(
        store.read_vote().await.expect("vote"),
        Some(Vote::new_committed(2, 3))
    );
    drop(store);

    let path = directory.path().join(QUORUM_VOTE_FILE_NAME);
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() - 3]).expect("tear the last vote");
    let (mut store, _) = QuorumLogStore::open(directory.path()).expect("torn vote recovers");
    assert_eq!(
        store.read_vote().await.expect("vote"),
        Some(Vote::new(2, 3))
    );
    store
        .save_vote(&Vote::new(3, 2))
        .await
        .expect("a vote after the torn one");
    drop(store);
    let (mut store, _) = QuorumLogStore::open(directory.path()).expect("reopen");
    assert_eq!(
        store.read_vote().await.expect("vote"),
        Some(Vote::new(3, 2))
    );
}
