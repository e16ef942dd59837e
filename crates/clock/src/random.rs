//! The [`Random`] trait and the seeded generator behind it.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A shared source of random numbers for decisions that need spread, not
/// secrecy: replica placement, topic ids, segment roll jitter, election
/// timeouts.
pub trait Random: fmt::Debug + Send + Sync {
    /// The next 64 random bits.
    fn next_u64(&self) -> u64;

    /// A number in `0..bound`; 0 when `bound` is 0.
    fn below_u64(&self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // The modulo bias is below bound / 2^64: negligible for broker
        // counts, partition counts and millisecond jitters.
        self.next_u64() % bound
    }

    /// A number in `0..bound`; 0 when `bound` is 0.
    fn below(&self, bound: usize) -> usize {
        let bound_u64 = u64::try_from(bound).unwrap_or(u64::MAX);
        usize::try_from(self.below_u64(bound_u64)).unwrap_or(0)
    }

    /// 16 random bytes (a random version-4 UUID is built from these).
    fn bytes_16(&self) -> [u8; 16] {
        let high = u128::from(self.next_u64());
        let low = u128::from(self.next_u64());
        ((high << 64) | low).to_be_bytes()
    }
}

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64: a small, fast, seedable generator whose state is one atomic
/// counter, so one instance is shared by every component without a lock.
/// The same seed yields the same sequence of draws. Not cryptographic.
#[derive(Debug)]
pub struct SeededRandom {
    seed: u64,
    state: AtomicU64,
}

impl SeededRandom {
    /// A generator that yields the same sequence for the same seed.
    pub fn new(seed: u64) -> Self {
        SeededRandom {
            seed,
            state: AtomicU64::new(seed),
        }
    }

    /// A generator seeded from the operating system's randomness (through
    /// the standard library's per-process hash keys). The seed is
    /// available from [`SeededRandom::seed`] so that a run can be logged
    /// and repeated.
    pub fn from_entropy() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(GAMMA);
        Self::new(hasher.finish())
    }

    /// The seed this generator started from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A new generator seeded from this one's next draw: a component that
    /// needs a stream of its own (and a draw order no other component can
    /// disturb) gets one, still determined by the parent's seed.
    pub fn fork(&self) -> SeededRandom {
        SeededRandom::new(self.next_u64())
    }
}

impl Random for SeededRandom {
    fn next_u64(&self) -> u64 {
        let state = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        let mut mixed = state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(random: &dyn Random, count: usize) -> Vec<u64> {
        (0..count).map(|_| random.next_u64()).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let first = draws(&SeededRandom::new(7), 16);
        assert_eq!(first, draws(&SeededRandom::new(7), 16));
        assert_ne!(first, draws(&SeededRandom::new(8), 16));
    }

    #[test]
    fn splitmix64_matches_its_reference_values() {
        // The first outputs of SplitMix64 seeded with 0 (Vigna's reference).
        let random = SeededRandom::new(0);
        assert_eq!(random.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(random.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range_and_zero_bound_gives_zero() {
        let random = SeededRandom::new(1);
        assert_eq!(random.below(0), 0);
        assert_eq!(random.below_u64(0), 0);
        let mut seen = [false; 3];
        for _ in 0..1_000 {
            let drawn = random.below(3);
            assert!(drawn < 3);
            if let Some(slot) = seen.get_mut(drawn) {
                *slot = true;
            }
        }
        assert_eq!(seen, [true; 3], "every value in range is drawn");
    }

    #[test]
    fn forks_are_reproducible_and_differ_from_the_parent() {
        let parent = SeededRandom::new(99);
        let child = parent.fork();
        let again = SeededRandom::new(99).fork();
        assert_eq!(child.seed(), again.seed());
        assert_eq!(draws(&child, 4), draws(&again, 4));
        assert_ne!(draws(&parent, 4), draws(&SeededRandom::new(99).fork(), 4));
    }

    #[test]
    fn entropy_seeds_differ_and_are_reported() {
        let first = SeededRandom::from_entropy();
        let second = SeededRandom::from_entropy();
        assert_ne!(first.seed(), second.seed());
        assert_eq!(draws(&first, 2), draws(&SeededRandom::new(first.seed()), 2));
    }

    #[test]
    fn one_generator_shared_by_threads_hands_out_distinct_draws() {
        let random = std::sync::Arc::new(SeededRandom::new(3));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let random = std::sync::Arc::clone(&random);
                std::thread::spawn(move || draws(&*random, 250))
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap_or_default())
            .collect();
        all.sort_unstable();
        let mut expected = draws(&SeededRandom::new(3), 1_000);
        expected.sort_unstable();
        assert_eq!(all, expected, "the threads share one sequence");
    }
}
