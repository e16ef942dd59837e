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

/// Sends `change` for `replica` to the controller (at most one at a time per
/// partition), then applies the controller's image. Must run inside a
/// tokio runtime.
pub fn propose(
    controller: &Arc<dyn ControllerClient>,
    replicas: &Arc<ReplicaManager>,
    replica: &Arc<PartitionReplica>,
    change: IsrChange,
) {
    if !replica.begin_isr_change() {
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
        match controller.alter_partition(request.clone()).await {
            Ok(Ok(reply)) => {
                info!(%topic_partition, isr = ?reply.isr, partition_epoch = reply.partition_epoch, "ISR changed");
                replicas.count_isr_change(reply.isr.len() < previous_isr);
            }
            Ok(Err(error)) => debug!(%topic_partition, %error, "ISR change refused"),
            Err(error) => debug!(%topic_partition, %error, "ISR change not sent"),
        }
        let image = controller.image();
        let _ = tokio::task::spawn_blocking(move || replicas.apply_image(&image)).await;
        replica.end_isr_change();
    });
}

/// Every `replica.lag.time.max.ms / 2`, proposes the ISR without the
/// followers that lagged longer than `replica.lag.time.max.ms`.
pub async fn shrink_loop(
    controller: Arc<dyn ControllerClient>,
    replicas: Arc<ReplicaManager>,
    replica_lag_time_max: Duration,
) {
    let lag_ms = i64::try_from(replica_lag_time_max.as_millis()).unwrap_or(i64::MAX);
    let every = (replica_lag_time_max / 2).max(Duration::from_millis(50));
    let mut interval = tokio::time::interval(every);
    loop {
        interval.tick().await;
        let now_ms = replicas.now_ms();
        for replica in replicas.hosted() {
            if let Some(change) = replica.isr_shrink(now_ms, lag_ms) {
                propose(&controller, &replicas, &replica, change);
            }
        }
    }
}
