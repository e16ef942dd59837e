//! Producer state: per producer id, its epoch, the sequence ranges of its
//! last five batches, its transaction coordinator's epoch and the first
//! offset of its ongoing transaction (KIP-98).
//!
//! A retried batch whose sequence range matches a remembered one is a
//! duplicate and is answered with the offsets it got the first time; a batch
//! whose first sequence does not follow the producer's last one is out of
//! order. A transactional data batch from a producer with no ongoing
//! transaction starts one at its base offset; a transaction marker (control
//! batch) ends it. Ongoing transactions are also kept by first offset, so the
//! first unstable offset is the first key of an ordered map; a completed
//! transaction stays unstable until the high watermark passes its marker,
//! as in Kafka. State is rebuilt from batch headers (and marker records) on
//! recovery, starting from the latest snapshot (`<20-digit
//! offset>.snapshot`, Kafka's version 1 format) taken at segment roll.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::batch::BatchHeader;
use crate::checkpoint::write_atomically;
use crate::error::{AppendError, IoContext, SnapshotError};
use crate::marker::{ControlMarker, MarkerKind, TransactionMarker};
use crate::segment::file_stem;

/// Batches remembered per producer (Kafka's `NUM_BATCHES_TO_RETAIN`).
pub const BATCHES_RETAINED: usize = 5;
/// Suffix of producer state snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
const SNAPSHOT_HEADER_BYTES: usize = 2 + 4 + 4;
/// The coordinator epoch of a producer no marker was seen for.
pub const NO_COORDINATOR_EPOCH: i32 = -1;

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
    /// Last data batches of the current epoch, oldest first (at most
    /// [`BATCHES_RETAINED`]).
    pub batches: VecDeque<BatchMetadata>,
    /// Epoch of the coordinator that wrote the producer's last marker
    /// ([`NO_COORDINATOR_EPOCH`] when none was seen).
    pub coordinator_epoch: i32,
    /// First offset of the producer's ongoing transaction, if any.
    pub current_txn_first_offset: Option<i64>,
    /// Max timestamp of the producer's last batch or marker.
    pub last_timestamp: i64,
    /// Last offset of the producer's last batch or marker: the producer is
    /// forgotten when the log start passes it (unless a transaction is
    /// ongoing).
    pub last_offset: i64,
}

impl ProducerEntry {
    fn new(epoch: i16) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            current_txn_first_offset: None,
            last_timestamp: -1,
            last_offset: -1,
        }
    }

    /// Last sequence written in the current epoch, if any.
    pub fn last_sequence(&self) -> Option<i32> {
        self.batches.back().map(|batch| batch.last_sequence)
    }

    /// Moves to `epoch`; the sequences of another epoch are forgotten.
    fn set_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }
}

/// One producer as DescribeProducers (KIP-664) reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSummary {
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// Its last sequence (-1 when none in the current epoch).
    pub last_sequence: i32,
    /// Max timestamp of its last batch or marker (-1 when unknown).
    pub last_timestamp: i64,
    /// Epoch of the coordinator of its last marker (-1 when none).
    pub coordinator_epoch: i32,
    /// First offset of its ongoing transaction, if any.
    pub current_txn_first_offset: Option<i64>,
}

/// A transaction a marker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of the transaction's first record.
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    /// Commit or abort.
    pub kind: MarkerKind,
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

/// The entry of `producer_id`, created at `epoch` if new, moved to `epoch`.
fn entry_at_epoch(
    producers: &mut HashMap<i64, ProducerEntry>,
    producer_id: i64,
    epoch: i16,
) -> &mut ProducerEntry {
    let entry = producers
        .entry(producer_id)
        .or_insert_with(|| ProducerEntry::new(epoch));
    entry.set_epoch(epoch);
    entry
}

