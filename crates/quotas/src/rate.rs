//! Rates over Kafka's sampled windows, the throttle time, and the token
//! bucket of controller mutations.
//!
//! A [`SampledRate`] keeps up to `quota.window.num` samples, each covering
//! `quota.window.size.seconds`; a sample older than the whole window is
//! forgotten. The rate is the sum of the samples over the time they span,
//! where a span shorter than `samples - 1` windows counts as that many
//! (Kafka's `Rate.windowSize`), so that a client's first burst is measured
//! over ten seconds rather than over the few milliseconds it took.

use std::collections::VecDeque;

/// Kafka's default `quota.window.num`.
pub const DEFAULT_WINDOW_SAMPLES: u32 = 11;
/// Kafka's default `quota.window.size.seconds`, in milliseconds.
pub const DEFAULT_WINDOW_SIZE_MS: u64 = 1_000;

/// The sampled window of client quotas: `quota.window.num` samples of
/// `quota.window.size.seconds` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaWindow {
    samples: u32,
    sample_ms: u64,
}

impl Default for QuotaWindow {
    fn default() -> Self {
        Self {
            samples: DEFAULT_WINDOW_SAMPLES,
            sample_ms: DEFAULT_WINDOW_SIZE_MS,
        }
    }
}

impl QuotaWindow {
    /// A window of `samples` samples of `sample_ms` each; both are at least
    /// one (Kafka's `atLeast(1)`), smaller values are raised to one.
    pub fn new(samples: u32, sample_ms: u64) -> Self {
        Self {
            samples: samples.max(1),
            sample_ms: sample_ms.max(1),
        }
    }

    /// `quota.window.num`.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// `quota.window.size.seconds`, in milliseconds.
    pub fn sample_ms(&self) -> u64 {
        self.sample_ms
    }

    /// How long a sample is remembered: the whole window.
    fn expiry_ms(&self) -> u64 {
        self.sample_ms.saturating_mul(u64::from(self.samples))
    }

    /// The most one client may use in one quota window at `bound` per
    /// second (Kafka's `getMaxValueInQuotaWindow`): `samples - 1` windows'
    /// worth. A Fetch never asks for more than this.
    pub fn max_value_in_window(&self, bound: f64) -> f64 {
        let seconds = (u64::from(self.samples) - 1).max(1) as f64 * self.sample_ms as f64 / 1_000.0;
        bound * seconds
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// A rate per second over a [`QuotaWindow`] (Kafka's `Rate` over a
/// `SampledStat`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampledRate {
    samples: VecDeque<Sample>,
}

impl SampledRate {
    /// An empty rate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value` at `now_ms` (a negative value takes back an earlier
    /// recording, as Kafka's fetch quota does for a throttled fetch).
    pub fn record(&mut self, window: &QuotaWindow, value: f64, now_ms: u64) {
        self.forget_expired(window, now_ms);
        match self.samples.back_mut() {
            Some(current) if now_ms.saturating_sub(current.start_ms) < window.sample_ms => {
                current.value += value;
            }
            _ => {
                self.samples.push_back(Sample {
                    start_ms: now_ms,
                    value,
                });
                while self.samples.len() > window.samples as usize {
                    self.samples.pop_front();
                }
            }
        }
    }

    fn forget_expired(&mut self, window: &QuotaWindow, now_ms: u64) {
        let expiry_ms = window.expiry_ms();
        while self
            .samples
            .front()
            .is_some_and(|sample| now_ms.saturating_sub(sample.start_ms) >= expiry_ms)
        {
            self.samples.pop_front();
        }
    }

    fn live(&self, window: &QuotaWindow, now_ms: u64) -> impl Iterator<Item = &Sample> {
        let expiry_ms = window.expiry_ms();
        self.samples
            .iter()
            .filter(move |sample| now_ms.saturating_sub(sample.start_ms) < expiry_ms)
    }

