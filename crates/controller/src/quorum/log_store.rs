//! The Raft log of the metadata quorum, on disk.
//!
//! A controller's metadata directory holds, beside the single-node files
//! ([`crate::log`]), two files of the quorum:
//!
//! - `quorum.log`: frames as in `metadata.log` (`length: u32 BE |
//!   crc32c: u32 BE | payload`), each payload a [`LogFrameMessage`]: a Raft
//!   entry ([`EntryMessage`]: log id, then a blank, a
//!   [`MetadataBatch`](crate::records::MetadataBatch) or a membership), or,
//!   first in the file after a purge, the log id of the last purged entry.
//!   Appends are written in one `write` and `fsync`ed before openraft is
//!   told they are durable, so an entry is never acknowledged to a leader
//!   before it is on disk. Truncating a conflicting suffix cuts the file at
//!   the first removed frame and syncs it. Purging the prefix a snapshot
//!   covers rewrites the file (temporary file, `fsync`, rename, directory
//!   `fsync`).
//! - `quorum.vote`: one frame appended per vote and `fdatasync`ed before
//!   the vote is granted or a term adopted; the last whole frame is the
//!   vote (a torn last frame was never acknowledged, so the one before it
//!   stands). After 1,024 votes the file is rewritten with the last one.
//!
//! Recovery reads the log whole (it is bounded by the snapshot interval),
//! drops a torn last frame as [`crate::log`] does, and refuses to start on
//! anything else: damage before the end, or entries that do not follow one
//! another.
//!
//! File I/O runs on tokio's blocking pool; the entries are also kept in
//! memory (the metadata log is small), so readers never touch the disk.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use openraft::storage::{LogFlushed, RaftLogReader, RaftLogStorage};
use openraft::{Entry, LogId, LogState, OptionalSend, RaftLogId, StorageError, Vote};
use prost::Message as _;

use crate::error::{CodecError, LogError};
use crate::log::{encode_frame, io_error, next_frame, sync_directory, write_synced, Frame};
use crate::quorum::codec::{
    entry_from_message, entry_to_message, log_id_from_message, log_id_to_message,
    vote_from_message, vote_to_message, EntryMessage, LogIdMessage, VoteMessage,
};
use crate::quorum::types::{NodeId, QuorumTypes};

/// File name of the quorum's Raft log.
pub const QUORUM_LOG_FILE_NAME: &str = "quorum.log";
/// File name of the quorum's vote.
pub const QUORUM_VOTE_FILE_NAME: &str = "quorum.vote";
const TEMP_SUFFIX: &str = ".tmp";

/// One frame of `quorum.log`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct LogFrameMessage {
    /// An entry, or the purge marker.
    #[prost(oneof = "LogFrameKind", tags = "1, 2")]
    pub frame: Option<LogFrameKind>,
}

/// What a frame of `quorum.log` holds.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum LogFrameKind {
    /// A Raft entry.
    #[prost(message, tag = "1")]
    Entry(EntryMessage),
    /// The last purged log id (only as the first frame).
    #[prost(message, tag = "2")]
    Purged(LogIdMessage),
}

type Entries = BTreeMap<u64, Entry<QuorumTypes>>;

/// The file side of the log: the open file and where each entry starts.
#[derive(Debug)]
struct LogFile {
    directory: PathBuf,
    path: PathBuf,
    file: File,
    /// Byte position of each entry's frame.
    positions: BTreeMap<u64, u64>,
    end_position: u64,
    /// `quorum.vote`, open for appending.
    vote_file: File,
    /// Frames in `quorum.vote`; past [`VOTE_FRAMES_BEFORE_REWRITE`] the file
    /// is rewritten with the last vote only.
    vote_frames: usize,
}

/// Votes appended to `quorum.vote` before it is rewritten.
const VOTE_FRAMES_BEFORE_REWRITE: usize = 1_024;

/// Opens the vote file for appending, creating it (and syncing the
/// directory, so that the new file survives a crash) if it is missing.
fn open_vote_file(directory: &Path, path: &Path) -> Result<File, LogError> {
    let existed = path.exists();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_error(path))?;
    if !existed {
        sync_directory(directory)?;
    }
    Ok(file)
}

