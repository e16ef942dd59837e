//! [`ClientQuotaManager`]: a client's usage against the quota that applies
//! to it.
//!
//! The manager is a plain value (the broker keeps it behind a lock): the
//! configured [`QuotaTable`], one [`SampledRate`] per (key, usage key) and
//! one [`TokenBucket`] per usage key of controller mutations. Time comes in
//! as `now_ms`, a monotonic reading.

use std::collections::HashMap;

use crate::entity::QuotaKey;
use crate::rate::{throttle_time_ms, QuotaWindow, SampledRate, TokenBucket};
use crate::table::{QuotaTable, UsageKey};

/// What was measured for one usage key of one quota key: for metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaUsage {
    /// The quota key.
    pub key: QuotaKey,
    /// Who the usage is summed under.
    pub usage: UsageKey,
    /// The quota, per second.
    pub bound: f64,
    /// The measured rate per second (for controller mutations: the tokens
    /// left in the bucket).
    pub rate: f64,
    /// The sum of the throttle times answered, in milliseconds.
    pub throttle_time_ms_total: u64,
    /// How many answers carried a throttle time.
    pub throttled_total: u64,
}

#[derive(Debug, Clone, Default)]
struct Meter {
    rate: SampledRate,
    bucket: TokenBucket,
    bound: f64,
    throttle_time_ms_total: u64,
    throttled_total: u64,
}

impl Meter {
    fn count_throttle(&mut self, throttle_ms: u64) -> u64 {
        if throttle_ms > 0 {
            self.throttle_time_ms_total = self.throttle_time_ms_total.saturating_add(throttle_ms);
            self.throttled_total += 1;
        }
        throttle_ms
    }
}

/// The quota resolved for one (user, client id): its bound and the key its
/// usage is summed under; `None` when no quota applies.
type Resolution = Option<(f64, UsageKey)>;

/// Resolutions by user, then client id (looked up by `&str`, without
/// allocating).
type Resolutions = HashMap<String, HashMap<String, Resolution>>;

/// Most resolutions remembered per key; past it the cache starts again
/// (client ids are chosen by clients, so their number has no bound).
const MAX_CACHED_RESOLUTIONS: usize = 10_000;

/// Client quotas of one broker. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct ClientQuotaManager {
    window: QuotaWindow,
    table: QuotaTable,
    /// By [`QuotaKey::index`]: the meters of each usage key.
    meters: [HashMap<UsageKey, Meter>; 4],
    /// By [`QuotaKey::index`]: KIP-55's resolution, remembered until the
    /// table changes, with how many entries each holds.
    resolutions: [(Resolutions, usize); 4],
}

impl ClientQuotaManager {
    /// A manager over `window` with no quota configured.
    pub fn new(window: QuotaWindow) -> Self {
        Self {
            window,
            ..Self::default()
        }
    }

    /// The window rates are measured over.
    pub fn window(&self) -> QuotaWindow {
        self.window
    }

    /// The configured quotas.
    pub fn table(&self) -> &QuotaTable {
        &self.table
    }

    /// Replaces the configured quotas (the measured usage is kept; a usage
    /// key no quota resolves to any more is dropped at the next
    /// [`ClientQuotaManager::forget_idle`]).
    pub fn set_table(&mut self, table: QuotaTable) {
        self.table = table;
        self.resolutions = Default::default();
    }

    /// Whether any quota of `key` is configured (nothing to record if not).
    pub fn is_enabled(&self, key: QuotaKey) -> bool {
        self.table.has_key(key)
    }

    /// The meter of the quota of `key` that applies to (`user`,
    /// `client_id`), with its bound; `None` when no quota applies.
    fn meter(&mut self, key: QuotaKey, user: &str, client_id: &str) -> Option<(f64, &mut Meter)> {
        let (resolutions, cached) = &mut self.resolutions[key.index()];
        let known = resolutions
            .get(user)
            .and_then(|clients| clients.get(client_id))
            .is_some();
        if !known {
            if *cached >= MAX_CACHED_RESOLUTIONS {
                resolutions.clear();
                *cached = 0;
            }
            let resolved = self
                .table
                .resolve(user, client_id, key)
                .map(|resolved| (resolved.bound, resolved.usage));
            resolutions
                .entry(user.to_owned())
                .or_default()
                .insert(client_id.to_owned(), resolved);
            *cached += 1;
        }
        let (bound, usage) = resolutions.get(user)?.get(client_id)?.as_ref()?;
        let meters = &mut self.meters[key.index()];
        if !meters.contains_key(usage) {
            meters.insert(usage.clone(), Meter::default());
        }
        let meter = meters.get_mut(usage)?;
        meter.bound = *bound;
        Some((*bound, meter))
    }