    /// The span the rate is measured over at `now_ms`, in milliseconds:
    /// from the oldest live sample, at least `samples - 1` windows, at
    /// least 1 ms (Kafka's `Rate.windowSize`).
    pub fn window_ms(&self, window: &QuotaWindow, now_ms: u64) -> u64 {
        let oldest_ms = self
            .live(window, now_ms)
            .map(|sample| sample.start_ms)
            .next()
            .unwrap_or(now_ms);
        let mut elapsed_ms = now_ms.saturating_sub(oldest_ms);
        let full_windows = elapsed_ms / window.sample_ms;
        let min_full_windows = u64::from(window.samples) - 1;
        if full_windows < min_full_windows {
            elapsed_ms += (min_full_windows - full_windows) * window.sample_ms;
        }
        elapsed_ms.max(1)
    }

    /// The sum of the live samples.
    pub fn total(&self, window: &QuotaWindow, now_ms: u64) -> f64 {
        self.live(window, now_ms).map(|sample| sample.value).sum()
    }

    /// The measured rate per second at `now_ms`.
    pub fn rate_per_second(&self, window: &QuotaWindow, now_ms: u64) -> f64 {
        self.total(window, now_ms) * 1_000.0 / self.window_ms(window, now_ms) as f64
    }

    /// Whether no live sample is left at `now_ms` (the rate may be dropped).
    pub fn is_idle(&self, window: &QuotaWindow, now_ms: u64) -> bool {
        self.live(window, now_ms).next().is_none()
    }
}

/// Kafka's throttle time: how long, in milliseconds, until a rate measured
/// at `rate` over `window_ms` comes back to `bound`:
/// `(rate - bound) / bound * window_ms`, rounded; zero when the rate is not
/// above the bound (or the bound is not positive, which validation keeps
/// out).
pub fn throttle_time_ms(rate: f64, bound: f64, window_ms: u64) -> u64 {
    let over = rate > bound && bound > 0.0;
    if !over {
        return 0;
    }
    // A float-to-integer `as` saturates, and the value is positive here.
    ((rate - bound) / bound * window_ms as f64).round() as u64
}

/// The token bucket of controller mutations (KIP-599): it holds up to
/// `rate * samples * window` tokens, refills at `rate` tokens per second,
/// and each partition created or deleted takes one token; the bucket may
/// go below zero, and while it is below zero further mutations are refused.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    last_update_ms: Option<u64>,
}

impl Default for TokenBucket {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenBucket {
    /// A full bucket (it fills at the first call).
    pub fn new() -> Self {
        Self {
            tokens: 0.0,
            last_update_ms: None,
        }
    }

    fn burst(window: &QuotaWindow, rate: f64) -> f64 {
        rate * f64::from(window.samples) * window.sample_ms as f64 / 1_000.0
    }

    fn refill(&mut self, window: &QuotaWindow, rate: f64, now_ms: u64) {
        let burst = Self::burst(window, rate);
        self.tokens = match self.last_update_ms {
            None => burst,
            Some(last_ms) => {
                let elapsed_s = now_ms.saturating_sub(last_ms) as f64 / 1_000.0;
                (self.tokens + rate * elapsed_s).min(burst)
            }
        };
        self.last_update_ms = Some(now_ms.max(self.last_update_ms.unwrap_or(0)));
    }

    /// The tokens at `now_ms` for a quota of `rate` per second.
    pub fn tokens(&mut self, window: &QuotaWindow, rate: f64, now_ms: u64) -> f64 {
        self.refill(window, rate, now_ms);
        self.tokens
    }

    /// How long until the bucket is back at zero, in milliseconds (zero when
    /// it is not below zero).
    pub fn throttle_time_ms(&mut self, window: &QuotaWindow, rate: f64, now_ms: u64) -> u64 {
        let tokens = self.tokens(window, rate, now_ms);
        let refilling = rate > 0.0;
        if tokens >= 0.0 || !refilling {
            return 0;
        }
        (-tokens / rate * 1_000.0).round() as u64
    }

    /// Takes `permits` tokens at `now_ms`.
    pub fn take(&mut self, window: &QuotaWindow, rate: f64, permits: f64, now_ms: u64) {
        self.refill(window, rate, now_ms);
        self.tokens -= permits;
    }
}

#[cfg(test)]
#[path = "rate_tests.rs"]
mod tests;
