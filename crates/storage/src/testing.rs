//! Test support: record batch construction and a fault-injecting file backend.
//!
//! [`simple_batch`] and [`keyed_batch`] build uncompressed v2 batches byte by
//! byte, independently of the log code, so tests and benchmarks can feed the
//! log real batches (producers use `strom-protocol`'s builder).
//! [`FaultInjector`] is the [`FileBackend`] used by the fault tests.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

use bytes::{BufMut, Bytes, BytesMut};

use crate::backend::FileBackend;
use crate::batch::{compute_crc, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES};

/// What to put in a test batch.
#[derive(Debug, Clone)]
pub struct BatchSpec {
    /// Base offset written into the header (the leader log overwrites it).
    pub base_offset: i64,
    /// Number of records (at least one).
    pub records: u32,
    /// Timestamp of the first record; record `i` gets `base_timestamp + i`.
    pub base_timestamp: i64,
    /// Idempotent producer id or -1.
    pub producer_id: i64,
    /// Producer epoch or -1.
    pub producer_epoch: i16,
    /// First sequence or -1.
    pub base_sequence: i32,
    /// Partition leader epoch.
    pub partition_leader_epoch: i32,
    /// Bytes of value per record.
    pub value_bytes: usize,
    /// Whether the batch is part of a transaction (attribute bit 4).
    pub transactional: bool,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            base_offset: 0,
            records: 1,
            base_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            partition_leader_epoch: 0,
            value_bytes: 8,
            transactional: false,
        }
    }
}

/// One record of a keyed test batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    /// Key, if any.
    pub key: Option<Vec<u8>>,
    /// Value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Builds a batch of `spec.records` records with filler values and no keys.
pub fn simple_batch(spec: &BatchSpec) -> Bytes {
    let records: Vec<TestRecord> = (0..spec.records.max(1))
        .map(|index| TestRecord {
            key: None,
            value: Some(vec![(index % 251) as u8; spec.value_bytes]),
        })
        .collect();
    keyed_batch(spec, &records)
}

