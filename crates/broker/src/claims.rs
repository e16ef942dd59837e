//! Which partitions of an internal topic (`__consumer_offsets`,
//! `__transaction_state`) a coordinator on this broker serves: those this
//! broker leads, each claimed at the leader epoch it leads it at. The
//! group and transaction services follow the metadata image with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use strom_controller::image::MetadataImage;

/// The partitions of `topic` that `node_id` leads in `image`, with their
/// leader epochs.
pub fn led_partitions(image: &MetadataImage, topic: &str, node_id: i32) -> BTreeMap<i32, i32> {
    let Some(topic) = image.topic_by_name(topic) else {
        return BTreeMap::new();
    };
    topic
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, partition)| partition.leader == Some(node_id))
        .filter_map(|(index, partition)| Some((i32::try_from(index).ok()?, partition.leader_epoch)))
        .collect()
}

/// The partitions a coordinator claimed, and those of them whose load has
/// not started.
#[derive(Debug, Default)]
pub struct Claims {
    /// Partitions led here (loaded, loading or claimed), with the leader
    /// epoch they were claimed at.
    owned: Mutex<BTreeMap<i32, i32>>,
    /// Claimed partitions whose load has not started yet.
    unloaded: Mutex<BTreeSet<i32>>,
    /// Set by [`Claims::resign`]: nothing is claimed again (an image
    /// applied late while the broker stops).
    resigned: std::sync::atomic::AtomicBool,
}

/// Locks one of the claims' maps: each is changed by single inserts and
/// removes, so a panic cannot leave one half-changed, and they are reused
/// after one.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Claims {
    /// Makes `led` (partition to leader epoch) the claimed partitions:
    /// `give_up` is called for each partition owned before and no longer
    /// led at the same epoch, then `claim` for each newly led one (or led
    /// again at another epoch: another leader may have written to it
    /// meanwhile), which is to be loaded.
    pub fn update(
        &self,
        led: BTreeMap<i32, i32>,
        mut give_up: impl FnMut(i32, i32),
        mut claim: impl FnMut(i32, i32),
    ) {
        let mut owned = lock(&self.owned);
        if self.resigned.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let mut unloaded = lock(&self.unloaded);
        for (partition, epoch) in owned.iter() {
            if led.get(partition) != Some(epoch) {
                unloaded.remove(partition);
                give_up(*partition, *epoch);
            }
        }
        for (partition, epoch) in &led {
            if owned.get(partition) != Some(epoch) {
                unloaded.insert(*partition);
                claim(*partition, *epoch);
            }
        }
        *owned = led;
    }

    /// Gives up every claimed partition (`give_up` for each) for good: the
    /// broker is stopping, and no later image claims one again.
    pub fn resign(&self, mut give_up: impl FnMut(i32, i32)) {
        let mut owned = lock(&self.owned);
        self.resigned
            .store(true, std::sync::atomic::Ordering::Release);
        lock(&self.unloaded).clear();
        for (partition, epoch) in std::mem::take(&mut *owned) {
            give_up(partition, epoch);
        }
    }

    /// The claimed partitions whose load has not started, with their
    /// epochs; they count as started from now.
    pub fn take_unloaded(&self) -> Vec<(i32, i32)> {
        let pending = std::mem::take(&mut *lock(&self.unloaded));
        pending
            .into_iter()
            .filter_map(|partition| {
                let epoch = lock(&self.owned).get(&partition).copied()?;
                Some((partition, epoch))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_follow_leadership_and_epochs() {
        let claims = Claims::default();
        let (mut given_up, mut claimed) = (Vec::new(), Vec::new());
        claims.update(
            BTreeMap::from([(0, 1), (1, 1)]),
            |p, e| given_up.push((p, e)),
            |p, e| claimed.push((p, e)),
        );
        assert_eq!(claimed, vec![(0, 1), (1, 1)]);
        assert_eq!(claims.take_unloaded(), vec![(0, 1), (1, 1)]);
        assert!(claims.take_unloaded().is_empty());
        claimed.clear();
        // Partition 0 led at a new epoch, partition 1 no longer led.
        claims.update(
            BTreeMap::from([(0, 2)]),
            |p, e| given_up.push((p, e)),
            |p, e| claimed.push((p, e)),
        );
        assert_eq!(given_up, vec![(0, 1), (1, 1)]);
        assert_eq!(claimed, vec![(0, 2)]);
        assert_eq!(claims.take_unloaded(), vec![(0, 2)]);
        // Resigned: everything given up, nothing claimed again.
        given_up.clear();
        claims.resign(|p, e| given_up.push((p, e)));
        assert_eq!(given_up, vec![(0, 2)]);
        claimed.clear();
        claims.update(
            BTreeMap::from([(0, 3)]),
            |p, e| given_up.push((p, e)),
            |p, e| claimed.push((p, e)),
        );
        assert!(claimed.is_empty());
        assert!(claims.take_unloaded().is_empty());
    }
}
