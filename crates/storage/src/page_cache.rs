//! Write-behind and drop-behind: keeping a log's page-cache footprint small.
//!
//! A partition log is written once, at its end, and mostly read near its
//! end. Left alone, the kernel keeps every appended page cached (and dirty
//! until its own writeback, `vm.dirty_expire_centisecs` later) and frees
//! cached pages only under memory pressure, so a broker's page cache grows
//! by every byte produced until memory is full. Each of those pages is a new
//! page: allocated, and on a virtual machine whose host takes back the
//! memory the guest leaves free (free page reporting, ballooning), faulted
//! in from the host on its first write. On the machine of
//! `docs/benchmarks.md` writing 2 GiB into memory that had been free for a
//! minute took 4.1–4.5 s of system time, and 0.33 s into pages that had
//! just been freed.
//!
//! [`PageCacheSettings`] can turn on two things, both only hints to the
//! kernel; they are off by default ([`PageCacheSettings::KERNEL`], Kafka's
//! behaviour), because they also cost (`docs/benchmarks.md`, "Page-cache
//! hints"):
//!
//! * **write-behind**: every `writeback_bytes` appended to a segment, the
//!   kernel is asked to start writing those bytes out
//!   (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so dirty data leaves in a
//!   steady stream instead of in bursts;
//! * **drop-behind**: once a partition has grown `retain_bytes` past them,
//!   those bytes are written out if still dirty and dropped from the cache
//!   (`posix_fadvise(POSIX_FADV_DONTNEED)`). The pages freed are the ones
//!   the next appends get, so a steady stream of appends reuses the same
//!   memory. Reads of older data go to the disk (and the kernel caches
//!   what they read, as usual).
//!
//! Neither changes what is durable or when: that is still `flush.messages`,
//! `flush.ms` and the fsyncs on roll and shutdown, and the recovery point
//! moves only with them. The system calls run on one background thread
//! ([`WriteBehind`]); an append only queues a request, and when the queue is
//! full the request is skipped (the kernel then does what it would have
//! done anyway). The hints are Linux system calls; elsewhere they are
//! no-ops.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Weak};

/// Bytes per drop-behind range when write-behind is off.
const DEFAULT_CHUNK_BYTES: u64 = 1 << 20;

/// Requests the background thread holds at most; more are skipped.
const QUEUE_CAPACITY: usize = 4096;

/// How a log treats the page cache (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCacheSettings {
    /// Start writeback every this many bytes appended to a segment; 0: never.
    pub writeback_bytes: u64,
    /// Bytes of a partition kept cached behind its end; older appended bytes
    /// are dropped from the cache. `None`: the kernel decides.
    pub retain_bytes: Option<u64>,
}

impl PageCacheSettings {
    /// Neither hint: the kernel's own behaviour.
    pub const KERNEL: PageCacheSettings = PageCacheSettings {
        writeback_bytes: 0,
        retain_bytes: None,
    };

    /// Write-behind every 1 MiB and 64 MiB of each partition kept cached:
    /// what `docs/benchmarks.md` measured as "on".
    pub const BOUNDED: PageCacheSettings = PageCacheSettings {
        writeback_bytes: 1 << 20,
        retain_bytes: Some(64 << 20),
    };

    /// Whether either hint is on.
    pub fn is_enabled(&self) -> bool {
        self.writeback_bytes > 0 || self.retain_bytes.is_some()
    }

    /// The size of the ranges a log tracks.
    fn chunk_bytes(&self) -> u64 {
        if self.writeback_bytes > 0 {
            self.writeback_bytes
        } else {
            DEFAULT_CHUNK_BYTES
        }
    }
}

impl Default for PageCacheSettings {
    /// Off ([`PageCacheSettings::KERNEL`]): Kafka's behaviour.
    fn default() -> Self {
        PageCacheSettings::KERNEL
    }
}

/// What the background thread has done, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCacheStats {
    /// Bytes whose writeback was started.
    pub writeback_bytes: u64,
    /// Bytes dropped from the cache.
    pub dropped_bytes: u64,
    /// Requests skipped because the queue was full.
    pub skipped_requests: u64,
    /// Requests whose system call failed (the file is left as it was).
    pub failed_requests: u64,
}

#[derive(Debug, Default)]
struct Counters {
    writeback_bytes: AtomicU64,
    dropped_bytes: AtomicU64,
    skipped_requests: AtomicU64,
    failed_requests: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    WriteBack,
    Drop,
}

#[derive(Debug)]
enum Message {
    Hint {
        file: Weak<File>,
        start: u64,
        length: u64,
        hint: Hint,
    },
    /// Answered once every message before it is done.
    Idle(SyncSender<()>),
}

/// The background thread that makes the page-cache system calls for every
/// log of a [`crate::LogManager`]. It ends when the last handle is dropped.
#[derive(Debug)]
pub struct WriteBehind {
    sender: SyncSender<Message>,
    counters: Arc<Counters>,
}

