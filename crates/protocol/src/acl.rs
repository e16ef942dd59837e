//! Kafka's ACL codes, as CreateAcls, DescribeAcls and DeleteAcls carry them
//! and the metadata log stores them: resource types, pattern types,
//! operations and permissions (Kafka's `ResourceType`, `PatternType`,
//! `AclOperation` and `AclPermissionType`), and the name of the cluster
//! resource. The authorizer, the broker's handlers and the `strom acls`
//! command all read them from here.

/// Kafka's `ResourceType` codes.
pub mod resource {
    /// Any resource type (filters only).
    pub const ANY: i8 = 1;
    /// A topic.
    pub const TOPIC: i8 = 2;
    /// A consumer group.
    pub const GROUP: i8 = 3;
    /// The cluster (named `kafka-cluster`).
    pub const CLUSTER: i8 = 4;
    /// A transactional id.
    pub const TRANSACTIONAL_ID: i8 = 5;
}

/// Kafka's `PatternType` codes.
pub mod pattern {
    /// Any pattern type (filters only).
    pub const ANY: i8 = 1;
    /// Whatever would match a resource name (filters only).
    pub const MATCH: i8 = 2;
    /// The name itself, or `*` for every resource of the type.
    pub const LITERAL: i8 = 3;
    /// Every name that starts with the pattern.
    pub const PREFIXED: i8 = 4;
}

/// Kafka's `AclOperation` codes.
pub mod operation {
    /// Any operation (filters only).
    pub const ANY: i8 = 1;
    /// Every operation.
    pub const ALL: i8 = 2;
    /// READ.
    pub const READ: i8 = 3;
    /// WRITE.
    pub const WRITE: i8 = 4;
    /// CREATE.
    pub const CREATE: i8 = 5;
    /// DELETE.
    pub const DELETE: i8 = 6;
    /// ALTER.
    pub const ALTER: i8 = 7;
    /// DESCRIBE.
    pub const DESCRIBE: i8 = 8;
    /// CLUSTER_ACTION.
    pub const CLUSTER_ACTION: i8 = 9;
    /// DESCRIBE_CONFIGS.
    pub const DESCRIBE_CONFIGS: i8 = 10;
    /// ALTER_CONFIGS.
    pub const ALTER_CONFIGS: i8 = 11;
    /// IDEMPOTENT_WRITE.
    pub const IDEMPOTENT_WRITE: i8 = 12;
}

/// Kafka's `AclPermissionType` codes.
pub mod permission {
    /// Any permission (filters only).
    pub const ANY: i8 = 1;
    /// DENY.
    pub const DENY: i8 = 2;
    /// ALLOW.
    pub const ALLOW: i8 = 3;
}

/// The name of the cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
