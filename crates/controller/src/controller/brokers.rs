//! Broker commands: registration, heartbeats, session expiry (fencing) and
//! leader elections.
//!
//! Liveness is registration plus heartbeats: a broker registers fenced,
//! its first heartbeat unfences it (and elects it leader where a partition
//! waits for it), and a broker whose last heartbeat is older than
//! `broker.session.timeout.ms` is fenced by [`Controller::tick`]. Fencing
//! moves leadership with the offline partition policy and takes the broker
//! out of ISRs, except where it is the last member: that ISR is kept, the
//! partition becomes leaderless, and the broker is elected again when it
//! comes back (without unclean election, no other replica may take over).
//!
//! A broker that asks to shut down (controlled shutdown) is fenced at once,
//! its leaderships moving with the controlled shutdown policy, and it stays
//! fenced until it registers again, whatever its later heartbeats say.
//! Fenced brokers are never elected nor taken into an ISR, so when several
//! brokers stop together, the controlled shutdown of one never elects
//! another that already asked to stop. Where no other in-sync replica is
//! live, the partition becomes leaderless with its ISR kept, rather than
//! led for the seconds it has left by a broker that is going away (as
//! Kafka's controller does): its last in-sync replica leads it again when
//! it comes back.

use uuid::Uuid;

use super::{is_live, partition_change, Controller, ControllerResult, Pending};
use crate::election::{
    controlled_shutdown_leader, offline_partition_leader, preferred_replica_leader, Election,
};
use crate::error::{ApplyError, ControllerError};
use crate::image::{BrokerId, Endpoint, MetadataImage, PartitionImage, TopicImage};
use crate::partition_state::PartitionState;
use crate::records::{
    uuid_to_bytes, BrokerEndpoint, FenceBrokerRecord, MetadataRecord, Record, RegisterBrokerRecord,
    UnfenceBrokerRecord,
};
use crate::replica_state::ReplicaState;

/// A BrokerRegistration request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerRegistrationRequest {
    /// The broker's `node.id`.
    pub broker_id: BrokerId,
    /// A random id for this process run.
    pub incarnation_id: Uuid,
    /// Advertised listeners.
    pub endpoints: Vec<Endpoint>,
    /// The broker's rack.
    pub rack: Option<String>,
}

/// The reply to a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerRegistrationReply {
    /// The broker epoch to quote in heartbeats.
    pub broker_epoch: i64,
}

/// A BrokerHeartbeat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerHeartbeatRequest {
    /// The broker's `node.id`.
    pub broker_id: BrokerId,
    /// The epoch from its registration.
    pub broker_epoch: i64,
    /// The broker asks to stay (or become) fenced, e.g. while catching up.
    pub want_fence: bool,
    /// The broker is shutting down cleanly (controlled shutdown).
    pub want_shutdown: bool,
}

/// The reply to a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerHeartbeatReply {
    /// Whether the broker is fenced after this heartbeat.
    pub is_fenced: bool,
    /// Whether the broker may complete its shutdown (it leads nothing).
    pub should_shut_down: bool,
}

/// Which leader election an ElectLeaders request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ElectionType {
    /// Move leadership to the preferred (first) replica.
    Preferred,
    /// Elect a leader for leaderless partitions, from outside the ISR if
    /// need be.
    Unclean,
}

/// An ElectLeaders request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ElectLeadersRequest {
    /// The election type.
    pub election_type: ElectionType,
    /// Partitions by topic name and index; `None` means all partitions
    /// (and then partitions that need no election are left out of the
    /// reply).
    pub partitions: Option<Vec<(String, i32)>>,
}

/// The result of an election for one partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ElectionOutcome {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition_index: i32,
    /// The new leader, or why there is none.
    pub result: Result<BrokerId, ControllerError>,
}

/// How a broker leaves its partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Departure {
    /// Fenced (session expired, re-registered, or asked): offline
    /// partition policy.
    Fenced,
    /// Controlled shutdown: controlled shutdown policy.
    Shutdown,
}

type Registration = Result<BrokerRegistrationReply, ControllerError>;
type Heartbeat = Result<BrokerHeartbeatReply, ControllerError>;