/// Per-producer state of one partition.
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Ongoing transactions: first offset → producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Completed transactions whose marker the high watermark has not
    /// passed yet, by first offset.
    unreplicated: BTreeMap<i64, CompletedTxn>,
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

    /// Every producer, by id (DescribeProducers).
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        let mut summaries: Vec<ProducerSummary> = self
            .producers
            .iter()
            .map(|(producer_id, entry)| ProducerSummary {
                producer_id: *producer_id,
                producer_epoch: entry.epoch,
                last_sequence: entry.last_sequence().unwrap_or(-1),
                last_timestamp: entry.last_timestamp,
                coordinator_epoch: entry.coordinator_epoch,
                current_txn_first_offset: entry.current_txn_first_offset,
            })
            .collect();
        summaries.sort_unstable_by_key(|summary| summary.producer_id);
        summaries
    }

    /// Ongoing transactions as (first offset, producer id), by first offset.
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing
            .iter()
            .map(|(first_offset, producer_id)| (*first_offset, *producer_id))
    }

    /// The first offset of the earliest transaction that is ongoing, or
    /// completed with its marker at or above `high_watermark`.
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        let ongoing = self.ongoing.keys().next().copied();
        let unreplicated = self
            .unreplicated
            .values()
            .find(|txn| txn.last_offset >= high_watermark)
            .map(|txn| txn.first_offset);
        match (ongoing, unreplicated) {
            (Some(ongoing), Some(unreplicated)) => Some(ongoing.min(unreplicated)),
            (ongoing, unreplicated) => ongoing.or(unreplicated),
        }
    }

    /// Forgets completed transactions whose marker is below `high_watermark`.
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.unreplicated
            .retain(|_, txn| txn.last_offset >= high_watermark);
    }

    /// The last stable offset right after `completed` ended: the first
    /// offset of the earliest transaction of another producer still
    /// ongoing, else the marker's offset + 1 (the index entry's field).
    pub fn last_stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, producer_id)| **producer_id != completed.producer_id)
            .map_or(completed.last_offset + 1, |(first_offset, _)| *first_offset)
    }

    /// Checks a batch from an idempotent producer before it is written.
    /// `pending` is the last (epoch, sequence) of earlier batches of the
    /// same append, which are not in the state yet. A non-transactional
    /// batch from a producer with an ongoing transaction is refused.
    pub fn check(
        &self,
        header: &BatchHeader,
        pending: Option<(i16, i32)>,
    ) -> Result<SequenceCheck, AppendError> {
        let verdict = self.check_sequence(header, pending)?;
        let in_transaction = self
            .producers
            .get(&header.producer_id)
            .is_some_and(|entry| entry.current_txn_first_offset.is_some());
        if verdict == SequenceCheck::Append && in_transaction && !header.is_transactional() {
            return Err(AppendError::InvalidTxnState {
                producer_id: header.producer_id,
            });
        }
        Ok(verdict)
    }

    fn check_sequence(
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

    /// Checks a marker the leader is asked to write: its producer epoch
    /// must not be below the producer's, nor its coordinator epoch below
    /// the one of the producer's last marker. An unknown producer is fine.
    pub fn check_marker(&self, marker: &TransactionMarker) -> Result<(), AppendError> {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        let stale_bump = marker.bumps_epoch
            && entry.current_txn_first_offset.is_some()
            && marker.producer_epoch <= entry.epoch;
        if marker.producer_epoch < entry.epoch || stale_bump {
            return Err(AppendError::InvalidProducerEpoch {
                producer_id: marker.producer_id,
                current_epoch: entry.epoch,
                found_epoch: marker.producer_epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(AppendError::TransactionCoordinatorFenced {
                producer_id: marker.producer_id,
                current_coordinator_epoch: entry.coordinator_epoch,
                found_coordinator_epoch: marker.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a batch that is now in the log (header with final offsets).
    /// A control batch passes its `marker` (`None` if its record could not
    /// be read: the transaction then stays ongoing); the transaction it
    /// ends, if the producer had one, is returned.
    pub fn update(
        &mut self,
        header: &BatchHeader,
        marker: Option<ControlMarker>,
    ) -> Option<CompletedTxn> {
        if !header.has_producer_id() {
            return None;
        }
        if header.is_control() {
            return self.end_transaction(header, marker);
        }
        let batch = BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            timestamp: header.max_timestamp,
        };
        let entry = entry_at_epoch(
            &mut self.producers,
            header.producer_id,
            header.producer_epoch,
        );
        entry.batches.push_back(batch);
        while entry.batches.len() > BATCHES_RETAINED {
            entry.batches.pop_front();
        }
        entry.last_timestamp = header.max_timestamp;
        entry.last_offset = header.last_offset();
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            self.ongoing.insert(header.base_offset, header.producer_id);
        }
        None
    }

    /// A marker batch: the producer moves to its epoch and coordinator
    /// epoch, and its ongoing transaction (if any) ends.
    fn end_transaction(
        &mut self,
        header: &BatchHeader,
        marker: Option<ControlMarker>,
    ) -> Option<CompletedTxn> {
        let entry = entry_at_epoch(
            &mut self.producers,
            header.producer_id,
            header.producer_epoch,
        );
        entry.last_timestamp = header.max_timestamp;
        entry.last_offset = header.last_offset();
        let marker = marker?;
        entry.coordinator_epoch = marker.coordinator_epoch;
        let first_offset = entry.current_txn_first_offset.take()?;
        self.ongoing.remove(&first_offset);
        let completed = CompletedTxn {
            producer_id: header.producer_id,
            first_offset,
            last_offset: header.last_offset(),
            kind: marker.kind,
        };
        self.unreplicated.insert(first_offset, completed);
        Some(completed)
    }

    /// Forgets producers whose last batch or marker is below
    /// `log_start_offset`, except those with an ongoing transaction.
    pub fn evict_before(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some() || entry.last_offset >= log_start_offset
        });
        self.unreplicated
            .retain(|_, txn| txn.last_offset >= log_start_offset);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
    }

    /// Writes a snapshot for log end offset `offset` into `dir`.
    pub fn write_snapshot(&self, dir: &Path, offset: i64) -> Result<(), SnapshotError> {
        write_atomically(&snapshot_path(dir, offset), &self.snapshot_bytes())?;
        Ok(())
    }

    /// The bytes of a snapshot of the current state (Kafka's version 1
    /// format), for [`snapshot_path`] of the log end offset. Per producer:
    /// id, epoch, last sequence, last data offset, offset delta of the
    /// last data batch (-1, -1, 0 without one), last timestamp, coordinator
    /// epoch, first offset of the ongoing transaction (-1 for none).
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let ordered: BTreeMap<i64, &ProducerEntry> = self
            .producers
            .iter()
            .map(|(producer_id, entry)| (*producer_id, entry))
            .collect();
        let mut body = Vec::with_capacity(4 + ordered.len() * SNAPSHOT_ENTRY_BYTES);
        body.extend_from_slice(&(ordered.len() as i32).to_be_bytes());
        for (producer_id, entry) in ordered {
            let (last_sequence, last_offset, offset_delta) =
                entry.batches.back().map_or((-1, -1, 0), |last| {
                    let delta = (last.last_offset - last.first_offset) as i32;
                    (last.last_sequence, last.last_offset, delta)
                });
            body.extend_from_slice(&producer_id.to_be_bytes());
            body.extend_from_slice(&entry.epoch.to_be_bytes());
            body.extend_from_slice(&last_sequence.to_be_bytes());
            body.extend_from_slice(&last_offset.to_be_bytes());
            body.extend_from_slice(&offset_delta.to_be_bytes());
            body.extend_from_slice(&entry.last_timestamp.to_be_bytes());
            body.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
            let txn_first_offset = entry.current_txn_first_offset.unwrap_or(-1);
            body.extend_from_slice(&txn_first_offset.to_be_bytes());
        }
        let mut file = Vec::with_capacity(6 + body.len());
        file.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        file.extend_from_slice(&strom_protocol::crc::crc32c(&body).to_be_bytes());
        file.extend_from_slice(&body);
        file
    }

    /// Replaces the state with the snapshot at `path` (named by its offset,
    /// see [`snapshot_path`]).
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
        let snapshot_offset = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| crate::segment::parse_base_offset(name, SNAPSHOT_SUFFIX))
            .unwrap_or(0);
        self.clear();
        for raw in entries.chunks_exact(SNAPSHOT_ENTRY_BYTES) {
            let (producer_id, entry) = snapshot_entry(raw, snapshot_offset);
            if let Some(first_offset) = entry.current_txn_first_offset {
                self.ongoing.insert(first_offset, producer_id);
            }
            self.producers.insert(producer_id, entry);
        }
        Ok(())
    }
}

