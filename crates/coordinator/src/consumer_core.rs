//! The coordinator's consumer-protocol (KIP-848) front end: the
//! ConsumerGroupHeartbeat entry point, the meeting of the two protocols on
//! one group id, and the consumer groups' timers.

use strom_clock::Random;

use crate::consumer_assignor::ConsumerAssignor;
use crate::consumer_group::{
    validate_heartbeat, ConsumerGroup, ConsumerGroupState, ConsumerHeartbeat,
    ConsumerHeartbeatResponse, TopicCatalog,
};
use crate::consumer_records::ConsumerRecord;
use crate::coordinator::{CoordinatorCore, GroupEntry, PartitionStatus};
use crate::error::GroupError;
use crate::group::Group;
use crate::offsets::GroupOffsets;
use crate::records::OffsetsRecord;
use crate::state::GroupState;

/// A consumer group as ListGroups reports it: id and state.
pub type ConsumerGroupListing = (String, ConsumerGroupState);

impl CoordinatorCore {
    /// ConsumerGroupHeartbeat: joins, heartbeats for, or takes out a member
    /// of a consumer-protocol group, created by the first join. A group id
    /// that belongs to a classic group with members answers
    /// GROUP_ID_NOT_FOUND (online migration is not supported); an empty
    /// classic group becomes a consumer group.
    pub fn consumer_heartbeat(
        &mut self,
        group_id: &str,
        request: &ConsumerHeartbeat,
        catalog: &dyn TopicCatalog,
        now_ms: i64,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let config = self.config.consumer.clone();
        validate_heartbeat(group_id, request, &config)?;
        self.check_owner(group_id)?;
        let member_id = if request.member_id.is_empty() {
            new_member_id(&*self.random)
        } else {
            request.member_id.clone()
        };
        let group = self.consumer_group_for(group_id, request.member_epoch == 0, now_ms)?;
        let result = group.heartbeat(request, &member_id, &config, catalog, now_ms);
        self.after_consumer_change(group_id);
        result
    }

    /// The consumer group of `group_id`, created (or converted from an
    /// empty classic group) when `create`.
    fn consumer_group_for(
        &mut self,
        group_id: &str,
        create: bool,
        now_ms: i64,
    ) -> Result<&mut ConsumerGroup, GroupError> {
        if !self.groups.contains_key(group_id) {
            if !create {
                return Err(GroupError::GroupIdNotFound);
            }
            self.groups.insert(
                group_id.to_owned(),
                GroupEntry {
                    group: Group::new(group_id, now_ms),
                    offsets: GroupOffsets::new(),
                    consumer: None,
                },
            );
        }
        let entry = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        if entry.consumer.is_none() {
            let classic_empty = entry.group.state() == GroupState::Empty
                && entry.group.is_empty()
                && entry.group.pending_members.is_empty();
            if !create || !classic_empty {
                return Err(GroupError::GroupIdNotFound);
            }
            entry.consumer = Some(ConsumerGroup::new());
        }
        entry.consumer.as_mut().ok_or(GroupError::GroupIdNotFound)
    }

    /// The consumer-protocol group of `group_id`, if it is one.
    pub fn consumer_group(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.groups
            .get(group_id)
            .and_then(|entry| entry.consumer.as_ref())
    }

