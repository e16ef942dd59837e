//! The background flusher: what a segment roll leaves to be made durable,
//! done off the append path.
//!
//! A roll used to seal the old segment, fsync it, write the producer-state
//! snapshot and fsync the partition directory before the append that
//! triggered it could go on, all under the log's write lock: with 1 GiB
//! segments an fsync of up to a gigabyte in front of every producer of the
//! partition. Kafka flushes the old segment asynchronously after the roll
//! (its log flush scheduler) and advances the recovery point when that flush
//! is done; so does Strom. A roll now only seals the old segment (no sync),
//! creates the new one and queues a `RollFlush` here, which:
//!
//! 1. fsyncs the `.log` files of the sealed segments past the recovery point
//!    and their two index files;
//! 2. writes the producer-state snapshot at the new segment's base offset
//!    (temporary file, fsync, rename);
//! 3. fsyncs the partition directory (the new segment's files, the
//!    snapshot's name);
//! 4. and only then moves the log's recovery point to the new base offset
//!    (kept in the log's `FlushProgress`, in `flush.rs`).
//!
//! Until step 4 the recovery point stays where it was, so a crash in
//! between makes recovery re-validate everything the roll sealed: crash
//! recovery stays correct without the roll waiting for the disk. A flush
//! that fails takes the log offline ([`crate::error::LogError::Offline`]):
//! after a failed fsync the kernel may have dropped the dirty pages, so no
//! later flush can prove them durable (Kafka takes the log directory
//! offline).
//!
//! A [`Flusher`] is one thread (`strom-log-flush`) shared by every log of a
//! [`crate::LogManager`]; a log without one (a standalone [`crate::Log`])
//! does the roll's flush inline, as before. Tests can make a flusher
//! [`Flusher::manual`]: it queues jobs until [`Flusher::run_queued`], so a
//! crash between a roll and its flush can be staged deterministically.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::FileBackend;
use crate::flush_progress::{FlushProgress, Publish};

/// What a roll leaves to the flusher (see the module docs).
#[derive(Debug)]
pub(crate) struct RollFlush {
    pub(crate) progress: Arc<FlushProgress>,
    /// The log's truncation generation when the roll happened.
    pub(crate) generation: u64,
    pub(crate) backend: Arc<dyn FileBackend>,
    pub(crate) dir: PathBuf,
    /// The `.log` files of the sealed segments past the recovery point.
    pub(crate) logs: Vec<(PathBuf, Arc<File>)>,
    /// Their index files (the maps keep no descriptor: synced by path).
    pub(crate) indexes: Vec<PathBuf>,
    /// The producer-state snapshot for the new segment's base offset.
    pub(crate) snapshot: Option<(PathBuf, Vec<u8>)>,
    /// The new segment's base offset: durable up to here once done.
    pub(crate) flushed_to: i64,
}

/// How a [`RollFlush`] ended.
#[derive(Debug)]
enum Outcome {
    Done,
    /// The log changed under the job (truncated, closed, deleted): nothing
    /// to claim.
    Stale,
}

/// An I/O failure of a job: the file and the error.
type JobError = (PathBuf, io::Error);

fn at<T>(path: &Path, result: io::Result<T>) -> Result<T, JobError> {
    result.map_err(|error| (path.to_path_buf(), error))
}

/// Whether `error` says the file is gone: the segment was deleted by
/// retention, or the partition with it (nothing left to make durable).
fn is_gone(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::NotFound
}

impl RollFlush {
    /// Runs the job and records its outcome in the log's progress.
    fn run(self) -> bool {
        match self.sync() {
            Ok(Outcome::Done) => {
                self.progress.advance(self.generation, self.flushed_to);
                true
            }
            Ok(Outcome::Stale) => true,
            Err((path, error)) => {
                tracing::error!(path = %path.display(), %error,
                    "background flush after a segment roll failed; the log goes offline");
                self.progress.fail(path, error.kind());
                false
            }
        }
    }

    fn sync(&self) -> Result<Outcome, JobError> {
        for (path, file) in &self.logs {
            at(path, self.backend.sync_data(path, file))?;
        }
        for path in &self.indexes {
            match File::open(path).and_then(|file| file.sync_data()) {
                Err(error) if is_gone(&error) => {}
                result => at(path, result)?,
            }
        }
        if let Some((path, bytes)) = &self.snapshot {
            if let Outcome::Stale = self.write_snapshot(path, bytes)? {
                return Ok(Outcome::Stale);
            }
        }
        match File::open(&self.dir).and_then(|dir| dir.sync_all()) {
            Err(error) if is_gone(&error) => Ok(Outcome::Stale),
            result => at(&self.dir, result).map(|()| Outcome::Done),
        }
    }