    /// Records `value` (bytes, or percent-seconds of handler time for
    /// `request_percentage`) for principal `user` with `client_id` at
    /// `now_ms`, and answers the throttle time in milliseconds: zero under
    /// the quota or when none applies. The request quota's throttle is at
    /// most one sample window (Kafka bounds it so).
    pub fn record(
        &mut self,
        key: QuotaKey,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: u64,
    ) -> u64 {
        let window = self.window;
        let Some((bound, meter)) = self.meter(key, user, client_id) else {
            return 0;
        };
        meter.rate.record(&window, value, now_ms);
        let rate = meter.rate.rate_per_second(&window, now_ms);
        let mut throttle_ms = throttle_time_ms(rate, bound, meter.rate.window_ms(&window, now_ms));
        if key == QuotaKey::RequestPercentage {
            throttle_ms = throttle_ms.min(window.sample_ms());
        }
        meter.count_throttle(throttle_ms)
    }

    /// Takes back a recorded `value` (a throttled Fetch sends no records,
    /// so its bytes do not count).
    pub fn unrecord(
        &mut self,
        key: QuotaKey,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: u64,
    ) {
        let window = self.window;
        if let Some((_, meter)) = self.meter(key, user, client_id) {
            meter.rate.record(&window, -value, now_ms);
        }
    }

    /// The most a client may use of `key` in one window (Kafka caps a
    /// Fetch's `max_bytes` with it); `None` when no quota applies.
    pub fn max_value_in_window(&self, key: QuotaKey, user: &str, client_id: &str) -> Option<f64> {
        let resolved = self.table.resolve(user, client_id, key)?;
        Some(self.window.max_value_in_window(resolved.bound))
    }

    /// KIP-599's strict check before a controller mutation: `Err` with the
    /// throttle time when the client's bucket is below zero.
    pub fn check_mutations(&mut self, user: &str, client_id: &str, now_ms: u64) -> Result<(), u64> {
        let window = self.window;
        let Some((bound, meter)) = self.meter(QuotaKey::ControllerMutationRate, user, client_id)
        else {
            return Ok(());
        };
        match meter.bucket.throttle_time_ms(&window, bound, now_ms) {
            0 => Ok(()),
            throttle_ms => Err(meter.count_throttle(throttle_ms)),
        }
    }

    /// Takes `partitions` mutations from the client's bucket and answers
    /// the throttle time (zero while the bucket is not below zero).
    pub fn record_mutations(
        &mut self,
        user: &str,
        client_id: &str,
        partitions: u32,
        now_ms: u64,
    ) -> u64 {
        let window = self.window;
        let Some((bound, meter)) = self.meter(QuotaKey::ControllerMutationRate, user, client_id)
        else {
            return 0;
        };
        meter
            .bucket
            .take(&window, bound, f64::from(partitions), now_ms);
        let throttle_ms = meter.bucket.throttle_time_ms(&window, bound, now_ms);
        meter.count_throttle(throttle_ms)
    }

    /// Drops the usage of keys with no live sample and no quota any more.
    pub fn forget_idle(&mut self, now_ms: u64) {
        let window = self.window;
        let table = &self.table;
        for (key, meters) in QuotaKey::ALL.into_iter().zip(self.meters.iter_mut()) {
            meters.retain(|usage, meter| {
                let still_limited = table
                    .resolve(
                        usage.user.as_deref().unwrap_or(""),
                        usage.client_id.as_deref().unwrap_or(""),
                        key,
                    )
                    .is_some_and(|resolved| resolved.usage == *usage);
                still_limited || !meter.rate.is_idle(&window, now_ms)
            });
        }
    }

    /// The usage of every measured key at `now_ms`, for metrics.
    pub fn usage(&mut self, now_ms: u64) -> Vec<QuotaUsage> {
        let window = self.window;
        let mut usage: Vec<QuotaUsage> = QuotaKey::ALL
            .into_iter()
            .zip(self.meters.iter_mut())
            .flat_map(|(key, meters)| {
                meters.iter_mut().map(move |(usage, meter)| QuotaUsage {
                    key,
                    usage: usage.clone(),
                    bound: meter.bound,
                    rate: if key == QuotaKey::ControllerMutationRate {
                        meter.bucket.tokens(&window, meter.bound, now_ms)
                    } else {
                        meter.rate.rate_per_second(&window, now_ms)
                    },
                    throttle_time_ms_total: meter.throttle_time_ms_total,
                    throttled_total: meter.throttled_total,
                })
            })
            .collect();
        usage.sort_by(|a, b| (a.key, &a.usage).cmp(&(b.key, &b.usage)));
        usage
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