    /// Whether a classic request may use `group_id`: refused with
    /// INCONSISTENT_GROUP_PROTOCOL while a consumer group with members
    /// holds it; an empty consumer group is turned back into a classic one.
    pub(crate) fn claim_for_classic(&mut self, group_id: &str) -> Result<(), GroupError> {
        let Some(entry) = self.groups.get_mut(group_id) else {
            return Ok(());
        };
        match &entry.consumer {
            Some(consumer) if !consumer.members().is_empty() => {
                Err(GroupError::InconsistentGroupProtocol)
            }
            Some(_) => {
                if let Some(consumer) = entry.consumer.take() {
                    self.write_consumer_group_removal(group_id, &consumer);
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Fences the consumer groups' members whose session or rebalance
    /// timeout passed.
    pub(crate) fn tick_consumer_groups(&mut self, now_ms: i64) {
        let group_ids: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, entry)| entry.consumer.is_some())
            .map(|(group_id, _)| group_id.clone())
            .collect();
        for group_id in group_ids {
            let expired = self
                .groups
                .get_mut(&group_id)
                .and_then(|entry| entry.consumer.as_mut())
                .map(|consumer| consumer.expire_members(now_ms))
                .unwrap_or_default();
            if !expired.is_empty() {
                tracing::info!(group = %group_id, members = ?expired, "consumer group members fenced");
                self.after_consumer_change(&group_id);
            }
        }
    }

    /// The consumer groups' earliest member deadline.
    pub(crate) fn next_consumer_deadline_ms(&self) -> Option<i64> {
        self.groups
            .values()
            .filter_map(|entry| entry.consumer.as_ref())
            .filter_map(ConsumerGroup::next_deadline_ms)
            .min()
    }

    /// ConsumerGroupDescribe for one group: the group and the assignor it
    /// uses; GROUP_ID_NOT_FOUND for an unknown or classic group.
    pub fn describe_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<(ConsumerGroup, ConsumerAssignor), GroupError> {
        self.check_owner(group_id)?;
        let consumer = self
            .consumer_group(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        Ok((consumer.clone(), consumer.assignor(&self.config.consumer)))
    }

    /// ListGroups' consumer-protocol groups of loaded partitions.
    pub fn list_consumer_groups(&self) -> Vec<ConsumerGroupListing> {
        let mut listings: Vec<ConsumerGroupListing> = self
            .groups
            .iter()
            .filter(|(group_id, _)| {
                let partition = self.partition_for(group_id);
                self.partitions.get(&partition) == Some(&PartitionStatus::Loaded)
            })
            .filter_map(|(group_id, entry)| {
                let consumer = entry.consumer.as_ref()?;
                Some((group_id.clone(), consumer.state()))
            })
            .collect();
        listings.sort_by(|left, right| left.0.cmp(&right.0));
        listings
    }

    /// Validates an OffsetFetch's member and epoch (v9+) when the group is
    /// a consumer group.
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        match self.consumer_group(group_id) {
            Some(consumer) => consumer.validate_offset_fetch(member_id, member_epoch),
            None => Ok(()),
        }
    }

    /// Writes the records of what changed in a consumer group.
    pub(crate) fn after_consumer_change(&mut self, group_id: &str) {
        let Some(consumer) = self
            .groups
            .get_mut(group_id)
            .and_then(|entry| entry.consumer.as_mut())
        else {
            return;
        };
        let changes = consumer.take_changes();
        let records = consumer.change_records(group_id, &changes);
        for record in records {
            self.push_record(OffsetsRecord::Consumer(record));
        }
    }

    /// Writes the tombstones of a consumer group that became classic or
    /// was deleted (`consumer` is the group as it was).
    pub(crate) fn write_consumer_group_removal(
        &mut self,
        group_id: &str,
        consumer: &ConsumerGroup,
    ) {
        for record in consumer.removal_records(group_id) {
            self.push_record(OffsetsRecord::Consumer(record));
        }
    }

    /// Replays one consumer-group record.
    pub(crate) fn apply_consumer_record(&mut self, record: ConsumerRecord, now_ms: i64) {
        let group_id = record.group().to_owned();
        let removes_group = matches!(record, ConsumerRecord::GroupMetadata { epoch: None, .. });
        if removes_group {
            if let Some(entry) = self.groups.get_mut(&group_id) {
                entry.consumer = None;
                if entry.offsets.is_empty() && entry.group.is_empty() {
                    self.groups.remove(&group_id);
                }
            }
            return;
        }
        let entry = self
            .groups
            .entry(group_id.clone())
            .or_insert_with(|| GroupEntry {
                group: Group::new(&group_id, now_ms),
                offsets: GroupOffsets::new(),
                consumer: None,
            });
        entry
            .consumer
            .get_or_insert_with(ConsumerGroup::new)
            .apply_record(record);
    }

    /// Starts a session for every member of the consumer groups of a
    /// loaded `partition`: a member that does not heartbeat to the new
    /// coordinator is fenced after its session timeout.
    pub(crate) fn start_consumer_sessions(&mut self, partition: i32, now_ms: i64) {
        let config = self.config.consumer.clone();
        let offsets_partitions = self.config.offsets_topic_partitions;
        for (group_id, entry) in &mut self.groups {
            if crate::records::partition_for_group(group_id, offsets_partitions) != partition {
                continue;
            }
            if let Some(consumer) = entry.consumer.as_mut() {
                consumer.start_sessions(&config, now_ms);
                let _ = consumer.take_changes();
            }
        }
    }
}

/// A new member id: a random version-4 UUID.
fn new_member_id(random: &dyn Random) -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&random.next_u64().to_be_bytes());
    bytes[8..].copy_from_slice(&random.next_u64().to_be_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}
