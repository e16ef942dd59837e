//! `strom dump-log`: print and verify log segments and their indexes, like
//! Kafka's `kafka-dump-log` (DumpLogSegments).
//!
//! A `.log` file is read whole and parsed with `strom-protocol`'s batch
//! code; `.index` and `.timeindex` files are parsed in [`index`] and checked
//! against the `.log` file next to them when there is one.

pub mod index;
pub mod segment;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use strom_protocol::records::Record;
use strom_storage::segment::{parse_base_offset, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};

use crate::cli::DumpLogArguments;
use crate::error::ToolError;
use crate::output::Output;
use crate::progress::Progress;
use segment::{timestamp_type_name, Problem, ScannedBatch};

/// Segments larger than this show a progress bar (on a terminal).
const PROGRESS_MIN_BYTES: u64 = 16 * 1024 * 1024;

/// Runs `strom dump-log`; fails with [`ToolError::VerificationFailed`]
/// when any file has problems.
pub fn run(arguments: &DumpLogArguments, out: &mut Output) -> Result<(), ToolError> {
    let mut failure = None;
    for path in &arguments.paths {
        let problems = dump_file(path, arguments, out)?;
        if problems > 0 && failure.is_none() {
            failure = Some(ToolError::VerificationFailed {
                path: path.clone(),
                problems,
            });
        }
    }
    out.flush()?;
    failure.map_or(Ok(()), Err)
}

fn dump_file(
    path: &Path,
    arguments: &DumpLogArguments,
    out: &mut Output,
) -> Result<usize, ToolError> {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    out.line(&format!("Dumping {}", path.display()))?;
    if name.ends_with(LOG_SUFFIX) {
        dump_log(path, base_offset(name, LOG_SUFFIX), arguments, out)
    } else if name.ends_with(TIME_INDEX_SUFFIX) {
        dump_index(
            &TIME_INDEX,
            path,
            base_offset(name, TIME_INDEX_SUFFIX),
            arguments,
            out,
        )
    } else if name.ends_with(INDEX_SUFFIX) {
        dump_index(
            &OFFSET_INDEX,
            path,
            base_offset(name, INDEX_SUFFIX),
            arguments,
            out,
        )
    } else {
        Err(ToolError::InvalidArgument {
            what: "file",
            text: path.display().to_string(),
            expected: "a .log, .index or .timeindex file",
        })
    }
}

/// The base offset from a 20-digit file name (0 for other names).
fn base_offset(name: &str, suffix: &str) -> i64 {
    parse_base_offset(name, suffix).unwrap_or(0)
}

fn read(path: &Path) -> Result<Bytes, ToolError> {
    std::fs::read(path)
        .map(Bytes::from)
        .map_err(|source| ToolError::ReadFile {
            path: path.to_owned(),
            source,
        })
}

fn dump_log(
    path: &Path,
    base_offset: i64,
    arguments: &DumpLogArguments,
    out: &mut Output,
) -> Result<usize, ToolError> {
    let read_error = |source| ToolError::ReadFile {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let size = file.metadata().map_err(read_error)?.len();
    out.line(&format!("Log starting offset: {base_offset}"))?;
    let progress = if size >= PROGRESS_MIN_BYTES {
        Progress::bar(size, "reading batches")
    } else {
        Progress::hidden()
    };
    let mut write_result = Ok(());
    let scan = segment::scan_reader(std::io::BufReader::new(file), size, |scanned| {
        progress.set_position(scanned.position);
        if write_result.is_ok() && !arguments.verify_only {
            write_result = print_batch(scanned, arguments.print_data, out);
        }
    });
    progress.finish();
    let scan = scan.map_err(read_error)?;
    write_result?;
    print_problems(&scan.problems, out)?;
    out.line(&format!(
        "Summary: {} batch(es), {} record(s), {} of {size} byte(s) valid, {} problem(s)",
        scan.batches.len(),
        scan.records,
        scan.valid_bytes,
        scan.problems.len()
    ))?;
    Ok(scan.problems.len())
}

fn print_batch(
    scanned: &ScannedBatch<'_>,
    print_data: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let batch = scanned.batch;
    let attributes = batch.attributes();
    out.line(&format!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
         isControl: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        batch.base_offset(),
        batch.last_offset(),
        batch.record_count(),
        batch.base_sequence(),
        batch.last_sequence(),
        batch.producer_id(),
        batch.producer_epoch(),
        batch.partition_leader_epoch(),
        attributes.is_transactional(),
        attributes.is_control(),
        scanned.position,
        timestamp_type_name(attributes.timestamp_type()),
        batch.max_timestamp(),
        batch.size_in_bytes(),
        batch.magic(),
        attributes.compression().name(),
        batch.crc(),
        scanned.crc_valid
    ))?;
    let Ok(records) = batch.records() else {
        return Ok(());
    };
    for record in records.flatten() {
        print_record(batch, &record, print_data, out)?;
    }
    Ok(())
}

