//! FindCoordinator: the leader of the group's `__consumer_offsets`
//! partition (key type 0) or of the transactional id's
//! `__transaction_state` partition (key type 1). The first request for a
//! key type creates its internal topic. v4+ batches keys.

use strom_coordinator::{java_string_hash_code, partition_for_group};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::find_coordinator_response::Coordinator;
use strom_protocol::kafka::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_transactions::coordinator::partition_for;

use super::BrokerContext;
use crate::groups::{ensure_offsets_topic, OFFSETS_TOPIC};
use crate::transactions::{ensure_transaction_state_topic, TRANSACTION_STATE_TOPIC};

/// FindCoordinator key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// FindCoordinator key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Where a coordinator is, or why it cannot be named.
type Located = Result<(i32, String, i32), (ErrorCode, &'static str)>;

/// Handles a FindCoordinator request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: FindCoordinatorRequest,
) -> Reply {
    let keys: Vec<String> = if context.api_version >= 4 {
        request
            .coordinator_keys
            .iter()
            .map(|key| key.to_string())
            .collect()
    } else {
        vec![request.key.to_string()]
    };
    let mut located = Vec::with_capacity(keys.len());
    for key in keys {
        let result = match denial(broker, context, request.key_type, &key) {
            Some(denied) => Err(denied),
            None => {
                locate(
                    broker,
                    &context.session.listener().name,
                    request.key_type,
                    &key,
                )
                .await
            }
        };
        located.push((key, result));
    }
    let response = if context.api_version >= 4 {
        FindCoordinatorResponse::default().with_coordinators(
            located
                .into_iter()
                .map(|(key, result)| coordinator_entry(key, result))
                .collect(),
        )
    } else {
        let (_, result) = located
            .into_iter()
            .next()
            .unwrap_or((String::new(), Err((ErrorCode::InvalidRequest, "no key"))));
        single_response(result)
    };
    Reply::Response(Response::FindCoordinator(response))
}

/// The refusal of a key the principal may not look up: DESCRIBE on the
/// group, or on the transactional id.
fn denial(
    broker: &BrokerContext,
    context: &RequestContext,
    key_type: i8,
    key: &str,
) -> Option<(ErrorCode, &'static str)> {
    use strom_protocol::acl::{operation, resource};
    match key_type {
        KEY_TYPE_GROUP => {
            (!super::authorization::may_on_group(broker, context, operation::DESCRIBE, key))
                .then_some((
                    ErrorCode::GroupAuthorizationFailed,
                    "DESCRIBE on the group is required",
                ))
        }
        KEY_TYPE_TRANSACTION => (!super::authorization::authorize(
            broker,
            context,
            operation::DESCRIBE,
            resource::TRANSACTIONAL_ID,
            key,
        ))
        .then_some((
            ErrorCode::TransactionalIdAuthorizationFailed,
            "DESCRIBE on the transactional id is required",
        )),
        _ => None,
    }
}

async fn locate(broker: &BrokerContext, listener: &str, key_type: i8, key: &str) -> Located {
    let internal_topic = match key_type {
        KEY_TYPE_GROUP => OFFSETS_TOPIC,
        KEY_TYPE_TRANSACTION => TRANSACTION_STATE_TOPIC,
        _ => return Err((ErrorCode::InvalidRequest, "unknown coordinator key type")),
    };
    if key.is_empty() {
        return Err((ErrorCode::InvalidRequest, "the coordinator key is empty"));
    }
    let mut image = broker.controller.image();
    if image.topic_by_name(internal_topic).is_none() {
        if key_type == KEY_TYPE_GROUP {
            ensure_offsets_topic(broker.controller.as_ref(), &broker.config).await;
        } else {
            ensure_transaction_state_topic(broker.controller.as_ref(), &broker.config).await;
        }
        broker.sync_metadata();
        image = broker.controller.image();
    }
    let Some(topic) = image.topic_by_name(internal_topic) else {
        return Err((
            ErrorCode::CoordinatorNotAvailable,
            "the coordinator's internal topic does not exist yet",
        ));
    };
    let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    let index = if key_type == KEY_TYPE_GROUP {
        partition_for_group(key, partitions.max(1))
    } else {
        partition_for(java_string_hash_code(key), partitions.max(1))
    };
    let leader = usize::try_from(index)
        .ok()
        .and_then(|index| topic.partitions.get(index))
        .and_then(|partition| partition.leader);
    let not_available = (
        ErrorCode::CoordinatorNotAvailable,
        "the coordinator's partition has no leader",
    );
    let leader = leader.ok_or(not_available)?;
    let registered = image.broker(leader).ok_or(not_available)?;
    let listener = Some(listener);
    let endpoint = registered
        .endpoints
        .iter()
        .find(|endpoint| Some(endpoint.name.as_str()) == listener)
        .or_else(|| registered.endpoints.first())
        .ok_or(not_available)?;
    Ok((leader, endpoint.host.clone(), i32::from(endpoint.port)))
}

fn coordinator_entry(key: String, result: Located) -> Coordinator {
    let entry = Coordinator::default().with_key(StrBytes::from_string(key));
    match result {
        Ok((node_id, host, port)) => entry
            .with_node_id(BrokerId(node_id))
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err((code, message)) => entry
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::from_static_str(""))
            .with_port(-1)
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_static_str(message))),
    }
}

fn single_response(result: Located) -> FindCoordinatorResponse {
    match result {
        Ok((node_id, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(node_id))
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err((code, message)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::from_static_str(""))
            .with_port(-1)
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_static_str(message))),
    }
}
