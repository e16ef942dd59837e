use std::fs::OpenOptions;

use uuid::Uuid;

use super::*;
use crate::error::ApplyError;
use crate::records::{uuid_to_bytes, PartitionRecord, Record, RemoveTopicRecord, TopicRecord};

fn topic_batch(name: &str, id: u128) -> Vec<MetadataRecord> {
    vec![
        MetadataRecord::new(Record::Topic(TopicRecord {
            name: name.into(),
            topic_id: uuid_to_bytes(Uuid::from_u128(id)),
        })),
        MetadataRecord::new(Record::Partition(PartitionRecord {
            topic_id: uuid_to_bytes(Uuid::from_u128(id)),
            partition_index: 0,
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionRecord::default()
        })),
    ]
}

/// Appends batches through the log and the image, as the controller does.
fn append(
    log: &mut MetadataLog,
    image: &MetadataImage,
    records: &[MetadataRecord],
) -> MetadataImage {
    let base = log.append(records).unwrap();
    image
        .apply_all(
            records
                .iter()
                .enumerate()
                .map(|(index, record)| (base + index as u64, record)),
        )
        .unwrap()
}

fn log_path(directory: &Path) -> PathBuf {
    directory.join(LOG_FILE_NAME)
}

fn file_length(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

fn three_batches(directory: &Path) -> (MetadataImage, Vec<u64>) {
    let (mut log, mut image, _) = MetadataLog::open(directory).unwrap();
    let mut ends = Vec::new();
    for (index, name) in ["a", "b", "c"].iter().enumerate() {
        image = append(&mut log, &image, &topic_batch(name, index as u128 + 1));
        ends.push(file_length(&log_path(directory)));
    }
    (image, ends)
}

#[test]
fn open_creates_a_missing_directory() {
    let root = tempfile::tempdir().unwrap();
    let directory = root.path().join("nested/metadata");
    let (log, image, report) = MetadataLog::open(&directory).unwrap();
    assert!(directory.is_dir());
    assert_eq!(log.next_offset(), 0);
    assert_eq!(image, MetadataImage::empty());
    assert_eq!(report, RecoveryReport::default());
}

#[test]
fn appended_batches_replay_on_reopen() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = three_batches(root.path());
    let (log, replayed, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(replayed, image);
    assert_eq!(replayed.last_offset(), Some(5));
    assert_eq!(log.next_offset(), 6);
    assert_eq!(report.replayed_batches, 3);
    assert_eq!(report.truncated_bytes, 0);
}

#[test]
fn torn_payload_is_truncated() {
    let root = tempfile::tempdir().unwrap();
    let (_, ends) = three_batches(root.path());
    let path = log_path(root.path());
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(ends[2] - 3).unwrap();
    let (mut log, image, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(report.truncated_bytes, ends[2] - 3 - ends[1]);
    assert_eq!(file_length(&path), ends[1]);
    assert!(image.topic_by_name("b").is_some());
    assert!(image.topic_by_name("c").is_none());
    assert_eq!(log.next_offset(), 4);
    // The log keeps working after recovery.
    let image = append(&mut log, &image, &topic_batch("d", 9));
    let (_, reopened, _) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(reopened, image);
}

#[test]
fn torn_header_is_truncated() {
    let root = tempfile::tempdir().unwrap();
    let (image, ends) = three_batches(root.path());
    let path = log_path(root.path());
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[0, 0, 1]).unwrap();
    let (_, recovered, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(report.truncated_bytes, 3);
    assert_eq!(file_length(&path), ends[2]);
    assert_eq!(recovered, image);
}

#[test]
fn zero_filled_tail_is_truncated() {
    let root = tempfile::tempdir().unwrap();
    let (image, ends) = three_batches(root.path());
    let path = log_path(root.path());
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[0; 4096]).unwrap();
    let (_, recovered, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(report.truncated_bytes, 4096);
    assert_eq!(file_length(&path), ends[2]);
    assert_eq!(recovered, image);
}

fn flip_byte(path: &Path, position: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[position as usize] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

#[test]
fn flipped_byte_in_last_frame_is_a_torn_tail() {
    let root = tempfile::tempdir().unwrap();
    let (_, ends) = three_batches(root.path());
    flip_byte(&log_path(root.path()), ends[2] - 2);
    let (_, image, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(report.truncated_bytes, ends[2] - ends[1]);
    assert!(image.topic_by_name("c").is_none());
}

#[test]
fn flipped_byte_before_the_tail_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (_, ends) = three_batches(root.path());
    let path = log_path(root.path());
    flip_byte(&path, ends[0] + 10);
    let before = fs::read(&path).unwrap();
    let error = MetadataLog::open(root.path()).unwrap_err();
    assert!(
        matches!(error, LogError::CrcMismatch { position, .. } if position == ends[0]),
        "{error:?}"
    );
    // Nothing was truncated: the evidence stays for an operator.
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn absurd_length_before_the_tail_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (_, ends) = three_batches(root.path());
    let path = log_path(root.path());
    let mut bytes = fs::read(&path).unwrap();
    bytes[ends[0] as usize] = 0xff;
    fs::write(&path, bytes).unwrap();
    assert!(matches!(
        MetadataLog::open(root.path()),
        Err(LogError::InvalidFrameLength { position, .. }) if position == ends[0]
    ));
}

#[test]
fn snapshot_then_replay_starts_from_the_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let (mut log, image, _) = MetadataLog::open(root.path()).unwrap();
    let image = append(&mut log, &image, &topic_batch("a", 1));
    log.write_snapshot(&image).unwrap();
    assert_eq!(file_length(&log_path(root.path())), 0);
    assert_eq!(log.records_since_snapshot(), 0);
    let image = append(&mut log, &image, &topic_batch("b", 2));
    drop(log);
    let (log, recovered, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(report.snapshot_offset, Some(1));
    assert_eq!(report.replayed_batches, 1);
    assert_eq!(recovered, image);
    assert_eq!(log.next_offset(), 4);
}

#[test]
fn crash_between_snapshot_and_log_truncation_skips_covered_batches() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = three_batches(root.path());
    let log_bytes = fs::read(log_path(root.path())).unwrap();
    let (mut log, _, _) = MetadataLog::open(root.path()).unwrap();
    log.write_snapshot(&image).unwrap();
    drop(log);
    // Simulate the crash: the old log content is still there.
    fs::write(log_path(root.path()), &log_bytes).unwrap();
    let (log, recovered, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(recovered, image);
    assert_eq!(report.replayed_batches, 0);
    assert_eq!(log.next_offset(), 6);
}

#[test]
fn missing_snapshot_with_a_truncated_log_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (mut log, image, _) = MetadataLog::open(root.path()).unwrap();
    let image = append(&mut log, &image, &topic_batch("a", 1));
    log.write_snapshot(&image).unwrap();
    append(&mut log, &image, &topic_batch("b", 2));
    drop(log);
    fs::remove_file(root.path().join(SNAPSHOT_FILE_NAME)).unwrap();
    assert!(matches!(
        MetadataLog::open(root.path()),
        Err(LogError::MissingSnapshot {
            first_log_offset: 2
        })
    ));
}

#[test]
fn no_snapshot_replays_the_whole_log() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = three_batches(root.path());
    assert!(!root.path().join(SNAPSHOT_FILE_NAME).exists());
    let (_, recovered, report) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(report.snapshot_offset, None);
    assert_eq!(recovered, image);
}

#[test]
fn incomplete_snapshot_temp_file_is_ignored_and_removed() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = three_batches(root.path());
    let temp = root.path().join(SNAPSHOT_TEMP_FILE_NAME);
    fs::write(&temp, b"STROMSNP partial").unwrap();
    let (_, recovered, _) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(recovered, image);
    assert!(!temp.exists());
}

