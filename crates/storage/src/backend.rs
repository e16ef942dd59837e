//! The file-backend seam: the writes, syncs and truncations of segment data
//! go through [`FileBackend`], so tests can tear writes and simulate crashes
//! that lose unflushed bytes (see [`crate::testing::FaultInjector`]).

use std::fmt::Debug;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The data-path file operations of a segment.
pub trait FileBackend: Send + Sync + Debug {
    /// Writes all of `bytes` at `position` of `file` (stored at `path`).
    fn write_all_at(&self, path: &Path, file: &File, bytes: &[u8], position: u64)
        -> io::Result<()>;
    /// Makes the file's data and size durable.
    fn sync_data(&self, path: &Path, file: &File) -> io::Result<()>;
    /// Sets the file's length (truncation).
    fn set_len(&self, path: &Path, file: &File, length: u64) -> io::Result<()>;
}

/// The operating system's files: `pwrite`, `fdatasync`, `ftruncate`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsBackend;

impl FileBackend for OsBackend {
    fn write_all_at(
        &self,
        _path: &Path,
        file: &File,
        bytes: &[u8],
        position: u64,
    ) -> io::Result<()> {
        file.write_all_at(bytes, position)
    }

    fn sync_data(&self, _path: &Path, file: &File) -> io::Result<()> {
        file.sync_data()
    }

    fn set_len(&self, _path: &Path, file: &File, length: u64) -> io::Result<()> {
        file.set_len(length)
    }
}
