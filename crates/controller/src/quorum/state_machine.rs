//! The quorum's state machine: committed entries applied to the
//! [`MetadataImage`], and the image's snapshots.
//!
//! Each committed [`MetadataBatch`] is applied only if it was planned
//! against the image it now follows (its `base_offset` equals the image's
//! next offset). A batch planned by a controller that was deposed before
//! its entry was appended after another leader's entries would otherwise
//! apply to an image it was not checked against; every replica skips it
//! alike ([`ApplyOutcome::Stale`]) and the command's caller is told.
//!
//! A snapshot is the image's snapshot records ([`MetadataSnapshot`]) with
//! the Raft log id and membership it covers, kept in `quorum.snapshot`
//! (the framing of `metadata.snapshot`: magic, version, length, CRC-32C),
//! written to a temporary file, `fsync`ed and renamed. Every new image is
//! published on a `watch` channel, which is how brokers and the active
//! controller see metadata.

use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, Snapshot, SnapshotMeta, StorageError,
    StoredMembership,
};
use prost::Message as _;
use tokio::sync::watch;

use crate::error::{CodecError, LogError};
use crate::image::MetadataImage;
use crate::log::{encode_snapshot, io_error, read_snapshot_payload, sync_directory, write_synced};
use crate::quorum::codec::{
    log_id_from_message, log_id_to_message, stored_membership_from_message,
    stored_membership_to_message, LogIdMessage, StoredMembershipMessage,
};
use crate::quorum::types::{ApplyOutcome, NodeId, QuorumTypes};
use crate::records::{MetadataBatch, MetadataSnapshot};

/// File name of the quorum's snapshot.
pub const QUORUM_SNAPSHOT_FILE_NAME: &str = "quorum.snapshot";

/// The payload of `quorum.snapshot`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QuorumSnapshotMessage {
    /// The last log id the snapshot covers.
    #[prost(message, optional, tag = "1")]
    pub last_log_id: Option<LogIdMessage>,
    /// The membership at that point.
    #[prost(message, optional, tag = "2")]
    pub membership: Option<StoredMembershipMessage>,
    /// The snapshot's id.
    #[prost(string, tag = "3")]
    pub snapshot_id: String,
    /// The image (absent while no record was ever committed).
    #[prost(message, optional, tag = "4")]
    pub image: Option<MetadataSnapshot>,
}

/// The image's data as it travels to a follower (`SnapshotData`).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ImageSnapshotMessage {
    /// The image (absent while no record was ever committed).
    #[prost(message, optional, tag = "1")]
    pub image: Option<MetadataSnapshot>,
}

#[derive(Debug, Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

#[derive(Debug)]
struct MachineState {
    image: MetadataImage,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    snapshot: Option<StoredSnapshot>,
    snapshots_built: u64,
}

/// The quorum's state machine (openraft's `RaftStateMachine`).
#[derive(Debug, Clone)]
pub struct QuorumStateMachine {
    state: Arc<Mutex<MachineState>>,
    publisher: Arc<watch::Sender<Arc<MetadataImage>>>,
    directory: PathBuf,
}

/// Builds snapshots of the state machine.
#[derive(Debug, Clone)]
pub struct QuorumSnapshotBuilder {
    machine: QuorumStateMachine,
}

impl QuorumStateMachine {
    /// Opens the state machine in `directory`, loading its snapshot if one
    /// was written.
    pub fn open(directory: &Path) -> Result<Self, LogError> {
        fs::create_dir_all(directory).map_err(io_error(directory))?;
        let path = directory.join(QUORUM_SNAPSHOT_FILE_NAME);
        let mut state = MachineState {
            image: MetadataImage::empty(),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: None,
            snapshots_built: 0,
        };
        if let Some(payload) = read_snapshot_payload(&path)? {
            load_snapshot_file(&path, &payload, &mut state)?;
        }
        let (publisher, _) = watch::channel(Arc::new(state.image.clone()));
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
            publisher: Arc::new(publisher),
            directory: directory.to_path_buf(),
        })
    }

    /// A receiver of every applied image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.publisher.subscribe()
    }

    /// The image as applied so far.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.borrow().clone()
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        self.lock().last_applied
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MachineState> {
        // Every mutation below builds the new value first and assigns it
        // whole, so the state a panicking thread left is a consistent one.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, image: &MetadataImage) {
        self.publisher.send_replace(Arc::new(image.clone()));
    }
}

