//! The replica state machine (Kafka's `ReplicaStateMachine`), with the
//! deletion states.
//!
//! - `New`: assigned during topic or partition creation; may only become a
//!   follower.
//! - `Online`: part of the partition's assigned replicas and started.
//! - `Offline`: its broker died or was fenced.
//! - `DeletionStarted`, `DeletionSuccessful`, `DeletionIneligible`: topic
//!   deletion in progress, done, or impossible for now (the broker is down).
//! - `NonExistent`: deleted (or never created).
//!
//! Legal transitions (target ← sources):
//!
//! | target               | from                                           |
//! |----------------------|------------------------------------------------|
//! | `New`                | `NonExistent`                                  |
//! | `Online`             | `New`, `Online`, `Offline`, `DeletionIneligible` |
//! | `Offline`            | `New`, `Online`, `Offline`, `DeletionIneligible` |
//! | `DeletionStarted`    | `Offline`                                      |
//! | `DeletionSuccessful` | `DeletionStarted`                              |
//! | `DeletionIneligible` | `Offline`, `DeletionStarted`                   |
//! | `NonExistent`        | `DeletionSuccessful`                           |

use std::fmt;

use crate::transition::IllegalTransition;

/// The state of one replica (one broker's copy of one partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplicaState {
    /// Assigned, not yet started.
    New,
    /// Started and serving.
    Online,
    /// Its broker is down or fenced.
    Offline,
    /// Deletion of its data has started.
    DeletionStarted,
    /// Its data is deleted.
    DeletionSuccessful,
    /// Deletion cannot proceed now.
    DeletionIneligible,
    /// Deleted, or never created.
    NonExistent,
}

impl ReplicaState {
    /// All states, for exhaustive checks.
    pub const ALL: [Self; 7] = [
        Self::New,
        Self::Online,
        Self::Offline,
        Self::DeletionStarted,
        Self::DeletionSuccessful,
        Self::DeletionIneligible,
        Self::NonExistent,
    ];

