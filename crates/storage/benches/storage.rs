//! Criterion benchmarks: append against a plain sequential `write` of the
//! same bytes to a file on the same disk, whole-segment scans and random
//! offset lookups from the page cache.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use strom_clock::SeededRandom;
use strom_storage::testing::{simple_batch, BatchSpec};
use strom_storage::{Log, LogConfig, LogOpenOptions};

/// Bytes written to one log before a fresh one is started (outside the timing).
const BYTES_PER_LOG: u64 = 512 * 1024 * 1024;

fn config() -> LogConfig {
    LogConfig {
        max_message_bytes: 8 * 1024 * 1024,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn open(dir: &Path) -> Log {
    Log::open(
        dir,
        config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .expect("open")
    .0
}

/// A batch of about `batch_bytes` bytes with 1 KiB records.
fn batch_of(batch_bytes: usize) -> Bytes {
    let records = (batch_bytes / 1024).max(1) as u32;
    simple_batch(&BatchSpec {
        records,
        value_bytes: 1024 - 16,
        ..BatchSpec::default()
    })
}

fn append_versus_write(criterion: &mut Criterion) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut group = criterion.benchmark_group("append");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    for batch_bytes in [1024usize, 16 * 1024, 1024 * 1024] {
        let batch = batch_of(batch_bytes);
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("log_append", batch_bytes),
            &batch,
            |bench, batch| {
                bench.iter_custom(|iterations| {
                    let mut elapsed = Duration::ZERO;
                    let mut written = 0u64;
                    let dir = root.path().join("bench-0");
                    let mut log = open(&dir);
                    for _ in 0..iterations {
                        if written >= BYTES_PER_LOG {
                            drop(log);
                            std::fs::remove_dir_all(&dir).expect("cleanup");
                            log = open(&dir);
                            written = 0;
                        }
                        // A fresh, unshared buffer per append, as a request frame is.
                        let input = Bytes::from(batch.to_vec());
                        let start = Instant::now();
                        log.append_as_leader(input, 0, 0).expect("append");
                        elapsed += start.elapsed();
                        written += batch.len() as u64;
                    }
                    drop(log);
                    std::fs::remove_dir_all(&dir).expect("cleanup");
                    elapsed
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("plain_write", batch_bytes),
            &batch,
            |bench, batch| {
                bench.iter_custom(|iterations| {
                    let mut elapsed = Duration::ZERO;
                    let mut written = 0u64;
                    let path = root.path().join("plain.bin");
                    let mut file = File::create(&path).expect("create");
                    for _ in 0..iterations {
                        if written >= BYTES_PER_LOG {
                            drop(file);
                            std::fs::remove_file(&path).expect("cleanup");
                            file = File::create(&path).expect("create");
                            written = 0;
                        }
                        let start = Instant::now();
                        file.write_all(batch).expect("write");
                        elapsed += start.elapsed();
                        written += batch.len() as u64;
                    }
                    drop(file);
                    std::fs::remove_file(&path).expect("cleanup");
                    elapsed
                });
            },
        );
    }
    group.finish();
}

fn reads(criterion: &mut Criterion) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let dir = root.path().join("read-0");
    let mut log = open(&dir);
    let batch = batch_of(16 * 1024);
    let batches = 8192u64;
    for _ in 0..batches {
        log.append_as_leader(batch.clone(), 0, 0).expect("append");
    }
    let end = log.log_end_offset();
    let mut group = criterion.benchmark_group("read");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(log.size_bytes()));
    group.bench_function("segment_scan_1MiB_reads", |bench| {
        bench.iter(|| {
            let mut offset = 0;
            let mut total = 0usize;
            while offset < end {
                let slice = log
                    .read(offset, 1 << 20, end, true)
                    .expect("read")
                    .records
                    .expect("records");
                total += slice.to_bytes().expect("bytes").len();
                offset = slice.next_offset();
            }
            total
        });
    });
    group.throughput(Throughput::Elements(1));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    group.bench_function("random_offset_lookup", |bench| {
        bench.iter(|| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let offset = (seed % end as u64) as i64;
            let slice = log
                .read(offset, 1, end, true)
                .expect("read")
                .records
                .expect("records");
            slice.to_bytes().expect("bytes").len()
        });
    });
    group.finish();
}

/// Criterion's generated group function lives in a private module.
mod harness {
    use super::{append_versus_write, reads};
    use criterion::criterion_group;

    criterion_group!(benches, append_versus_write, reads);
}

criterion_main!(harness::benches);
