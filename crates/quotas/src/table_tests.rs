use super::*;
use proptest::prelude::*;

fn named(name: &str) -> EntityName {
    EntityName::Named(name.to_owned())
}

/// The eight levels for user `alice` and client `app`, most specific first.
fn levels() -> [QuotaEntity; 8] {
    [
        QuotaEntity::user_client(named("alice"), named("app")),
        QuotaEntity::user_client(named("alice"), EntityName::Default),
        QuotaEntity::user(named("alice")),
        QuotaEntity::user_client(EntityName::Default, named("app")),
        QuotaEntity::user_client(EntityName::Default, EntityName::Default),
        QuotaEntity::user(EntityName::Default),
        QuotaEntity::client(named("app")),
        QuotaEntity::client(EntityName::Default),
    ]
}

#[test]
fn no_quota_applies_to_an_empty_table_or_another_key() {
    let mut table = QuotaTable::new();
    assert_eq!(
        table.resolve("alice", "app", QuotaKey::ProducerByteRate),
        None
    );
    table.set(
        QuotaEntity::user(named("alice")),
        QuotaKey::ConsumerByteRate,
        5.0,
    );
    assert_eq!(
        table.resolve("alice", "app", QuotaKey::ProducerByteRate),
        None
    );
    assert!(table.has_key(QuotaKey::ConsumerByteRate));
    assert!(!table.has_key(QuotaKey::ProducerByteRate));
    assert_eq!(
        table.resolve("bob", "app", QuotaKey::ConsumerByteRate),
        None
    );
}

#[test]
fn usage_is_summed_under_the_matched_entity() {
    let mut table = QuotaTable::new();
    table.set(
        QuotaEntity::user(EntityName::Default),
        QuotaKey::ProducerByteRate,
        10.0,
    );
    table.set(
        QuotaEntity::client(named("app")),
        QuotaKey::ConsumerByteRate,
        20.0,
    );
    table.set(
        QuotaEntity::user_client(EntityName::Default, EntityName::Default),
        QuotaKey::RequestPercentage,
        30.0,
    );
    let produce = table
        .resolve("alice", "app", QuotaKey::ProducerByteRate)
        .expect("user default");
    assert_eq!(produce.entity, QuotaEntity::user(EntityName::Default));
    assert_eq!(
        produce.usage,
        UsageKey {
            user: Some("alice".into()),
            client_id: None
        }
    );
    let fetch = table
        .resolve("alice", "app", QuotaKey::ConsumerByteRate)
        .expect("client");
    assert_eq!(
        fetch.usage,
        UsageKey {
            user: None,
            client_id: Some("app".into())
        }
    );
    let request = table
        .resolve("bob", "other", QuotaKey::RequestPercentage)
        .expect("user and client default");
    assert_eq!(request.bound, 30.0);
    assert_eq!(
        request.usage,
        UsageKey {
            user: Some("bob".into()),
            client_id: Some("other".into())
        }
    );
}

#[test]
fn removing_the_last_key_removes_the_entity() {
    let mut table = QuotaTable::new();
    let entity = QuotaEntity::client(named("app"));
    table.set(entity.clone(), QuotaKey::ProducerByteRate, 1.0);
    table.set(entity.clone(), QuotaKey::ProducerByteRate, 2.0);
    assert!(table.has_key(QuotaKey::ProducerByteRate));
    assert!(table.remove(&entity, QuotaKey::ProducerByteRate));
    assert!(!table.has_key(QuotaKey::ProducerByteRate));
    assert!(!table.remove(&entity, QuotaKey::ProducerByteRate));
    assert!(table.is_empty());
}

#[test]
fn describe_filters_by_exact_default_and_specified_names() {
    let mut table = QuotaTable::new();
    for (index, entity) in levels().into_iter().enumerate() {
        table.set(entity, QuotaKey::ProducerByteRate, index as f64 + 1.0);
    }
    let user = |name| FilterComponent {
        is_user: true,
        name,
    };
    let client = |name| FilterComponent {
        is_user: false,
        name,
    };
    assert_eq!(table.describe(&[], false).len(), 8);
    assert_eq!(table.describe(&[], true).len(), 0);
    let exact = table.describe(&[user(NameMatch::Exact(Some("alice".into())))], false);
    assert_eq!(exact.len(), 3);
    let exact_strict = table.describe(&[user(NameMatch::Exact(Some("alice".into())))], true);
    assert_eq!(exact_strict.len(), 1);
    assert_eq!(exact_strict[0].0, &QuotaEntity::user(named("alice")));
    let defaults = table.describe(
        &[user(NameMatch::Default), client(NameMatch::Default)],
        true,
    );
    assert_eq!(defaults.len(), 1);
    let specified = table.describe(&[client(NameMatch::Specified)], false);
    assert_eq!(specified.len(), 3);
}

proptest! {
    /// Whatever subset of the eight levels is configured, the most specific
    /// one applies.
    #[test]
    fn precedence_picks_the_most_specific_entity(configured in proptest::collection::vec(any::<bool>(), 8)) {
        let mut table = QuotaTable::new();
        for (index, entity) in levels().into_iter().enumerate() {
            if configured[index] {
                table.set(entity, QuotaKey::ProducerByteRate, index as f64 + 1.0);
            }
        }
        // Other users and clients never match alice's levels by name.
        table.set(QuotaEntity::user(named("bob")), QuotaKey::ProducerByteRate, 99.0);
        table.set(QuotaEntity::client(named("other")), QuotaKey::ProducerByteRate, 99.0);
        let expected = configured.iter().position(|set| *set);
        let resolved = table.resolve("alice", "app", QuotaKey::ProducerByteRate);
        match expected {
            None => prop_assert!(resolved.is_none()),
            Some(level) => {
                let resolved = resolved.expect("a level is configured");
                prop_assert_eq!(resolved.bound, level as f64 + 1.0);
                prop_assert_eq!(&resolved.entity, &levels()[level]);
            }
        }
    }
}

proptest! {
    /// Whether a key is configured follows every set and removal.
    #[test]
    fn has_key_follows_sets_and_removals(
        operations in proptest::collection::vec((0usize..3, 0usize..4, any::<bool>()), 0..40),
    ) {
        let mut table = QuotaTable::new();
        let entities = [
            QuotaEntity::user(named("a")),
            QuotaEntity::client(EntityName::Default),
            QuotaEntity::user_client(named("a"), named("b")),
        ];
        for (entity, key, set) in operations {
            let key = QuotaKey::ALL[key];
            if set {
                table.set(entities[entity].clone(), key, 1.0);
            } else {
                table.remove(&entities[entity], key);
            }
            for key in QuotaKey::ALL {
                let naive = table.entities().any(|(_, quotas)| quotas.contains_key(&key));
                prop_assert_eq!(table.has_key(key), naive);
            }
        }
    }
}
