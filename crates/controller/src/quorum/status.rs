//! The quorum as operators see it: Kafka's DescribeQuorum answer, taken
//! from the Raft node's metrics.

use openraft::{BasicNode, RaftMetrics, ServerState};

use crate::quorum::types::NodeId;

/// One replica of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaStatus {
    /// The node.
    pub node_id: NodeId,
    /// The offset after the last entry the active controller knows the node
    /// holds (`None` if it knows nothing yet: not the active controller, or
    /// no reply since it became active).
    pub log_end_offset: Option<u64>,
}

/// The quorum as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuorumStatus {
    /// The node that answered.
    pub node_id: NodeId,
    /// Whether that node is the active controller.
    pub is_active: bool,
    /// The active controller, if known.
    pub leader: Option<NodeId>,
    /// The current Raft term, the controller epoch.
    pub epoch: u64,
    /// The offset after the last committed (applied) entry on this node:
    /// DescribeQuorum's high watermark.
    pub high_watermark: u64,
    /// The voters, ascending by id.
    pub voters: Vec<ReplicaStatus>,
    /// The observers (learners), ascending by id.
    pub observers: Vec<ReplicaStatus>,
}

fn end_offset(index: Option<u64>) -> Option<u64> {
    index.map(|index| index.saturating_add(1))
}

/// Builds the status from openraft's metrics.
pub fn status_from_metrics(metrics: &RaftMetrics<NodeId, BasicNode>) -> QuorumStatus {
    let membership = metrics.membership_config.membership();
    let replica = |node_id: NodeId| {
        let matched = if node_id == metrics.id {
            metrics.last_log_index
        } else {
            metrics
                .replication
                .as_ref()
                .and_then(|replication| replication.get(&node_id).copied().flatten())
                .map(|log_id| log_id.index)
        };
        ReplicaStatus {
            node_id,
            log_end_offset: end_offset(matched),
        }
    };
    QuorumStatus {
        node_id: metrics.id,
        is_active: metrics.state == ServerState::Leader,
        leader: metrics.current_leader,
        epoch: metrics.current_term,
        high_watermark: end_offset(metrics.last_applied.map(|log_id| log_id.index)).unwrap_or(0),
        voters: membership.voter_ids().map(replica).collect(),
        observers: membership.learner_ids().map(replica).collect(),
    }
}
