//! Load figures that do not fit criterion: recovery time per GiB of
//! unflushed log, and memory and open files per idle partition.
//!
//! ```text
//! cargo run --release -p strom-storage --example storage_load -- recovery 1024
//! cargo run --release -p strom-storage --example storage_load -- partitions 10000
//! cargo run --release -p strom-storage --example storage_load -- append 256
//! cargo run --release -p strom-storage --example storage_load -- append 256 1024
//! cargo run --release -p strom-storage --example storage_load -- append-null 2000000
//! cargo run --release -p strom-storage --example storage_load -- crc
//! ```
//!
//! `append-null` times `Log::append_as_leader` of 1 KiB batches over a file
//! backend that discards writes: the user-space cost of an append alone.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use strom_clock::SeededRandom;
use strom_storage::testing::{simple_batch, BatchSpec};
use strom_storage::{Log, LogConfig, LogManager, LogManagerConfig, LogOpenOptions, TopicPartition};

fn options(clean: bool) -> LogOpenOptions {
    LogOpenOptions {
        log_start_offset: 0,
        recovery_point: 0,
        had_clean_shutdown: clean,
        now_ms: 0,
        random: Arc::new(SeededRandom::new(0)),
    }
}

/// Resident memory of this process in KiB (from /proc/self/status).
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |entries| entries.count())
}

fn recovery(root: &Path, mebibytes: u64) {
    let dir = root.join("recovery-0");
    let config = LogConfig {
        retention_ms: None,
        ..LogConfig::default()
    };
    let (mut log, _) = Log::open(&dir, config.clone(), options(true)).expect("open");
    let batch = simple_batch(&BatchSpec {
        records: 16,
        value_bytes: 1000,
        ..BatchSpec::default()
    });
    let target = mebibytes * 1024 * 1024;
    while log.size_bytes() < target {
        log.append_as_leader(batch.clone(), 0, 0).expect("append");
    }
    let bytes = log.size_bytes();
    let segments = log.segment_count();
    drop(log);
    let start = Instant::now();
    let (log, report) = Log::open(&dir, config, options(false)).expect("recover");
    let elapsed = start.elapsed();
    assert_eq!(report.bytes_truncated, 0);
    let gib = bytes as f64 / (1u64 << 30) as f64;
    println!(
        "recovery: {bytes} bytes in {segments} segments re-validated in {:.3} s = {:.3} s per GiB (page cache warm), log end {}",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() / gib,
        log.log_end_offset()
    );
}

