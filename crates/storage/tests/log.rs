//! Log behaviour: append, read, roll, truncation, retention, recovery.

use crate::common;

use common::{batch, open, partition_dir, read_all, small_config};
use strom_storage::config::MessageTimestampType;
use strom_storage::error::{AppendError, ReadError};
use strom_storage::read::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP};
use strom_storage::testing::{simple_batch, BatchSpec};

#[test]
fn append_assigns_offsets_and_reads_whole_batches() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    let first = log.append_as_leader(batch(3, 100), 0, 0).expect("append");
    assert_eq!((first.first_offset, first.last_offset), (0, 2));
    let second = log.append_as_leader(batch(2, 200), 0, 0).expect("append");
    assert_eq!((second.first_offset, second.last_offset), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    // Reading offset 1 returns the whole first batch.
    let info = log.read(1, 1 << 20, 5, true).expect("read");
    let slice = info.records.expect("records");
    assert_eq!(slice.first_offset(), 0);
    assert_eq!(slice.next_offset(), 5);
    // The high watermark bounds the read.
    let bounded = log.read(0, 1 << 20, 3, true).expect("read");
    assert_eq!(bounded.records.expect("records").next_offset(), 3);
    // max_bytes below one batch still returns one batch with min_one_batch.
    let tiny = log
        .read(0, 1, 5, true)
        .expect("read")
        .records
        .expect("one batch");
    assert_eq!(tiny.next_offset(), 3);
    assert!(log.read(0, 1, 5, false).expect("read").records.is_none());
    assert!(log
        .read(5, 100, 5, true)
        .expect("read at end")
        .records
        .is_none());
    assert!(matches!(
        log.read(6, 100, 5, true),
        Err(ReadError::OffsetOutOfRange {
            requested: 6,
            log_start: 0,
            log_end: 5
        })
    ));
}

#[test]
fn oversized_and_corrupt_batches_are_rejected() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = small_config();
    config.max_message_bytes = 200;
    let mut log = open(&dir, &config, true, 0);
    assert!(matches!(
        log.append_as_leader(batch(10, 0), 0, 0),
        Err(AppendError::RecordTooLarge { max: 200, .. })
    ));
    let mut corrupt = batch(1, 0).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    assert!(matches!(
        log.append_as_leader(corrupt.into(), 0, 0),
        Err(AppendError::Corrupt(_))
    ));
    assert!(matches!(
        log.append_as_leader(bytes::Bytes::new(), 0, 0),
        Err(AppendError::Empty)
    ));
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn rolls_on_size_and_reads_across_segments_after_reopen() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let mut log = open(&dir, &config, true, 0);
    for step in 0..100 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    assert!(log.segment_count() > 3, "segments: {}", log.segment_count());
    for segment in log.segments() {
        assert!(segment.size_bytes() <= u64::from(config.segment_bytes));
    }
    let before = read_all(&log, 0);
    assert_eq!(before.len(), 100);
    log.close(0).expect("close");
    // Sealed index files are trimmed to their entries.
    for entry in std::fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path
            .extension()
            .is_some_and(|extension| extension == "index")
        {
            assert_eq!(std::fs::metadata(&path).expect("meta").len() % 8, 0);
        }
    }
    let log = open(&dir, &config, true, 200);
    assert_eq!(log.log_end_offset(), 200);
    assert_eq!(read_all(&log, 0), before);
    assert_eq!(read_all(&log, 77).first().map(|batch| batch.0), Some(76));
}

#[test]
fn truncation_to_an_offset_and_full_truncation() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    for _ in 0..60 {
        log.append_as_leader(batch(2, 0), 0, 0).expect("append");
    }
    assert!(log.truncate_to(50, 0).expect("truncate"));
    assert_eq!(log.log_end_offset(), 50);
    assert_eq!(read_all(&log, 0).last().map(|batch| batch.1), Some(50));
    let next = log.append_as_leader(batch(1, 0), 0, 0).expect("append");
    assert_eq!(next.first_offset, 50);
    log.truncate_fully_and_start_at(500, 0)
        .expect("truncate fully");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
    assert_eq!(log.segment_count(), 1);
    let appended = log.append_as_leader(batch(1, 0), 0, 0).expect("append");
    assert_eq!(appended.first_offset, 500);
}

