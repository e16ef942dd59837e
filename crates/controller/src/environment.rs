//! Time and randomness, injected so that controller logic is
//! deterministic under test.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of the current time in milliseconds.
pub trait Clock: Send + Sync {
    /// Milliseconds since an arbitrary, fixed origin; never decreases.
    fn now_ms(&self) -> u64;
}

/// The system clock: milliseconds since the Unix epoch as read at the first
/// call, advanced from then on by the monotonic clock, so it never goes
/// backwards when the wall clock is stepped (a step must not expire every
/// broker session at once).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
        let (start, start_ms) = ANCHOR.get_or_init(|| {
            let wall_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |elapsed| {
                    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
                });
            (Instant::now(), wall_ms)
        });
        let elapsed_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        start_ms.saturating_add(elapsed_ms)
    }
}

/// A clock that moves only when told to, for deterministic tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: std::sync::atomic::AtomicU64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        Self {
            now_ms: std::sync::atomic::AtomicU64::new(now_ms),
        }
    }

    /// Moves the clock forward by `elapsed_ms`.
    pub fn advance(&self, elapsed_ms: u64) {
        self.now_ms
            .fetch_add(elapsed_ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A source of random numbers.
pub trait RandomSource: Send {
    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64;

    /// A number in `0..bound`; 0 when `bound` is 0.
    fn below(&mut self, bound: usize) -> usize {
        let bound_u64 = u64::try_from(bound).unwrap_or(u64::MAX);
        if bound_u64 == 0 {
            return 0;
        }
        // The modulo bias is below 2^-32 for any realistic broker count.
        usize::try_from(self.next_u64() % bound_u64).unwrap_or(0)
    }

    /// A random version-4 UUID (used for topic ids).
    fn uuid(&mut self) -> uuid::Uuid {
        let high = u128::from(self.next_u64());
        let low = u128::from(self.next_u64());
        uuid::Builder::from_random_bytes(((high << 64) | low).to_be_bytes()).into_uuid()
    }
}

/// SplitMix64: a small, fast, seedable generator. Not cryptographic; the
/// controller only needs spread and unique-enough ids, and a seed makes a
/// test run reproducible.
#[derive(Debug, Clone)]
pub struct SeededRandom {
    state: u64,
}

impl SeededRandom {
    /// A generator that yields the same sequence for the same seed.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator seeded from the operating system's randomness.
    pub fn from_entropy() -> Self {
        let bytes = *uuid::Uuid::new_v4().as_bytes();
        let mut seed = [0u8; 8];
        seed.copy_from_slice(bytes.get(..8).unwrap_or(&[0; 8]));
        Self::new(u64::from_le_bytes(seed))
    }
}

impl RandomSource for SeededRandom {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut first = SeededRandom::new(7);
        let mut second = SeededRandom::new(7);
        let a: Vec<u64> = (0..4).map(|_| first.next_u64()).collect();
        let b: Vec<u64> = (0..4).map(|_| second.next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(
            a,
            (0..4)
                .map(|_| SeededRandom::new(8).next_u64())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn below_stays_in_range() {
        let mut random = SeededRandom::new(1);
        assert_eq!(random.below(0), 0);
        for _ in 0..1000 {
            assert!(random.below(3) < 3);
        }
    }

    #[test]
    fn uuids_are_version_four_and_distinct() {
        let mut random = SeededRandom::new(3);
        let first = random.uuid();
        let second = random.uuid();
        assert_eq!(first.get_version_num(), 4);
        assert_ne!(first, second);
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(5);
        assert_eq!(clock.now_ms(), 5);
        clock.advance(10);
        assert_eq!(clock.now_ms(), 15);
    }

    #[test]
    fn system_clock_is_after_2020_and_never_goes_back() {
        let first = SystemClock.now_ms();
        assert!(first > 1_577_836_800_000);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = SystemClock.now_ms();
        assert!(second >= first + 5, "{first} then {second}");
    }
}
