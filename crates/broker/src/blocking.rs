//! Blocking file work reached from a request handler, without stalling the
//! other tasks of the runtime worker it runs on.
//!
//! Most of the broker's disk waits run where blocking is allowed (the log
//! manager's scheduler thread, the storage crate's flusher thread, tokio's
//! blocking pool). A few synchronous paths are reached from handlers with
//! locks held (creating or deleting partition logs when a handler applies a
//! new metadata image, the producer-id counter's file, DeleteRecords, the
//! group coordinator's appends): they call [`blocking`], which on a
//! multi-threaded runtime worker hands the worker's other tasks to another
//! thread for the duration (`tokio::task::block_in_place`).

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `work`, moving the current worker's other tasks elsewhere first when
/// called on a multi-threaded runtime worker; elsewhere just runs it.
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}