#[test]
fn retention_by_size_time_and_log_start_never_deletes_the_active_segment() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = small_config();
    config.retention_bytes = Some(8192);
    config.file_delete_delay_ms = 1000;
    let mut log = open(&dir, &config, true, 0);
    for step in 0..200 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    let deleted = log.delete_old_segments(0).expect("retention");
    assert!(deleted > 0);
    assert!(log.size_bytes() <= 8192 + u64::from(config.segment_bytes));
    let first_base = log.segments().next().map(|segment| segment.base_offset());
    assert_eq!(Some(log.log_start_offset()), first_base);
    let deleted_files = std::fs::read_dir(&dir)
        .expect("dir")
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|entry| entry.file_name().to_string_lossy().ends_with(".deleted"))
        })
        .count();
    assert_eq!(deleted_files, log.pending_delete_count());
    log.tick(500).expect("tick");
    assert!(log.pending_delete_count() > 0, "not yet due");
    log.tick(1000).expect("tick");
    assert_eq!(log.pending_delete_count(), 0);

    // Time: everything older than 10ms goes, except the active segment.
    let mut config = log.config().clone();
    config.retention_bytes = None;
    config.retention_ms = Some(10);
    log.set_config(config);
    log.delete_old_segments(1_000_000).expect("retention");
    assert_eq!(log.segment_count(), 1);
    assert!(log.read(log.log_start_offset(), 1 << 20, 400, true).is_ok());

    // Log start offset (DeleteRecords) beyond the high watermark is refused.
    assert!(log.increment_log_start_offset(399).is_err());
    log.update_high_watermark(400);
    assert!(log.increment_log_start_offset(399).expect("delete records"));
    assert!(matches!(
        log.read(398, 100, 400, true),
        Err(ReadError::OffsetOutOfRange { log_start: 399, .. })
    ));
}

#[test]
fn offsets_for_timestamps() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    for step in 0..100 {
        log.append_as_leader(batch(2, 1000 + step * 10), 0, 0)
            .expect("append");
    }
    let earliest = log
        .offset_for_timestamp(EARLIEST_TIMESTAMP)
        .expect("earliest");
    assert_eq!(earliest.offset, 0);
    assert_eq!(
        log.offset_for_timestamp(LATEST_TIMESTAMP)
            .expect("latest")
            .offset,
        200
    );
    let max = log.offset_for_timestamp(MAX_TIMESTAMP).expect("max");
    assert_eq!((max.timestamp, max.offset), (1991, 199));
    let found = log.offset_for_timestamp(1500).expect("by time");
    assert_eq!(found.offset, 100);
    let between = log.offset_for_timestamp(1505).expect("by time");
    assert_eq!(between.offset, 102);
    // Record granularity: the second record of the batch at offset 100.
    let inside = log.offset_for_timestamp(1501).expect("by time");
    assert_eq!((inside.timestamp, inside.offset), (1501, 101));
    assert!(log.offset_for_timestamp(5000).is_none());
}

#[test]
fn offsets_for_timestamps_find_the_record_inside_a_batch() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    // One batch of ten records stamped 1000, 1001, ... 1009.
    log.append_as_leader(batch(10, 1000), 0, 0).expect("append");
    let found = |log: &strom_storage::log::Log, timestamp| {
        log.offset_for_timestamp(timestamp)
            .map(|found| (found.timestamp, found.offset))
    };
    assert_eq!(found(&log, 0), Some((1000, 0)));
    assert_eq!(found(&log, 1003), Some((1003, 3)));
    assert_eq!(found(&log, 1009), Some((1009, 9)));
    assert_eq!(found(&log, 1010), None);
    // Records before the log start offset are never answered.
    log.update_high_watermark(10);
    assert!(log.increment_log_start_offset(6).expect("delete records"));
    assert_eq!(found(&log, 1002), Some((1006, 6)));
}

