//! The partition state machine (Kafka's `PartitionStateMachine`).
//!
//! ```text
//!   NonExistent ──▶ New ──▶ Online ◀──▶ Offline ──▶ NonExistent
//!                    └──────────────────▶ ▲
//! ```
//!
//! - `NonExistent`: never created, or deleted.
//! - `New`: replicas assigned, no leader elected yet.
//! - `Online`: a leader is elected and alive. `Online → Online` is legal:
//!   it is a re-election (preferred replica, reassignment, controlled
//!   shutdown) that keeps the partition online.
//! - `Offline`: the leader died and no successor was elected yet.
//!
//! In the KRaft-style controller these states are not stored: they are
//! read from the image with [`PartitionState::of`], and every change the
//! controller makes is checked against [`PartitionState::transition`].

use std::fmt;

use crate::image::{BrokerId, PartitionImage};
use crate::transition::IllegalTransition;

/// The state of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionState {
    /// Never created, or deleted.
    NonExistent,
    /// Created with replicas, no leader elected yet.
    New,
    /// Has a live leader.
    Online,
    /// Its leader is gone.
    Offline,
}

impl PartitionState {
    /// All states, for exhaustive checks.
    pub const ALL: [Self; 4] = [Self::NonExistent, Self::New, Self::Online, Self::Offline];

    /// The states from which `self` may be entered.
    pub fn valid_previous_states(self) -> &'static [Self] {
        match self {
            Self::NonExistent => &[Self::Offline],
            Self::New => &[Self::NonExistent],
            Self::Online | Self::Offline => &[Self::New, Self::Online, Self::Offline],
        }
    }

    /// Moves to `to` if the transition is legal.
    pub fn transition(self, to: Self) -> Result<Self, IllegalTransition<Self>> {
        if to.valid_previous_states().contains(&self) {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self, to })
        }
    }

    /// The state of an existing partition as the image shows it: online if
    /// its leader is live, offline otherwise.
    pub fn of(partition: &PartitionImage, is_live: impl Fn(BrokerId) -> bool) -> Self {
        match partition.leader {
            Some(leader) if is_live(leader) => Self::Online,
            _ => Self::Offline,
        }
    }
}

impl fmt::Display for PartitionState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::NonExistent => "NonExistentPartition",
            Self::New => "NewPartition",
            Self::Online => "OnlinePartition",
            Self::Offline => "OfflinePartition",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::PartitionState::{self, *};
    use crate::image::PartitionImage;

    macro_rules! transitions {
        ($($name:ident: $from:ident => $to:ident, $legal:literal;)*) => {
            $(
                #[test]
                fn $name() {
                    let result = $from.transition($to);
                    if $legal {
                        assert_eq!(result, Ok($to));
                    } else {
                        let error = result.unwrap_err();
                        assert_eq!((error.from, error.to), ($from, $to));
                    }
                }
            )*

            #[test]
            fn every_pair_is_covered() {
                let listed = [$(($from, $to)),*];
                for from in PartitionState::ALL {
                    for to in PartitionState::ALL {
                        assert!(listed.contains(&(from, to)), "{from} -> {to} has no test");
                    }
                }
            }
        };
    }

    transitions! {
        non_existent_to_non_existent_is_illegal: NonExistent => NonExistent, false;
        non_existent_to_new_is_legal: NonExistent => New, true;
        non_existent_to_online_is_illegal: NonExistent => Online, false;
        non_existent_to_offline_is_illegal: NonExistent => Offline, false;
        new_to_non_existent_is_illegal: New => NonExistent, false;
        new_to_new_is_illegal: New => New, false;
        new_to_online_is_legal: New => Online, true;
        new_to_offline_is_legal: New => Offline, true;
        online_to_non_existent_is_illegal: Online => NonExistent, false;
        online_to_new_is_illegal: Online => New, false;
        online_to_online_is_legal: Online => Online, true;
        online_to_offline_is_legal: Online => Offline, true;
        offline_to_non_existent_is_legal: Offline => NonExistent, true;
        offline_to_new_is_illegal: Offline => New, false;
        offline_to_online_is_legal: Offline => Online, true;
        offline_to_offline_is_legal: Offline => Offline, true;
    }

    #[test]
    fn state_is_read_from_the_leader() {
        let mut partition = PartitionImage {
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader: Some(1),
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionImage::default()
        };
        assert_eq!(PartitionState::of(&partition, |id| id == 1), Online);
        assert_eq!(PartitionState::of(&partition, |id| id == 2), Offline);
        partition.leader = None;
        assert_eq!(PartitionState::of(&partition, |_| true), Offline);
    }

    #[test]
    fn display_uses_kafka_names() {
        assert_eq!(Online.to_string(), "OnlinePartition");
        let error = NonExistent.transition(Online).unwrap_err();
        assert_eq!(
            error.to_string(),
            "illegal transition from NonExistentPartition to OnlinePartition"
        );
    }
}
