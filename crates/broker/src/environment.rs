//! The broker's one clock and one source of randomness.
//!
//! [`crate::broker::start`] builds an [`Environment`] from the operating
//! system ([`Environment::system`]) and hands its clock and random source to
//! everything it creates: the log manager and its scheduler (segment age,
//! retention, roll jitter), the replica manager and fetchers, the group
//! coordinator (sessions, commit timestamps), the embedded controller or
//! the quorum node (broker sessions, replica placement, topic ids), and the
//! registration (incarnation id). A test passes its own to
//! [`crate::broker::start_with`] (a [`strom_clock::ManualClock`], a
//! [`strom_clock::SeededRandom`] with a fixed seed) and decides what time
//! it is for the whole broker.
//!
//! What still reads the host's clocks directly, on purpose: request and
//! flush latency measurements for metrics, tokio timers that bound a wait
//! (produce `timeout.ms`, fetch `max.wait.ms`, start-up and shutdown
//! deadlines), the rate limit of repeated warnings and of the certificate
//! reload check, and openraft's own election timers (see
//! `docs/testing.md`).

use std::sync::Arc;

use strom_clock::{Clock, Random, SeededRandom, SystemClock};

/// The clock and random source a broker and everything it creates use.
#[derive(Debug, Clone)]
pub struct Environment {
    /// The broker's clock.
    pub clock: Arc<dyn Clock>,
    /// The broker's source of randomness.
    pub random: Arc<dyn Random>,
}

impl Environment {
    /// The operating system's clock and a generator seeded from its
    /// randomness (the seed is logged at start, so a run can be repeated).
    pub fn system() -> Environment {
        let random = SeededRandom::from_entropy();
        tracing::debug!(seed = random.seed(), "random source seeded");
        Environment {
            clock: Arc::new(SystemClock),
            random: Arc::new(random),
        }
    }

    /// `clock` and `random`, as a test injects them.
    pub fn new(clock: Arc<dyn Clock>, random: Arc<dyn Random>) -> Environment {
        Environment { clock, random }
    }

    /// A random version-4 UUID from the random source.
    pub fn uuid(&self) -> uuid::Uuid {
        uuid::Builder::from_random_bytes(self.random.bytes_16()).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_clock::ManualClock;

    #[test]
    fn the_same_seed_gives_the_same_uuids() {
        let environment = |seed| {
            Environment::new(
                Arc::new(ManualClock::new(0)),
                Arc::new(SeededRandom::new(seed)),
            )
        };
        let (first, second) = (environment(5), environment(5));
        assert_eq!(first.uuid(), second.uuid());
        assert_eq!(first.uuid().get_version_num(), 4);
        assert_ne!(first.uuid(), environment(6).uuid());
    }

    #[test]
    fn the_system_environment_reads_the_wall_clock() {
        assert!(Environment::system().clock.wall_ms() > 1_577_836_800_000);
    }
}
