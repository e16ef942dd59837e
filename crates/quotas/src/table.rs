//! The configured quotas and the one that applies to a client.
//!
//! KIP-55's order, most specific first, for a client with principal name
//! `user` and client id `client`:
//!
//! 1. `/users/<user>/clients/<client>`
//! 2. `/users/<user>/clients/<default>`
//! 3. `/users/<user>`
//! 4. `/users/<default>/clients/<client>`
//! 5. `/users/<default>/clients/<default>`
//! 6. `/users/<default>`
//! 7. `/clients/<client>`
//! 8. `/clients/<default>`
//!
//! The search is per key: a client may take its `producer_byte_rate` from
//! level 3 and its `consumer_byte_rate` from level 8.

use std::collections::BTreeMap;

use crate::entity::{EntityName, QuotaEntity, QuotaKey};

/// Who a client's usage is summed under: the parts of the matched entity,
/// with `<default>` replaced by the client's own name (Kafka's quota
/// metric tags `user` and `client-id`, where `None` is Kafka's empty tag).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsageKey {
    /// The user the usage is summed under, if the matched entity has one.
    pub user: Option<String>,
    /// The client id the usage is summed under, if the matched entity has
    /// one.
    pub client_id: Option<String>,
}

/// The quota that applies to a client for one key.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedQuota {
    /// The bound, per second (bytes, percent, or mutations).
    pub bound: f64,
    /// The entity it was configured on.
    pub entity: QuotaEntity,
    /// Who the usage is summed under.
    pub usage: UsageKey,
}

/// Which entities a DescribeClientQuotas component matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameMatch {
    /// Kafka's match type 0: this name (`<default>` when `None`).
    Exact(Option<String>),
    /// Match type 1: the `<default>` entity.
    Default,
    /// Match type 2: any entity with a name of its own.
    Specified,
}

impl NameMatch {
    fn matches(&self, name: &EntityName) -> bool {
        match (self, name) {
            (Self::Exact(Some(wanted)), EntityName::Named(name)) => wanted == name,
            (Self::Exact(None) | Self::Default, EntityName::Default) => true,
            (Self::Specified, EntityName::Named(_)) => true,
            _ => false,
        }
    }
}

/// One component of a DescribeClientQuotas filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterComponent {
    /// `user` or `client-id` (`true` for user).
    pub is_user: bool,
    /// How the name must match.
    pub name: NameMatch,
}

/// Every configured quota, by entity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaTable {
    entities: BTreeMap<QuotaEntity, BTreeMap<QuotaKey, f64>>,
    /// How many entities have each key (by [`QuotaKey::index`]), so that
    /// a request learns in constant time whether its kind is limited.
    key_counts: [usize; 4],
}

impl QuotaTable {
    /// An empty table: no client is limited.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` of `entity` to `value`.
    pub fn set(&mut self, entity: QuotaEntity, key: QuotaKey, value: f64) {
        if self
            .entities
            .entry(entity)
            .or_default()
            .insert(key, value)
            .is_none()
        {
            self.key_counts[key.index()] += 1;
        }
    }

    /// Removes `key` of `entity`; whether it was set.
    pub fn remove(&mut self, entity: &QuotaEntity, key: QuotaKey) -> bool {
        let Some(quotas) = self.entities.get_mut(entity) else {
            return false;
        };
        let removed = quotas.remove(&key).is_some();
        if removed {
            self.key_counts[key.index()] -= 1;
        }
        if quotas.is_empty() {
            self.entities.remove(entity);
        }
        removed
    }

    /// The quotas of `entity`.
    pub fn get(&self, entity: &QuotaEntity) -> Option<&BTreeMap<QuotaKey, f64>> {
        self.entities.get(entity)
    }

    /// Every entity with its quotas.
    pub fn entities(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<QuotaKey, f64>)> {
        self.entities.iter()
    }

    /// Whether no quota is configured.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Whether any entity has a quota for `key` (when none does, usage of
    /// that kind is not even recorded, as in Kafka).
    pub fn has_key(&self, key: QuotaKey) -> bool {
        self.key_counts[key.index()] > 0
    }

    /// The quota of `key` that applies to principal `user` with client id
    /// `client_id`, in KIP-55's order; `None` when none applies.
    pub fn resolve(&self, user: &str, client_id: &str, key: QuotaKey) -> Option<ResolvedQuota> {
        if self.entities.is_empty() {
            return None;
        }
        let named_user = || EntityName::Named(user.to_owned());
        let named_client = || EntityName::Named(client_id.to_owned());
        // Which parts of the client the usage is summed under, per level.
        let (both, user_only, client_only) = ((true, true), (true, false), (false, true));
        let order = [
            (QuotaEntity::user_client(named_user(), named_client()), both),
            (
                QuotaEntity::user_client(named_user(), EntityName::Default),
                both,
            ),
            (QuotaEntity::user(named_user()), user_only),
            (
                QuotaEntity::user_client(EntityName::Default, named_client()),
                both,
            ),
            (
                QuotaEntity::user_client(EntityName::Default, EntityName::Default),
                both,
            ),
            (QuotaEntity::user(EntityName::Default), user_only),
            (QuotaEntity::client(named_client()), client_only),
            (QuotaEntity::client(EntityName::Default), client_only),
        ];
        order
            .into_iter()
            .find_map(|(entity, (by_user, by_client))| {
                let bound = *self.entities.get(&entity)?.get(&key)?;
                Some(ResolvedQuota {
                    bound,
                    entity,
                    usage: UsageKey {
                        user: by_user.then(|| user.to_owned()),
                        client_id: by_client.then(|| client_id.to_owned()),
                    },
                })
            })
    }

    /// The entities a DescribeClientQuotas filter matches: each component's
    /// type must be present and match; with `strict`, the entity has no
    /// other type. An empty filter matches every entity (or, strict, none).
    pub fn describe(
        &self,
        components: &[FilterComponent],
        strict: bool,
    ) -> Vec<(&QuotaEntity, &BTreeMap<QuotaKey, f64>)> {
        self.entities
            .iter()
            .filter(|(entity, _)| entity_matches(entity, components, strict))
            .collect()
    }
}

fn entity_matches(entity: &QuotaEntity, components: &[FilterComponent], strict: bool) -> bool {
    let all_match = components.iter().all(|component| {
        let part = if component.is_user {
            entity.user_name()
        } else {
            entity.client_id_name()
        };
        part.is_some_and(|name| component.name.matches(name))
    });
    if !all_match {
        return false;
    }
    if !strict {
        return true;
    }
    let parts =
        usize::from(entity.user_name().is_some()) + usize::from(entity.client_id_name().is_some());
    parts == components.len()
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
