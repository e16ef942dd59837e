//! KIP-430 authorized-operation bit sets: the operations a resource type
//! supports, all of them without an authorizer (as in Kafka) or those the
//! authorizer allows.

use strom_protocol::acl::operation::{
    ALTER, ALTER_CONFIGS, CLUSTER_ACTION, CREATE, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
    IDEMPOTENT_WRITE, READ, WRITE,
};

/// The operations the CLUSTER resource supports.
const CLUSTER_OPERATIONS: &[i8] = &[
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
];

/// The operations the TOPIC resource supports.
const TOPIC_OPERATIONS: &[i8] = &[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
];

/// The operations the GROUP resource supports.
const GROUP_OPERATIONS: &[i8] = &[READ, DELETE, DESCRIBE];

#[cfg(test)]
fn bits(operations: &[i8]) -> i32 {
    operations
        .iter()
        .fold(0, |bits, operation| bits | (1 << operation))
}

fn allowed_bits(operations: &[i8], allowed: impl Fn(i8) -> bool) -> i32 {
    operations
        .iter()
        .filter(|operation| allowed(**operation))
        .fold(0, |bits, operation| bits | (1 << operation))
}

/// The cluster operations `allowed` allows.
pub fn cluster_allowed(allowed: impl Fn(i8) -> bool) -> i32 {
    allowed_bits(CLUSTER_OPERATIONS, allowed)
}

/// The topic operations `allowed` allows.
pub fn topic_allowed(allowed: impl Fn(i8) -> bool) -> i32 {
    allowed_bits(TOPIC_OPERATIONS, allowed)
}

/// The group operations `allowed` allows.
pub fn group_allowed(allowed: impl Fn(i8) -> bool) -> i32 {
    allowed_bits(GROUP_OPERATIONS, allowed)
}

/// The operations allowed on the cluster.
#[cfg(test)]
pub fn cluster() -> i32 {
    bits(CLUSTER_OPERATIONS)
}

#[cfg(test)]
/// The operations allowed on a topic.
pub fn topic() -> i32 {
    bits(TOPIC_OPERATIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_sets_hold_exactly_the_supported_operations() {
        // DESCRIBE (8) and ALTER (7) on the cluster; READ (3) only on topics.
        assert_ne!(cluster() & (1 << 8), 0);
        assert_ne!(cluster() & (1 << 7), 0);
        assert_eq!(cluster() & (1 << 3), 0);
        assert_ne!(topic() & (1 << 3), 0);
        assert_eq!(topic() & (1 << 9), 0);
        assert_eq!(cluster().count_ones(), 7);
        assert_eq!(topic().count_ones(), 8);
        assert_eq!(topic_allowed(|_| true), topic());
        assert_eq!(cluster_allowed(|operation| operation == 8), 1 << 8);
        assert_eq!(group_allowed(|_| true), (1 << 3) | (1 << 6) | (1 << 8));
        assert_eq!(group_allowed(|operation| operation == 8), 1 << 8);
    }
}
