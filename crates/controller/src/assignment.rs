//! Replica assignment for new topics and partitions, as Kafka does it for
//! rack-unaware clusters (a cluster whose live brokers all have
//! `broker.rack` uses [`crate::rack_assignment`] instead).
//!
//! Brokers are sorted by id. A random start index picks the broker of the
//! first replica of partition 0; partition `p`'s first replica is broker
//! `(p + start) % n`. Followers are placed at a shift from the first
//! replica, `1 + (shift + j) % (n - 1)` for the `j`-th follower, and the
//! shift grows by one every `n` partitions. So leaders spread evenly and
//! followers of one broker's partitions spread over the other brokers
//! instead of all landing on its neighbour.
//!
//! A requested (manual) assignment is validated instead: consecutive
//! partition indexes, no empty or duplicate replica lists, only known
//! brokers, and the same replication factor everywhere.

use crate::error::AssignmentError;
use crate::image::BrokerId;
use strom_clock::Random;

/// Replicas for one partition, as requested by a client.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestedAssignment {
    /// The partition index.
    pub partition_index: i32,
    /// Replicas, preferred leader first.
    pub broker_ids: Vec<BrokerId>,
}

/// Assigns replicas for `partitions` partitions starting at
/// `first_partition_index`, with random start index and shift.
pub fn assign_replicas(
    brokers: &[BrokerId],
    partitions: i32,
    replication_factor: i32,
    first_partition_index: i32,
    random: &dyn Random,
) -> Result<Vec<Vec<BrokerId>>, AssignmentError> {
    let start_index = random.below(brokers.len());
    let replica_shift = random.below(brokers.len());
    assign_replicas_from(
        brokers,
        partitions,
        replication_factor,
        first_partition_index,
        start_index,
        replica_shift,
    )
}

/// Assigns replicas with a fixed start index and initial replica shift
/// (Kafka's `fixedStartIndex`); [`assign_replicas`] draws both at random.
pub fn assign_replicas_from(
    brokers: &[BrokerId],
    partitions: i32,
    replication_factor: i32,
    first_partition_index: i32,
    start_index: usize,
    replica_shift: usize,
) -> Result<Vec<Vec<BrokerId>>, AssignmentError> {
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let broker_count = sorted.len();
    let replicas_per_partition = check_counts(broker_count, partitions, replication_factor)?;
    // Only `start % n` and `shift % (n - 1)` matter; reducing them first
    // keeps the arithmetic below far from overflow.
    let start_index = start_index % broker_count;
    let mut shift = replica_shift % broker_count.saturating_sub(1).max(1);
    let first_partition_id = usize::try_from(first_partition_index.max(0)).unwrap_or(0);
    let partition_count = usize::try_from(partitions).unwrap_or(0);
    let mut assignment = Vec::new();
    for partition_id in first_partition_id..first_partition_id + partition_count {
        if partition_id > 0 && partition_id % broker_count == 0 {
            shift += 1;
        }
        let first_index = (partition_id + start_index) % broker_count;
        let replicas = (0..replicas_per_partition)
            .map(|replica| {
                let index = match replica {
                    0 => first_index,
                    follower => follower_index(first_index, shift, follower - 1, broker_count),
                };
                sorted.get(index).copied().unwrap_or_default()
            })
            .collect();
        assignment.push(replicas);
    }
    Ok(assignment)
}

fn follower_index(first_index: usize, shift: usize, follower: usize, broker_count: usize) -> usize {
    // broker_count >= 2 whenever there are followers (checked by the caller).
    let offset = 1 + (shift + follower) % (broker_count - 1);
    (first_index + offset) % broker_count
}

pub(crate) fn check_counts(
    broker_count: usize,
    partitions: i32,
    replication_factor: i32,
) -> Result<usize, AssignmentError> {
    if partitions <= 0 {
        return Err(AssignmentError::NonPositivePartitions { partitions });
    }
    let replicas = usize::try_from(replication_factor)
        .ok()
        .filter(|replicas| *replicas > 0)
        .ok_or(AssignmentError::NonPositiveReplicationFactor { replication_factor })?;
    if replicas > broker_count {
        return Err(AssignmentError::ReplicationFactorTooLarge {
            replication_factor,
            available_brokers: broker_count,
        });
    }
    Ok(replicas)
}

