//! Log compaction support: the crash-safe swap of cleaned segments.
//!
//! A cleaning pass writes its output as `<base>.log.cleaned` (and indexes),
//! renames them to `.swap`, renames the replaced segments to `.deleted`, and
//! finally renames the `.swap` files to their live names. A crash before the
//! `.swap` rename leaves the originals untouched (`.cleaned` files are
//! discarded on open); a crash after it is completed on open by
//! `complete_interrupted_swaps` when the log is opened.
//!
//! One output may replace several originals (small segments are merged),
//! and it may end before the last of them does (its trailing records were
//! removed). Before the `.swap` rename, the end offset of each group is
//! written to `<base>.cleaner-cover`, so recovery removes every original
//! whose base lies in `[output base, max(output end, group end))`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::batch::BATCH_HEADER_BYTES;
use crate::error::{IoContext, RecoveryError};
use crate::segment::{parse_base_offset, LOG_SUFFIX};
use crate::txn_index::TXN_INDEX_SUFFIX;

/// Suffix of cleaner output that is complete and being swapped in.
pub const SWAP_SUFFIX: &str = ".swap";
/// Suffix of cleaner output still being written.
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// Suffix of the file that records where the group of original segments
/// replaced by the cleaner output of the same base ends (one decimal offset).
pub const COVER_SUFFIX: &str = ".cleaner-cover";

/// The cover file of the cleaner output based at `base`.
pub(crate) fn cover_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{}{COVER_SUFFIX}", crate::segment::file_stem(base)))
}

/// The group end recorded for the output at `base`, if a readable cover exists.
fn read_cover(dir: &Path, base: i64) -> Option<i64> {
    std::fs::read_to_string(cover_path(dir, base))
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

/// Offset after the last whole batch of the `.log` file at `path`.
pub(crate) fn next_offset_of_file(path: &Path, base_offset: i64) -> Result<i64, RecoveryError> {
    let file = File::open(path).at(path)?;
    let length = file.metadata().at(path)?.len();
    let mut position = 0u64;
    let mut next_offset = base_offset;
    let mut raw = [0u8; BATCH_HEADER_BYTES];
    while position + BATCH_HEADER_BYTES as u64 <= length {
        if file.read_exact_at(&mut raw, position).is_err() {
            break;
        }
        let Ok(header) = crate::batch::parse_header(&raw, position as usize) else {
            break;
        };
        if position + header.size_in_bytes() as u64 > length {
            break;
        }
        next_offset = header.next_offset();
        position += header.size_in_bytes() as u64;
    }
    Ok(next_offset)
}

/// Completes swaps interrupted by a crash: every live segment covered by a
/// `.log.swap` file is removed and the swap files are renamed to live names.
pub(crate) fn complete_interrupted_swaps(dir: &Path) -> Result<(), RecoveryError> {
    let mut swaps = Vec::new();
    let mut live = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if let Some(stem) = name.strip_suffix(SWAP_SUFFIX) {
            if let Some(base) = parse_base_offset(stem, LOG_SUFFIX) {
                swaps.push((base, entry.path()));
            }
        } else if let Some(base) = parse_base_offset(name, LOG_SUFFIX) {
            live.push(base);
        }
    }
    for (base, swap_path) in swaps {
        let end = next_offset_of_file(&swap_path, base)?.max(read_cover(dir, base).unwrap_or(base));
        for covered in live
            .iter()
            .copied()
            .filter(|live| *live >= base && *live < end.max(base + 1))
        {
            crate::segment::remove_segment_files(dir, covered)?;
        }
        let stem = crate::segment::file_stem(base);
        for suffix in [LOG_SUFFIX, ".index", ".timeindex", TXN_INDEX_SUFFIX] {
            let from: PathBuf = dir.join(format!("{stem}{suffix}{SWAP_SUFFIX}"));
            if from.exists() {
                let to = dir.join(format!("{stem}{suffix}"));
                std::fs::rename(&from, &to).at(&from)?;
            } else if suffix == TXN_INDEX_SUFFIX {
                // The output aborted no transaction: the originals' entries
                // (if any) must not outlive them.
                std::fs::remove_file(dir.join(format!("{stem}{suffix}"))).ok();
            } else if suffix != LOG_SUFFIX {
                // A missing index is rebuilt when the segment opens.
                std::fs::remove_file(dir.join(format!("{stem}{suffix}"))).ok();
            }
        }
    }
    remove_covers(dir)
}

/// Removes every cover file (they matter only while a swap is pending).
fn remove_covers(dir: &Path) -> Result<(), RecoveryError> {
    for entry in std::fs::read_dir(dir).at(dir)? {
        let path = entry.at(dir)?.path();
        if path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.ends_with(COVER_SUFFIX))
        {
            std::fs::remove_file(&path).at(&path)?;
        }
    }
    Ok(())
}
