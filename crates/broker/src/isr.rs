//! ISR changes from a partition's leader to the controller: expansions
//! earned by a follower's fetch and shrinks found by the periodic lag check
//! (`replica.lag.time.max.ms`). Each quotes the partition epoch the leader
//! knows, so a stale one is refused; the committed change comes back in the
//! metadata image, which is applied at once.

use std::sync::Arc;
use std::time::Duration;

use strom_controller::controller::AlterPartitionRequest;
use strom_controller::runtime::ControllerClient;
use strom_replication::IsrChange;
use tracing::{debug, info};

use crate::replica_manager::{PartitionReplica, ReplicaManager};

/// How long a leader waits before it sends again an ISR change that got no
/// answer (the metadata quorum did not answer in time, or the connection
/// broke).
const UNANSWERED_RETRY: Duration = Duration::from_millis(200);

/// Sends `change` for `replica` to the controller (at most one at a time per
/// partition), then applies the controller's image. A change that got no
/// answer is sent again after 200 ms (`UNANSWERED_RETRY`) while this broker leads
/// at the same leader and partition epochs, as Kafka's AlterPartition
/// manager retries: a follower proposed into the ISR holds the HW back
/// until an answer or the image settles the proposal, and a follower that
/// cannot fetch would never cause another proposal. Must run inside a
/// tokio runtime.
pub fn propose(
    controller: &Arc<dyn ControllerClient>,
    replicas: &Arc<ReplicaManager>,
    replica: &Arc<PartitionReplica>,
    change: IsrChange,
) {
    if replicas.is_stopping() || !replica.begin_isr_change() {
        return;
    }
    let Ok(Ok(leader_epoch)) = replica.leader_epoch() else {
        replica.end_isr_change();
        return;
    };
    let previous_isr = replica.isr_size();
    let request = AlterPartitionRequest {
        broker_id: replicas.node_id(),
        broker_epoch: replicas.broker_epoch(),
        topic_id: replica.topic_id,
        partition_index: replica.topic_partition.partition,
        leader_epoch,
        partition_epoch: change.partition_epoch,
        new_isr: change.isr.iter().copied().collect(),
    };
    let controller = Arc::clone(controller);
    let replicas = Arc::clone(replicas);
    let replica = Arc::clone(replica);
    tokio::spawn(async move {
        let topic_partition = &replica.topic_partition;
        let mut unanswered = false;
        match controller.alter_partition(request.clone()).await {
            Ok(Ok(reply)) => {
                info!(%topic_partition, isr = ?reply.isr, partition_epoch = reply.partition_epoch, "ISR changed");
                replicas.count_isr_change(reply.isr.len() < previous_isr);
            }
            Ok(Err(error)) => {
                debug!(%topic_partition, %error, "ISR change refused");
                // A follower the controller will not take into the ISR
                // (fenced, shutting down) stops holding the HW back. Other
                // refusals (a stale partition epoch) may follow a committed
                // change this leader has not seen: the image settles those.
                if matches!(
                    error,
                    strom_controller::error::ControllerError::IneligibleReplica { .. }
                ) {
                    replica.abandon_isr_expansion();
                }
            }
            Err(error) => {
                debug!(%topic_partition, %error, "ISR change not answered; sent again shortly");
                unanswered = true;
            }
        }
        let image = controller.image();
        let applying = Arc::clone(&replicas);
        let _ = tokio::task::spawn_blocking(move || applying.apply_image(&image)).await;
        replica.end_isr_change();
        // A stopping broker proposes nothing more: the task would hold the
        // replica manager (and so the logs) past shutdown while no
        // controller answers.
        if unanswered && !replicas.is_stopping() {
            tokio::time::sleep(UNANSWERED_RETRY).await;
            let same_leader =
                matches!(replica.leader_epoch(), Ok(Ok(epoch)) if epoch == leader_epoch);
            if same_leader && replica.partition_epoch() == Some(change.partition_epoch) {
                propose(&controller, &replicas, &replica, change);
            }
        }
    });
}

/// Every `replica.lag.time.max.ms / 2`, proposes the ISR without the
/// followers that lagged longer than `replica.lag.time.max.ms`, unless this
/// process itself was stalled (see [`StallGuard`]).
pub async fn shrink_loop(
    controller: Arc<dyn ControllerClient>,
    replicas: Arc<ReplicaManager>,
    replica_lag_time_max: Duration,
) {
    let lag_ms = i64::try_from(replica_lag_time_max.as_millis()).unwrap_or(i64::MAX);
    let every = (replica_lag_time_max / 2).max(Duration::from_millis(50));
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let every_ms = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
    let mut guard = StallGuard::new(every_ms, replicas.now_ms());
    loop {
        interval.tick().await;
        let now_ms = replicas.now_ms();
        if !guard.may_shrink(now_ms) {
            info!(
                now_ms,
                "the ISR check ran late (this process stalled); no shrink this round"
            );
            continue;
        }
        for replica in replicas.hosted() {
            if let Some(change) = replica.isr_shrink(now_ms, lag_ms) {
                propose(&controller, &replicas, &replica, change);
            }
        }
    }
}

/// Keeps a leader that was stalled (stopped, paused by the OS, starved of
/// CPU) from blaming its followers for its own stall: they could not fetch
/// from a leader that did not run, so when the periodic check runs much
/// later than its interval, the followers first get one more interval to
/// fetch and catch up before any of them is proposed out of the ISR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallGuard {
    every_ms: i64,
    previous_ms: i64,
    quiet_until_ms: i64,
}

impl StallGuard {
    /// A guard for a check that runs every `every_ms`, first at `now_ms`.
    pub fn new(every_ms: i64, now_ms: i64) -> StallGuard {
        StallGuard {
            every_ms,
            previous_ms: now_ms,
            quiet_until_ms: i64::MIN,
        }
    }

    /// Whether the check running at `now_ms` may shrink the ISR: not when
    /// it runs more than twice its interval after the previous one, nor
    /// during the interval after that.
    pub fn may_shrink(&mut self, now_ms: i64) -> bool {
        if now_ms.saturating_sub(self.previous_ms) > self.every_ms.saturating_mul(2) {
            self.quiet_until_ms = now_ms.saturating_add(self.every_ms);
        }
        self.previous_ms = now_ms;
        now_ms >= self.quiet_until_ms
    }
}

#[cfg(test)]
mod tests {
    use super::StallGuard;

    #[test]
    fn checks_on_time_may_shrink() {
        let mut guard = StallGuard::new(1_500, 0);
        for now_ms in [1_500, 3_000, 4_600, 6_100] {
            assert!(guard.may_shrink(now_ms), "at {now_ms}");
        }
    }

    #[test]
    fn a_check_after_a_stall_and_the_interval_after_it_do_not_shrink() {
        let mut guard = StallGuard::new(1_500, 0);
        assert!(guard.may_shrink(1_500));
        // The process was stopped for 5 s: the next check runs at 6,500.
        assert!(!guard.may_shrink(6_500), "the check right after the stall");
        assert!(!guard.may_shrink(7_000), "within an interval of it");
        assert!(guard.may_shrink(8_000), "one interval later");
        assert!(guard.may_shrink(9_500));
    }

    #[test]
    fn the_stall_threshold_is_twice_the_interval() {
        let mut guard = StallGuard::new(1_500, 0);
        assert!(guard.may_shrink(3_000));
        assert!(!guard.may_shrink(6_001));
    }
}
