//! Model-based property test: random sequences of append, read, roll,
//! truncate, retention, flush, the background flushes rolls leave behind,
//! and restart (clean and unclean, with background flushes still queued)
//! against a simple in-memory model of the batches the log must hold.

use crate::common;

use std::path::Path;

use bytes::Bytes;
use std::sync::Arc;

use common::{partition_dir, small_config};
use proptest::prelude::*;
use strom_clock::SeededRandom;
use strom_protocol::records::BatchHeaderMut;
use strom_storage::backend::FileBackend;
use strom_storage::batch::validate_batch_at;
use strom_storage::flusher::Flusher;
use strom_storage::testing::FaultInjector;
use strom_storage::testing::{simple_batch, BatchSpec};
use strom_storage::LogOpenOptions;
use strom_storage::{Log, LogConfig};

#[derive(Debug, Clone)]
enum Operation {
    Append {
        records: u32,
        value_bytes: usize,
    },
    Read {
        offset_seed: u32,
        max_bytes: u64,
    },
    Roll,
    Truncate {
        offset_seed: u32,
    },
    Retention {
        retention_bytes: u64,
    },
    Flush,
    /// Runs the flushes queued by rolls (the background flusher's work).
    BackgroundFlush,
    Restart {
        clean: bool,
    },
    Crash {
        garbage_bytes: u64,
    },
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        6 => (1u32..6, 0usize..300).prop_map(|(records, value_bytes)| Operation::Append { records, value_bytes }),
        3 => (any::<u32>(), 1u64..3000).prop_map(|(offset_seed, max_bytes)| Operation::Read { offset_seed, max_bytes }),
        1 => Just(Operation::Roll),
        1 => any::<u32>().prop_map(|offset_seed| Operation::Truncate { offset_seed }),
        1 => (2000u64..20_000).prop_map(|retention_bytes| Operation::Retention { retention_bytes }),
        1 => Just(Operation::Flush),
        2 => Just(Operation::BackgroundFlush),
        1 => any::<bool>().prop_map(|clean| Operation::Restart { clean }),
        1 => (0u64..200).prop_map(|garbage_bytes| Operation::Crash { garbage_bytes }),
    ]
}

/// The model: every batch the log holds, as stored (offsets assigned).
#[derive(Debug, Default)]
struct Model {
    batches: Vec<Bytes>,
}

impl Model {
    fn log_end(&self, start: i64) -> i64 {
        self.batches
            .last()
            .map_or(start, |bytes| next_offset(bytes))
    }
}

fn base_offset(bytes: &[u8]) -> i64 {
    validate_batch_at(bytes, 0)
        .expect("model batch")
        .base_offset
}

fn next_offset(bytes: &[u8]) -> i64 {
    validate_batch_at(bytes, 0)
        .expect("model batch")
        .next_offset()
}

/// The background flusher of the run: manual, so that the test decides
/// when (and whether, before a crash) rolls' flushes run.
struct Disk {
    injector: Arc<FaultInjector>,
    flusher: Arc<Flusher>,
}

fn open_log(dir: &Path, config: &LogConfig, disk: &Disk, options: LogOpenOptions) -> Log {
    let mut log = Log::open_with_backend(
        dir,
        config.clone(),
        options,
        Arc::clone(&disk.injector) as Arc<dyn FileBackend>,
    )
    .expect("open")
    .0;
    log.set_flusher(Arc::clone(&disk.flusher));
    log
}