fn partitions(root: &Path, count: i32) {
    let dirs = vec![root.join("data")];
    let config = LogManagerConfig::new(dirs.clone(), LogConfig::default());
    let resident_before = resident_kib();
    let files_before = open_files();
    let start = Instant::now();
    let manager = LogManager::open(config.clone(), BTreeMap::new(), 0).expect("open");
    for partition in 0..count {
        manager
            .get_or_create(&TopicPartition::new("idle", partition), 0)
            .expect("create");
    }
    let created = start.elapsed();
    let resident = resident_kib().saturating_sub(resident_before);
    let files = open_files().saturating_sub(files_before);
    println!(
        "create {count} partitions: {:.2} s, resident +{resident} KiB ({:.1} KiB per partition), open files +{files} ({:.2} per partition)",
        created.as_secs_f64(),
        resident as f64 / f64::from(count),
        files as f64 / f64::from(count)
    );
    let start = Instant::now();
    manager.shutdown(0).expect("shutdown");
    println!(
        "clean shutdown of {count} partitions: {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let resident_before = resident_kib();
    let start = Instant::now();
    let manager = LogManager::open(config, BTreeMap::new(), 0).expect("reopen");
    let loaded = start.elapsed();
    let resident = resident_kib().saturating_sub(resident_before);
    println!(
        "reopen {} partitions after clean shutdown: {:.2} s, resident +{resident} KiB ({:.1} KiB per partition)",
        manager.partitions().len(),
        loaded.as_secs_f64(),
        resident as f64 / f64::from(count)
    );
}

/// Appends and plain writes of the same batches, interleaved so that load
/// from other processes hits both alike.
fn append_versus_write(root: &Path, batch_bytes: usize, total_mebibytes: u64) {
    use std::io::Write;
    let config = LogConfig {
        max_message_bytes: 8 * 1024 * 1024,
        retention_ms: None,
        ..LogConfig::default()
    };
    let (mut log, _) = Log::open(&root.join("append-0"), config, options(true)).expect("open");
    let mut file = std::fs::File::create(root.join("plain.bin")).expect("create");
    let batch = simple_batch(&BatchSpec {
        records: (batch_bytes / 1024).max(1) as u32,
        value_bytes: 1024 - 16,
        ..BatchSpec::default()
    });
    let rounds = (total_mebibytes * 1024 * 1024 / batch.len() as u64).max(1);
    let (mut append_time, mut write_time) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    // Per chunk of 1,000 rounds: plain-write time over append time.
    let mut chunk_ratios = Vec::new();
    let (mut chunk_append, mut chunk_write) =
        (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for round in 1..=rounds {
        let input = bytes::Bytes::from(batch.to_vec());
        let start = Instant::now();
        log.append_as_leader(input, 0, 0).expect("append");
        let append_elapsed = start.elapsed();
        let start = Instant::now();
        file.write_all(&batch).expect("write");
        let write_elapsed = start.elapsed();
        append_time += append_elapsed;
        write_time += write_elapsed;
        chunk_append += append_elapsed;
        chunk_write += write_elapsed;
        if round % 1000 == 0 {
            chunk_ratios.push(chunk_write.as_secs_f64() / chunk_append.as_secs_f64());
            (chunk_append, chunk_write) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        }
    }
    chunk_ratios.sort_by(f64::total_cmp);
    let mebibytes = (rounds * batch.len() as u64) as f64 / (1024.0 * 1024.0);
    println!(
        "batch {} B x {rounds}: append {:.0} MiB/s, plain write {:.0} MiB/s, ratio {:.0}%",
        batch.len(),
        mebibytes / append_time.as_secs_f64(),
        mebibytes / write_time.as_secs_f64(),
        100.0 * write_time.as_secs_f64() / append_time.as_secs_f64()
    );
    if let Some(median) = chunk_ratios.get(chunk_ratios.len() / 2) {
        println!(
            "  median ratio over {} chunks of 1000 rounds: {:.0}%",
            chunk_ratios.len(),
            100.0 * median
        );
    }
}

/// A file backend that writes nothing: isolates the append's own work.
#[derive(Debug)]
struct NullBackend;

impl strom_storage::backend::FileBackend for NullBackend {
    fn write_all_at(
        &self,
        _path: &Path,
        _file: &std::fs::File,
        _bytes: &[u8],
        _position: u64,
    ) -> std::io::Result<()> {
        Ok(())
    }

    fn sync_data(&self, _path: &Path, _file: &std::fs::File) -> std::io::Result<()> {
        Ok(())
    }

    fn set_len(&self, _path: &Path, _file: &std::fs::File, _length: u64) -> std::io::Result<()> {
        Ok(())
    }
}

/// Nanoseconds per 1 KiB append with writes discarded. The appends are timed
/// in chunks of 1,000; the lowest decile and the median chunk are reported,
/// so that chunks slowed by other processes on a shared machine fall out.
fn append_null(root: &Path, appends: u64) {
    const CHUNK: u64 = 1000;
    let config = LogConfig {
        retention_ms: None,
        ..LogConfig::default()
    };
    let batch = simple_batch(&BatchSpec {
        records: 1,
        value_bytes: 1024 - 16,
        ..BatchSpec::default()
    });
    let (mut log, _) = Log::open_with_backend(
        &root.join("null-0"),
        config,
        options(true),
        std::sync::Arc::new(NullBackend),
    )
    .expect("open");
    let mut chunks = Vec::new();
    for _ in 0..appends.div_ceil(CHUNK) {
        let mut elapsed = std::time::Duration::ZERO;
        for _ in 0..CHUNK {
            let input = bytes::Bytes::from(batch.to_vec());
            let start = Instant::now();
            log.append_as_leader(input, 0, 0).expect("append");
            elapsed += start.elapsed();
        }
        chunks.push(elapsed.as_nanos() as f64 / CHUNK as f64);
    }
    chunks.sort_by(f64::total_cmp);
    println!(
        "null backend, batch {} B x {}: {:.0} ns per append (lowest-decile chunk), median {:.0} ns",
        batch.len(),
        chunks.len() as u64 * CHUNK,
        chunks[chunks.len() / 10],
        chunks[chunks.len() / 2]
    );
}

/// Nanoseconds per CRC-32C of batch-like lengths: this crate's
/// `strom_protocol::crc` against the `crc32c` crate, best of five runs each.
fn crc_speed() {
    let bytes: Vec<u8> = (0..1024 * 1024 + 64)
        .map(|index| (index * 31) as u8)
        .collect();
    for length in [1057usize, 16 * 1024 - 21, 64 * 1024, 1024 * 1024] {
        let repeats = (64 * 1024 * 1024 / length).max(1);
        let time = |crc: &dyn Fn(&[u8]) -> u32| {
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    let mut sum = 0u32;
                    for repeat in 0..repeats {
                        let offset = repeat % 64;
                        sum ^= crc(std::hint::black_box(&bytes[offset..offset + length]));
                    }
                    std::hint::black_box(sum);
                    start.elapsed().as_nanos() as f64 / repeats as f64
                })
                .fold(f64::INFINITY, f64::min)
        };
        let ours = time(&strom_protocol::crc::crc32c);
        let crate_time = time(&crc32c::crc32c);
        println!(
            "crc32c of {length} B: strom_protocol::crc {ours:.0} ns ({:.1} GB/s), crc32c crate {crate_time:.0} ns ({:.1} GB/s)",
            length as f64 / ours,
            length as f64 / crate_time
        );
    }
}

/// The number after the mode, or `default`.
fn first_number<T: std::str::FromStr>(arguments: &[String], default: T) -> T {
    arguments
        .get(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let root =
        tempfile::tempdir_in(std::env::var("STROM_LOAD_DIR").unwrap_or_else(|_| ".".to_owned()))
            .expect("tempdir");
    match arguments.first().map(String::as_str) {
        Some("recovery") => {
            let mebibytes = first_number(&arguments, 1024);
            recovery(root.path(), mebibytes);
        }
        Some("append") => {
            let total = first_number(&arguments, 256);
            // Optional batch sizes after the total, e.g. `append 256 1024`.
            let sizes: Vec<usize> = arguments
                .iter()
                .skip(2)
                .filter_map(|value| value.parse().ok())
                .collect();
            let sizes = if sizes.is_empty() {
                vec![1024, 16 * 1024, 1024 * 1024]
            } else {
                sizes
            };
            for batch_bytes in sizes {
                append_versus_write(root.path(), batch_bytes, total);
            }
        }
        Some("append-null") => {
            let appends = first_number(&arguments, 2_000_000);
            append_null(root.path(), appends);
        }
        Some("crc") => crc_speed(),
        Some("partitions") => {
            let count = first_number(&arguments, 10_000);
            partitions(root.path(), count);
        }
        _ => eprintln!("usage: storage_load (recovery <MiB> | partitions <count> | append <MiB> [<batch bytes>...] | append-null <count> | crc)"),
    }
}