impl Controller {
    /// Registers a broker (fenced until its first heartbeat). A new
    /// incarnation of a registered broker replaces the old one, unless the
    /// old one is unfenced and its session is still alive.
    pub fn register_broker(
        &mut self,
        image: &MetadataImage,
        request: &BrokerRegistrationRequest,
        now_ms: u64,
    ) -> Result<ControllerResult<Registration>, ApplyError> {
        let broker_id = request.broker_id;
        let mut pending = Pending::new(image);
        if let Some(existing) = image.broker(broker_id) {
            if existing.incarnation_id == request.incarnation_id {
                self.last_heartbeat_ms.insert(broker_id, now_ms);
                self.last_heard_ms.insert(broker_id, now_ms);
                let reply = BrokerRegistrationReply {
                    broker_epoch: existing.epoch,
                };
                return Ok(pending.finish(Ok(reply), false));
            }
            if !existing.fenced && self.session_alive(broker_id, now_ms) {
                let error = ControllerError::DuplicateBrokerRegistration { broker_id };
                return Ok(pending.finish(Err(error), false));
            }
            let departure = self.departure_records(&pending.image, broker_id, Departure::Fenced);
            pending.push(departure)?;
        }
        let broker_epoch = i64::try_from(pending.image.next_offset()).unwrap_or(i64::MAX);
        pending.push(vec![MetadataRecord::new(Record::RegisterBroker(
            RegisterBrokerRecord {
                broker_id,
                incarnation_id: uuid_to_bytes(request.incarnation_id),
                broker_epoch,
                endpoints: request.endpoints.iter().map(endpoint_record).collect(),
                rack: request.rack.clone(),
                fenced: true,
            },
        ))])?;
        self.last_heartbeat_ms.insert(broker_id, now_ms);
        self.last_heard_ms.insert(broker_id, now_ms);
        self.shutting_down.remove(&broker_id);
        Ok(pending.finish(Ok(BrokerRegistrationReply { broker_epoch }), false))
    }

    /// Records a heartbeat: refreshes the session and fences, unfences or
    /// shuts the broker down as it asks.
    pub fn broker_heartbeat(
        &mut self,
        image: &MetadataImage,
        request: &BrokerHeartbeatRequest,
        now_ms: u64,
    ) -> Result<ControllerResult<Heartbeat>, ApplyError> {
        let broker_id = request.broker_id;
        let mut pending = Pending::new(image);
        let broker = match broker_at_epoch(image, broker_id, request.broker_epoch) {
            Ok(broker) => broker,
            Err(error) => return Ok(pending.finish(Err(error), false)),
        };
        self.last_heartbeat_ms.insert(broker_id, now_ms);
        self.last_heard_ms.insert(broker_id, now_ms);
        let (epoch, fenced) = (broker.epoch, broker.fenced);
        // Once a broker asked to shut down, every later heartbeat of the
        // same registration is answered as a shutdown: a heartbeat sent
        // before the request but delivered after it (or a confused broker)
        // must not unfence it and make it the leader of partitions that
        // wait for one, while it is going away.
        let shutting_down = request.want_shutdown || self.is_shutting_down(broker_id, epoch);
        let reply = if shutting_down {
            self.shutting_down.insert(broker_id, epoch);
            if !fenced {
                self.fence(&mut pending, broker_id, epoch, Departure::Shutdown)?;
            }
            BrokerHeartbeatReply {
                is_fenced: true,
                should_shut_down: true,
            }
        } else if fenced && !request.want_fence {
            self.unfence(&mut pending, broker_id, epoch)?;
            BrokerHeartbeatReply {
                is_fenced: false,
                should_shut_down: false,
            }
        } else {
            if !fenced && request.want_fence {
                self.fence(&mut pending, broker_id, epoch, Departure::Fenced)?;
            }
            BrokerHeartbeatReply {
                is_fenced: request.want_fence || fenced,
                should_shut_down: false,
            }
        };
        Ok(pending.finish(Ok(reply), false))
    }

