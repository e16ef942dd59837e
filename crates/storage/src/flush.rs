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
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

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

/// A log's flush progress, shared with the background flushes its rolls
/// queued (see [`crate::flusher`]).
///
/// The log bumps the generation whenever its end moves back (truncation)
/// and when it is dropped; a background flush of an older generation then
/// claims nothing, so records written after a truncation are never taken
/// for the ones it synced.
#[derive(Debug, Default)]
pub(crate) struct FlushProgress {
    state: Mutex<ProgressState>,
}

#[derive(Debug, Default)]
struct ProgressState {
    generation: u64,
    /// The offset background flushes of this generation made durable.
    durable_to: Option<i64>,
    /// The first background flush that failed: the file and the error.
    failure: Option<(PathBuf, io::ErrorKind)>,
}

/// Whether [`FlushProgress::publish`] ran its step.
#[derive(Debug)]
pub(crate) enum Publish<T> {
    /// It ran, with this result.
    Done(T),
    /// The generation had changed: it did not run.
    Stale,
}

impl FlushProgress {
    fn state(&self) -> MutexGuard<'_, ProgressState> {
        // Two offsets and an error, each changed by one assignment: a panic
        // elsewhere cannot leave them inconsistent, so they are safe to reuse.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.state().generation
    }

    /// What background flushes of the current generation made durable.
    pub(crate) fn durable_to(&self) -> Option<i64> {
        self.state().durable_to
    }

    /// The first failed background flush, if any.
    pub(crate) fn failure(&self) -> Option<(PathBuf, io::ErrorKind)> {
        self.state().failure.clone()
    }

    /// Records that a flush of `generation` made the log durable up to `to`.
    pub(crate) fn advance(&self, generation: u64, to: i64) {
        let mut state = self.state();
        if state.generation == generation {
            state.durable_to = Some(state.durable_to.map_or(to, |durable| durable.max(to)));
        }
    }

    /// Records a failed flush (the first one is kept), whatever the
    /// generation: after a failed fsync the kernel may have dropped dirty
    /// pages of the file, and a later fsync would not say so.
    pub(crate) fn fail(&self, path: PathBuf, kind: io::ErrorKind) {
        let mut state = self.state();
        if state.failure.is_none() {
            state.failure = Some((path, kind));
        }
    }

    /// Runs `step` (a rename) only if the generation is still `generation`,
    /// holding off a truncation until it is done.
    pub(crate) fn publish<T>(&self, generation: u64, step: impl FnOnce() -> T) -> Publish<T> {
        let state = self.state();
        if state.generation == generation {
            Publish::Done(step())
        } else {
            Publish::Stale
        }
    }

    /// Starts a new generation; returns what the old one made durable (for
    /// the log to fold into its recovery point first).
    pub(crate) fn next_generation(&self) -> Option<i64> {
        let mut state = self.state();
        state.generation += 1;
        state.durable_to.take()
    }
}
