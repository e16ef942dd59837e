//! Idempotent producer state: per producer id, its epoch and the sequence
//! ranges of its last five batches.
//!
//! A retried batch whose sequence range matches a remembered one is a
//! duplicate and is answered with the offsets it got the first time; a batch
//! whose first sequence does not follow the producer's last one is out of
//! order. State is rebuilt from batch headers on recovery, starting from the
//! latest snapshot (`<20-digit offset>.snapshot`, Kafka's version 1 format)
//! taken at segment roll.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::batch::BatchHeader;
use crate::checkpoint::write_atomically;
use crate::error::{AppendError, IoContext, SnapshotError};
use crate::segment::file_stem;

/// Batches remembered per producer (Kafka's `NUM_BATCHES_TO_RETAIN`).
pub const BATCHES_RETAINED: usize = 5;
/// Suffix of producer state snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
const SNAPSHOT_HEADER_BYTES: usize = 2 + 4 + 4;

/// Where one producer batch landed in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// First sequence of the batch.
    pub first_sequence: i32,
    /// Last sequence of the batch.
    pub last_sequence: i32,
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

/// What the log knows about one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// Current epoch.
    pub epoch: i16,
    /// Last batches, oldest first (at most [`BATCHES_RETAINED`]).
    pub batches: VecDeque<BatchMetadata>,
}

impl ProducerEntry {
    fn last_sequence(&self) -> Option<i32> {
        self.batches.back().map(|batch| batch.last_sequence)
    }
}

/// The verdict on an idempotent batch before it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// New data: append it.
    Append,
    /// A retry of a batch already in the log at these offsets.
    Duplicate(BatchMetadata),
}

/// The sequence after `sequence` (wrapping at `i32::MAX`).
fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