#[test]
fn log_append_time_overwrites_max_timestamp() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = small_config();
    config.message_timestamp_type = MessageTimestampType::LogAppendTime;
    let mut log = open(&dir, &config, true, 0);
    let info = log
        .append_as_leader(batch(3, 5), 7, 123_456)
        .expect("append");
    assert_eq!(info.log_append_time_ms, Some(123_456));
    let bytes = log
        .read(0, 1 << 20, 3, true)
        .expect("read")
        .records
        .expect("records");
    let bytes = bytes.to_bytes().expect("bytes");
    let header = strom_storage::batch::validate_batch_at(&bytes, 0).expect("valid after rewrite");
    assert_eq!(header.max_timestamp, 123_456);
    assert_eq!(header.partition_leader_epoch, 7);
    assert_eq!(log.epoch_cache().latest_epoch(), Some(7));
}

#[test]
fn idempotent_retries_get_their_original_offsets() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    let idempotent = |base_sequence: i32| {
        simple_batch(&BatchSpec {
            records: 2,
            producer_id: 9,
            producer_epoch: 0,
            base_sequence,
            ..BatchSpec::default()
        })
    };
    log.append_as_leader(batch(1, 0), 0, 0).expect("append");
    let first = log.append_as_leader(idempotent(0), 0, 0).expect("append");
    log.append_as_leader(idempotent(2), 0, 0).expect("append");
    let retry = log.append_as_leader(idempotent(0), 0, 0).expect("retry");
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (first.first_offset, first.last_offset)
    );
    assert_eq!(log.log_end_offset(), 5);
    assert!(matches!(
        log.append_as_leader(idempotent(9), 0, 0),
        Err(AppendError::OutOfOrderSequence {
            expected_sequence: 4,
            found_sequence: 9,
            ..
        })
    ));
    // State survives a restart (snapshot on close plus header scan).
    log.close(0).expect("close");
    let mut log = open(&dir, &small_config(), true, 5);
    let retry = log
        .append_as_leader(idempotent(2), 0, 0)
        .expect("retry after restart");
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, 3);
}

#[test]
fn follower_appends_keep_offsets_and_fill_the_epoch_cache() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    let replicated = |base_offset: i64, epoch: i32| {
        simple_batch(&BatchSpec {
            base_offset,
            records: 5,
            partition_leader_epoch: epoch,
            ..BatchSpec::default()
        })
    };
    log.append_as_follower(replicated(0, 1), 0).expect("append");
    log.append_as_follower(replicated(5, 1), 0).expect("append");
    log.append_as_follower(replicated(10, 3), 0)
        .expect("append");
    assert!(matches!(
        log.append_as_follower(replicated(12, 3), 0),
        Err(AppendError::OffsetsNotIncreasing {
            base_offset: 12,
            log_end: 15
        })
    ));
    assert_eq!(
        log.epoch_cache().end_offset_for(1, log.log_end_offset()),
        (1, 10)
    );
    assert_eq!(
        log.epoch_cache().end_offset_for(3, log.log_end_offset()),
        (3, 15)
    );
    log.truncate_to(10, 0).expect("truncate");
    assert_eq!(log.epoch_cache().latest_epoch(), Some(1));
}

#[test]
fn a_new_leader_epoch_starts_at_the_log_end_before_any_write() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    log.assign_leader_epoch(1).expect("assign");
    assert_eq!(
        log.epoch_cache().latest_epoch(),
        Some(1),
        "an empty log records the epoch too, as Kafka does"
    );
    // A follower that wrote in epoch 0 learns that its whole log diverges.
    assert_eq!(
        log.epoch_cache().end_offset_for(0, log.log_end_offset()),
        (0, 0)
    );
    let batch = simple_batch(&BatchSpec {
        records: 4,
        ..BatchSpec::default()
    });
    log.append_as_leader(batch, 1, 0).expect("append");
    log.assign_leader_epoch(3).expect("assign");
    // Epoch 2 was never written here: its end is where epoch 3 starts.
    assert_eq!(
        log.epoch_cache().end_offset_for(2, log.log_end_offset()),
        (1, 4)
    );
    assert_eq!(log.epoch_cache().latest_epoch(), Some(3));
    // An older or equal epoch changes nothing.
    log.assign_leader_epoch(2).expect("assign");
    log.assign_leader_epoch(3).expect("assign");
    assert_eq!(log.epoch_cache().entries().len(), 2);
}

