//! ConsumerGroupDescribe (KIP-848): a consumer-protocol group's state,
//! epochs, assignor and members with their current and target
//! assignments. DESCRIBE on the group is needed (GROUP_AUTHORIZATION_FAILED
//! otherwise); a classic or unknown group answers GROUP_ID_NOT_FOUND, as
//! Kafka does.

use strom_controller::image::MetadataImage;
use strom_coordinator::{Assignment, ConsumerAssignor, ConsumerGroup, ConsumerMember};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::operation;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use strom_protocol::kafka::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::may_on_group;
use super::errors::group_error_code;
use super::{authorized_operations, BrokerContext};

/// Kafka's "authorized operations not requested" marker.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// `MemberType` of a member using the consumer protocol (v1).
const CONSUMER_MEMBER: i8 = 1;

/// Handles a ConsumerGroupDescribe request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ConsumerGroupDescribeRequest,
) -> Reply {
    let group_ids: Vec<String> = request
        .group_ids
        .iter()
        .map(|id| id.0.to_string())
        .collect();
    let described = broker
        .groups
        .coordinator
        .describe_consumer_groups(&group_ids);
    let image = broker.controller.image();
    let groups = request
        .group_ids
        .iter()
        .zip(described)
        .map(|(group_id, result)| {
            let answer = DescribedGroup::default().with_group_id(group_id.clone());
            if !may_on_group(broker, context, operation::DESCRIBE, group_id) {
                return answer.with_error_code(ErrorCode::GroupAuthorizationFailed.code());
            }
            let operations = match request.include_authorized_operations {
                true => authorized_operations::group_allowed(|operation| {
                    may_on_group(broker, context, operation, group_id)
                }),
                false => OPERATIONS_NOT_REQUESTED,
            };
            match result {
                Ok((group, assignor)) => described_group(answer, &group, assignor, &image)
                    .with_authorized_operations(operations),
                Err(error) => {
                    let message = format!("Group {} not found.", group_id.0);
                    answer
                        .with_error_code(group_error_code(&error).code())
                        .with_error_message(Some(StrBytes::from_string(message)))
                }
            }
        })
        .collect();
    Reply::Response(Response::ConsumerGroupDescribe(
        ConsumerGroupDescribeResponse::default().with_groups(groups),
    ))
}

fn described_group(
    answer: DescribedGroup,
    group: &ConsumerGroup,
    assignor: ConsumerAssignor,
    image: &MetadataImage,
) -> DescribedGroup {
    let members = group
        .members()
        .values()
        .map(|member| {
            let target = group
                .target_of(&member.member_id)
                .cloned()
                .unwrap_or_default();
            described_member(member, &target, image)
        })
        .collect();
    answer
        .with_group_state(StrBytes::from_static_str(group.state().kafka_name()))
        .with_group_epoch(group.group_epoch())
        .with_assignment_epoch(group.assignment_epoch())
        .with_assignor_name(StrBytes::from_static_str(assignor.name()))
        .with_members(members)
}

fn described_member(member: &ConsumerMember, target: &Assignment, image: &MetadataImage) -> Member {
    let text = |value: &Option<String>| value.clone().map(StrBytes::from_string);
    Member::default()
        .with_member_id(StrBytes::from_string(member.member_id.clone()))
        .with_instance_id(text(&member.instance_id))
        .with_rack_id(text(&member.rack_id))
        .with_member_epoch(member.member_epoch)
        .with_client_id(StrBytes::from_string(member.client_id.clone()))
        .with_client_host(StrBytes::from_string(member.client_host.clone()))
        .with_subscribed_topic_names(
            member
                .subscribed_topics
                .iter()
                .map(|name| TopicName(StrBytes::from_string(name.clone())))
                .collect(),
        )
        .with_subscribed_topic_regex(text(&member.subscribed_topic_regex))
        .with_assignment(wire_assignment(&member.assigned, image))
        .with_target_assignment(wire_assignment(target, image))
        .with_member_type(CONSUMER_MEMBER)
}

/// Partitions by topic id, named from the image (a deleted topic has an
/// empty name).
fn wire_assignment(assignment: &Assignment, image: &MetadataImage) -> WireAssignment {
    WireAssignment::default().with_topic_partitions(
        assignment
            .iter()
            .map(|(topic_id, partitions)| {
                let name = image
                    .topic_by_id(*topic_id)
                    .map(|topic| topic.name.clone())
                    .unwrap_or_default();
                TopicPartitions::default()
                    .with_topic_id(*topic_id)
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(partitions.iter().copied().collect())
            })
            .collect(),
    )
}
