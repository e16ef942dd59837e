use super::*;
use crate::entity::{EntityName, QuotaEntity};

fn manager_with(entity: QuotaEntity, key: QuotaKey, bound: f64) -> ClientQuotaManager {
    let mut table = QuotaTable::new();
    table.set(entity, key, bound);
    let mut manager = ClientQuotaManager::new(QuotaWindow::default());
    manager.set_table(table);
    manager
}

#[test]
fn no_quota_means_no_throttle_and_no_recording() {
    let mut manager = ClientQuotaManager::new(QuotaWindow::default());
    assert!(!manager.is_enabled(QuotaKey::ProducerByteRate));
    assert_eq!(
        manager.record(QuotaKey::ProducerByteRate, "alice", "app", 1e12, 0),
        0
    );
    assert!(manager.usage(0).is_empty());
}

#[test]
fn a_producer_over_its_quota_is_throttled_until_the_rate_is_back() {
    let mut manager = manager_with(
        QuotaEntity::client(EntityName::Named("app".into())),
        QuotaKey::ProducerByteRate,
        1_000.0,
    );
    // 10,000 bytes at once are exactly the quota over the 10 s minimum span.
    assert_eq!(
        manager.record(QuotaKey::ProducerByteRate, "u", "app", 10_000.0, 0),
        0
    );
    // 2,000 more: 12,000 over 10 s is 20% over, 2 s of throttle.
    assert_eq!(
        manager.record(QuotaKey::ProducerByteRate, "u", "app", 2_000.0, 0),
        2_000
    );
    // Another client id is not limited by this entity.
    assert_eq!(
        manager.record(QuotaKey::ProducerByteRate, "u", "other", 1e9, 0),
        0
    );
    let usage = manager.usage(0);
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0].throttle_time_ms_total, 2_000);
    assert_eq!(usage[0].throttled_total, 1);
    assert_eq!(usage[0].bound, 1_000.0);
}

#[test]
fn all_clients_of_a_user_share_the_user_quota() {
    let mut manager = manager_with(
        QuotaEntity::user(EntityName::Named("alice".into())),
        QuotaKey::ConsumerByteRate,
        100.0,
    );
    assert_eq!(
        manager.record(QuotaKey::ConsumerByteRate, "alice", "a", 1_000.0, 0),
        0
    );
    assert!(manager.record(QuotaKey::ConsumerByteRate, "alice", "b", 1_000.0, 0) > 0);
}

#[test]
fn a_default_user_quota_gives_each_user_its_own_rate() {
    let mut manager = manager_with(
        QuotaEntity::user(EntityName::Default),
        QuotaKey::ConsumerByteRate,
        100.0,
    );
    assert_eq!(
        manager.record(QuotaKey::ConsumerByteRate, "alice", "a", 1_000.0, 0),
        0
    );
    assert_eq!(
        manager.record(QuotaKey::ConsumerByteRate, "bob", "a", 1_000.0, 0),
        0
    );
}

#[test]
fn an_unrecorded_fetch_does_not_count() {
    let mut manager = manager_with(
        QuotaEntity::client(EntityName::Default),
        QuotaKey::ConsumerByteRate,
        100.0,
    );
    assert!(manager.record(QuotaKey::ConsumerByteRate, "u", "c", 5_000.0, 0) > 0);
    manager.unrecord(QuotaKey::ConsumerByteRate, "u", "c", 5_000.0, 0);
    assert_eq!(
        manager.record(QuotaKey::ConsumerByteRate, "u", "c", 10.0, 0),
        0
    );
    assert_eq!(
        manager.max_value_in_window(QuotaKey::ConsumerByteRate, "u", "c"),
        Some(1_000.0)
    );
    assert_eq!(
        manager.max_value_in_window(QuotaKey::ProducerByteRate, "u", "c"),
        None
    );
}

#[test]
fn the_request_quota_throttle_is_at_most_one_sample() {
    let mut manager = manager_with(
        QuotaEntity::user(EntityName::Default),
        QuotaKey::RequestPercentage,
        1.0,
    );
    let throttle = manager.record(QuotaKey::RequestPercentage, "u", "c", 1_000.0, 0);
    assert_eq!(throttle, 1_000);
}

#[test]
fn mutations_are_refused_once_the_bucket_is_empty() {
    let mut manager = manager_with(
        QuotaEntity::user(EntityName::Default),
        QuotaKey::ControllerMutationRate,
        1.0,
    );
    // A burst of 11; the request that goes below zero is accepted.
    assert_eq!(manager.check_mutations("u", "c", 0), Ok(()));
    assert_eq!(manager.record_mutations("u", "c", 10, 0), 0);
    assert_eq!(manager.check_mutations("u", "c", 0), Ok(()));
    assert_eq!(manager.record_mutations("u", "c", 3, 0), 2_000);
    assert_eq!(manager.check_mutations("u", "c", 0), Err(2_000));
    assert_eq!(manager.check_mutations("u", "c", 1_500), Err(500));
    assert_eq!(manager.check_mutations("u", "c", 2_000), Ok(()));
}

#[test]
fn idle_usage_without_a_quota_is_forgotten() {
    let mut manager = manager_with(
        QuotaEntity::client(EntityName::Default),
        QuotaKey::ProducerByteRate,
        100.0,
    );
    manager.record(QuotaKey::ProducerByteRate, "u", "c", 1.0, 0);
    manager.set_table(QuotaTable::new());
    manager.forget_idle(5_000);
    assert_eq!(manager.usage(5_000).len(), 1, "a live sample keeps it");
    manager.forget_idle(11_000);
    assert!(manager.usage(11_000).is_empty());
}

#[test]
fn a_changed_table_applies_to_clients_already_seen() {
    let mut manager = manager_with(
        QuotaEntity::client(EntityName::Default),
        QuotaKey::ProducerByteRate,
        100.0,
    );
    assert!(manager.record(QuotaKey::ProducerByteRate, "u", "c", 5_000.0, 0) > 0);
    let mut table = QuotaTable::new();
    table.set(
        QuotaEntity::client(EntityName::Named("c".into())),
        QuotaKey::ProducerByteRate,
        1e9,
    );
    manager.set_table(table);
    // The client now resolves to its own entity, with a rate of its own.
    assert_eq!(
        manager.record(QuotaKey::ProducerByteRate, "u", "c", 5_000.0, 0),
        0
    );
    manager.set_table(QuotaTable::new());
    assert_eq!(
        manager.record(QuotaKey::ProducerByteRate, "u", "c", 1e12, 0),
        0
    );
}

#[test]
fn many_client_ids_do_not_grow_the_resolution_cache_without_bound() {
    let mut manager = manager_with(
        QuotaEntity::client(EntityName::Default),
        QuotaKey::ProducerByteRate,
        1e12,
    );
    for index in 0..(MAX_CACHED_RESOLUTIONS + 10) {
        manager.record(
            QuotaKey::ProducerByteRate,
            "u",
            &format!("c{index}"),
            1.0,
            0,
        );
    }
    let (resolutions, cached) = &manager.resolutions[QuotaKey::ProducerByteRate.index()];
    assert!(*cached <= MAX_CACHED_RESOLUTIONS);
    assert!(resolutions.values().map(HashMap::len).sum::<usize>() <= MAX_CACHED_RESOLUTIONS);
}
