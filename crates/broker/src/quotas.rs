//! The broker's client quotas: the one [`ClientQuotaManager`] of this
//! broker, kept in line with the quotas of the metadata image, and what a
//! throttle does to an answer (KIP-219): the response carries
//! `throttle_time_ms` and leaves at once, and the connection reads no
//! further request until the time has passed.
//!
//! Who a request is accounted to: the principal's name (`ANONYMOUS` on an
//! unauthenticated listener) and the client id of the request header (the
//! empty string when it has none), as in Kafka.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use strom_clock::Clock;
use strom_controller::MetadataImage;
use strom_network::RequestContext;
use strom_quotas::{ClientQuotaManager, QuotaKey, QuotaTable, QuotaUsage, QuotaWindow};

/// Who a request is accounted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaClient {
    /// The principal's name.
    pub user: String,
    /// The request header's client id (empty when absent).
    pub client_id: String,
}

impl QuotaClient {
    /// The client of a request.
    pub fn of(context: &RequestContext) -> Self {
        Self {
            user: context.session.principal().name,
            client_id: context.client_id.clone().unwrap_or_default(),
        }
    }
}

struct State {
    manager: ClientQuotaManager,
    /// The image's table the manager last took (compared by pointer).
    source: Arc<QuotaTable>,
}

/// Client quotas of this broker. See the module docs.
pub struct QuotaService {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for QuotaService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("QuotaService")
            .finish_non_exhaustive()
    }
}

impl QuotaService {
    /// A service measuring over the window of `quota.window.num` and
    /// `quota.window.size.seconds`.
    pub fn from_config(config: &crate::config::BrokerConfig, clock: Arc<dyn Clock>) -> Self {
        let window = QuotaWindow::new(
            config.quota_window_num,
            u64::from(config.quota_window_size_seconds).saturating_mul(1_000),
        );
        Self::new(window, clock)
    }

    /// A service measuring over `window`, reading time from `clock`.
    pub fn new(window: QuotaWindow, clock: Arc<dyn Clock>) -> Self {
        Self {
            state: Mutex::new(State {
                manager: ClientQuotaManager::new(window),
                source: Arc::new(QuotaTable::new()),
            }),
            clock,
        }
    }

    /// The manager, with the quotas of `image`. A poisoned lock is reused:
    /// the manager's state is rates and counters, each changed by single
    /// assignments, and a lost sample only makes a throttle shorter.
    fn manager(&self, image: &MetadataImage) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let table = image.client_quotas().table();
        if !Arc::ptr_eq(&state.source, table) {
            state.source = Arc::clone(table);
            state.manager.set_table(QuotaTable::clone(table));
        }
        state
    }

    fn now_ms(&self) -> u64 {
        self.clock.monotonic_ms()
    }

    /// Whether any quota of `key` is configured in `image` (when none is,
    /// nothing is recorded and nothing locked).
    pub fn enabled(image: &MetadataImage, key: QuotaKey) -> bool {
        let table = image.client_quotas().table();
        !table.is_empty() && table.has_key(key)
    }

    /// Records `value` of `key` for `client`; the throttle time.
    pub fn record(
        &self,
        image: &MetadataImage,
        key: QuotaKey,
        client: &QuotaClient,
        value: f64,
    ) -> Duration {
        if !Self::enabled(image, key) {
            return Duration::ZERO;
        }
        let now_ms = self.now_ms();
        let throttle_ms =
            self.manager(image)
                .manager
                .record(key, &client.user, &client.client_id, value, now_ms);
        Duration::from_millis(throttle_ms)
    }

    /// Takes back a recorded `value` of `key`.
    pub fn unrecord(&self, image: &MetadataImage, key: QuotaKey, client: &QuotaClient, value: f64) {
        if !Self::enabled(image, key) {
            return;
        }
        let now_ms = self.now_ms();
        self.manager(image)
            .manager
            .unrecord(key, &client.user, &client.client_id, value, now_ms);
    }

    /// The most `client` may fetch in one quota window, if limited.
    pub fn max_fetch_bytes(&self, image: &MetadataImage, client: &QuotaClient) -> Option<u64> {
        if !Self::enabled(image, QuotaKey::ConsumerByteRate) {
            return None;
        }
        let bytes = self.manager(image).manager.max_value_in_window(
            QuotaKey::ConsumerByteRate,
            &client.user,
            &client.client_id,
        )?;
        // A float-to-integer `as` saturates.
        Some(bytes.max(1.0) as u64)
    }

    /// KIP-599's check before a controller mutation: the throttle time if
    /// the client's bucket is empty.
    pub fn check_mutations(
        &self,
        image: &MetadataImage,
        client: &QuotaClient,
    ) -> Result<(), Duration> {
        if !Self::enabled(image, QuotaKey::ControllerMutationRate) {
            return Ok(());
        }
        let now_ms = self.now_ms();
        self.manager(image)
            .manager
            .check_mutations(&client.user, &client.client_id, now_ms)
            .map_err(Duration::from_millis)
    }

    /// Takes `partitions` mutations; the throttle time.
    pub fn record_mutations(
        &self,
        image: &MetadataImage,
        client: &QuotaClient,
        partitions: u32,
    ) -> Duration {
        if !Self::enabled(image, QuotaKey::ControllerMutationRate) || partitions == 0 {
            return Duration::ZERO;
        }
        let now_ms = self.now_ms();
        let throttle_ms = self.manager(image).manager.record_mutations(
            &client.user,
            &client.client_id,
            partitions,
            now_ms,
        );
        Duration::from_millis(throttle_ms)
    }

    /// The measured usage of every limited client, for metrics.
    pub fn usage(&self) -> Vec<QuotaUsage> {
        let now_ms = self.now_ms();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.manager.forget_idle(now_ms);
        state.manager.usage(now_ms)
    }
}

/// A throttle time as the responses carry it.
pub fn throttle_ms_field(throttle: Duration) -> i32 {
    i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX)
}
