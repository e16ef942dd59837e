//! Partitioners: murmur2 for keyed records exactly like the Java client, the
//! sticky partitioner (KIP-480) for unkeyed ones, and the [`Partitioner`]
//! trait for custom ones.

use std::collections::HashMap;
use std::sync::Mutex;

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len() as u32;
    let mut h = SEED ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Java's `Utils.toPositive`: clears the sign bit.
pub fn to_positive(value: i32) -> i32 {
    value & 0x7fff_ffff
}

/// The partition of a keyed record: `toPositive(murmur2(key)) % partitions`.
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    to_positive(murmur2(key)) % partitions.max(1)
}

/// Chooses a partition for a record without an explicit one.
pub trait Partitioner: Send + Sync {
    /// The partition for a record with `key` on `topic` of `partitions`
    /// partitions (at least one).
    fn partition(&self, topic: &str, key: Option<&[u8]>, partitions: i32) -> i32;

    /// Called when the record appended to `partition` of `topic` started a
    /// new batch (the sticky partitioner moves on then).
    fn on_new_batch(&self, _topic: &str, _partition: i32, _partitions: i32) {}
}

/// The default partitioner: murmur2 for keyed records, sticky for unkeyed.
#[derive(Debug, Default)]
pub struct DefaultPartitioner {
    sticky: Mutex<HashMap<String, i32>>,
}

impl Partitioner for DefaultPartitioner {
    fn partition(&self, topic: &str, key: Option<&[u8]>, partitions: i32) -> i32 {
        if let Some(key) = key {
            return key_partition(key, partitions);
        }
        let mut sticky = self
            .sticky
            .lock()
            // The sticky choice per topic is a cache changed by single
            // inserts: reused after a panic.
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Look up by `&str` first: no key allocation per record.
        if let Some(current) = sticky.get_mut(topic) {
            if *current >= partitions {
                *current = random_partition(partitions);
            }
            return *current;
        }
        let chosen = random_partition(partitions);
        sticky.insert(topic.to_owned(), chosen);
        chosen
    }

    fn on_new_batch(&self, topic: &str, partition: i32, partitions: i32) {
        let mut sticky = self
            .sticky
            .lock()
            // The sticky choice per topic is a cache changed by single
            // inserts: reused after a panic.
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(current) = sticky.get_mut(topic) else {
            return;
        };
        if *current != partition || partitions < 2 {
            return;
        }
        // Any partition but the one whose batch just filled, as Java does.
        let mut next = random_partition(partitions - 1);
        if next >= partition {
            next += 1;
        }
        *current = next;
    }
}

fn random_partition(partitions: i32) -> i32 {
    fastrand::i32(0..partitions.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The vectors of Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_javas_test_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input),
                expected,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(42), 42);
    }

    #[test]
    fn sticky_partition_holds_until_a_new_batch() {
        let partitioner = DefaultPartitioner::default();
        let first = partitioner.partition("t", None, 8);
        for _ in 0..20 {
            assert_eq!(partitioner.partition("t", None, 8), first);
        }
        partitioner.on_new_batch("t", first, 8);
        let second = partitioner.partition("t", None, 8);
        assert_ne!(second, first);
        // A new batch on another partition does not move the sticky one.
        partitioner.on_new_batch("t", (second + 1) % 8, 8);
        assert_eq!(partitioner.partition("t", None, 8), second);
    }

    proptest! {
        #[test]
        fn keyed_partition_is_in_range_and_stable(key in proptest::collection::vec(any::<u8>(), 0..64), partitions in 1i32..1000) {
            let partitioner = DefaultPartitioner::default();
            let partition = partitioner.partition("t", Some(&key), partitions);
            prop_assert!((0..partitions).contains(&partition));
            prop_assert_eq!(partition, key_partition(&key, partitions));
        }
    }
}