impl WriteBehind {
    /// Starts the thread (`strom-page-cache`).
    pub fn start() -> std::io::Result<Arc<WriteBehind>> {
        let (sender, receiver) = mpsc::sync_channel(QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let worker_counters = Arc::clone(&counters);
        std::thread::Builder::new()
            .name("strom-page-cache".to_owned())
            .spawn(move || run(&receiver, &worker_counters))?;
        Ok(Arc::new(WriteBehind { sender, counters }))
    }

    /// What the thread has done so far.
    pub fn stats(&self) -> PageCacheStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        PageCacheStats {
            writeback_bytes: load(&self.counters.writeback_bytes),
            dropped_bytes: load(&self.counters.dropped_bytes),
            skipped_requests: load(&self.counters.skipped_requests),
            failed_requests: load(&self.counters.failed_requests),
        }
    }

    /// Blocks until every request queued before the call is done.
    pub fn wait_idle(&self) {
        let (sender, receiver) = mpsc::sync_channel(1);
        if self.sender.send(Message::Idle(sender)).is_ok() {
            let _ = receiver.recv();
        }
    }

    fn request(&self, file: Weak<File>, start: u64, length: u64, hint: Hint) {
        let message = Message::Hint {
            file,
            start,
            length,
            hint,
        };
        if self.sender.try_send(message).is_err() {
            self.counters
                .skipped_requests
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn run(receiver: &Receiver<Message>, counters: &Counters) {
    for message in receiver {
        match message {
            Message::Idle(answer) => {
                let _ = answer.send(());
            }
            Message::Hint {
                file,
                start,
                length,
                hint,
            } => {
                // A segment deleted meanwhile needs nothing.
                let Some(file) = file.upgrade() else {
                    continue;
                };
                let (result, counter) = match hint {
                    Hint::WriteBack => (
                        crate::sys::start_writeback(&file, start, length),
                        &counters.writeback_bytes,
                    ),
                    Hint::Drop => (
                        crate::sys::write_out_and_drop(&file, start, length),
                        &counters.dropped_bytes,
                    ),
                };
                match result {
                    Ok(()) => {
                        counter.fetch_add(length, Ordering::Relaxed);
                    }
                    Err(error) => {
                        counters.failed_requests.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%error, ?hint, start, length, "page cache hint failed");
                    }
                }
            }
        }
    }
}

/// The part of the active segment not yet handed to the thread.
#[derive(Debug)]
struct Open {
    file: Weak<File>,
    /// Start of the bytes not yet in a range.
    start: u64,
    /// End of the last append.
    end: u64,
}

/// A range whose drop waits for the log to grow past it.
#[derive(Debug)]
struct Retained {
    file: Weak<File>,
    start: u64,
    length: u64,
    /// The log's appended byte count when the range closed.
    appended_at_close: u64,
}

/// One log's bookkeeping: which ranges to write back and, later, drop.
#[derive(Debug)]
pub(crate) struct PageCacheTracker {
    worker: Arc<WriteBehind>,
    settings: PageCacheSettings,
    open: Option<Open>,
    /// Bytes appended since tracking began.
    appended: u64,
    retained: VecDeque<Retained>,
}

impl PageCacheTracker {
    pub(crate) fn new(worker: Arc<WriteBehind>, settings: PageCacheSettings) -> Self {
        PageCacheTracker {
            worker,
            settings,
            open: None,
            appended: 0,
            retained: VecDeque::new(),
        }
    }

    /// Records an append of `file`'s bytes `start..end`.
    pub(crate) fn appended(&mut self, file: &Arc<File>, start: u64, end: u64) {
        let same_file = self
            .open
            .as_ref()
            .is_some_and(|open| std::ptr::eq(open.file.as_ptr(), Arc::as_ptr(file)));
        if !same_file {
            // A roll (or a truncation back into an older segment): the
            // previous file's last bytes form a range of their own.
            if let Some(previous) = self.open.take() {
                self.close(previous.file, previous.start, previous.end);
            }
        }
        let open = self.open.get_or_insert_with(|| Open {
            file: Arc::downgrade(file),
            start,
            end: start,
        });
        // After a truncation the next append starts below the range.
        open.start = open.start.min(start);
        open.end = end;
        self.appended = self.appended.saturating_add(end.saturating_sub(start));
        if open.end - open.start >= self.settings.chunk_bytes() {
            let (file, range_start, range_end) = (open.file.clone(), open.start, open.end);
            open.start = range_end;
            self.close(file, range_start, range_end);
        }
        self.drop_behind();
    }

    fn close(&mut self, file: Weak<File>, start: u64, end: u64) {
        if end <= start {
            return;
        }
        if self.settings.writeback_bytes > 0 {
            self.worker
                .request(file.clone(), start, end - start, Hint::WriteBack);
        }
        if self.settings.retain_bytes.is_some() {
            self.retained.push_back(Retained {
                file,
                start,
                length: end - start,
                appended_at_close: self.appended,
            });
        }
    }

    fn drop_behind(&mut self) {
        let Some(retain) = self.settings.retain_bytes else {
            return;
        };
        while let Some(front) = self.retained.front() {
            if front.appended_at_close.saturating_add(retain) > self.appended {
                break;
            }
            if let Some(range) = self.retained.pop_front() {
                self.worker
                    .request(range.file, range.start, range.length, Hint::Drop);
            }
        }
    }
}