/// Validates a requested assignment for partitions `first_partition_index`
/// onwards. `expected_replication_factor` is the existing topic's factor
/// when adding partitions; otherwise the first partition sets it.
pub fn validate_requested_assignment(
    requested: &[RequestedAssignment],
    first_partition_index: i32,
    is_known_broker: impl Fn(BrokerId) -> bool,
    expected_replication_factor: Option<usize>,
) -> Result<(), AssignmentError> {
    let mut expected_factor = expected_replication_factor;
    let mut expected_index = first_partition_index;
    for partition in requested {
        let partition_index = partition.partition_index;
        if partition_index != expected_index {
            return Err(AssignmentError::UnexpectedPartition {
                partition_index,
                expected_index,
            });
        }
        check_partition_replicas(partition, &is_known_broker)?;
        let actual = partition.broker_ids.len();
        let expected = *expected_factor.get_or_insert(actual);
        if actual != expected {
            return Err(AssignmentError::InconsistentReplicationFactor {
                partition_index,
                expected,
                actual,
            });
        }
        expected_index = expected_index.saturating_add(1);
    }
    Ok(())
}

fn check_partition_replicas(
    partition: &RequestedAssignment,
    is_known_broker: &impl Fn(BrokerId) -> bool,
) -> Result<(), AssignmentError> {
    let partition_index = partition.partition_index;
    if partition.broker_ids.is_empty() {
        return Err(AssignmentError::EmptyReplicas { partition_index });
    }
    for (position, broker_id) in partition.broker_ids.iter().enumerate() {
        let earlier = partition.broker_ids.get(..position).unwrap_or_default();
        if earlier.contains(broker_id) {
            return Err(AssignmentError::DuplicateBroker {
                partition_index,
                broker_id: *broker_id,
            });
        }
        if !is_known_broker(*broker_id) {
            return Err(AssignmentError::UnknownBroker {
                partition_index,
                broker_id: *broker_id,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use strom_clock::SeededRandom;

    #[test]
    fn matches_kafkas_documented_layout() {
        // Kafka's AdminUtils doc: 5 brokers, 10 partitions, factor 3,
        // start index 0 and shift 0.
        let assignment = assign_replicas_from(&[0, 1, 2, 3, 4], 10, 3, 0, 0, 0).unwrap();
        let expected: Vec<Vec<BrokerId>> = vec![
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            vec![0, 2, 3],
            vec![1, 3, 4],
            vec![2, 4, 0],
            vec![3, 0, 1],
            vec![4, 1, 2],
        ];
        assert_eq!(assignment, expected);
    }

    #[test]
    fn unsorted_broker_ids_are_sorted_first() {
        let assignment = assign_replicas_from(&[30, 10, 20], 3, 1, 0, 0, 0).unwrap();
        assert_eq!(assignment, vec![vec![10], vec![20], vec![30]]);
    }

    #[test]
    fn added_partitions_continue_the_pattern() {
        let all = assign_replicas_from(&[0, 1, 2, 3, 4], 10, 3, 0, 0, 0).unwrap();
        let added = assign_replicas_from(&[0, 1, 2, 3, 4], 4, 3, 6, 0, 0).unwrap();
        // Partition 6 onward: the shift for partitions 5..9 is 1 (it grew at 5);
        // starting at 6 it grows only at 10, so compare the first replicas.
        let first_replicas: Vec<_> = added.iter().map(|replicas| replicas[0]).collect();
        let expected: Vec<_> = all[6..10].iter().map(|replicas| replicas[0]).collect();
        assert_eq!(first_replicas, expected);
    }

    #[test]
    fn replication_factor_above_broker_count_is_an_error() {
        let random = SeededRandom::new(1);
        assert_eq!(
            assign_replicas(&[1, 2], 3, 3, 0, &random),
            Err(AssignmentError::ReplicationFactorTooLarge {
                replication_factor: 3,
                available_brokers: 2
            })
        );
        assert_eq!(
            assign_replicas(&[], 1, 1, 0, &random),
            Err(AssignmentError::ReplicationFactorTooLarge {
                replication_factor: 1,
                available_brokers: 0
            })
        );
    }

    #[test]
    fn duplicate_broker_ids_count_once() {
        assert_eq!(
            assign_replicas_from(&[1, 1], 1, 2, 0, 0, 0),
            Err(AssignmentError::ReplicationFactorTooLarge {
                replication_factor: 2,
                available_brokers: 1
            })
        );
    }

    #[test]
    fn non_positive_counts_are_errors() {
        let random = SeededRandom::new(1);
        assert_eq!(
            assign_replicas(&[1], 0, 1, 0, &random),
            Err(AssignmentError::NonPositivePartitions { partitions: 0 })
        );
        assert_eq!(
            assign_replicas(&[1], 1, 0, 0, &random),
            Err(AssignmentError::NonPositiveReplicationFactor {
                replication_factor: 0
            })
        );
    }

    #[test]
    fn single_broker_gets_every_partition() {
        let random = SeededRandom::new(9);
        let assignment = assign_replicas(&[1], 4, 1, 0, &random).unwrap();
        assert_eq!(assignment, vec![vec![1]; 4]);
    }

    #[test]
    fn same_seed_same_assignment() {
        let brokers = [1, 2, 3, 4, 5, 6];
        let first = assign_replicas(&brokers, 12, 3, 0, &SeededRandom::new(42)).unwrap();
        let second = assign_replicas(&brokers, 12, 3, 0, &SeededRandom::new(42)).unwrap();
        assert_eq!(first, second);
    }

    proptest! {
        #[test]
        fn assignments_are_valid_and_leaders_balanced(
            broker_count in 1usize..8,
            rounds in 1usize..4,
            factor_seed in any::<usize>(),
            seed in any::<u64>(),
        ) {
            let brokers: Vec<BrokerId> = (0..broker_count as i32).map(|id| id * 10).collect();
            let factor = 1 + factor_seed % broker_count;
            let partitions = broker_count * rounds;
            let assignment = assign_replicas(
                &brokers, partitions as i32, factor as i32, 0, &SeededRandom::new(seed),
            ).unwrap();
            prop_assert_eq!(assignment.len(), partitions);
            for replicas in &assignment {
                prop_assert_eq!(replicas.len(), factor);
                let mut distinct = replicas.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), factor);
                prop_assert!(replicas.iter().all(|id| brokers.contains(id)));
            }
            for broker in &brokers {
                let led = assignment.iter().filter(|replicas| replicas[0] == *broker).count();
                prop_assert_eq!(led, rounds);
                let hosted = assignment.iter().filter(|replicas| replicas.contains(broker)).count();
                prop_assert_eq!(hosted, rounds * factor);
            }
        }
    }

    proptest! {
        #[test]
        fn arbitrary_inputs_never_panic(
            brokers in proptest::collection::vec(-3i32..6, 0..6),
            partitions in -2i32..20,
            replication_factor in -2i32..8,
            first_partition_index in -5i32..1000,
            start_index in any::<usize>(),
            replica_shift in any::<usize>(),
        ) {
            let _ = assign_replicas_from(
                &brokers, partitions, replication_factor, first_partition_index, start_index, replica_shift,
            );
        }
    }

    fn requested(partition_index: i32, broker_ids: &[BrokerId]) -> RequestedAssignment {
        RequestedAssignment {
            partition_index,
            broker_ids: broker_ids.to_vec(),
        }
    }

    fn known(id: BrokerId) -> bool {
        (1..=3).contains(&id)
    }

    #[test]
    fn valid_requested_assignment_passes() {
        let assignment = [requested(0, &[1, 2]), requested(1, &[3, 1])];
        assert_eq!(
            validate_requested_assignment(&assignment, 0, known, None),
            Ok(())
        );
    }

    #[test]
    fn requested_assignment_with_duplicate_broker_fails() {
        let assignment = [requested(0, &[1, 1])];
        assert_eq!(
            validate_requested_assignment(&assignment, 0, known, None),
            Err(AssignmentError::DuplicateBroker {
                partition_index: 0,
                broker_id: 1
            })
        );
    }

    #[test]
    fn requested_assignment_with_unknown_broker_fails() {
        let assignment = [requested(0, &[1, 9])];
        assert_eq!(
            validate_requested_assignment(&assignment, 0, known, None),
            Err(AssignmentError::UnknownBroker {
                partition_index: 0,
                broker_id: 9
            })
        );
    }

    #[test]
    fn requested_assignment_with_inconsistent_factor_fails() {
        let assignment = [requested(0, &[1, 2]), requested(1, &[3])];
        assert_eq!(
            validate_requested_assignment(&assignment, 0, known, None),
            Err(AssignmentError::InconsistentReplicationFactor {
                partition_index: 1,
                expected: 2,
                actual: 1
            })
        );
        let added = [requested(4, &[1, 2])];
        assert_eq!(
            validate_requested_assignment(&added, 4, known, Some(3)),
            Err(AssignmentError::InconsistentReplicationFactor {
                partition_index: 4,
                expected: 3,
                actual: 2
            })
        );
    }

    #[test]
    fn requested_assignment_with_gap_or_empty_list_fails() {
        assert_eq!(
            validate_requested_assignment(&[requested(1, &[1])], 0, known, None),
            Err(AssignmentError::UnexpectedPartition {
                partition_index: 1,
                expected_index: 0
            })
        );
        assert_eq!(
            validate_requested_assignment(&[requested(0, &[])], 0, known, None),
            Err(AssignmentError::EmptyReplicas { partition_index: 0 })
        );
    }
}
