//! A consumer-protocol group to and from its `__consumer_offsets` records:
//! what a change writes, and how a replay rebuilds the group.

use crate::consumer_group::{ConsumerChanges, ConsumerGroup, TopicMetadata};
use crate::consumer_member::{ConsumerMember, MemberState};
use crate::consumer_records::{
    ConsumerRecord, CurrentAssignmentValue, MemberMetadataValue, SubscribedTopic,
};

impl ConsumerGroup {
    /// The records of `changes`, in the order Kafka writes them: removed
    /// members' tombstones, changed members' metadata, the group epoch and
    /// subscribed topics, the target assignment, then current assignments.
    pub(crate) fn change_records(
        &self,
        group_id: &str,
        changes: &ConsumerChanges,
    ) -> Vec<ConsumerRecord> {
        let mut records = Vec::new();
        for member_id in &changes.removed {
            if !self.members.contains_key(member_id) {
                records.extend(member_tombstones(group_id, member_id));
            }
        }
        for member_id in &changes.members {
            if let Some(member) = self.members.get(member_id) {
                records.push(ConsumerRecord::MemberMetadata {
                    group: group_id.to_owned(),
                    member: member_id.clone(),
                    value: Some(member_metadata(member)),
                });
            }
        }
        if changes.group {
            records.push(self.partition_metadata_record(group_id));
            records.push(ConsumerRecord::GroupMetadata {
                group: group_id.to_owned(),
                epoch: Some(self.group_epoch),
            });
        }
        if changes.target {
            for (member_id, partitions) in &self.target {
                records.push(ConsumerRecord::TargetAssignmentMember {
                    group: group_id.to_owned(),
                    member: member_id.clone(),
                    partitions: Some(partitions.clone()),
                });
            }
            records.push(ConsumerRecord::TargetAssignmentMetadata {
                group: group_id.to_owned(),
                epoch: Some(self.assignment_epoch),
            });
        }
        for member_id in &changes.members {
            if let Some(member) = self.members.get(member_id) {
                records.push(current_assignment(group_id, member));
            }
        }
        records
    }

    /// Tombstones for the whole group (deleted, or turned classic).
    pub(crate) fn removal_records(&self, group_id: &str) -> Vec<ConsumerRecord> {
        let mut records: Vec<ConsumerRecord> = self
            .members
            .keys()
            .flat_map(|member_id| member_tombstones(group_id, member_id))
            .collect();
        records.push(ConsumerRecord::TargetAssignmentMetadata {
            group: group_id.to_owned(),
            epoch: None,
        });
        records.push(ConsumerRecord::PartitionMetadata {
            group: group_id.to_owned(),
            topics: None,
        });
        records.push(ConsumerRecord::GroupMetadata {
            group: group_id.to_owned(),
            epoch: None,
        });
        records
    }

    fn partition_metadata_record(&self, group_id: &str) -> ConsumerRecord {
        let topics = self
            .subscription_metadata
            .iter()
            .map(|(name, topic)| SubscribedTopic {
                topic_id: topic.topic_id,
                name: name.clone(),
                partitions: topic.partitions,
            })
            .collect();
        ConsumerRecord::PartitionMetadata {
            group: group_id.to_owned(),
            topics: Some(topics),
        }
    }

    /// Applies one replayed record (later records win, tombstones delete).
    pub(crate) fn apply_record(&mut self, record: ConsumerRecord) {
        match record {
            ConsumerRecord::GroupMetadata { epoch, .. } => self.group_epoch = epoch.unwrap_or(0),
            ConsumerRecord::PartitionMetadata { topics, .. } => {
                self.subscription_metadata = topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|topic| {
                        let metadata = TopicMetadata {
                            topic_id: topic.topic_id,
                            partitions: topic.partitions,
                        };
                        (topic.name, metadata)
                    })
                    .collect();
            }
            ConsumerRecord::MemberMetadata { member, value, .. } => match value {
                Some(value) => {
                    let entry = self
                        .members
                        .entry(member.clone())
                        .or_insert_with(|| ConsumerMember::new(&member));
                    apply_member_metadata(entry, value);
                }
                None => {
                    self.members.remove(&member);
                    self.timers.remove(&member);
                }
            },
            ConsumerRecord::TargetAssignmentMetadata { epoch, .. } => {
                self.assignment_epoch = epoch.unwrap_or(0);
            }
            ConsumerRecord::TargetAssignmentMember {
                member, partitions, ..
            } => match partitions {
                Some(partitions) => {
                    self.target.insert(member, partitions);
                }
                None => {
                    self.target.remove(&member);
                }
            },
            ConsumerRecord::CurrentMemberAssignment { member, value, .. } => {
                let entry = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::new(&member));
                let value = value.unwrap_or_default();
                entry.member_epoch = value.member_epoch;
                entry.previous_member_epoch = value.previous_member_epoch;
                entry.state = MemberState::from_code(value.state);
                entry.assigned = value.assigned;
                entry.revoking = value.pending_revocation;
            }
        }
    }
}

fn member_tombstones(group_id: &str, member_id: &str) -> [ConsumerRecord; 3] {
    [
        ConsumerRecord::CurrentMemberAssignment {
            group: group_id.to_owned(),
            member: member_id.to_owned(),
            value: None,
        },
        ConsumerRecord::TargetAssignmentMember {
            group: group_id.to_owned(),
            member: member_id.to_owned(),
            partitions: None,
        },
        ConsumerRecord::MemberMetadata {
            group: group_id.to_owned(),
            member: member_id.to_owned(),
            value: None,
        },
    ]
}

fn member_metadata(member: &ConsumerMember) -> MemberMetadataValue {
    MemberMetadataValue {
        instance_id: member.instance_id.clone(),
        rack_id: member.rack_id.clone(),
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        subscribed_topic_names: member.subscribed_topics.iter().cloned().collect(),
        subscribed_topic_regex: member.subscribed_topic_regex.clone(),
        rebalance_timeout_ms: member.rebalance_timeout_ms,
        server_assignor: member.server_assignor.clone(),
    }
}

fn apply_member_metadata(member: &mut ConsumerMember, value: MemberMetadataValue) {
    member.instance_id = value.instance_id;
    member.rack_id = value.rack_id;
    member.client_id = value.client_id;
    member.client_host = value.client_host;
    member.subscribed_topics = value.subscribed_topic_names.into_iter().collect();
    member.subscribed_topic_regex = value.subscribed_topic_regex;
    member.rebalance_timeout_ms = value.rebalance_timeout_ms;
    member.server_assignor = value.server_assignor;
}

fn current_assignment(group_id: &str, member: &ConsumerMember) -> ConsumerRecord {
    ConsumerRecord::CurrentMemberAssignment {
        group: group_id.to_owned(),
        member: member.member_id.clone(),
        value: Some(CurrentAssignmentValue {
            member_epoch: member.member_epoch,
            previous_member_epoch: member.previous_member_epoch,
            state: member.state.code(),
            assigned: member.assigned.clone(),
            pending_revocation: member.revoking.clone(),
        }),
    }
}