/// The quorum's Raft log storage (openraft's `RaftLogStorage`).
#[derive(Debug, Clone)]
pub struct QuorumLogStore {
    entries: Arc<RwLock<Entries>>,
    last_purged: Arc<RwLock<Option<LogId<NodeId>>>>,
    vote: Arc<RwLock<Option<Vote<NodeId>>>>,
    file: Arc<Mutex<LogFile>>,
}

/// A reader of the log's entries.
#[derive(Debug, Clone)]
pub struct QuorumLogReader {
    entries: Arc<RwLock<Entries>>,
}

/// What recovery found in `quorum.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogRecovery {
    /// Entries read back.
    pub entries: usize,
    /// Bytes of torn tail removed.
    pub truncated_bytes: u64,
}

impl QuorumLogStore {
    /// Opens (creating if needed) the log and vote in `directory`.
    pub fn open(directory: &Path) -> Result<(Self, LogRecovery), LogError> {
        fs::create_dir_all(directory).map_err(io_error(directory))?;
        let path = directory.join(QUORUM_LOG_FILE_NAME);
        let bytes = read_or_empty(&path)?;
        let replay = replay(&path, &bytes)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        let recovery = LogRecovery {
            entries: replay.entries.len(),
            truncated_bytes: (bytes.len() as u64).saturating_sub(replay.valid_bytes),
        };
        if recovery.truncated_bytes > 0 {
            file.set_len(replay.valid_bytes).map_err(io_error(&path))?;
            file.sync_all().map_err(io_error(&path))?;
            tracing::warn!(path = %path.display(), bytes = recovery.truncated_bytes, "truncated torn tail of the quorum log");
        }
        let vote_path = directory.join(QUORUM_VOTE_FILE_NAME);
        let (vote, vote_frames, vote_bytes) = read_vote(&vote_path)?;
        let vote_file = open_vote_file(directory, &vote_path)?;
        // A torn last vote is cut off, so the next vote follows whole ones.
        if vote_file.metadata().map_err(io_error(&vote_path))?.len() > vote_bytes {
            vote_file
                .set_len(vote_bytes)
                .map_err(io_error(&vote_path))?;
            vote_file.sync_all().map_err(io_error(&vote_path))?;
        }
        let store = Self {
            entries: Arc::new(RwLock::new(replay.entries)),
            last_purged: Arc::new(RwLock::new(replay.last_purged)),
            vote: Arc::new(RwLock::new(vote)),
            file: Arc::new(Mutex::new(LogFile {
                directory: directory.to_path_buf(),
                path,
                file,
                positions: replay.positions,
                end_position: replay.valid_bytes,
                vote_file,
                vote_frames,
            })),
        };
        Ok((store, recovery))
    }

    /// The last log id in the log (or the last purged one).
    pub fn last_log_id(&self) -> Option<LogId<NodeId>> {
        let entries = read_lock(&self.entries);
        entries
            .values()
            .next_back()
            .map(|entry| *entry.get_log_id())
            .or(*read_lock(&self.last_purged))
    }

    async fn with_file<T, F>(&self, operation: F) -> Result<T, StorageError<NodeId>>
    where
        T: Send + 'static,
        F: FnOnce(&mut LogFile) -> Result<T, LogError> + Send + 'static,
    {
        let file = Arc::clone(&self.file);
        let result = tokio::task::spawn_blocking(move || {
            let mut guard = file.lock().map_err(|_| LogError::Poisoned)?;
            operation(&mut guard)
        })
        .await
        .map_err(|join| {
            storage_error(LogError::Io {
                path: PathBuf::from(QUORUM_LOG_FILE_NAME),
                source: std::io::Error::other(join),
            })
        })?;
        result.map_err(storage_error)
    }
}

