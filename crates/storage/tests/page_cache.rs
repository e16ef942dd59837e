//! Write-behind and drop-behind (`strom_storage::page_cache`): what stays in
//! the kernel's page cache after appends, and that nothing is lost by it.
//!
//! Residency is read with `mincore` on a mapping of the segment file. The
//! files live under Cargo's target directory, not `/tmp`, which may be a
//! `tmpfs` (whose pages cannot be dropped).

use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::{open, partition_dir, read_all};
use strom_storage::page_cache::{PageCacheSettings, WriteBehind};
use strom_storage::testing::{simple_batch, BatchSpec};
use strom_storage::{Log, LogConfig, LogManager, LogManagerConfig, TopicPartition};

const KIB: u64 = 1024;

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).expect("a page size")
}

/// Whether each page of the file at `path` is in the page cache.
fn resident_pages(path: &Path) -> Vec<bool> {
    let file = std::fs::File::open(path).expect("open segment");
    // SAFETY: the mapping is only passed to mincore, never read; the file
    // is not truncated while it exists.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map segment");
    let pages = (map.len() as u64).div_ceil(page_size()) as usize;
    let mut residency = vec![0u8; pages];
    // SAFETY: `map` is a live page-aligned mapping of `map.len()` bytes and
    // `residency` has one byte per page of it.
    let result = unsafe {
        libc::mincore(
            map.as_ptr() as *mut libc::c_void,
            map.len(),
            residency.as_mut_ptr(),
        )
    };
    assert_eq!(result, 0, "mincore: {}", std::io::Error::last_os_error());
    residency.iter().map(|byte| byte & 1 == 1).collect()
}

/// Resident pages among those wholly inside `start..end` (bytes).
fn resident_within(pages: &[bool], start: u64, end: u64) -> (usize, usize) {
    let page = page_size();
    let first = start.div_ceil(page) as usize;
    let last = (end / page) as usize;
    let range = pages.get(first..last.min(pages.len())).unwrap_or(&[]);
    (
        range.iter().filter(|resident| **resident).count(),
        range.len(),
    )
}

fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch directory")
}

/// About 16 KiB: 160 records of 100 bytes.
fn batch() -> bytes::Bytes {
    simple_batch(&BatchSpec {
        records: 160,
        value_bytes: 100,
        ..BatchSpec::default()
    })
}

fn append_until(log: &mut Log, bytes: u64) {
    let records = batch();
    while log.size_bytes() < bytes {
        log.append_as_leader(records.clone(), 0, 0).expect("append");
    }
}

/// Every offset from 0 to the log end, in order, in valid batches.
fn assert_whole(log: &Log) {
    let batches = read_all(log, 0);
    let mut expected = 0;
    for (base, next) in &batches {
        assert_eq!(*base, expected, "a gap or overlap before offset {base}");
        expected = *next;
    }
    assert_eq!(expected, log.log_end_offset());
}

fn first_segment_path(log: &Log) -> std::path::PathBuf {
    let first = log.segments().next().expect("a segment");
    first.log_path().to_path_buf()
}

fn one_segment_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 20,
        retention_ms: None,
        ..LogConfig::default()
    }
}

#[test]
fn drop_behind_keeps_only_the_retained_tail_cached_and_loses_nothing() {
    let root = scratch_dir();
    let mut log = open(&partition_dir(root.path()), &one_segment_config(), true, 0);
    let worker = WriteBehind::start().expect("page cache thread");
    let chunk = 64 * KIB;
    let retain = 512 * KIB;
    log.set_page_cache(
        Arc::clone(&worker),
        PageCacheSettings {
            writeback_bytes: chunk,
            retain_bytes: Some(retain),
        },
    );
    append_until(&mut log, 4096 * KIB);
    worker.wait_idle();

    let size = log.size_bytes();
    let path = first_segment_path(&log);
    let pages = resident_pages(&path);
    // Bytes more than `retain` plus one open range behind the end were
    // dropped; a range's first and last page may be shared with its
    // neighbours and stay (the kernel drops whole pages only).
    let dropped_end = size - retain - chunk;
    let (resident, total) = resident_within(&pages, 0, dropped_end);
    let ranges = dropped_end.div_ceil(chunk) as usize;
    assert!(total > 800, "{total} pages checked");
    assert!(
        resident <= ranges + 1,
        "{resident} of {total} dropped pages still cached ({ranges} ranges)"
    );
    // The retained tail is still cached.
    let (resident, total) = resident_within(&pages, size - retain, size);
    assert_eq!(resident, total, "the retained tail was dropped");

    let stats = worker.stats();
    assert!(stats.dropped_bytes >= dropped_end, "{stats:?}");
    assert!(stats.writeback_bytes >= size - chunk, "{stats:?}");
    assert_eq!((stats.failed_requests, stats.skipped_requests), (0, 0));
    // Reads of dropped bytes come back from the disk, whole.
    assert_whole(&log);
}

