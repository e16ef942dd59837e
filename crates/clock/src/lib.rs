//! The one clock and the one source of randomness of a Strom broker.
//!
//! This crate owns two small traits and their implementations:
//! [`Clock`] (wall-clock and monotonic time) and [`Random`] (a seedable
//! stream of random numbers). The broker builds one of each at start and
//! hands them to storage, replication, the controller and the group
//! coordinator, so that a test or a simulation decides what time it is and
//! which random choices are made. It deliberately owns nothing else: no
//! timers, no scheduling, no runtime. Where a component must *wait* (a
//! tokio `sleep`, an `interval`) it still waits on tokio's timer; the clock
//! only answers "what time is it", which is what decisions (segment age,
//! retention, session expiry, lease and commit timestamps) depend on.
//!
//! The crate sits at the bottom of the layering, below storage: the protocol
//! crate stays clock-free (it works on bytes only), and every server crate
//! may depend on this one. It has no dependencies of its own unless the
//! `tokio` feature is on.
//!
//! Design decisions a newcomer must know:
//! - **Two readings, two types.** [`Clock::wall_ms`] is milliseconds since
//!   the Unix epoch as an `i64`, what Kafka stores in record timestamps and
//!   compares with `retention.ms` and `segment.ms`; it may jump backwards or
//!   forwards when the operating system's clock is stepped.
//!   [`Clock::monotonic_ms`] is a `u64` from an arbitrary origin that never
//!   decreases, for durations: broker sessions, leases, timeouts. A
//!   component that measures how long something took reads the monotonic
//!   clock, so a wall-clock step cannot expire every session at once.
//! - **[`ManualClock`] moves the two readings independently.** A test
//!   advances both together ([`ManualClock::advance`]) or jumps only the
//!   wall clock ([`ManualClock::set_wall_ms`], [`ManualClock::jump_wall_ms`])
//!   to check that nothing measured with the monotonic clock is disturbed.
//! - **Production reads `std`, paused-time tests read tokio.**
//!   [`SystemClock`] reads [`std::time::SystemTime`] and
//!   [`std::time::Instant`]: the wall reading follows the operating system
//!   (NTP corrections included), as Kafka's timestamps must. The optional
//!   `TokioClock` (feature `tokio`) reads `tokio::time::Instant`, so under
//!   `tokio::time::pause()` the clock and every tokio timer move together
//!   with `tokio::time::advance`; its wall reading is the wall time at
//!   creation plus that elapsed time, so it never follows a step of the
//!   system clock. It is for tests (the coordinator's paused-time tests run
//!   on it), not for brokers: a broker that ran for weeks on it would drift
//!   from the host's wall clock. [`SystemClock`] does not read tokio's time
//!   because that would tie the crate to a runtime, and because outside
//!   paused tests the two read the same monotonic source.
//! - **One random stream, shared.** [`Random`] takes `&self`, so one
//!   `Arc<dyn Random>` serves every component. [`SeededRandom`] is
//!   SplitMix64 with an atomic state: the same seed gives the same sequence
//!   of draws, and a single-threaded simulation that draws in a fixed order
//!   is reproducible. It is not cryptographic; secrets (SASL nonces, TLS)
//!   come from `ring`'s system random, never from here.
//!
//! Feature flags: `tokio` adds `TokioClock` (off by default).

#![deny(missing_docs)]

mod clock;
mod random;
#[cfg(feature = "tokio")]
mod tokio_clock;

pub use clock::{Clock, ManualClock, SystemClock};
pub use random::{Random, SeededRandom};
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;
