//! FindCoordinator: the leader of the group's `__consumer_offsets`
//! partition. Key type 0 (group) only; transactions have no coordinator in
//! Strom, and such keys get an honest error. v4+ batches keys.

use strom_coordinator::partition_for_group;
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::find_coordinator_response::Coordinator;
use strom_protocol::kafka::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::BrokerContext;
use crate::groups::{ensure_offsets_topic, OFFSETS_TOPIC};

/// FindCoordinator key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;

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
        let denied = request.key_type == KEY_TYPE_GROUP
            && !super::authorization::may_on_group(
                broker,
                context,
                strom_protocol::acl::operation::DESCRIBE,
                &key,
            );
        let result = match denied {
            true => Err((
                ErrorCode::GroupAuthorizationFailed,
                "DESCRIBE on the group is required",
            )),
            false => {
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

async fn locate(broker: &BrokerContext, listener: &str, key_type: i8, key: &str) -> Located {
    if key_type != KEY_TYPE_GROUP {
        return Err((
            ErrorCode::InvalidRequest,
            "Strom has no transaction coordinator",
        ));
    }
    if key.is_empty() {
        return Err((ErrorCode::InvalidRequest, "the group id is empty"));
    }
    let mut image = broker.controller.image();
    if image.topic_by_name(OFFSETS_TOPIC).is_none() {
        ensure_offsets_topic(broker.controller.as_ref(), &broker.config).await;
        broker.sync_metadata();
        image = broker.controller.image();
    }
    let Some(topic) = image.topic_by_name(OFFSETS_TOPIC) else {
        return Err((
            ErrorCode::CoordinatorNotAvailable,
            "__consumer_offsets does not exist yet",
        ));
    };
    let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    let index = partition_for_group(key, partitions.max(1));
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
