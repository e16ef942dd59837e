//! Flushing by `flush.messages` without holding the log across the fsync.
//!
//! [`Log::flush`] needs `&mut Log`, so a caller that keeps the log behind a
//! lock would hold that lock for the whole fsync, and readers of the
//! partition would wait for the disk. A [`FlushTicket`] splits the flush in
//! three steps:
//!
//! 1. [`Log::prepare_flush`] (shared access, a moment): which files hold
//!    unflushed bytes, and the offset they reach;
//! 2. [`FlushTicket::sync`] (no access to the log at all, the slow part;
//!    run it where blocking is allowed);
//! 3. [`Log::complete_flush`] (exclusive access, a moment): advance the
//!    recovery point and the flush bookkeeping.
//!
//! The same three steps, with the progress kept in a `FlushProgress`
//! shared with the log, carry the flush a segment roll leaves to the
//! background flusher (see [`crate::flusher`]).
//!
//! Only the `.log` files are synced. That is enough for durability: after an
//! unclean shutdown, recovery re-validates every segment from the one that
//! holds the recovery point and rebuilds its indexes (see `recovery.rs`),
//! and every segment before it was flushed whole, indexes included, when
//! the next one was rolled.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::FileBackend;
use crate::error::{IoContext, LogError};
use crate::log::Log;

/// The unflushed tail of a log, to be synced without holding the log.
#[derive(Debug)]
pub struct FlushTicket {
    backend: Arc<dyn FileBackend>,
    files: Vec<(PathBuf, Arc<File>)>,
    flushed_to: i64,
    messages: u64,
    /// The log's truncation generation when the ticket was prepared.
    generation: u64,
}

impl FlushTicket {
    /// The offset the log is durable up to once [`FlushTicket::sync`]
    /// returns (the log end offset when the ticket was prepared).
    pub fn flushed_to(&self) -> i64 {
        self.flushed_to
    }

    /// Fsyncs the files (blocking; call it off any async worker).
    pub fn sync(&self) -> Result<(), LogError> {
        for (path, file) in &self.files {
            self.backend.sync_data(path, file).at(path)?;
        }
        Ok(())
    }
}

impl Log {
    /// Whether `flush.messages` appended records are waiting for a flush.
    pub fn flush_due(&self) -> bool {
        self.config
            .flush_messages
            .is_some_and(|limit| self.unflushed_messages >= limit)
    }

    /// Flushes now when [`Log::flush_due`].
    pub(crate) fn flush_if_due(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.flush_due() {
            self.flush(now_ms)?;
        }
        Ok(())
    }

    /// Step 1: the files holding bytes past the recovery point.
    pub fn prepare_flush(&self) -> FlushTicket {
        let from = self
            .segments
            .range(..=self.recovery_point())
            .next_back()
            .map_or(self.log_start_offset, |(base, _)| *base);
        let files = self
            .segments
            .range(from..)
            .map(|(_, segment)| (segment.log_path().to_path_buf(), Arc::clone(segment.file())))
            .collect();
        FlushTicket {
            backend: Arc::clone(&self.backend),
            files,
            flushed_to: self.log_end_offset,
            messages: self.unflushed_messages,
            generation: self.flush_progress.generation(),
        }
    }

    /// Step 3, after a successful [`FlushTicket::sync`]: moves the recovery
    /// point up to what the ticket made durable (never back, never past the
    /// log end offset) and counts its messages as flushed.
    ///
    /// A ticket prepared before a truncation of the log claims nothing
    /// (the records it synced may have been replaced since).
    pub fn complete_flush(&mut self, ticket: &FlushTicket, now_ms: i64) {
        if ticket.generation != self.flush_progress.generation() {
            return;
        }
        let durable = ticket.flushed_to.min(self.log_end_offset);
        self.recovery_point = self.recovery_point.max(durable);
        self.unflushed_messages = self.unflushed_messages.saturating_sub(ticket.messages);
        self.last_flush_ms = self.last_flush_ms.max(now_ms);
    }
}