#[test]
fn truncating_at_the_log_end_drops_an_epoch_that_has_no_records() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open(&dir, &small_config(), true, 0);
    log.append_as_leader(batch(4, 0), 1, 0).expect("append");
    // Led at epoch 3, then deposed before writing anything in it.
    log.assign_leader_epoch(3).expect("assign");
    assert_eq!(log.epoch_cache().latest_epoch(), Some(3));
    // The new leader never had epoch 3: the follower truncates to where
    // its epoch 1 ends, which is its log end.
    assert!(!log.truncate_to(4, 0).expect("truncate"));
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(
        log.epoch_cache().latest_epoch(),
        Some(1),
        "epoch 3 is no longer announced"
    );
}

#[test]
fn flush_messages_advances_the_recovery_point() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = small_config();
    config.flush_messages = Some(4);
    let mut log = open(&dir, &config, true, 0);
    log.append_as_leader(batch(2, 0), 0, 0).expect("append");
    assert_eq!(log.recovery_point(), 0);
    log.append_as_leader(batch(2, 0), 0, 0).expect("append");
    assert_eq!(log.recovery_point(), 4);
    config.flush_messages = None;
    config.flush_ms = Some(100);
    log.set_config(config);
    log.append_as_leader(batch(2, 0), 0, 50).expect("append");
    log.tick(60).expect("tick");
    assert_eq!(log.recovery_point(), 4);
    log.tick(200).expect("tick");
    assert_eq!(log.recovery_point(), 6);
}

#[test]
fn a_shared_buffer_is_appended_with_offsets_assigned_and_left_unchanged() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut log = open(&partition_dir(root.path()), &small_config(), true, 0);
    log.append_as_leader(batch(3, 0), 0, 0).expect("append");
    // The request frame keeps a reference: the log must not edit it.
    let records = batch(2, 1_000);
    let kept = records.clone();
    let info = log.append_as_leader(records, 7, 0).expect("shared append");
    assert_eq!((info.first_offset, info.last_offset), (3, 4));
    assert_eq!(kept, batch(2, 1_000), "the caller's bytes are untouched");
    assert_eq!(read_all(&log, 0), vec![(0, 3), (3, 5)]);
    let slice = log
        .read(3, 1 << 20, 5, true)
        .expect("read")
        .records
        .expect("records");
    let stored = slice.to_bytes().expect("bytes");
    let header = strom_storage::batch::validate_batch_at(&stored, 0).expect("valid CRC");
    assert_eq!(header.base_offset, 3);
    assert_eq!(header.partition_leader_epoch, 7);
    // Only the leader-owned prefix differs from what the client sent.
    assert_eq!(stored[16..], kept[16..]);
    assert_ne!(stored[..16], kept[..16]);
}

#[test]
fn a_large_shared_buffer_is_written_around_its_stamped_prefix() {
    // At 64 KiB and more per batch the log writes a stamped copy of the
    // 16-byte prefix and the rest straight from the caller's buffer.
    let root = tempfile::tempdir().expect("tempdir");
    let config = strom_storage::LogConfig {
        segment_bytes: 4 << 20,
        max_message_bytes: 1 << 20,
        ..small_config()
    };
    let mut log = open(&partition_dir(root.path()), &config, true, 0);
    log.append_as_leader(batch(3, 0), 0, 0).expect("append");
    let records = batch(1_800, 1_000);
    assert!(records.len() >= 64 * 1024);
    let kept = records.clone();
    let info = log.append_as_leader(records, 7, 0).expect("shared append");
    assert_eq!((info.first_offset, info.last_offset), (3, 1_802));
    assert_eq!(
        kept,
        batch(1_800, 1_000),
        "the caller's bytes are untouched"
    );
    let slice = log
        .read(3, 4 << 20, 1_803, true)
        .expect("read")
        .records
        .expect("records");
    let stored = slice.to_bytes().expect("bytes");
    let header = strom_storage::batch::validate_batch_at(&stored, 0).expect("valid CRC");
    assert_eq!((header.base_offset, header.partition_leader_epoch), (3, 7));
    assert_eq!(stored[16..kept.len()], kept[16..]);
}