#[test]
fn damaged_snapshot_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = three_batches(root.path());
    let (mut log, _, _) = MetadataLog::open(root.path()).unwrap();
    log.write_snapshot(&image).unwrap();
    drop(log);
    let path = root.path().join(SNAPSHOT_FILE_NAME);
    let length = file_length(&path);
    flip_byte(&path, length - 1);
    assert!(matches!(
        MetadataLog::open(root.path()),
        Err(LogError::CorruptSnapshot {
            problem: SnapshotProblem::CrcMismatch,
            ..
        })
    ));
    fs::write(&path, b"NOTASNAPSHOT").unwrap();
    assert!(matches!(
        MetadataLog::open(root.path()),
        Err(LogError::CorruptSnapshot {
            problem: SnapshotProblem::BadMagic,
            ..
        })
    ));
    let mut truncated = SNAPSHOT_MAGIC.to_vec();
    truncated.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_be_bytes());
    truncated.extend_from_slice(&100u64.to_be_bytes());
    fs::write(&path, truncated).unwrap();
    assert!(matches!(
        MetadataLog::open(root.path()),
        Err(LogError::CorruptSnapshot {
            problem: SnapshotProblem::Truncated,
            ..
        })
    ));
}

#[test]
fn inapplicable_record_in_the_log_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (mut log, _, _) = MetadataLog::open(root.path()).unwrap();
    let remove = MetadataRecord::new(Record::RemoveTopic(RemoveTopicRecord {
        topic_id: uuid_to_bytes(Uuid::from_u128(5)),
    }));
    log.append(&[remove]).unwrap();
    drop(log);
    assert!(matches!(
        MetadataLog::open(root.path()),
        Err(LogError::Apply {
            offset: 0,
            source: ApplyError::UnknownTopicId { .. }
        })
    ));
}

#[test]
fn empty_append_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let (mut log, _, _) = MetadataLog::open(root.path()).unwrap();
    assert_eq!(log.append(&[]).unwrap(), 0);
    assert_eq!(file_length(&log_path(root.path())), 0);
}
