//! Transaction verification state (KIP-890 part 1).
//!
//! Before a partition leader appends the first transactional batch of a
//! producer that has no transaction ongoing in the partition, it asks the
//! producer's transaction coordinator whether the partition was added to
//! the transaction. The request is asynchronous, so a marker can land in
//! between (the transaction aborted, say): the append must then not open
//! a new transaction that no coordinator knows about (a hanging one).
//!
//! The leader therefore starts a verification before asking: the log
//! hands out a [`VerificationGuard`] for the producer and remembers it.
//! Any transactional batch or marker of that producer that is written
//! clears it. The append that follows a successful verification carries
//! the guard, and the log accepts the batch only if the producer still has
//! that very guard: a marker written in between fails the append with
//! `INVALID_TXN_STATE` rather than starting a hanging transaction.
//!
//! While a verification is outstanding the log also remembers the lowest
//! sequence seen for it, and refuses a later batch of the same producer
//! whose sequence is above it (Kafka's rule: a higher sequence must not
//! overtake a lower one whose verification failed with a retriable error).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// How long an unused verification is kept (Kafka's default
/// `producer.id.expiration.ms`, which bounds it there too).
pub const VERIFICATION_EXPIRY_MS: i64 = 86_400_000;

/// Guards are unique in the process, so a guard handed out before a
/// partition's state was rebuilt never matches one handed out after.
static NEXT_GUARD: AtomicU64 = AtomicU64::new(1);

/// The token of one verification; see the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerificationGuard(u64);

impl VerificationGuard {
    fn fresh() -> VerificationGuard {
        VerificationGuard(NEXT_GUARD.fetch_add(1, Ordering::Relaxed))
    }
}

/// What a leader append requires of a transactional data batch whose
/// producer has no transaction ongoing in the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnVerification {
    /// Nothing: verification is off, or the write is not a client's.
    Unchecked,
    /// The batch must carry the producer's current guard; `None` means no
    /// verification ran for it, so such a batch is refused.
    Guard(Option<VerificationGuard>),
}

/// One producer's outstanding verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    guard: VerificationGuard,
    created_ms: i64,
    lowest_sequence: i32,
    epoch: i16,
}

/// The outstanding verifications of one partition, by producer id.
#[derive(Debug, Default)]
pub struct VerificationStates {
    entries: HashMap<i64, Entry>,
}

impl VerificationStates {
    /// Starts (or joins) the verification of `producer_id` for a batch at
    /// `sequence` and `epoch`, and returns its guard. The lowest sequence
    /// moves down to `sequence` at the same epoch, and resets at a higher
    /// epoch. Entries older than [`VERIFICATION_EXPIRY_MS`] are dropped.
    pub fn start(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        now_ms: i64,
    ) -> VerificationGuard {
        self.entries
            .retain(|_, entry| now_ms.saturating_sub(entry.created_ms) < VERIFICATION_EXPIRY_MS);
        let entry = self.entries.entry(producer_id).or_insert_with(|| Entry {
            guard: VerificationGuard::fresh(),
            created_ms: now_ms,
            lowest_sequence: sequence,
            epoch,
        });
        if epoch == entry.epoch && sequence < entry.lowest_sequence {
            entry.lowest_sequence = sequence;
        }
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.lowest_sequence = sequence;
        }
        entry.guard
    }

    /// The guard of `producer_id`'s outstanding verification, if any.
    pub fn guard(&self, producer_id: i64) -> Option<VerificationGuard> {
        self.entries.get(&producer_id).map(|entry| entry.guard)
    }

    /// The lowest sequence seen by `producer_id`'s outstanding
    /// verification, if any.
    pub fn lowest_sequence(&self, producer_id: i64) -> Option<i32> {
        self.entries
            .get(&producer_id)
            .map(|entry| entry.lowest_sequence)
    }

    /// Forgets `producer_id`'s verification: a transactional batch or a
    /// marker of it was written.
    pub fn clear(&mut self, producer_id: i64) {
        self.entries.remove(&producer_id);
    }

    /// Number of outstanding verifications.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no verification is outstanding.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_keeps_its_guard_until_cleared() {
        let mut states = VerificationStates::default();
        let first = states.start(7, 10, 0, 0);
        assert_eq!(states.start(7, 12, 0, 5), first);
        assert_eq!(states.guard(7), Some(first));
        assert_eq!(states.lowest_sequence(7), Some(10));
        let other = states.start(8, 0, 0, 5);
        assert_ne!(other, first);
        states.clear(7);
        assert_eq!(states.guard(7), None);
        let again = states.start(7, 10, 0, 6);
        assert_ne!(again, first, "a new verification gets a new guard");
    }

    #[test]
    fn the_lowest_sequence_follows_lower_sequences_and_resets_on_a_new_epoch() {
        let mut states = VerificationStates::default();
        states.start(1, 20, 3, 0);
        states.start(1, 15, 3, 0);
        assert_eq!(states.lowest_sequence(1), Some(15));
        states.start(1, 40, 3, 0);
        assert_eq!(states.lowest_sequence(1), Some(15));
        states.start(1, 0, 2, 0);
        assert_eq!(
            states.lowest_sequence(1),
            Some(15),
            "an older epoch is ignored"
        );
        states.start(1, 3, 4, 0);
        assert_eq!(states.lowest_sequence(1), Some(3));
    }

    #[test]
    fn old_verifications_expire() {
        let mut states = VerificationStates::default();
        let old = states.start(1, 0, 0, 0);
        states.start(2, 0, 0, VERIFICATION_EXPIRY_MS);
        assert_eq!(states.guard(1), None);
        assert_eq!(states.len(), 1);
        assert_ne!(states.start(1, 0, 0, VERIFICATION_EXPIRY_MS), old);
    }
}
