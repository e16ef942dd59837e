//! File ranges sent in place of a response's stand-ins: the record bytes
//! of a Fetch answer go from their segment files to the socket with
//! `sendfile` on plaintext connections, and are read into memory and
//! encrypted on TLS ones.
//!
//! The server does not know where the files come from: a handler hands it
//! each range as a [`FileRegion`] (the broker: a storage read's segment
//! slice), so this crate needs no storage crate.

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use bytes::Bytes;

/// A byte range of an open file that a response sends in place of a
/// stand-in (see `strom_protocol::chunked::stand_in`).
pub trait FileRegion: std::fmt::Debug + Send + Sync {
    /// Number of bytes.
    fn len(&self) -> u64;

    /// Whether the range is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Byte position of the range in its file (for logs).
    fn position(&self) -> u64;

    /// Sends the range from byte `sent` of it on to the socket `out` with
    /// one `sendfile` call and returns how many bytes went. A full
    /// non-blocking socket gives [`std::io::ErrorKind::WouldBlock`];
    /// `Ok(0)` while bytes remain means the file ended early, and the
    /// connection must close (the frame's length is already promised).
    fn send_to(&self, out: BorrowedFd<'_>, sent: u64) -> std::io::Result<usize>;

    /// Whether every page of the range is in the page cache; `None` when
    /// that cannot be told.
    fn is_cached(&self) -> Option<bool>;

    /// Reads the range through the page cache, keeping nothing, so that a
    /// `sendfile` right after does not wait for the disk. Blocks for as
    /// long as the disk takes: the server calls it off the async workers.
    fn load_into_page_cache(&self) -> std::io::Result<()>;

    /// Reads the range into memory (TLS connections, which cannot
    /// `sendfile`). Blocks: the server calls it off the async workers.
    fn to_bytes(&self) -> std::io::Result<Bytes>;
}

/// A shared [`FileRegion`], as answers carry them.
pub type Region = Arc<dyn FileRegion>;
