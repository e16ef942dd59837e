//! Authorization decided for a whole request before its handler runs:
//! the group APIs that name one group (READ on it, ConsumerGroupHeartbeat included; OffsetCommit READ,
//! OffsetFetch v0-v7 DESCRIBE, OffsetDelete DELETE) and InitProducerId
//! (WRITE on the transactional id, or IDEMPOTENT_WRITE on the cluster or
//! WRITE on some topic for an idempotent producer). Topics, and the groups
//! of a v8+ OffsetFetch, are checked one by one in their handlers, which
//! answer the refused ones and serve the others, as Kafka does.

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use strom_protocol::kafka::messages::*;
use strom_protocol::messages::{Request, Response};

use super::authorization::{authorize, enabled, may_on_group, may_write_some_topic};
use super::BrokerContext;

/// The refusal of `request`, if the connection may not make it.
pub fn refusal(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &Request,
) -> Option<Reply> {
    if !enabled(broker) {
        return None;
    }
    let group_denied = |group: &GroupId| !may_on_group(broker, context, operation::READ, group);
    let denied = ErrorCode::GroupAuthorizationFailed.code();
    let response = match request {
        Request::JoinGroup(r) if group_denied(&r.group_id) => {
            Response::JoinGroup(JoinGroupResponse::default().with_error_code(denied))
        }
        Request::SyncGroup(r) if group_denied(&r.group_id) => {
            Response::SyncGroup(SyncGroupResponse::default().with_error_code(denied))
        }
        Request::Heartbeat(r) if group_denied(&r.group_id) => {
            Response::Heartbeat(HeartbeatResponse::default().with_error_code(denied))
        }
        Request::LeaveGroup(r) if group_denied(&r.group_id) => {
            Response::LeaveGroup(LeaveGroupResponse::default().with_error_code(denied))
        }
        Request::ConsumerGroupHeartbeat(r) if group_denied(&r.group_id) => {
            Response::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default().with_error_code(denied),
            )
        }
        Request::OffsetCommit(r) => return offset_commit(broker, context, r),
        Request::OffsetFetch(r)
            if context.api_version < 8
                && !may_on_group(broker, context, operation::DESCRIBE, &r.group_id) =>
        {
            Response::OffsetFetch(OffsetFetchResponse::default().with_error_code(denied))
        }
        Request::InitProducerId(r) => return init_producer_id(broker, context, r),
        Request::AddOffsetsToTxn(_) | Request::EndTxn(_) | Request::TxnOffsetCommit(_) => {
            return transactional(broker, context, request)
        }
        Request::OffsetDelete(r)
            if !may_on_group(broker, context, operation::DELETE, &r.group_id) =>
        {
            Response::OffsetDelete(OffsetDeleteResponse::default().with_error_code(denied))
        }
        _ => return None,
    };
    Some(Reply::Response(response))
}

/// READ on the group, or every partition is refused (the topics are
/// checked by the handler, which commits the allowed ones).
fn offset_commit(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &OffsetCommitRequest,
) -> Option<Reply> {
    if may_on_group(broker, context, operation::READ, &request.group_id) {
        return None;
    }
    let code = ErrorCode::GroupAuthorizationFailed.code();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    Some(Reply::Response(Response::OffsetCommit(
        OffsetCommitResponse::default().with_topics(topics),
    )))
}

fn init_producer_id(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &InitProducerIdRequest,
) -> Option<Reply> {
    let (allowed, code) = match &request.transactional_id {
        Some(id) => (
            authorize(
                broker,
                context,
                operation::WRITE,
                resource::TRANSACTIONAL_ID,
                id,
            ),
            ErrorCode::TransactionalIdAuthorizationFailed,
        ),
        None => (
            authorize(
                broker,
                context,
                operation::IDEMPOTENT_WRITE,
                resource::CLUSTER,
                CLUSTER_NAME,
            ) || may_write_some_topic(broker, context),
            ErrorCode::ClusterAuthorizationFailed,
        ),
    };
    (!allowed).then(|| {
        Reply::Response(Response::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ))
    })
}

/// The transactional id a transaction request names.
fn transactional_id(request: &Request) -> Option<&str> {
    Some(match request {
        Request::AddOffsetsToTxn(r) => r.transactional_id.0.as_str(),
        Request::EndTxn(r) => r.transactional_id.0.as_str(),
        Request::TxnOffsetCommit(r) => r.transactional_id.0.as_str(),
        _ => return None,
    })
}

/// WRITE on the transactional id (and READ on the group for
/// TxnOffsetCommit), or the whole request is refused. (AddPartitionsToTxn
/// checks it in its handler, which answers every partition.)
fn transactional(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &Request,
) -> Option<Reply> {
    let id = transactional_id(request)?;
    let mut code = (!authorize(
        broker,
        context,
        operation::WRITE,
        resource::TRANSACTIONAL_ID,
        id,
    ))
    .then_some(ErrorCode::TransactionalIdAuthorizationFailed);
    if let (None, Request::TxnOffsetCommit(r)) = (code, request) {
        code = (!may_on_group(broker, context, operation::READ, &r.group_id))
            .then_some(ErrorCode::GroupAuthorizationFailed);
    }
    let code = code?.code();
    let response = match request {
        Request::AddOffsetsToTxn(_) => {
            Response::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        Request::EndTxn(_) => Response::EndTxn(EndTxnResponse::default().with_error_code(code)),
        Request::TxnOffsetCommit(r) => {
            Response::TxnOffsetCommit(txn_offset_commit_refusal(r, code))
        }
        _ => return None,
    };
    Some(Reply::Response(response))
}

/// Every partition of a TxnOffsetCommit answered `code`.
fn txn_offset_commit_refusal(
    request: &TxnOffsetCommitRequest,
    code: i16,
) -> TxnOffsetCommitResponse {
    use strom_protocol::kafka::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The refusal of a config operation on a resource (topic: the topic;
/// broker: the cluster), if the principal lacks it.
pub fn config_refusal(
    broker: &BrokerContext,
    context: &RequestContext,
    operation: i8,
    resource_type: i8,
    name: &str,
) -> Option<ErrorCode> {
    const TOPIC: i8 = 2;
    match resource_type {
        TOPIC => (!authorize(broker, context, operation, resource::TOPIC, name))
            .then_some(ErrorCode::TopicAuthorizationFailed),
        _ => (!authorize(broker, context, operation, resource::CLUSTER, CLUSTER_NAME))
            .then_some(ErrorCode::ClusterAuthorizationFailed),
    }
}