#[test]
fn a_shared_buffer_with_log_append_time_is_stamped_on_a_copy() {
    let root = tempfile::tempdir().expect("tempdir");
    let config = strom_storage::LogConfig {
        message_timestamp_type: MessageTimestampType::LogAppendTime,
        ..small_config()
    };
    let mut log = open(&partition_dir(root.path()), &config, true, 0);
    let records = batch(2, 1_000);
    let kept = records.clone();
    let info = log.append_as_leader(records, 1, 123_456).expect("append");
    assert_eq!(info.log_append_time_ms, Some(123_456));
    assert_eq!(kept, batch(2, 1_000));
    let slice = log
        .read(0, 1 << 20, 2, true)
        .expect("read")
        .records
        .expect("records");
    let stored = slice.to_bytes().expect("bytes");
    let header = strom_storage::batch::validate_batch_at(&stored, 0).expect("valid CRC");
    assert_eq!(header.max_timestamp, 123_456);
}

/// A log under `root` with `batches` batches of 20 records in segments of
/// about a megabyte, and a read of it from offset `from` to its end (one
/// segment's worth at most).
fn slice_of(root: &std::path::Path, batches: i64, from: i64) -> strom_storage::read::LogSlice {
    let config = strom_storage::LogConfig {
        segment_bytes: 1 << 20,
        segment_index_bytes: 64 * 1024,
        index_interval_bytes: 4096,
        ..small_config()
    };
    let mut log = open(&partition_dir(root), &config, true, 0);
    for index in 0..batches {
        log.append_as_leader(batch(20, index), 0, 0)
            .expect("append");
    }
    log.read(from, 1 << 20, log.log_end_offset(), true)
        .expect("read")
        .records
        .expect("records")
}

#[test]
fn a_slice_sent_with_sendfile_is_the_bytes_a_read_returns() {
    use std::io::Read;
    use std::os::fd::AsFd;
    let root = tempfile::tempdir().expect("tempdir");
    // From offset 100: the slice starts inside the file, not at 0.
    let slice = slice_of(root.path(), 40, 100);
    assert!(slice.position() > 0);
    let expected = slice.to_bytes().expect("bytes");
    let (sender, mut receiver) = std::os::unix::net::UnixStream::pair().expect("pair");
    let reader = std::thread::spawn(move || {
        let mut received = Vec::new();
        receiver.read_to_end(&mut received).expect("receive");
        received
    });
    // In pieces: whatever each call moved, the next one goes on from there.
    let mut sent = 0u64;
    while sent < slice.len() {
        let moved = slice.send_to(sender.as_fd(), sent).expect("sendfile");
        assert!(moved > 0, "the file did not shrink");
        sent += moved as u64;
    }
    assert_eq!(
        slice.send_to(sender.as_fd(), sent).expect("nothing left"),
        0
    );
    drop(sender);
    assert_eq!(reader.join().expect("reader"), expected.to_vec());
}

#[test]
fn sendfile_reports_a_full_socket_and_a_truncated_file() {
    use std::os::fd::AsFd;
    let root = tempfile::tempdir().expect("tempdir");
    let slice = slice_of(root.path(), 1000, 0);
    let (sender, _receiver) = std::os::unix::net::UnixStream::pair().expect("pair");
    sender.set_nonblocking(true).expect("non-blocking");
    // Nobody reads: the socket fills and then refuses without blocking.
    let mut sent = 0u64;
    let full = loop {
        match slice.send_to(sender.as_fd(), sent) {
            Ok(0) => panic!("the whole {} bytes fit in the socket", slice.len()),
            Ok(moved) => sent += moved as u64,
            Err(error) => break error,
        }
    };
    assert_eq!(full.kind(), std::io::ErrorKind::WouldBlock);
    assert!(sent > 0 && sent < slice.len());
    // A file cut short under the slice: sendfile moves nothing.
    let (open_sender, _open_receiver) = std::os::unix::net::UnixStream::pair().expect("pair");
    slice
        .file()
        .set_len(slice.position() + 100)
        .expect("truncate");
    assert_eq!(
        slice.send_to(open_sender.as_fd(), 100).expect("at the end"),
        0
    );
}