fn print_record(
    batch: &strom_protocol::records::RecordBatch,
    record: &Record,
    print_data: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let size = |field: Option<&[u8]>| field.map_or(-1, |bytes| bytes.len() as i64);
    let sequence = if batch.base_sequence() < 0 {
        -1
    } else {
        batch.base_sequence().wrapping_add(record.offset_delta())
    };
    let header_keys: Vec<String> = record
        .headers()
        .iter()
        .map(|header| String::from_utf8_lossy(header.key).into_owned())
        .collect();
    let mut line = format!(
        "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
        record.offset(batch.base_offset()),
        timestamp_type_name(batch.attributes().timestamp_type()),
        batch.record_timestamp(record),
        size(record.key()),
        size(record.value()),
        sequence,
        header_keys.join(",")
    );
    if print_data {
        let text = |field: Option<&[u8]>| {
            field.map_or_else(
                || "null".to_owned(),
                |bytes| String::from_utf8_lossy(bytes).into_owned(),
            )
        };
        line.push_str(&format!(
            " key: {} payload: {}",
            text(record.key()),
            text(record.value())
        ));
    }
    out.line(&line)
}

fn print_problems(problems: &[Problem], out: &mut Output) -> Result<(), ToolError> {
    problems.iter().try_for_each(|problem| {
        out.line(&format!(
            "PROBLEM at byte {}: {}",
            problem.position, problem.description
        ))
    })
}

/// The batches of the `.log` next to an index, if it exists and reads.
fn sibling_batches(path: &Path, suffix: &str) -> Option<Vec<segment::BatchExtent>> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(suffix)?;
    let log_path: PathBuf = path.with_file_name(format!("{stem}{LOG_SUFFIX}"));
    let file = std::fs::File::open(log_path).ok()?;
    let size = file.metadata().ok()?.len();
    segment::scan_reader(std::io::BufReader::new(file), size, |_| {})
        .ok()
        .map(|scan| scan.batches)
}

/// What differs between the offset index and the time index.
struct IndexKind<T> {
    suffix: &'static str,
    parse: fn(&[u8], i64) -> index::IndexEntries<T>,
    describe: fn(&T) -> String,
    verify: fn(&[T], Option<&[segment::BatchExtent]>) -> Vec<Problem>,
}

const OFFSET_INDEX: IndexKind<strom_storage::index::OffsetPosition> = IndexKind {
    suffix: INDEX_SUFFIX,
    parse: index::parse_offset_index,
    describe: |entry| format!("offset: {} position: {}", entry.offset, entry.position),
    verify: index::verify_offset_index,
};

const TIME_INDEX: IndexKind<strom_storage::index::TimestampOffset> = IndexKind {
    suffix: TIME_INDEX_SUFFIX,
    parse: index::parse_time_index,
    describe: |entry| format!("timestamp: {} offset: {}", entry.timestamp, entry.offset),
    verify: index::verify_time_index,
};

fn dump_index<T>(
    kind: &IndexKind<T>,
    path: &Path,
    base_offset: i64,
    arguments: &DumpLogArguments,
    out: &mut Output,
) -> Result<usize, ToolError> {
    let bytes = read(path)?;
    let parsed = (kind.parse)(&bytes, base_offset);
    if !arguments.verify_only {
        for entry in &parsed.entries {
            out.line(&(kind.describe)(entry))?;
        }
    }
    let batches = sibling_batches(path, kind.suffix);
    let mut problems = parsed.problems;
    problems.extend((kind.verify)(&parsed.entries, batches.as_deref()));
    finish_index(
        parsed.entries.len(),
        parsed.padding_entries,
        batches.is_some(),
        &problems,
        out,
    )
}

fn finish_index(
    entries: usize,
    padding_entries: usize,
    checked_against_log: bool,
    problems: &[Problem],
    out: &mut Output,
) -> Result<usize, ToolError> {
    print_problems(problems, out)?;
    out.line(&format!(
        "Summary: {entries} entr{}, {padding_entries} preallocated, {}, {} problem(s)",
        if entries == 1 { "y" } else { "ies" },
        if checked_against_log {
            "checked against the .log"
        } else {
            "no .log next to it (entries not checked against the log)"
        },
        problems.len()
    ))?;
    Ok(problems.len())
}
