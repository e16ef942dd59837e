use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn racked(layout: &[(BrokerId, &str)]) -> Vec<(BrokerId, String)> {
    layout
        .iter()
        .map(|(broker_id, rack)| (*broker_id, rack.to_string()))
        .collect()
}

#[test]
fn racks_alternate_as_kafka_documents() {
    // Kafka's example: 0 -> rack1, 1 -> rack3, 2 -> rack3, 3 -> rack2,
    // 4 -> rack2, 5 -> rack1 gives 0, 3, 1, 5, 4, 2.
    let brokers = racked(&[
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]);
    assert_eq!(rack_alternated(&brokers), vec![0, 3, 1, 5, 4, 2]);
}

#[test]
fn racks_alternate_in_the_arranged_list() {
    // Kafka's documented example: rack1 {0,1,2}, rack2 {3}, rack3 {4,5}.
    let brokers = racked(&[
        (0, "rack1"),
        (1, "rack1"),
        (2, "rack1"),
        (3, "rack2"),
        (4, "rack3"),
        (5, "rack3"),
    ]);
    assert_eq!(rack_alternated(&brokers), vec![0, 3, 4, 1, 5, 2]);
}

#[test]
fn each_partition_spans_as_many_racks_as_it_can() {
    let brokers = racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]);
    let assignment = assign_replicas_rack_aware_from(&brokers, 12, 3, 0, 0, 0).expect("assigns");
    for replicas in &assignment {
        let racks: BTreeSet<&str> = replicas
            .iter()
            .map(|id| {
                brokers
                    .iter()
                    .find(|(b, _)| b == id)
                    .map(|(_, r)| r.as_str())
                    .expect("known")
            })
            .collect();
        assert_eq!(racks.len(), 3, "{replicas:?} spans every rack");
        let distinct: BTreeSet<_> = replicas.iter().collect();
        assert_eq!(distinct.len(), 3);
    }
}

#[test]
fn two_racks_and_three_replicas_put_two_in_one_rack() {
    let brokers = racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]);
    let assignment = assign_replicas_rack_aware_from(&brokers, 4, 3, 0, 1, 1).expect("assigns");
    for replicas in &assignment {
        let distinct: BTreeSet<_> = replicas.iter().collect();
        assert_eq!(distinct.len(), 3);
        let in_a = replicas.iter().filter(|id| **id <= 2).count();
        assert!(in_a == 1 || in_a == 2, "{replicas:?}");
    }
}

proptest! {
    #[test]
    fn assignments_are_valid_spread_and_balanced(
        racks in 1..4usize,
        per_rack in 1..4usize,
        partitions in 1..40i32,
        factor in 1..4i32,
        start in 0..12usize,
        shift in 0..12usize,
    ) {
        let brokers: Vec<(BrokerId, String)> = (0..racks * per_rack)
            .map(|index| (index as BrokerId + 1, format!("rack-{}", index % racks)))
            .collect();
        let result = assign_replicas_rack_aware_from(&brokers, partitions, factor, 0, start, shift);
        if factor as usize > brokers.len() {
            prop_assert!(result.is_err());
            return Ok(());
        }
        let assignment = result.expect("assigns");
        prop_assert_eq!(assignment.len(), partitions as usize);
        let mut leaders = std::collections::BTreeMap::new();
        for replicas in &assignment {
            let distinct: BTreeSet<_> = replicas.iter().collect();
            prop_assert_eq!(distinct.len(), factor as usize);
            let racks_used: BTreeSet<&str> = replicas
                .iter()
                .map(|id| brokers[(*id - 1) as usize].1.as_str())
                .collect();
            prop_assert_eq!(racks_used.len(), (factor as usize).min(racks));
            *leaders.entry(replicas[0]).or_insert(0usize) += 1;
        }
        let most = leaders.values().max().copied().unwrap_or(0);
        let fewest = if leaders.len() < brokers.len().min(partitions as usize) { 0 } else { leaders.values().min().copied().unwrap_or(0) };
        prop_assert!(most - fewest <= 1, "leaders balanced: {leaders:?}");
    }
}