#[test]
fn a_slice_dropped_from_the_page_cache_is_seen_and_loaded_again() {
    let root = tempfile::tempdir().expect("tempdir");
    let slice = slice_of(root.path(), 1000, 0);
    let expected = slice.to_bytes().expect("bytes");
    // (Without `cachestat`, Linux before 6.5, this answers None and the
    // broker sends as before; this test needs it.)
    assert_eq!(slice.is_cached(), Some(true), "just written and read");
    // Written out and dropped, the range is no longer cached.
    slice.file().sync_all().expect("fsync");
    let dropped = {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open; fadvise only drops clean pages.
        unsafe { libc::posix_fadvise(slice.file().as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }
    };
    assert_eq!(dropped, 0);
    assert_eq!(slice.is_cached(), Some(false));
    slice.load_into_page_cache().expect("load");
    assert_eq!(slice.is_cached(), Some(true));
    assert_eq!(slice.to_bytes().expect("bytes"), expected);
}

/// The batches of `log` from `from` to its log end, as a follower's fetch
/// returns them.
fn fetched(log: &strom_storage::Log, from: i64, max_bytes: u64) -> bytes::Bytes {
    log.read(from, max_bytes, log.log_end_offset(), true)
        .expect("read")
        .records
        .expect("records")
        .to_bytes()
        .expect("bytes")
}

#[test]
fn a_follower_elected_leader_knows_the_idempotent_producers_of_the_old_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut leader = open(&root.path().join("leader-0"), &small_config(), true, 0);
    let follower_dir = root.path().join("follower-0");
    let mut follower = open(&follower_dir, &small_config(), true, 0);
    let idempotent = |base_sequence: i32| {
        simple_batch(&BatchSpec {
            records: 2,
            producer_id: 9,
            producer_epoch: 0,
            base_sequence,
            ..BatchSpec::default()
        })
    };
    for base_sequence in [0, 2, 4] {
        leader
            .append_as_leader(idempotent(base_sequence), 0, 0)
            .expect("append");
    }
    // Two fetches: the first batch alone, then the other two together.
    follower
        .append_as_follower(fetched(&leader, 0, 1), 0)
        .expect("first fetch");
    assert_eq!(follower.log_end_offset(), 2);
    follower
        .append_as_follower(fetched(&leader, 2, 1 << 20), 0)
        .expect("second fetch");
    assert_eq!(follower.log_end_offset(), 6);
    drop(leader);

    // The follower is elected: a producer retrying its last batches gets
    // their original offsets, a sequence gap is refused.
    follower.assign_leader_epoch(1).expect("new epoch");
    let check = |log: &mut strom_storage::Log| {
        for (index, base_sequence) in [2, 4].into_iter().enumerate() {
            let retry = log
                .append_as_leader(idempotent(base_sequence), 1, 0)
                .expect("retry");
            assert!(retry.duplicate, "sequence {base_sequence} is a duplicate");
            let first_offset = 2 * (index as i64 + 1);
            assert_eq!(
                (retry.first_offset, retry.last_offset),
                (first_offset, first_offset + 1)
            );
        }
        assert!(matches!(
            log.append_as_leader(idempotent(8), 1, 0),
            Err(AppendError::OutOfOrderSequence {
                expected_sequence: 6,
                found_sequence: 8,
                ..
            })
        ));
        assert_eq!(log.log_end_offset(), 6, "nothing appended");
    };
    check(&mut follower);
    // The same after a crash and recovery of the follower's log.
    drop(follower);
    let mut recovered = open(&follower_dir, &small_config(), false, 0);
    check(&mut recovered);
    let next = recovered
        .append_as_leader(idempotent(6), 1, 0)
        .expect("the next sequence");
    assert!(!next.duplicate);
    assert_eq!(next.first_offset, 6);
}