/// One snapshot entry (exactly [`SNAPSHOT_ENTRY_BYTES`]) of the snapshot
/// at `snapshot_offset`. A producer with no data batch (only markers) is
/// anchored just below the snapshot for eviction.
fn snapshot_entry(raw: &[u8], snapshot_offset: i64) -> (i64, ProducerEntry) {
    let field = |at: usize, width: usize| {
        raw.get(at..at + width)
            .unwrap_or_default()
            .iter()
            .fold(0i64, |value, byte| (value << 8) | i64::from(*byte))
    };
    let producer_id = field(0, 8);
    let mut entry = ProducerEntry::new(field(8, 2) as u16 as i16);
    let last_sequence = field(10, 4) as u32 as i32;
    let last_offset = field(14, 8);
    let offset_delta = field(22, 4) as u32 as i32;
    entry.last_timestamp = field(26, 8);
    entry.coordinator_epoch = field(34, 4) as u32 as i32;
    let txn_first_offset = field(38, 8);
    entry.current_txn_first_offset = (txn_first_offset >= 0).then_some(txn_first_offset);
    if last_sequence >= 0 && last_offset >= 0 {
        entry.batches.push_back(BatchMetadata {
            first_sequence: (i64::from(last_sequence) - i64::from(offset_delta)).max(0) as i32,
            last_sequence,
            first_offset: last_offset - i64::from(offset_delta),
            last_offset,
            timestamp: entry.last_timestamp,
        });
        entry.last_offset = last_offset;
    } else {
        entry.last_offset = snapshot_offset - 1;
    }
    (producer_id, entry)
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
#[path = "producer_state_tests.rs"]
mod tests;