fn reopen(dir: &Path, config: &LogConfig, disk: &Disk, log: Log, clean: bool) -> Log {
    let recovery_point = log.recovery_point();
    let start = log.log_start_offset();
    if clean {
        log.close(0).expect("close");
    } else {
        drop(log);
    }
    // Flushes still queued for the old log never run (the process ended).
    disk.flusher.discard_queued();
    open_log(
        dir,
        config,
        disk,
        LogOpenOptions {
            log_start_offset: start,
            recovery_point,
            had_clean_shutdown: clean,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
}

fn check_read(log: &Log, model: &Model, offset: i64, max_bytes: u64) {
    let info = log
        .read(offset, max_bytes, log.log_end_offset(), true)
        .expect("in range");
    let Some(slice) = info.records else {
        assert_eq!(
            offset,
            log.log_end_offset(),
            "only an empty read at the end"
        );
        return;
    };
    let bytes = slice.to_bytes().expect("bytes");
    let first = model
        .batches
        .iter()
        .position(|batch| next_offset(batch) > offset)
        .expect("model has the batch");
    let mut position = 0;
    let mut index = first;
    while position < bytes.len() {
        let header = validate_batch_at(&bytes, position).expect("valid batch");
        let expected = &model.batches[index];
        assert_eq!(
            &bytes[position..position + header.size_in_bytes()],
            &expected[..]
        );
        position += header.size_in_bytes();
        index += 1;
    }
    assert!(index > first, "at least one batch");
    assert!(bytes.len() as u64 <= max_bytes || index == first + 1);
}

fn run(operations: Vec<Operation>) {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = small_config();
    config.segment_bytes = 2048;
    let disk = Disk {
        injector: Arc::new(FaultInjector::new()),
        flusher: Flusher::manual(),
    };
    let mut log = open_log(
        &dir,
        &config,
        &disk,
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    );
    let mut model = Model::default();
    for operation in operations {
        match operation {
            Operation::Append {
                records,
                value_bytes,
            } => {
                let input = simple_batch(&BatchSpec {
                    records,
                    value_bytes,
                    ..BatchSpec::default()
                });
                let info = log.append_as_leader(input.clone(), 1, 0).expect("append");
                assert_eq!(info.first_offset, model.log_end(log.log_start_offset()));
                let mut stored = input.to_vec();
                let mut header = BatchHeaderMut::new(&mut stored).expect("batch");
                header.set_base_offset(info.first_offset);
                header.set_partition_leader_epoch(1);
                model.batches.push(stored.into());
            }
            Operation::Read {
                offset_seed,
                max_bytes,
            } => {
                let start = log.log_start_offset();
                let span = (log.log_end_offset() - start + 1) as u64;
                let offset = start + (u64::from(offset_seed) % span) as i64;
                check_read(&log, &model, offset, max_bytes);
            }
            Operation::Roll => log.roll(0).expect("roll"),
            Operation::Truncate { offset_seed } => {
                if model.batches.is_empty() {
                    continue;
                }
                let index = offset_seed as usize % model.batches.len();
                let offset = base_offset(&model.batches[index]);
                if offset < log.log_start_offset() {
                    continue;
                }
                log.truncate_to(offset, 0).expect("truncate");
                model.batches.truncate(index);
            }
            Operation::Retention { retention_bytes } => {
                let mut updated = log.config().clone();
                updated.retention_bytes = Some(retention_bytes);
                log.set_config(updated);
                let before = log.log_start_offset();
                log.delete_old_segments(0).expect("retention");
                let start = log.log_start_offset();
                assert!(start >= before);
                model.batches.retain(|batch| next_offset(batch) > start);
                if let Some(first) = model.batches.first() {
                    assert_eq!(base_offset(first), start, "retention removes whole batches");
                }
                let mut restored = log.config().clone();
                restored.retention_bytes = None;
                log.set_config(restored);
            }
            Operation::Flush => log.flush(0).expect("flush"),
            Operation::BackgroundFlush => {
                let before = log.recovery_point();
                disk.flusher.run_queued();
                assert!(log.recovery_point() >= before);
                assert!(log.check_online().is_ok());
            }
            Operation::Restart { clean } => log = reopen(&dir, &config, &disk, log, clean),
            Operation::Crash { garbage_bytes } => {
                let recovery_point = log.recovery_point();
                let start = log.log_start_offset();
                drop(log);
                // Roll flushes not yet run are lost with the machine.
                disk.flusher.discard_queued();
                disk.injector.crash(garbage_bytes).expect("crash");
                log = open_log(
                    &dir,
                    &config,
                    &disk,
                    LogOpenOptions {
                        log_start_offset: start,
                        recovery_point,
                        had_clean_shutdown: false,
                        now_ms: 0,
                        random: Arc::new(SeededRandom::new(0)),
                    },
                );
                let end = log.log_end_offset();
                assert!(end >= recovery_point, "flushed records survive a crash");
                assert!(end <= model.log_end(start), "a crash never invents records");
                model.batches.retain(|batch| next_offset(batch) <= end);
            }
        }
        assert_eq!(log.log_end_offset(), model.log_end(log.log_start_offset()));
    }
    // Final full scan against the model.
    if let Some(first) = model.batches.first() {
        let mut offset = base_offset(first);
        let mut seen = 0;
        while offset < log.log_end_offset() {
            let slice = log
                .read(offset, 1 << 20, log.log_end_offset(), true)
                .expect("read")
                .records
                .expect("records");
            let bytes = slice.to_bytes().expect("bytes");
            let mut position = 0;
            while position < bytes.len() {
                let header = validate_batch_at(&bytes, position).expect("valid");
                assert_eq!(
                    &bytes[position..position + header.size_in_bytes()],
                    &model.batches[seen][..]
                );
                position += header.size_in_bytes();
                seen += 1;
            }
            offset = slice.next_offset();
        }
        assert_eq!(seen, model.batches.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_the_model(operations in proptest::collection::vec(operation(), 1..60)) {
        run(operations);
    }
}