/// Builds a batch holding `records` (the spec's `records` count is ignored).
pub fn keyed_batch(spec: &BatchSpec, records: &[TestRecord]) -> Bytes {
    assert!(!records.is_empty(), "a batch needs at least one record");
    let mut body = BytesMut::new();
    for (index, record) in records.iter().enumerate() {
        encode_record(&mut body, index as i64, record);
    }
    let count = records.len() as i32;
    let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.put_i64(spec.base_offset);
    out.put_i32((BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + body.len()) as i32);
    out.put_i32(spec.partition_leader_epoch);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(if spec.transactional { 0x10 } else { 0 });
    out.put_i32(count - 1);
    out.put_i64(spec.base_timestamp);
    out.put_i64(spec.base_timestamp + i64::from(count - 1));
    out.put_i64(spec.producer_id);
    out.put_i16(spec.producer_epoch);
    out.put_i32(spec.base_sequence);
    out.put_i32(count);
    out.extend_from_slice(&body);
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn encode_record(out: &mut BytesMut, index: i64, record: &TestRecord) {
    let mut body = BytesMut::new();
    body.put_i8(0);
    put_varlong(&mut body, index);
    put_varlong(&mut body, index);
    put_optional(&mut body, record.key.as_deref());
    put_optional(&mut body, record.value.as_deref());
    put_varlong(&mut body, 0);
    put_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

fn put_optional(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            put_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
        None => put_varlong(out, -1),
    }
}

/// Writes a zig-zag varint.
fn put_varlong(out: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.put_u8((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.put_u8(zigzag as u8);
}

/// A [`FileBackend`] that remembers how much of
/// each file was made durable and can tear writes and simulate crashes.
///
/// A file first seen by the backend counts as durable up to its length at
/// that moment; `sync_data` makes its current length durable; a truncation
/// lowers the durable length. Syncs can be held (a disk that takes its
/// time: [`FaultInjector::hold_syncs`]) or made to fail.
#[derive(Debug, Default)]
pub struct FaultInjector {
    state: Mutex<FaultState>,
    /// Signalled when held syncs are released.
    released: Condvar,
}

#[derive(Debug, Clone, Copy)]
struct TrackedFile {
    inode: u64,
    synced_bytes: u64,
}

#[derive(Debug, Default)]
struct FaultState {
    files: HashMap<PathBuf, TrackedFile>,
    tear_next_write_at: Option<usize>,
    fail_writes: bool,
    fail_syncs: bool,
    hold_syncs: bool,
    held_syncs: usize,
}

impl FaultState {
    fn track(&mut self, path: &Path, file: &File) -> io::Result<&mut TrackedFile> {
        let metadata = file.metadata()?;
        let tracked = self.files.entry(path.to_path_buf()).or_insert(TrackedFile {
            inode: metadata.ino(),
            synced_bytes: metadata.len(),
        });
        if tracked.inode != metadata.ino() {
            *tracked = TrackedFile {
                inode: metadata.ino(),
                synced_bytes: metadata.len(),
            };
        }
        Ok(tracked)
    }
}

impl FaultInjector {
    /// A backend with no fault armed.
    pub fn new() -> Self {
        FaultInjector::default()
    }

    fn state(&self) -> MutexGuard<'_, FaultState> {
        // Test bookkeeping of plain values; a panicking test thread cannot
        // leave it half-changed in a way another test relies on.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes every `sync_data` wait (until `hold_syncs(false)`) before it
    /// syncs: a disk whose fsync takes as long as the test wants.
    pub fn hold_syncs(&self, hold: bool) {
        self.state().hold_syncs = hold;
        self.released.notify_all();
    }

    /// How many `sync_data` calls are waiting in [`FaultInjector::hold_syncs`].
    pub fn held_syncs(&self) -> usize {
        self.state().held_syncs
    }

    /// Makes every `sync_data` fail (or succeed again).
    pub fn fail_syncs(&self, fail: bool) {
        self.state().fail_syncs = fail;
    }

    /// The next write stores only its first `keep_bytes` bytes and fails.
    pub fn tear_next_write(&self, keep_bytes: usize) {
        self.state().tear_next_write_at = Some(keep_bytes);
    }

    /// Makes every write fail (or succeed again).
    pub fn fail_writes(&self, fail: bool) {
        self.state().fail_writes = fail;
    }

    /// Simulates a power loss: every file written through the backend is
    /// cut back to its durable length; a file that had unflushed bytes also
    /// gets `garbage_bytes` of zeros appended, as a file system may leave
    /// when a size update outran the data.
    pub fn crash(&self, garbage_bytes: u64) -> io::Result<()> {
        let mut state = self.state();
        for (path, tracked) in state.files.drain() {
            let file = match OpenOptions::new().write(true).open(&path) {
                Ok(file) => file,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            let metadata = file.metadata()?;
            if metadata.ino() != tracked.inode || metadata.len() <= tracked.synced_bytes {
                continue;
            }
            file.set_len(tracked.synced_bytes)?;
            file.set_len(tracked.synced_bytes + garbage_bytes)?;
        }
        Ok(())
    }
}

impl FileBackend for FaultInjector {
    fn write_all_at(
        &self,
        path: &Path,
        file: &File,
        bytes: &[u8],
        position: u64,
    ) -> io::Result<()> {
        let mut state = self.state();
        state.track(path, file)?;
        if state.fail_writes {
            return Err(io::Error::other("injected write failure"));
        }
        if let Some(keep) = state.tear_next_write_at.take() {
            file.write_all_at(&bytes[..keep.min(bytes.len())], position)?;
            return Err(io::Error::other("injected torn write"));
        }
        file.write_all_at(bytes, position)
    }

    fn sync_data(&self, path: &Path, file: &File) -> io::Result<()> {
        {
            let mut state = self.state();
            state.held_syncs += 1;
            while state.hold_syncs {
                state = self
                    .released
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            state.held_syncs -= 1;
            if state.fail_syncs {
                return Err(io::Error::other("injected sync failure"));
            }
        }
        file.sync_data()?;
        let length = file.metadata()?.len();
        self.state().track(path, file)?.synced_bytes = length;
        Ok(())
    }

    fn set_len(&self, path: &Path, file: &File, length: u64) -> io::Result<()> {
        let mut state = self.state();
        let tracked = state.track(path, file)?;
        tracked.synced_bytes = tracked.synced_bytes.min(length);
        file.set_len(length)
    }
}