    /// Fences every unfenced broker whose session expired at `now_ms`;
    /// returns their ids. A registered broker this controller has not
    /// heard from yet (e.g. after a controller restart) gets a full session
    /// from now. Then, when `auto.leader.rebalance.enable` is set and
    /// `leader.imbalance.check.interval.seconds` has passed since the last
    /// check, moves leadership back to preferred replicas where a broker's
    /// imbalance is too high (see the `rebalance` module).
    pub fn tick(
        &mut self,
        image: &MetadataImage,
        now_ms: u64,
    ) -> Result<ControllerResult<Vec<BrokerId>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut fenced = Vec::new();
        let unfenced: Vec<(BrokerId, i64)> = image
            .brokers()
            .filter(|broker| !broker.fenced)
            .map(|broker| (broker.broker_id, broker.epoch))
            .collect();
        for (broker_id, epoch) in unfenced {
            let last = *self.last_heartbeat_ms.entry(broker_id).or_insert(now_ms);
            if now_ms.saturating_sub(last) >= self.config.broker_session_timeout_ms {
                tracing::warn!(broker_id, "broker session expired; fencing it");
                self.fence(&mut pending, broker_id, epoch, Departure::Fenced)?;
                fenced.push(broker_id);
            }
        }
        for (topic, partition, leader) in self.maybe_rebalance(&mut pending, now_ms)? {
            tracing::info!(%topic, partition, leader, "preferred leader elected by the rebalance");
        }
        Ok(pending.finish(fenced, false))
    }

    /// Fences `broker_id` on evidence that its process is gone (its
    /// connection to this controller closed and its listener refuses
    /// connections since `evidence_since_ms`): only if it is still
    /// registered and unfenced at `broker_epoch` and no heartbeat of it
    /// arrived after `evidence_since_ms` (a broker that reconnected and
    /// heartbeated is alive). Returns whether it was fenced. Silent
    /// failures (pauses, partitions, a host that sends nothing) leave no
    /// such evidence and wait for `broker.session.timeout.ms` in
    /// [`Controller::tick`].
    pub fn fence_unreachable(
        &mut self,
        image: &MetadataImage,
        broker_id: BrokerId,
        broker_epoch: i64,
        evidence_since_ms: u64,
    ) -> Result<ControllerResult<bool>, ApplyError> {
        let mut pending = Pending::new(image);
        let registered = image
            .broker(broker_id)
            .is_some_and(|broker| broker.epoch == broker_epoch && !broker.fenced);
        let heard_since = self
            .last_heard_ms
            .get(&broker_id)
            .is_some_and(|last| *last > evidence_since_ms);
        if !registered || heard_since {
            return Ok(pending.finish(false, false));
        }
        tracing::warn!(
            broker_id,
            "broker's controller connection closed and its listener refuses connections; fencing it"
        );
        self.fence(&mut pending, broker_id, broker_epoch, Departure::Fenced)?;
        Ok(pending.finish(true, false))
    }

    /// The unfenced brokers (with their epochs) this controller has heard
    /// no heartbeat from after `since_ms` (a new active controller asks,
    /// to look for brokers that died with the previous one).
    pub fn silent_brokers(
        &self,
        image: &MetadataImage,
        since_ms: u64,
    ) -> Result<ControllerResult<Vec<(BrokerId, i64)>>, ApplyError> {
        let silent = image
            .brokers()
            .filter(|broker| !broker.fenced)
            .filter(|broker| {
                self.last_heard_ms
                    .get(&broker.broker_id)
                    .is_none_or(|last| *last <= since_ms)
            })
            .map(|broker| (broker.broker_id, broker.epoch))
            .collect();
        Ok(Pending::new(image).finish(silent, false))
    }

    /// Runs leader elections.
    pub fn elect_leaders(
        &mut self,
        image: &MetadataImage,
        request: &ElectLeadersRequest,
    ) -> Result<ControllerResult<Vec<ElectionOutcome>>, ApplyError> {
        let mut pending = Pending::new(image);
        let targets: Vec<(String, i32)> = match &request.partitions {
            Some(partitions) => partitions.clone(),
            None => image
                .topics()
                .flat_map(|topic| {
                    (0..topic.partitions.len())
                        .map(|index| (topic.name.clone(), i32::try_from(index).unwrap_or(i32::MAX)))
                })
                .collect(),
        };
        let mut outcomes = Vec::new();
        for (topic, partition_index) in targets {
            let result =
                self.elect_one(&mut pending, &topic, partition_index, request.election_type)?;
            let not_needed = matches!(result, Err(ControllerError::ElectionNotNeeded { .. }));
            if request.partitions.is_some() || !not_needed {
                outcomes.push(ElectionOutcome {
                    topic,
                    partition_index,
                    result,
                });
            }
        }
        Ok(pending.finish(outcomes, false))
    }

    fn elect_one(
        &self,
        pending: &mut Pending,
        topic_name: &str,
        partition_index: i32,
        election_type: ElectionType,
    ) -> Result<Result<BrokerId, ControllerError>, ApplyError> {
        let image = &pending.image;
        let Some(topic) = image.topic_by_name(topic_name) else {
            return Ok(Err(ControllerError::UnknownTopic {
                name: topic_name.to_owned(),
            }));
        };
        let unknown = || ControllerError::UnknownPartition {
            topic: topic_name.to_owned(),
            partition_index,
        };
        let (Some(partition), Ok(index)) = (
            topic.partition(partition_index),
            usize::try_from(partition_index),
        ) else {
            return Ok(Err(unknown()));
        };
        let live = |id| is_live(image, id);
        let not_needed = ControllerError::ElectionNotNeeded {
            topic: topic_name.to_owned(),
            partition_index,
        };
        let election = match election_type {
            ElectionType::Preferred if partition.leader == partition.replicas.first().copied() => {
                return Ok(Err(not_needed))
            }
            ElectionType::Unclean if partition.leader.is_some_and(live) => {
                return Ok(Err(not_needed))
            }
            ElectionType::Preferred => {
                preferred_replica_leader(&partition.replicas, &partition.isr, live).ok_or(
                    ControllerError::PreferredLeaderNotAvailable {
                        topic: topic_name.to_owned(),
                        partition_index,
                    },
                )
            }
            ElectionType::Unclean => {
                offline_partition_leader(&partition.replicas, &partition.isr, live, true).ok_or(
                    ControllerError::EligibleLeadersNotAvailable {
                        topic: topic_name.to_owned(),
                        partition_index,
                    },
                )
            }
        };
        let election = match election {
            Ok(election) => election,
            Err(error) => return Ok(Err(error)),
        };
        let leader = election.leader;
        let record = election_record(image, topic, index, partition, election);
        pending.push(vec![record])?;
        Ok(Ok(leader))
    }

    fn session_alive(&self, broker_id: BrokerId, now_ms: u64) -> bool {
        self.last_heartbeat_ms.get(&broker_id).is_some_and(|last| {
            now_ms.saturating_sub(*last) < self.config.broker_session_timeout_ms
        })
    }

    fn fence(
        &self,
        pending: &mut Pending,
        broker_id: BrokerId,
        epoch: i64,
        departure: Departure,
    ) -> Result<(), ApplyError> {
        let mut records = self.departure_records(&pending.image, broker_id, departure);
        records.push(MetadataRecord::new(Record::FenceBroker(
            FenceBrokerRecord {
                broker_id,
                broker_epoch: epoch,
            },
        )));
        pending.push(records)
    }

    fn unfence(
        &self,
        pending: &mut Pending,
        broker_id: BrokerId,
        epoch: i64,
    ) -> Result<(), ApplyError> {
        pending.push(vec![MetadataRecord::new(Record::UnfenceBroker(
            UnfenceBrokerRecord {
                broker_id,
                broker_epoch: epoch,
            },
        ))])?;
        let records = self.return_records(&pending.image, broker_id);
        pending.push(records)
    }

    /// Partition changes that take `broker_id` out of leadership and ISRs.
    fn departure_records(
        &self,
        image: &MetadataImage,
        broker_id: BrokerId,
        departure: Departure,
    ) -> Vec<MetadataRecord> {
        let live = |id| id != broker_id && is_live(image, id);
        let mut records = Vec::new();
        for topic in image.topics() {
            let unclean = self.unclean_enabled(image, topic);
            for (index, partition) in topic.partitions.iter().enumerate() {
                // The departing broker's replica goes Offline (from Online,
                // or stays Offline): legal by the table.
                debug_assert!(
                    !partition.replicas.contains(&broker_id)
                        || image
                            .replica_state(partition, broker_id)
                            .transition(ReplicaState::Offline)
                            .is_ok()
                );
                let leads = partition.leader == Some(broker_id);
                if !leads && !partition.isr.contains(&broker_id) {
                    continue;
                }
                let mut isr: Vec<BrokerId> = partition
                    .isr
                    .iter()
                    .copied()
                    .filter(|id| *id != broker_id)
                    .collect();
                if isr.is_empty() {
                    // Keep the last in-sync replica: it alone has every
                    // committed record, and it leads again when it returns.
                    isr.clone_from(&partition.isr);
                }
                if !leads {
                    if isr != partition.isr {
                        records.push(partition_change(topic, index, Some(isr), None));
                    }
                    continue;
                }
                let election = match departure {
                    Departure::Fenced => {
                        offline_partition_leader(&partition.replicas, &isr, live, unclean)
                    }
                    Departure::Shutdown => {
                        controlled_shutdown_leader(&partition.replicas, &isr, live, |id| {
                            id == broker_id
                        })
                    }
                };
                records.push(match election {
                    Some(election) => election_record(image, topic, index, partition, election),
                    None => {
                        debug_assert!(PartitionState::Online
                            .transition(PartitionState::Offline)
                            .is_ok());
                        partition_change(
                            topic,
                            index,
                            Some(isr).filter(|isr| *isr != partition.isr),
                            Some(None),
                        )
                    }
                });
            }
        }
        records
    }

    /// Elections for leaderless partitions that `broker_id`, now unfenced,
    /// can lead.
    fn return_records(&self, image: &MetadataImage, broker_id: BrokerId) -> Vec<MetadataRecord> {
        let live = |id| is_live(image, id);
        let mut records = Vec::new();
        for topic in image.topics() {
            let unclean = self.unclean_enabled(image, topic);
            for (index, partition) in topic.partitions.iter().enumerate() {
                // The returning broker's replica comes back Online.
                debug_assert!(
                    !partition.replicas.contains(&broker_id)
                        || image
                            .replica_state(partition, broker_id)
                            .transition(ReplicaState::Online)
                            .is_ok()
                );
                let leaderless = !partition.leader.is_some_and(live);
                if !leaderless || !partition.replicas.contains(&broker_id) {
                    continue;
                }
                if let Some(election) =
                    offline_partition_leader(&partition.replicas, &partition.isr, live, unclean)
                {
                    records.push(election_record(image, topic, index, partition, election));
                }
            }
        }
        records
    }
}