/// Per-producer state of one partition.
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateManager {
    /// Empty state.
    pub fn new() -> Self {
        ProducerStateManager::default()
    }

    /// The entry of `producer_id`, if known.
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Number of producers tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks a batch from an idempotent producer before it is written.
    /// `pending` is the last (epoch, sequence) of earlier batches of the
    /// same append, which are not in the state yet.
    pub fn check(
        &self,
        header: &BatchHeader,
        pending: Option<(i16, i32)>,
    ) -> Result<SequenceCheck, AppendError> {
        let producer_id = header.producer_id;
        let known = self.producers.get(&producer_id);
        let current = pending
            .or_else(|| known.map(|entry| (entry.epoch, entry.last_sequence().unwrap_or(-1))));
        let Some((current_epoch, last_sequence)) = current else {
            // Unknown producer (new, or its state expired with retention):
            // any sequence is accepted, as Kafka does.
            return Ok(SequenceCheck::Append);
        };
        if header.producer_epoch < current_epoch {
            return Err(AppendError::InvalidProducerEpoch {
                producer_id,
                current_epoch,
                found_epoch: header.producer_epoch,
            });
        }
        if header.producer_epoch > current_epoch {
            if header.base_sequence != 0 {
                return Err(AppendError::OutOfOrderSequence {
                    producer_id,
                    expected_sequence: 0,
                    found_sequence: header.base_sequence,
                });
            }
            return Ok(SequenceCheck::Append);
        }
        if let Some(duplicate) = known.and_then(|entry| {
            entry.batches.iter().find(|batch| {
                batch.first_sequence == header.base_sequence
                    && batch.last_sequence == header.last_sequence()
            })
        }) {
            return Ok(SequenceCheck::Duplicate(*duplicate));
        }
        let expected_sequence = next_sequence(last_sequence);
        if last_sequence >= 0 && header.base_sequence != expected_sequence {
            return Err(AppendError::OutOfOrderSequence {
                producer_id,
                expected_sequence,
                found_sequence: header.base_sequence,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Records a batch that is now in the log (header with final offsets).
    pub fn update(&mut self, header: &BatchHeader) {
        if !header.has_producer_id() {
            return;
        }
        let batch = BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            timestamp: header.max_timestamp,
        };
        self.record(header.producer_id, header.producer_epoch, batch);
    }

    fn record(&mut self, producer_id: i64, epoch: i16, batch: BatchMetadata) {
        let entry = self.producers.entry(producer_id).or_insert(ProducerEntry {
            epoch,
            batches: VecDeque::new(),
        });
        if epoch != entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(batch);
        while entry.batches.len() > BATCHES_RETAINED {
            entry.batches.pop_front();
        }
    }

    /// Forgets producers whose last batch is below `log_start_offset`.
    pub fn evict_before(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, entry| {
            entry
                .batches
                .back()
                .is_some_and(|batch| batch.last_offset >= log_start_offset)
        });
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Writes a snapshot for log end offset `offset` into `dir`.
    pub fn write_snapshot(&self, dir: &Path, offset: i64) -> Result<(), SnapshotError> {
        write_atomically(&snapshot_path(dir, offset), &self.snapshot_bytes())?;
        Ok(())
    }

    /// The bytes of a snapshot of the current state (Kafka's version 1
    /// format), for [`snapshot_path`] of the log end offset.
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let ordered: BTreeMap<i64, &ProducerEntry> = self
            .producers
            .iter()
            .map(|(producer_id, entry)| (*producer_id, entry))
            .collect();
        let mut body = Vec::with_capacity(4 + ordered.len() * SNAPSHOT_ENTRY_BYTES);
        body.extend_from_slice(&(ordered.len() as i32).to_be_bytes());
        for (producer_id, entry) in ordered {
            let Some(last) = entry.batches.back() else {
                continue;
            };
            body.extend_from_slice(&producer_id.to_be_bytes());
            body.extend_from_slice(&entry.epoch.to_be_bytes());
            body.extend_from_slice(&last.last_sequence.to_be_bytes());
            body.extend_from_slice(&last.last_offset.to_be_bytes());
            let offset_delta = (last.last_offset - last.first_offset) as i32;
            body.extend_from_slice(&offset_delta.to_be_bytes());
            body.extend_from_slice(&last.timestamp.to_be_bytes());
            body.extend_from_slice(&(-1i32).to_be_bytes());
            body.extend_from_slice(&(-1i64).to_be_bytes());
        }
        let mut file = Vec::with_capacity(6 + body.len());
        file.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        file.extend_from_slice(&strom_protocol::crc::crc32c(&body).to_be_bytes());
        file.extend_from_slice(&body);
        file
    }

    /// Replaces the state with the snapshot at `path`.
    pub fn load_snapshot(&mut self, path: &Path) -> Result<(), SnapshotError> {
        let bytes = std::fs::read(path).at(path)?;
        let corrupt = |reason| SnapshotError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if bytes.len() < SNAPSHOT_HEADER_BYTES {
            return Err(corrupt("shorter than its header"));
        }
        if i16::from_be_bytes([bytes[0], bytes[1]]) != SNAPSHOT_VERSION {
            return Err(corrupt("unknown version"));
        }
        let stored_crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
        let body = &bytes[6..];
        if strom_protocol::crc::crc32c(body) != stored_crc {
            return Err(corrupt("CRC mismatch"));
        }
        let count = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let entries = &body[4..];
        if count < 0 || entries.len() != count as usize * SNAPSHOT_ENTRY_BYTES {
            return Err(corrupt("entry count does not match the file length"));
        }
        self.producers.clear();
        for raw in entries.chunks_exact(SNAPSHOT_ENTRY_BYTES) {
            let field = |at: usize, width: usize| {
                raw[at..at + width]
                    .iter()
                    .fold(0i64, |value, byte| (value << 8) | i64::from(*byte))
            };
            let producer_id = field(0, 8);
            let epoch = field(8, 2) as u16 as i16;
            let last_sequence = field(10, 4) as u32 as i32;
            let last_offset = field(14, 8);
            let offset_delta = field(22, 4) as u32 as i32;
            let timestamp = field(26, 8);
            let first_sequence = if last_sequence < 0 {
                -1
            } else {
                (i64::from(last_sequence) - i64::from(offset_delta)).max(0) as i32
            };
            let batch = BatchMetadata {
                first_sequence,
                last_sequence,
                first_offset: last_offset - i64::from(offset_delta),
                last_offset,
                timestamp,
            };
            self.record(producer_id, epoch, batch);
        }
        Ok(())
    }
}

/// The snapshot file for log end offset `offset`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{}{SNAPSHOT_SUFFIX}", file_stem(offset)))
}

/// Snapshot files in `dir`, by offset.
pub fn list_snapshots(dir: &Path) -> Result<BTreeMap<i64, PathBuf>, SnapshotError> {
    let mut snapshots = BTreeMap::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if let Some(offset) = crate::segment::parse_base_offset(name, SNAPSHOT_SUFFIX) {
            snapshots.insert(offset, entry.path());
        }
    }
    Ok(snapshots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch_at;
    use crate::testing::{simple_batch, BatchSpec};

    fn header(base_offset: i64, epoch: i16, base_sequence: i32, records: u32) -> BatchHeader {
        let bytes = simple_batch(&BatchSpec {
            base_offset,
            records,
            producer_id: 42,
            producer_epoch: epoch,
            base_sequence,
            ..BatchSpec::default()
        });
        validate_batch_at(&bytes, 0).expect("valid")
    }

    #[test]
    fn duplicates_and_gaps() {
        let mut state = ProducerStateManager::new();
        let first = header(0, 0, 0, 3);
        assert_eq!(
            state.check(&first, None).expect("new"),
            SequenceCheck::Append
        );
        state.update(&first);
        let second = header(3, 0, 3, 2);
        assert_eq!(
            state.check(&second, None).expect("next"),
            SequenceCheck::Append
        );
        state.update(&second);
        // Retry of the first batch is a duplicate with its original offsets.
        let retry = header(99, 0, 0, 3);
        assert!(matches!(
            state.check(&retry, None).expect("duplicate"),
            SequenceCheck::Duplicate(BatchMetadata {
                first_offset: 0,
                last_offset: 2,
                ..
            })
        ));
        let gap = header(5, 0, 7, 1);
        assert!(matches!(
            state.check(&gap, None),
            Err(AppendError::OutOfOrderSequence {
                expected_sequence: 5,
                found_sequence: 7,
                ..
            })
        ));
        let fenced = header(5, -1, 5, 1);
        assert!(matches!(
            state.check(&fenced, None),
            Err(AppendError::InvalidProducerEpoch { .. })
        ));
        let bumped = header(5, 1, 0, 1);
        assert_eq!(
            state.check(&bumped, None).expect("new epoch"),
            SequenceCheck::Append
        );
        let bumped_late = header(5, 1, 4, 1);
        assert!(state.check(&bumped_late, None).is_err());
    }

    #[test]
    fn only_five_batches_are_remembered() {
        let mut state = ProducerStateManager::new();
        for index in 0..6 {
            state.update(&header(index, 0, index as i32, 1));
        }
        let oldest = header(0, 0, 0, 1);
        assert!(
            state.check(&oldest, None).is_err(),
            "evicted batch is no longer a duplicate"
        );
        let kept = header(1, 0, 1, 1);
        assert!(matches!(
            state.check(&kept, None),
            Ok(SequenceCheck::Duplicate(_))
        ));
    }

    #[test]
    fn snapshot_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut state = ProducerStateManager::new();
        state.update(&header(10, 2, 7, 3));
        state.write_snapshot(dir.path(), 13).expect("write");
        let snapshots = list_snapshots(dir.path()).expect("list");
        let path = snapshots.get(&13).expect("snapshot at 13");
        let mut loaded = ProducerStateManager::new();
        loaded.load_snapshot(path).expect("load");
        let entry = loaded.entry(42).expect("producer");
        assert_eq!(entry.epoch, 2);
        assert_eq!(
            entry.batches.back().copied(),
            state
                .entry(42)
                .and_then(|entry| entry.batches.back().copied())
        );
        let mut bytes = std::fs::read(path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(path, bytes).expect("write");
        assert!(matches!(
            loaded.load_snapshot(path),
            Err(SnapshotError::Corrupt { .. })
        ));
    }
}
