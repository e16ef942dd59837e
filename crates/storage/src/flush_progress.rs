//! A log's flush progress: what background flushes of its rolled segments
//! made durable, by generation, shared between the log and the flusher.

use std::io;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

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
