//! Kafka's text checkpoint files.
//!
//! ```text
//! 0                      version
//! 2                      number of entries
//! my-topic 0 1234        one entry per line, fields separated by one space
//! my-topic 1 99
//! ```
//!
//! Offset checkpoints (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`) hold
//! `topic partition offset`; the `leader-epoch-checkpoint` holds
//! `epoch start_offset`. Files are replaced atomically: written to
//! `<name>.tmp`, fsynced, renamed over the old file, and the directory fsynced.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{CheckpointError, IoContext, IoError};
use crate::topic_partition::TopicPartition;

/// Name of the recovery point checkpoint in each log directory.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// Name of the log start offset checkpoint in each log directory.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// Name of the high watermark checkpoint in each log directory.
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
/// Name of the leader epoch checkpoint in each partition directory.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// The only checkpoint version Kafka writes.
const CHECKPOINT_VERSION: u32 = 0;
/// Refuse to pre-allocate for more than this many entries from a count line.
const MAX_PREALLOCATED_ENTRIES: usize = 4096;

/// Fsyncs a directory so renames and creations in it are durable.
pub(crate) fn sync_directory(path: &Path) -> Result<(), IoError> {
    File::open(path).and_then(|dir| dir.sync_all()).at(path)
}

/// Writes `contents` to `path` atomically (temporary file, fsync, rename,
/// directory fsync).
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), IoError> {
    let temporary = path.with_extension("tmp");
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temporary)
        .at(&temporary)?;
    file.write_all(contents).at(&temporary)?;
    file.sync_all().at(&temporary)?;
    std::fs::rename(&temporary, path).at(path)?;
    if let Some(parent) = path.parent() {
        sync_directory(parent)?;
    }
    Ok(())
}

/// Reads the entry lines of a checkpoint, checking version and count.
/// A missing file reads as no entries.
fn read_entry_lines(path: &Path) -> Result<Vec<String>, CheckpointError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(CheckpointError::Io(IoError {
                path: path.to_path_buf(),
                source,
            }))
        }
    };
    let malformed = |line: usize, reason: &'static str| CheckpointError::Malformed {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut lines = text.lines();
    let version: u32 = lines
        .next()
        .and_then(|line| line.trim().parse().ok())
        .ok_or_else(|| malformed(1, "missing or invalid version"))?;
    if version != CHECKPOINT_VERSION {
        return Err(malformed(1, "unsupported version"));
    }
    let count: usize = lines
        .next()
        .and_then(|line| line.trim().parse().ok())
        .ok_or_else(|| malformed(2, "missing or invalid entry count"))?;
    let mut entries = Vec::with_capacity(count.min(MAX_PREALLOCATED_ENTRIES));
    for (index, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if entries.len() == count {
            return Err(malformed(
                index + 3,
                "more entries than the count line says",
            ));
        }
        entries.push(line.to_owned());
    }
    if entries.len() != count {
        return Err(malformed(2, "fewer entries than the count line says"));
    }
    Ok(entries)
}

fn render(entries: &[String]) -> Vec<u8> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(entry);
        text.push('\n');
    }
    text.into_bytes()
}

/// A `topic partition offset` checkpoint file.
#[derive(Debug, Clone)]
pub struct OffsetCheckpointFile {
    path: PathBuf,
}

impl OffsetCheckpointFile {
    /// A checkpoint at `path` (not touched until read or written).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        OffsetCheckpointFile { path: path.into() }
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads all entries; a missing file is empty.
    pub fn read(&self) -> Result<BTreeMap<TopicPartition, i64>, CheckpointError> {
        let mut offsets = BTreeMap::new();
        for (index, line) in read_entry_lines(&self.path)?.iter().enumerate() {
            let malformed = CheckpointError::Malformed {
                path: self.path.clone(),
                line: index + 3,
                reason: "expected `topic partition offset`",
            };
            let mut fields = line.split(' ');
            let (Some(topic), Some(partition), Some(offset), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(malformed);
            };
            let (Ok(partition), Ok(offset)) = (partition.parse::<i32>(), offset.parse::<i64>())
            else {
                return Err(malformed);
            };
            offsets.insert(TopicPartition::new(topic, partition), offset);
        }
        Ok(offsets)
    }