    /// Writes the snapshot to a temporary file, syncs it, and renames it in
    /// place only if the log was not truncated meanwhile (a truncation
    /// removes the snapshots past the new log end; one renamed after it
    /// would describe records that are gone).
    fn write_snapshot(&self, path: &Path, bytes: &[u8]) -> Result<Outcome, JobError> {
        let temporary = path.with_extension("tmp");
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)
            .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()));
        match written {
            Err(error) if is_gone(&error) => return Ok(Outcome::Stale),
            result => at(&temporary, result)?,
        }
        match self
            .progress
            .publish(self.generation, || std::fs::rename(&temporary, path))
        {
            Publish::Done(result) => at(path, result).map(|()| Outcome::Done),
            Publish::Stale => {
                std::fs::remove_file(&temporary).ok();
                Ok(Outcome::Stale)
            }
        }
    }
}

#[derive(Debug)]
enum Message {
    Roll(RollFlush),
    /// Answered once every job before it is done.
    Idle(SyncSender<()>),
}

#[derive(Debug)]
enum Mode {
    /// A thread runs jobs as they come.
    Thread(Mutex<Sender<Message>>),
    /// Jobs wait for [`Flusher::run_queued`] (tests).
    Manual(Mutex<VecDeque<RollFlush>>),
}

/// What the flusher has done, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlusherStats {
    /// Roll flushes queued.
    pub queued: u64,
    /// Roll flushes finished (made durable, or found stale).
    pub completed: u64,
    /// Roll flushes that failed (their logs went offline).
    pub failed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    queued: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    fn record(&self, succeeded: bool) {
        let counter = if succeeded {
            &self.completed
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The thread that makes rolled segments durable (see the module docs).
/// It ends when the last handle is dropped.
#[derive(Debug)]
pub struct Flusher {
    mode: Mode,
    counters: Arc<Counters>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A queue of jobs and a channel handle: a panic elsewhere cannot leave
    // them half-changed (every change is one push, pop or send), so they are
    // safe to reuse.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Flusher {
    /// Starts the thread (`strom-log-flush`).
    pub fn start() -> io::Result<Arc<Flusher>> {
        let (sender, receiver) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let worker_counters = Arc::clone(&counters);
        std::thread::Builder::new()
            .name("strom-log-flush".to_owned())
            .spawn(move || run(&receiver, &worker_counters))?;
        Ok(Arc::new(Flusher {
            mode: Mode::Thread(Mutex::new(sender)),
            counters,
        }))
    }

    /// A flusher without a thread: jobs wait for [`Flusher::run_queued`].
    pub fn manual() -> Arc<Flusher> {
        Arc::new(Flusher {
            mode: Mode::Manual(Mutex::new(VecDeque::new())),
            counters: Arc::default(),
        })
    }

    /// What the flusher has done so far.
    pub fn stats(&self) -> FlusherStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        FlusherStats {
            queued: load(&self.counters.queued),
            completed: load(&self.counters.completed),
            failed: load(&self.counters.failed),
        }
    }

    /// Queues a roll's flush.
    pub(crate) fn submit(&self, job: RollFlush) {
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        match &self.mode {
            Mode::Thread(sender) => {
                if let Err(mpsc::SendError(Message::Roll(job))) =
                    lock(sender).send(Message::Roll(job))
                {
                    // The thread is gone (it only ends with the flusher):
                    // do the work here rather than lose it.
                    self.counters.record(job.run());
                }
            }
            Mode::Manual(queue) => lock(queue).push_back(job),
        }
    }

    /// Blocks until every job queued before the call is done (for a manual
    /// flusher: runs them).
    pub fn wait_idle(&self) {
        match &self.mode {
            Mode::Thread(sender) => {
                let (answer, done) = mpsc::sync_channel(1);
                if lock(sender).send(Message::Idle(answer)).is_ok() {
                    let _ = done.recv();
                }
            }
            Mode::Manual(_) => self.run_queued(),
        }
    }

    /// Runs the queued jobs of a manual flusher on the calling thread
    /// (nothing for a threaded one).
    pub fn run_queued(&self) {
        if let Mode::Manual(queue) = &self.mode {
            loop {
                let Some(job) = lock(queue).pop_front() else {
                    break;
                };
                self.counters.record(job.run());
            }
        }
    }

    /// Drops the queued jobs of a manual flusher unrun: what a crash does
    /// to flushes that had not started. Returns how many were dropped.
    pub fn discard_queued(&self) -> usize {
        match &self.mode {
            Mode::Manual(queue) => lock(queue).drain(..).count(),
            Mode::Thread(_) => 0,
        }
    }
}

fn run(receiver: &Receiver<Message>, counters: &Counters) {
    for message in receiver {
        match message {
            Message::Roll(job) => counters.record(job.run()),
            Message::Idle(answer) => {
                let _ = answer.send(());
            }
        }
    }
}