fn storage_error(error: LogError) -> StorageError<NodeId> {
    StorageError::from_io_error(
        openraft::ErrorSubject::Logs,
        openraft::ErrorVerb::Write,
        std::io::Error::other(error),
    )
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // A panic while holding these locks can only come from a bug in this
    // module; the maps are replaced whole under the write lock, so the
    // data a panicking writer left is still a consistent map.
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read_or_empty(path: &Path) -> Result<Vec<u8>, LogError> {
    match fs::read(path) {
        Ok(bytes) => Ok(bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(LogError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

struct Replay {
    entries: Entries,
    positions: BTreeMap<u64, u64>,
    last_purged: Option<LogId<NodeId>>,
    valid_bytes: u64,
}

fn replay(path: &Path, bytes: &[u8]) -> Result<Replay, LogError> {
    let mut replay = Replay {
        entries: BTreeMap::new(),
        positions: BTreeMap::new(),
        last_purged: None,
        valid_bytes: 0,
    };
    let mut position = 0;
    while position < bytes.len() {
        let Frame::Complete { payload, end } = next_frame(path, bytes, position)? else {
            break;
        };
        let undecodable = |source| LogError::QuorumFrame {
            path: path.to_path_buf(),
            position: position as u64,
            source,
        };
        let frame = LogFrameMessage::decode(payload)
            .map_err(|source| undecodable(CodecError::Decode { source }))?;
        match frame.frame {
            Some(LogFrameKind::Purged(log_id)) if replay.entries.is_empty() => {
                replay.last_purged = Some(log_id_from_message(log_id));
            }
            Some(LogFrameKind::Entry(message)) => {
                let entry = entry_from_message(message).map_err(undecodable)?;
                check_follows(path, &replay, entry.log_id.index)?;
                replay.positions.insert(entry.log_id.index, position as u64);
                replay.entries.insert(entry.log_id.index, entry);
            }
            _ => {
                return Err(undecodable(CodecError::MissingField {
                    field: "frame (an entry, or a purge marker first)",
                }))
            }
        }
        position = end;
        replay.valid_bytes = end as u64;
    }
    Ok(replay)
}

fn check_follows(path: &Path, replay: &Replay, index: u64) -> Result<(), LogError> {
    let expected = match replay.entries.keys().next_back() {
        Some(last) => Some(last.saturating_add(1)),
        None => replay
            .last_purged
            .map(|purged| purged.index.saturating_add(1)),
    };
    match expected {
        Some(expected) if expected != index => Err(LogError::OffsetGap {
            path: path.to_path_buf(),
            expected,
            found: index,
        }),
        _ => Ok(()),
    }
}

/// Reads the vote file: frames appended one per vote, the last whole one
/// is the vote. A torn last frame is a vote whose `fsync` did not complete,
/// so it was never acknowledged and the one before it stands.
fn read_vote(path: &Path) -> Result<(Option<Vote<NodeId>>, usize, u64), LogError> {
    let bytes = read_or_empty(path)?;
    let mut vote = None;
    let mut frames = 0;
    let mut position = 0;
    while position < bytes.len() {
        let Frame::Complete { payload, end } = next_frame(path, &bytes, position)? else {
            break;
        };
        let message = VoteMessage::decode(payload).map_err(|source| LogError::QuorumFrame {
            path: path.to_path_buf(),
            position: position as u64,
            source: CodecError::Decode { source },
        })?;
        vote = Some(vote_from_message(message));
        frames += 1;
        position = end;
    }
    Ok((vote, frames, position as u64))
}

fn encode_entry_frame(entry: &Entry<QuorumTypes>) -> Result<Vec<u8>, LogError> {
    let frame = LogFrameMessage {
        frame: Some(LogFrameKind::Entry(entry_to_message(entry))),
    };
    encode_frame(&frame.encode_to_vec())
}

impl LogFile {
    fn append(&mut self, frames: Vec<(u64, Vec<u8>)>) -> Result<(), LogError> {
        let mut bytes = Vec::new();
        for (index, frame) in frames {
            self.positions
                .insert(index, self.end_position + bytes.len() as u64);
            bytes.extend_from_slice(&frame);
        }
        self.file.write_all(&bytes).map_err(io_error(&self.path))?;
        self.file.sync_data().map_err(io_error(&self.path))?;
        self.end_position += bytes.len() as u64;
        Ok(())
    }

    fn truncate(&mut self, from_index: u64) -> Result<(), LogError> {
        let Some(position) = self.positions.range(from_index..).next().map(|(_, p)| *p) else {
            return Ok(());
        };
        self.file.set_len(position).map_err(io_error(&self.path))?;
        self.file.sync_all().map_err(io_error(&self.path))?;
        self.positions.retain(|index, _| *index < from_index);
        self.end_position = position;
        Ok(())
    }

    /// Rewrites the file with the purge marker and the entries kept.
    fn rewrite(
        &mut self,
        purged: LogId<NodeId>,
        kept: Vec<Entry<QuorumTypes>>,
    ) -> Result<(), LogError> {
        let marker = LogFrameMessage {
            frame: Some(LogFrameKind::Purged(log_id_to_message(&purged))),
        };
        let mut bytes = encode_frame(&marker.encode_to_vec())?;
        let mut positions = BTreeMap::new();
        for entry in &kept {
            positions.insert(entry.log_id.index, bytes.len() as u64);
            bytes.extend_from_slice(&encode_entry_frame(entry)?);
        }
        let temp = self.path.with_extension(format!("log{TEMP_SUFFIX}"));
        write_synced(&temp, &bytes)?;
        fs::rename(&temp, &self.path).map_err(io_error(&self.path))?;
        sync_directory(&self.directory)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io_error(&self.path))?;
        self.positions = positions;
        self.end_position = bytes.len() as u64;
        Ok(())
    }

    /// Appends the vote and `fdatasync`s it: one sync per vote, so that a
    /// slow disk delays elections as little as it can. Now and then the file
    /// is rewritten (temporary file, `fsync`, rename, directory `fsync`)
    /// with the last vote only.
    fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), LogError> {
        let path = self.directory.join(QUORUM_VOTE_FILE_NAME);
        let frame = encode_frame(&vote_to_message(vote).encode_to_vec())?;
        if self.vote_frames >= VOTE_FRAMES_BEFORE_REWRITE {
            let temp = self
                .directory
                .join(format!("{QUORUM_VOTE_FILE_NAME}{TEMP_SUFFIX}"));
            write_synced(&temp, &frame)?;
            fs::rename(&temp, &path).map_err(io_error(&path))?;
            sync_directory(&self.directory)?;
            self.vote_file = open_vote_file(&self.directory, &path)?;
            self.vote_frames = 1;
            return Ok(());
        }
        self.vote_file.write_all(&frame).map_err(io_error(&path))?;
        self.vote_file.sync_data().map_err(io_error(&path))?;
        self.vote_frames += 1;
        Ok(())
    }
}

fn entries_in<RB: RangeBounds<u64>>(entries: &Entries, range: RB) -> Vec<Entry<QuorumTypes>> {
    entries
        .range(range)
        .map(|(_, entry)| entry.clone())
        .collect()
}

impl RaftLogReader<QuorumTypes> for QuorumLogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<QuorumTypes>>, StorageError<NodeId>> {
        Ok(entries_in(&read_lock(&self.entries), range))
    }
}

impl RaftLogReader<QuorumTypes> for QuorumLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<QuorumTypes>>, StorageError<NodeId>> {
        Ok(entries_in(&read_lock(&self.entries), range))
    }
}

impl RaftLogStorage<QuorumTypes> for QuorumLogStore {
    type LogReader = QuorumLogReader;

    async fn get_log_state(&mut self) -> Result<LogState<QuorumTypes>, StorageError<NodeId>> {
        Ok(LogState {
            last_purged_log_id: *read_lock(&self.last_purged),
            last_log_id: self.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        QuorumLogReader {
            entries: Arc::clone(&self.entries),
        }
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let to_save = *vote;
        self.with_file(move |file| file.save_vote(&to_save)).await?;
        *write_lock(&self.vote) = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(*read_lock(&self.vote))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<QuorumTypes>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<QuorumTypes>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<QuorumTypes>> = entries.into_iter().collect();
        let mut frames = Vec::with_capacity(entries.len());
        for entry in &entries {
            let frame = encode_entry_frame(entry).map_err(storage_error)?;
            frames.push((entry.log_id.index, frame));
        }
        {
            let mut memory = write_lock(&self.entries);
            for entry in entries {
                memory.insert(entry.log_id.index, entry);
            }
        }
        let result = self.with_file(move |file| file.append(frames)).await;
        let flushed = result
            .as_ref()
            .map(|_| ())
            .map_err(|error| std::io::Error::other(error.to_string()));
        callback.log_io_completed(flushed);
        result
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let from = log_id.index;
        write_lock(&self.entries).retain(|index, _| *index < from);
        self.with_file(move |file| file.truncate(from)).await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let kept = {
            let mut memory = write_lock(&self.entries);
            memory.retain(|index, _| *index > log_id.index);
            memory.values().cloned().collect::<Vec<_>>()
        };
        *write_lock(&self.last_purged) = Some(log_id);
        self.with_file(move |file| file.rewrite(log_id, kept)).await
    }
}

#[cfg(test)]
#[path = "log_store_tests.rs"]
mod tests;