#[test]
fn without_hints_the_kernel_keeps_what_was_appended() {
    // The control for the test above: the same appends, no hints.
    let root = scratch_dir();
    let mut log = open(&partition_dir(root.path()), &one_segment_config(), true, 0);
    append_until(&mut log, 4096 * KIB);
    let path = first_segment_path(&log);
    let pages = resident_pages(&path);
    let (resident, total) = resident_within(&pages, 0, log.size_bytes());
    assert!(
        resident * 10 >= total * 9,
        "only {resident} of {total} pages cached"
    );
}

#[test]
fn ranges_follow_rolls_and_truncations() {
    let root = scratch_dir();
    let config = LogConfig {
        segment_bytes: 256 * KIB as u32,
        retention_ms: None,
        ..LogConfig::default()
    };
    let mut log = open(&partition_dir(root.path()), &config, true, 0);
    let worker = WriteBehind::start().expect("page cache thread");
    let chunk = 64 * KIB;
    log.set_page_cache(
        Arc::clone(&worker),
        PageCacheSettings {
            writeback_bytes: chunk,
            retain_bytes: Some(256 * KIB),
        },
    );
    append_until(&mut log, 1024 * KIB);
    // Back into the middle of the log, then past where it was.
    let middle = log.log_end_offset() / 2;
    assert!(log.truncate_to(middle, 0).expect("truncate"));
    append_until(&mut log, 2048 * KIB);
    worker.wait_idle();

    let segments: Vec<_> = log
        .segments()
        .map(|segment| {
            let next = segment.next_offset();
            (segment.log_path().to_path_buf(), segment.size_bytes(), next)
        })
        .collect();
    assert!(segments.len() >= 8, "{} segments", segments.len());
    // Every segment but the last two lies wholly more than the retained
    // 256 KiB (plus one open range) behind the end: its pages are gone but
    // for the edges of its ranges. The segment that was truncated is left
    // out: the truncation read its batch headers back (and the kernel
    // cached what it read, as it does for any read).
    let mut checked = 0;
    let mut base = 0;
    for (path, size, next) in &segments[..segments.len() - 2] {
        let truncated = (base..*next).contains(&middle);
        base = *next;
        if truncated {
            continue;
        }
        let pages = resident_pages(path);
        let (resident, total) = resident_within(&pages, 0, *size);
        let ranges = size.div_ceil(chunk) as usize;
        assert!(
            resident <= ranges + 1,
            "{}: {resident} of {total} pages cached",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 5, "{checked} segments checked");
    // The active segment is within the retained bytes: all cached.
    let (last_path, last_size, _) = segments.last().expect("an active segment");
    let (resident, total) = resident_within(&resident_pages(last_path), 0, *last_size);
    assert_eq!(resident, total);
    assert_eq!(worker.stats().failed_requests, 0);
    assert_whole(&log);
}

#[test]
fn the_log_manager_gives_its_logs_the_hints_it_is_configured_with() {
    let root = scratch_dir();
    let defaults = LogConfig {
        retention_ms: None,
        ..LogConfig::default()
    };
    let mut config = LogManagerConfig::new(vec![root.path().to_path_buf()], defaults.clone());
    assert_eq!(config.page_cache, PageCacheSettings::KERNEL);
    config.page_cache = PageCacheSettings {
        writeback_bytes: 64 * KIB,
        retain_bytes: Some(0),
    };
    let manager = LogManager::open(config, Default::default(), 0).expect("open manager");
    let partition = TopicPartition::new("hinted", 0);
    let log = manager.get_or_create(&partition, 0).expect("create log");
    append_until(&mut log.write().expect("log lock"), 1024 * KIB);
    manager.wait_for_page_cache();
    let stats = manager.page_cache_stats().expect("hints are on");
    assert!(stats.dropped_bytes >= 1024 * KIB - 64 * KIB, "{stats:?}");
    drop(log);
    manager.shutdown(0).expect("shutdown");

    // Reopened without hints: no thread, and the data is all there.
    let mut config = LogManagerConfig::new(vec![root.path().to_path_buf()], defaults);
    config.page_cache = PageCacheSettings::KERNEL;
    let manager = LogManager::open(config, Default::default(), 0).expect("reopen manager");
    assert_eq!(manager.page_cache_stats(), None);
    let log = manager.get(&partition).expect("the log");
    let log = log.read().expect("log lock");
    assert!(log.size_bytes() >= 1024 * KIB);
    assert_whole(&log);
}
