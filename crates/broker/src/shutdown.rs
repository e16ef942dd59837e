//! The last steps of a broker's shutdown: stopping what runs beside the
//! request path, waiting until the log manager has no other owner, and
//! closing the logs with the clean-shutdown marker.
//!
//! The log manager is shared by everything that reads or writes a
//! partition: the replica manager (and through it the request handlers,
//! the follower fetchers, the group coordinator's `__consumer_offsets`
//! storage, the transaction coordinator's `__transaction_state` storage and
//! marker writer) and the log scheduler. Only its sole owner may close it
//! (closing every log and writing `.kafka_cleanshutdown`); while another
//! handle is alive the logs can only be flushed, and the next start then
//! recovers every partition. So shutdown stops and awaits every task it
//! started, gives up the coordinators' partitions (which ends the
//! transaction coordinator's marker tasks), drops its own handles, and
//! waits a bounded time for tasks it does not own (an ISR change waiting
//! for the controller, an image being applied on the blocking pool) to let
//! go. A handle still alive after [`HOLDER_WAIT`] is a bug; the broker then
//! says at error level which structures still have owners and closes
//! without the marker.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use strom_clock::Clock;
use strom_storage::manager::Scheduler;
use strom_storage::LogManager;
use tokio::task::JoinHandle;
use tracing::{error, warn};

use crate::groups::GroupService;
use crate::handlers::BrokerContext;
use crate::replica_manager::ReplicaManager;
use crate::transactions::TransactionService;

/// How long shutdown waits for the last handles on the log manager to be
/// dropped by tasks it cannot await (each is bounded by a request timeout).
pub const HOLDER_WAIT: Duration = Duration::from_secs(15);

/// How often the wait looks again.
const HOLDER_POLL: Duration = Duration::from_millis(5);

/// What a broker's shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The log manager was closed by its sole owner: every log closed, and
    /// the clean-shutdown marker written in every log directory (but one
    /// holding a poisoned log), so the next start recovers nothing.
    pub logs_closed_cleanly: bool,
    /// Leaderships the metadata offered this broker after it began to stop,
    /// which it declined (see
    /// [`ReplicaManager::stop_taking_leadership`]).
    pub leaderships_declined: u64,
    /// Leaderships it took after it began to stop (zero: a stopping broker
    /// takes none).
    pub leaderships_taken_while_stopping: u64,
}

/// Weak handles on the structures that own the log manager, to name the
/// ones still owned when it stays shared.
pub(crate) struct Holders {
    context: Weak<BrokerContext>,
    replicas: Weak<ReplicaManager>,
    groups: Weak<GroupService>,
    transactions: Weak<TransactionService>,
}

impl Holders {
    pub(crate) fn of(context: &Arc<BrokerContext>) -> Holders {
        Holders {
            context: Arc::downgrade(context),
            replicas: Arc::downgrade(&context.replicas),
            groups: Arc::downgrade(&context.groups),
            transactions: Arc::downgrade(&context.transactions),
        }
    }
}

/// Stops the follower fetchers and the background tasks and waits until
/// the aborted tasks are dropped; then gives up the transaction
/// coordinator's partitions, so that its marker tasks end.
pub(crate) async fn stop_background_work(context: &BrokerContext, mut tasks: Vec<JoinHandle<()>>) {
    if let Some(fetchers) = context.replicas.fetchers() {
        fetchers.shutdown().await;
    }
    for task in &tasks {
        task.abort();
    }
    for task in tasks.drain(..) {
        let _ = task.await;
    }
    context.transactions.resign_all();
}

/// Waits until `logs` is the only handle on the log manager, for at most
/// `wait`; returns whether it is. When it is not, says at error level
/// which owners remain.
pub(crate) async fn wait_for_sole_owner(
    logs: &Arc<LogManager>,
    holders: &Holders,
    wait: Duration,
) -> bool {
    // A bound on a real wait: the host's clock.
    let deadline = Instant::now() + wait;
    while Arc::strong_count(logs) > 1 {
        if Instant::now() >= deadline {
            error!(
                log_manager_handles = Arc::strong_count(logs) - 1,
                broker_context = holders.context.strong_count(),
                replica_manager = holders.replicas.strong_count(),
                group_service = holders.groups.strong_count(),
                transaction_service = holders.transactions.strong_count(),
                waited_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "the log manager is still shared after every task was stopped: a task or structure that should have ended holds it (the counts are its other owners)"
            );
            return false;
        }
        tokio::time::sleep(HOLDER_POLL).await;
    }
    true
}

/// Stops the log scheduler (its thread holds a handle on the log manager)
/// and waits for its thread to end.
pub(crate) async fn stop_scheduler(scheduler: Scheduler) {
    let _ = tokio::task::spawn_blocking(move || scheduler.stop()).await;
}

/// Closes the logs on the blocking pool: when `logs` is the only handle, a
/// clean shutdown that writes every checkpoint and the clean-shutdown
/// marker. Returns whether it was that.
pub(crate) async fn close_logs(logs: Arc<LogManager>, clock: Arc<dyn Clock>) -> bool {
    let closed = tokio::task::spawn_blocking(move || {
        let now_ms = clock.wall_ms();
        match Arc::try_unwrap(logs) {
            Ok(logs) => logs.shutdown(now_ms).map(|()| true),
            Err(shared) => {
                // Still shared (reported by `wait_for_sole_owner`): flush
                // everything and write every checkpoint through the shared
                // handle; the next start recovers.
                error!("log manager still shared at shutdown: flushing without the clean-shutdown marker");
                shared.flush_and_checkpoint(now_ms).map(|()| false)
            }
        }
    })
    .await;
    match closed {
        Ok(Ok(clean)) => clean,
        Ok(Err(error)) => {
            warn!(%error, "error while closing logs");
            false
        }
        Err(error) => {
            warn!(%error, "log shutdown task failed");
            false
        }
    }
}
