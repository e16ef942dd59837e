//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use strom_clock::SeededRandom;
use strom_storage::testing::{simple_batch, BatchSpec};
use strom_storage::{Log, LogConfig, LogOpenOptions};

/// Small segments and indexes so tests roll often.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        segment_index_bytes: 1024,
        index_interval_bytes: 256,
        retention_ms: None,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// The partition directory `topic-0` under `root`.
pub fn partition_dir(root: &Path) -> PathBuf {
    root.join("topic-0")
}

/// Opens the log with the given shutdown state and recovery point.
pub fn open(dir: &Path, config: &LogConfig, clean: bool, recovery_point: i64) -> Log {
    let (log, _) = Log::open(
        dir,
        config.clone(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point,
            had_clean_shutdown: clean,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .expect("open log");
    log
}

/// A batch of `records` records starting at `timestamp`.
pub fn batch(records: u32, timestamp: i64) -> Bytes {
    simple_batch(&BatchSpec {
        records,
        base_timestamp: timestamp,
        value_bytes: 40,
        ..BatchSpec::default()
    })
}

/// Reads every batch from `from` to the log end; returns (base offset, next offset) pairs.
pub fn read_all(log: &Log, from: i64) -> Vec<(i64, i64)> {
    let mut batches = Vec::new();
    let mut offset = from;
    while offset < log.log_end_offset() {
        let info = log
            .read(offset, 1 << 20, log.log_end_offset(), true)
            .expect("read");
        let Some(slice) = info.records else { break };
        let bytes = slice.to_bytes().expect("bytes");
        let mut position = 0;
        while position < bytes.len() {
            let header = strom_storage::batch::validate_batch_at(&bytes, position)
                .expect("reads return valid batches");
            batches.push((header.base_offset, header.next_offset()));
            position += header.size_in_bytes();
        }
        offset = slice.next_offset();
    }
    batches
}