fn load_snapshot_file(
    path: &Path,
    payload: &[u8],
    state: &mut MachineState,
) -> Result<(), LogError> {
    let corrupt = |source| LogError::QuorumFrame {
        path: path.to_path_buf(),
        position: 0,
        source,
    };
    let message = QuorumSnapshotMessage::decode(payload)
        .map_err(|source| corrupt(CodecError::Decode { source }))?;
    let image = image_from_snapshot(message.image).map_err(corrupt)?;
    let meta = SnapshotMeta {
        last_log_id: message.last_log_id.map(log_id_from_message),
        last_membership: message
            .membership
            .map(stored_membership_from_message)
            .unwrap_or_default(),
        snapshot_id: message.snapshot_id,
    };
    state.image = image.clone();
    state.last_applied = meta.last_log_id;
    state.membership = meta.last_membership.clone();
    state.snapshot = Some(StoredSnapshot {
        meta,
        data: image_data(&image),
    });
    Ok(())
}

fn image_from_snapshot(snapshot: Option<MetadataSnapshot>) -> Result<MetadataImage, CodecError> {
    let Some(snapshot) = snapshot else {
        return Ok(MetadataImage::empty());
    };
    MetadataImage::from_snapshot_records(snapshot.last_offset, &snapshot.records).map_err(|_| {
        CodecError::MissingField {
            field: "snapshot records that rebuild an image",
        }
    })
}

fn image_snapshot(image: &MetadataImage) -> Option<MetadataSnapshot> {
    image.last_offset().map(|last_offset| MetadataSnapshot {
        last_offset,
        records: image.to_snapshot_records(),
    })
}

fn image_data(image: &MetadataImage) -> Vec<u8> {
    ImageSnapshotMessage {
        image: image_snapshot(image),
    }
    .encode_to_vec()
}

/// Applies one batch to `image`, returning the outcome and the new image.
fn apply_batch(
    image: &MetadataImage,
    batch: &MetadataBatch,
) -> (ApplyOutcome, Option<MetadataImage>) {
    let next_offset = image.next_offset();
    if batch.base_offset != next_offset {
        return (
            ApplyOutcome::Stale {
                planned_offset: batch.base_offset,
                next_offset,
            },
            None,
        );
    }
    let offsets = (next_offset..).zip(batch.records.iter());
    match image.apply_all(offsets) {
        Ok(applied) => (
            ApplyOutcome::Applied {
                base_offset: next_offset,
            },
            Some(applied),
        ),
        Err(error) => {
            tracing::error!(error = %error, base_offset = next_offset, "committed metadata batch does not apply; skipped on every replica");
            (
                ApplyOutcome::Inapplicable {
                    planned_offset: batch.base_offset,
                },
                None,
            )
        }
    }
}

fn persist_snapshot(
    directory: &Path,
    snapshot: &StoredSnapshot,
    image: &MetadataImage,
) -> Result<(), LogError> {
    let message = QuorumSnapshotMessage {
        last_log_id: snapshot.meta.last_log_id.as_ref().map(log_id_to_message),
        membership: Some(stored_membership_to_message(&snapshot.meta.last_membership)),
        snapshot_id: snapshot.meta.snapshot_id.clone(),
        image: image_snapshot(image),
    };
    let path = directory.join(QUORUM_SNAPSHOT_FILE_NAME);
    let temp = directory.join(format!("{QUORUM_SNAPSHOT_FILE_NAME}.tmp"));
    write_synced(&temp, &encode_snapshot(&message.encode_to_vec()))?;
    fs::rename(&temp, &path).map_err(io_error(&path))?;
    sync_directory(directory)
}