/// The change record that installs an election's leader and ISR.
pub(super) fn election_record(
    image: &MetadataImage,
    topic: &TopicImage,
    index: usize,
    partition: &PartitionImage,
    election: Election,
) -> MetadataRecord {
    let from = PartitionState::of(partition, |id| is_live(image, id));
    debug_assert!(from.transition(PartitionState::Online).is_ok());
    if election.unclean {
        tracing::warn!(topic = %topic.name, partition = index, leader = election.leader, "unclean leader election");
    }
    let isr = Some(election.isr).filter(|isr| *isr != partition.isr);
    partition_change(topic, index, isr, Some(Some(election.leader)))
}

fn endpoint_record(endpoint: &Endpoint) -> BrokerEndpoint {
    BrokerEndpoint {
        name: endpoint.name.clone(),
        host: endpoint.host.clone(),
        port: u32::from(endpoint.port),
        security_protocol: endpoint.security_protocol.clone(),
    }
}

/// The registered broker `broker_id`, if its epoch is `broker_epoch`;
/// otherwise the error Kafka answers (BROKER_ID_NOT_REGISTERED or
/// STALE_BROKER_EPOCH).
pub(super) fn broker_at_epoch(
    image: &MetadataImage,
    broker_id: BrokerId,
    broker_epoch: i64,
) -> Result<&crate::image::BrokerImage, ControllerError> {
    let broker = image
        .broker(broker_id)
        .ok_or(ControllerError::BrokerNotRegistered { broker_id })?;
    if broker.epoch != broker_epoch {
        return Err(ControllerError::StaleBrokerEpoch {
            broker_id,
            current_epoch: broker.epoch,
            request_epoch: broker_epoch,
        });
    }
    Ok(broker)
}