    /// The states from which `self` may be entered.
    pub fn valid_previous_states(self) -> &'static [Self] {
        match self {
            Self::New => &[Self::NonExistent],
            Self::Online | Self::Offline => &[
                Self::New,
                Self::Online,
                Self::Offline,
                Self::DeletionIneligible,
            ],
            Self::DeletionStarted => &[Self::Offline],
            Self::DeletionSuccessful => &[Self::DeletionStarted],
            Self::DeletionIneligible => &[Self::Offline, Self::DeletionStarted],
            Self::NonExistent => &[Self::DeletionSuccessful],
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
}

impl ReplicaState {
    /// Walks `path` from `self`, each step checked against the table.
    pub fn walk(self, path: &[Self]) -> Result<Self, IllegalTransition<Self>> {
        path.iter()
            .try_fold(self, |state, next| state.transition(*next))
    }
}

/// The path of a replica of a topic being deleted: taken offline, its
/// data deleted (by its broker, once the topic is gone from the image),
/// then gone. Kafka's controller walks the same states.
pub const DELETION_PATH: [ReplicaState; 4] = [
    ReplicaState::Offline,
    ReplicaState::DeletionStarted,
    ReplicaState::DeletionSuccessful,
    ReplicaState::NonExistent,
];

/// Checks the replica transitions a command makes, in every build: a
/// planned change whose replica transition the table forbids is a
/// controller bug, reported and refused rather than applied.
pub fn check(
    replicas: impl IntoIterator<Item = (i32, ReplicaState)>,
    path: &[ReplicaState],
) -> Result<(), IllegalTransition<ReplicaState>> {
    for (broker_id, from) in replicas {
        if let Err(error) = from.walk(path) {
            tracing::error!(broker_id, %error, "illegal replica state transition planned");
            return Err(error);
        }
    }
    Ok(())
}

impl fmt::Display for ReplicaState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::New => "NewReplica",
            Self::Online => "OnlineReplica",
            Self::Offline => "OfflineReplica",
            Self::DeletionStarted => "ReplicaDeletionStarted",
            Self::DeletionSuccessful => "ReplicaDeletionSuccessful",
            Self::DeletionIneligible => "ReplicaDeletionIneligible",
            Self::NonExistent => "NonExistentReplica",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ReplicaState::{self, *};

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
                for from in ReplicaState::ALL {
                    for to in ReplicaState::ALL {
                        assert!(listed.contains(&(from, to)), "{from} -> {to} has no test");
                    }
                }
            }
        };
    }

    transitions! {
        new_to_new_is_illegal: New => New, false;
        new_to_online_is_legal: New => Online, true;
        new_to_offline_is_legal: New => Offline, true;
        new_to_deletion_started_is_illegal: New => DeletionStarted, false;
        new_to_deletion_successful_is_illegal: New => DeletionSuccessful, false;
        new_to_deletion_ineligible_is_illegal: New => DeletionIneligible, false;
        new_to_non_existent_is_illegal: New => NonExistent, false;

        online_to_new_is_illegal: Online => New, false;
        online_to_online_is_legal: Online => Online, true;
        online_to_offline_is_legal: Online => Offline, true;
        online_to_deletion_started_is_illegal: Online => DeletionStarted, false;
        online_to_deletion_successful_is_illegal: Online => DeletionSuccessful, false;
        online_to_deletion_ineligible_is_illegal: Online => DeletionIneligible, false;
        online_to_non_existent_is_illegal: Online => NonExistent, false;

        offline_to_new_is_illegal: Offline => New, false;
        offline_to_online_is_legal: Offline => Online, true;
        offline_to_offline_is_legal: Offline => Offline, true;
        offline_to_deletion_started_is_legal: Offline => DeletionStarted, true;
        offline_to_deletion_successful_is_illegal: Offline => DeletionSuccessful, false;
        offline_to_deletion_ineligible_is_legal: Offline => DeletionIneligible, true;
        offline_to_non_existent_is_illegal: Offline => NonExistent, false;

        deletion_started_to_new_is_illegal: DeletionStarted => New, false;
        deletion_started_to_online_is_illegal: DeletionStarted => Online, false;
        deletion_started_to_offline_is_illegal: DeletionStarted => Offline, false;
        deletion_started_to_deletion_started_is_illegal: DeletionStarted => DeletionStarted, false;
        deletion_started_to_deletion_successful_is_legal: DeletionStarted => DeletionSuccessful, true;
        deletion_started_to_deletion_ineligible_is_legal: DeletionStarted => DeletionIneligible, true;
        deletion_started_to_non_existent_is_illegal: DeletionStarted => NonExistent, false;

        deletion_successful_to_new_is_illegal: DeletionSuccessful => New, false;
        deletion_successful_to_online_is_illegal: DeletionSuccessful => Online, false;
        deletion_successful_to_offline_is_illegal: DeletionSuccessful => Offline, false;
        deletion_successful_to_deletion_started_is_illegal: DeletionSuccessful => DeletionStarted, false;
        deletion_successful_to_deletion_successful_is_illegal: DeletionSuccessful => DeletionSuccessful, false;
        deletion_successful_to_deletion_ineligible_is_illegal: DeletionSuccessful => DeletionIneligible, false;
        deletion_successful_to_non_existent_is_legal: DeletionSuccessful => NonExistent, true;

        deletion_ineligible_to_new_is_illegal: DeletionIneligible => New, false;
        deletion_ineligible_to_online_is_legal: DeletionIneligible => Online, true;
        deletion_ineligible_to_offline_is_legal: DeletionIneligible => Offline, true;
        deletion_ineligible_to_deletion_started_is_illegal: DeletionIneligible => DeletionStarted, false;
        deletion_ineligible_to_deletion_successful_is_illegal: DeletionIneligible => DeletionSuccessful, false;
        deletion_ineligible_to_deletion_ineligible_is_illegal: DeletionIneligible => DeletionIneligible, false;
        deletion_ineligible_to_non_existent_is_illegal: DeletionIneligible => NonExistent, false;

        non_existent_to_new_is_legal: NonExistent => New, true;
        non_existent_to_online_is_illegal: NonExistent => Online, false;
        non_existent_to_offline_is_illegal: NonExistent => Offline, false;
        non_existent_to_deletion_started_is_illegal: NonExistent => DeletionStarted, false;
        non_existent_to_deletion_successful_is_illegal: NonExistent => DeletionSuccessful, false;
        non_existent_to_deletion_ineligible_is_illegal: NonExistent => DeletionIneligible, false;
        non_existent_to_non_existent_is_illegal: NonExistent => NonExistent, false;
    }

    #[test]
    fn display_uses_kafka_names() {
        assert_eq!(DeletionIneligible.to_string(), "ReplicaDeletionIneligible");
        assert_eq!(NonExistent.to_string(), "NonExistentReplica");
    }

    #[test]
    fn the_deletion_path_is_legal_from_online_and_offline_only() {
        assert_eq!(Online.walk(&super::DELETION_PATH), Ok(NonExistent));
        assert_eq!(Offline.walk(&super::DELETION_PATH), Ok(NonExistent));
        let error = NonExistent.walk(&super::DELETION_PATH).unwrap_err();
        assert_eq!((error.from, error.to), (NonExistent, Offline));
        assert!(super::check([(1, Online), (2, Offline)], &super::DELETION_PATH).is_ok());
        assert!(super::check(
            [(1, Online), (2, DeletionSuccessful)],
            &super::DELETION_PATH
        )
        .is_err());
    }

    #[test]
    fn a_replica_s_state_follows_its_broker() {
        use crate::image::{MetadataImage, PartitionImage};
        let partition = PartitionImage {
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            leader: Some(1),
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionImage::default()
        };
        use crate::records::{MetadataRecord, Record, RegisterBrokerRecord};
        let mut image = MetadataImage::default();
        for (offset, (id, fenced)) in [(1, false), (2, true)].into_iter().enumerate() {
            let record = MetadataRecord::new(Record::RegisterBroker(RegisterBrokerRecord {
                broker_id: id,
                incarnation_id: vec![0; 16],
                broker_epoch: 0,
                endpoints: Vec::new(),
                rack: None,
                fenced,
            }));
            image = image.apply(offset as u64, &record).expect("applies");
        }
        assert_eq!(image.replica_state(&partition, 1), Online);
        assert_eq!(image.replica_state(&partition, 2), Offline);
        // Assigned to a broker that is not registered: offline.
        assert_eq!(image.replica_state(&partition, 3), Offline);
        assert_eq!(image.replica_state(&partition, 4), NonExistent);
    }
}