fn snapshot_error(error: LogError) -> StorageError<NodeId> {
    StorageError::from_io_error(
        openraft::ErrorSubject::Snapshot(None),
        openraft::ErrorVerb::Write,
        std::io::Error::other(error),
    )
}

async fn persist_off_worker(
    directory: PathBuf,
    snapshot: StoredSnapshot,
    image: MetadataImage,
) -> Result<(), StorageError<NodeId>> {
    tokio::task::spawn_blocking(move || persist_snapshot(&directory, &snapshot, &image))
        .await
        .map_err(|join| {
            snapshot_error(LogError::Io {
                path: PathBuf::from(QUORUM_SNAPSHOT_FILE_NAME),
                source: std::io::Error::other(join),
            })
        })?
        .map_err(snapshot_error)
}

impl RaftSnapshotBuilder<QuorumTypes> for QuorumSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<QuorumTypes>, StorageError<NodeId>> {
        let (image, snapshot) = {
            let mut state = self.machine.lock();
            state.snapshots_built += 1;
            let snapshot_id = match state.last_applied {
                Some(log_id) => format!(
                    "{}-{}-{}",
                    log_id.leader_id.term, log_id.index, state.snapshots_built
                ),
                None => format!("empty-{}", state.snapshots_built),
            };
            let meta = SnapshotMeta {
                last_log_id: state.last_applied,
                last_membership: state.membership.clone(),
                snapshot_id,
            };
            let data = image_data(&state.image);
            (state.image.clone(), StoredSnapshot { meta, data })
        };
        persist_off_worker(self.machine.directory.clone(), snapshot.clone(), image).await?;
        self.machine.lock().snapshot = Some(snapshot.clone());
        Ok(Snapshot {
            meta: snapshot.meta,
            snapshot: Box::new(Cursor::new(snapshot.data)),
        })
    }
}

impl RaftStateMachine<QuorumTypes> for QuorumStateMachine {
    type SnapshotBuilder = QuorumSnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let state = self.lock();
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyOutcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<QuorumTypes>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut outcomes = Vec::new();
        let mut state = self.lock();
        let mut changed = false;
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => ApplyOutcome::NoMetadata,
                EntryPayload::Membership(membership) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), membership);
                    ApplyOutcome::NoMetadata
                }
                EntryPayload::Normal(batch) => {
                    let (outcome, image) = apply_batch(&state.image, &batch);
                    if let Some(image) = image {
                        state.image = image;
                        changed = true;
                    }
                    outcome
                }
            };
            outcomes.push(outcome);
        }
        if changed {
            self.publish(&state.image);
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        QuorumSnapshotBuilder {
            machine: self.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let image = ImageSnapshotMessage::decode(data.as_slice())
            .map_err(|source| CodecError::Decode { source })
            .and_then(|message| image_from_snapshot(message.image))
            .map_err(|source| {
                snapshot_error(LogError::QuorumFrame {
                    path: PathBuf::from(QUORUM_SNAPSHOT_FILE_NAME),
                    position: 0,
                    source,
                })
            })?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        persist_off_worker(self.directory.clone(), stored.clone(), image.clone()).await?;
        {
            let mut state = self.lock();
            state.image = image;
            state.last_applied = meta.last_log_id;
            state.membership = meta.last_membership.clone();
            state.snapshot = Some(stored);
            self.publish(&state.image);
        }
        tracing::info!(snapshot = %meta, "installed a metadata snapshot from the active controller");
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<QuorumTypes>>, StorageError<NodeId>> {
        let state = self.lock();
        Ok(state.snapshot.as_ref().map(|stored| Snapshot {
            meta: stored.meta.clone(),
            snapshot: Box::new(Cursor::new(stored.data.clone())),
        }))
    }
}

#[cfg(test)]
#[path = "state_machine_tests.rs"]
mod tests;
