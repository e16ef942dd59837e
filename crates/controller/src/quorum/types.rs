//! The quorum's openraft type configuration.

use crate::records::MetadataBatch;

/// A controller's `node.id`.
pub type NodeId = u64;

/// What applying one log entry to the metadata image did. Every replica
/// applies the same entries in the same order and so reaches the same
/// outcome for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The entry carried no metadata (a new leader's blank entry or a
    /// membership change).
    NoMetadata,
    /// The batch's records were applied; the first got `base_offset`.
    Applied {
        /// Offset of the batch's first record.
        base_offset: u64,
    },
    /// The batch was planned against another image than the one it
    /// follows (its leader was deposed between planning and appending),
    /// so it was skipped on every replica.
    Stale {
        /// The offset the batch was planned at.
        planned_offset: u64,
        /// The image's next offset when the entry was applied.
        next_offset: u64,
    },
    /// The records did not apply to the image (a controller bug); the
    /// entry was skipped on every replica and the image is unchanged.
    Inapplicable {
        /// The offset the batch was planned at.
        planned_offset: u64,
    },
}

openraft::declare_raft_types!(
    /// The metadata quorum's types: entries carry [`MetadataBatch`]es (the
    /// records of one controller command), nodes are addressed by
    /// `host:port` on the controller listener.
    pub QuorumTypes:
        D = MetadataBatch,
        R = ApplyOutcome,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<QuorumTypes>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);