    /// Replaces the file with `offsets`.
    pub fn write(&self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), CheckpointError> {
        let lines: Vec<String> = offsets
            .iter()
            .map(|(partition, offset)| {
                format!("{} {} {offset}", partition.topic, partition.partition)
            })
            .collect();
        write_atomically(&self.path, &render(&lines))?;
        Ok(())
    }
}

/// One leader epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// Leader epoch.
    pub epoch: i32,
    /// First offset of the epoch.
    pub start_offset: i64,
}

/// The `leader-epoch-checkpoint` file of a partition.
#[derive(Debug, Clone)]
pub struct LeaderEpochCheckpointFile {
    path: PathBuf,
}

impl LeaderEpochCheckpointFile {
    /// A checkpoint at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LeaderEpochCheckpointFile { path: path.into() }
    }

    /// Reads all entries; a missing file is empty.
    pub fn read(&self) -> Result<Vec<EpochEntry>, CheckpointError> {
        let mut entries = Vec::new();
        for (index, line) in read_entry_lines(&self.path)?.iter().enumerate() {
            let mut fields = line.split(' ');
            let parsed = match (fields.next(), fields.next(), fields.next()) {
                (Some(epoch), Some(offset), None) => {
                    epoch.parse::<i32>().ok().zip(offset.parse::<i64>().ok())
                }
                _ => None,
            };
            let Some((epoch, start_offset)) = parsed else {
                return Err(CheckpointError::Malformed {
                    path: self.path.clone(),
                    line: index + 3,
                    reason: "expected `epoch start_offset`",
                });
            };
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        Ok(entries)
    }

    /// Replaces the file with `entries`.
    pub fn write(&self, entries: &[EpochEntry]) -> Result<(), CheckpointError> {
        let lines: Vec<String> = entries
            .iter()
            .map(|entry| format!("{} {}", entry.epoch, entry.start_offset))
            .collect();
        write_atomically(&self.path, &render(&lines))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_round_trips_in_kafkas_text_format() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = OffsetCheckpointFile::new(dir.path().join(RECOVERY_POINT_CHECKPOINT));
        assert!(file.read().expect("missing reads empty").is_empty());
        let mut offsets = BTreeMap::new();
        offsets.insert(TopicPartition::new("a-topic", 0), 1234);
        offsets.insert(TopicPartition::new("b", 7), 0);
        file.write(&offsets).expect("write");
        let text = std::fs::read_to_string(file.path()).expect("read");
        assert_eq!(text, "0\n2\na-topic 0 1234\nb 7 0\n");
        assert_eq!(file.read().expect("read"), offsets);
    }

    #[test]
    fn malformed_checkpoints_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cp");
        let file = OffsetCheckpointFile::new(&path);
        for text in [
            "1\n0\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt x 1\n",
            "0\n1\nt 0 1\nt 1 2\n",
            "",
        ] {
            std::fs::write(&path, text).expect("write");
            assert!(
                matches!(file.read(), Err(CheckpointError::Malformed { .. })),
                "{text:?} must be rejected"
            );
        }
    }

    #[test]
    fn leader_epoch_checkpoint_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = LeaderEpochCheckpointFile::new(dir.path().join(LEADER_EPOCH_CHECKPOINT));
        let entries = vec![
            EpochEntry {
                epoch: 0,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 3,
                start_offset: 120,
            },
        ];
        file.write(&entries).expect("write");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).expect("read"),
            "0\n2\n0 0\n3 120\n"
        );
        assert_eq!(file.read().expect("read"), entries);
    }
}
