use std::collections::BTreeSet;

use uuid::Uuid;

use super::*;

fn topic() -> Uuid {
    Uuid::from_u128(7)
}

fn parts(partitions: &[i32]) -> Assignment {
    [(
        topic(),
        partitions.iter().copied().collect::<BTreeSet<i32>>(),
    )]
    .into()
}

fn nobody_else(_: &Uuid, _: i32) -> bool {
    false
}

fn stable_member(epoch: i32, partitions: &[i32]) -> ConsumerMember {
    let mut member = ConsumerMember::new("m");
    member.member_epoch = epoch;
    member.assigned = parts(partitions);
    member
}

#[test]
fn stable_member_with_only_new_partitions_moves_to_the_target_epoch() {
    let mut member = stable_member(1, &[0]);
    member.reconcile(2, &parts(&[0, 1]), None, &nobody_else);
    assert_eq!(member.state, MemberState::Stable);
    assert_eq!(member.member_epoch, 2);
    assert_eq!(member.previous_member_epoch, 1);
    assert_eq!(member.assigned, parts(&[0, 1]));
}

#[test]
fn unchanged_partitions_are_kept_and_the_epoch_advances() {
    let mut member = stable_member(1, &[0, 1]);
    member.reconcile(3, &parts(&[0, 1]), None, &nobody_else);
    assert_eq!(member.state, MemberState::Stable);
    assert_eq!(member.member_epoch, 3);
    assert_eq!(member.assigned, parts(&[0, 1]));
}

#[test]
fn stable_to_unrevoked_keeps_the_epoch_until_the_revocation_is_acknowledged() {
    let mut member = stable_member(1, &[0, 1, 2]);
    member.reconcile(2, &parts(&[0]), None, &nobody_else);
    assert_eq!(member.state, MemberState::UnrevokedPartitions);
    assert_eq!(member.member_epoch, 1);
    assert_eq!(member.assigned, parts(&[0]));
    assert_eq!(member.revoking, parts(&[1, 2]));
    // A heartbeat that still owns a revoked partition changes nothing.
    member.reconcile(2, &parts(&[0]), Some(&parts(&[0, 2])), &nobody_else);
    assert_eq!(member.state, MemberState::UnrevokedPartitions);
    // A heartbeat without ownership information changes nothing either.
    member.reconcile(2, &parts(&[0]), None, &nobody_else);
    assert_eq!(member.state, MemberState::UnrevokedPartitions);
    member.reconcile(2, &parts(&[0]), Some(&parts(&[0])), &nobody_else);
    assert_eq!(member.state, MemberState::Stable);
    assert_eq!(member.member_epoch, 2);
    assert!(member.revoking.is_empty());
}

#[test]
fn partitions_held_elsewhere_are_withheld_as_unreleased() {
    let mut member = stable_member(1, &[0]);
    let held = |_: &Uuid, partition: i32| partition == 1;
    member.reconcile(2, &parts(&[0, 1, 2]), None, &held);
    assert_eq!(member.state, MemberState::UnreleasedPartitions);
    assert_eq!(member.member_epoch, 2);
    assert_eq!(member.assigned, parts(&[0, 2]));
    member.reconcile(2, &parts(&[0, 1, 2]), None, &nobody_else);
    assert_eq!(member.state, MemberState::Stable);
    assert_eq!(member.assigned, parts(&[0, 1, 2]));
}

#[test]
fn unreleased_member_revokes_first_when_the_target_shrinks() {
    let mut member = stable_member(1, &[0]);
    let held = |_: &Uuid, partition: i32| partition == 1;
    member.reconcile(2, &parts(&[0, 1]), None, &held);
    assert_eq!(member.state, MemberState::UnreleasedPartitions);
    member.reconcile(3, &parts(&[1]), None, &held);
    assert_eq!(member.state, MemberState::UnrevokedPartitions);
    assert_eq!(member.member_epoch, 2);
    assert_eq!(member.revoking, parts(&[0]));
}

#[test]
fn state_codes_round_trip() {
    for state in MemberState::ALL {
        assert_eq!(MemberState::from_code(state.code()), state);
    }
    assert_eq!(MemberState::from_code(55), MemberState::Unknown);
}

#[test]
fn holds_covers_assigned_and_revoking() {
    let mut member = stable_member(1, &[0, 1]);
    member.reconcile(2, &parts(&[0]), None, &nobody_else);
    assert!(member.holds(&topic(), 0));
    assert!(member.holds(&topic(), 1));
    assert!(!member.holds(&topic(), 2));
}
