//! AddOffsetsToTxn: adds the group's `__consumer_offsets` partition to the
//! producer's transaction, so that the offsets it commits with
//! TxnOffsetCommit become visible with the transaction's commit marker.

use std::collections::BTreeSet;

use strom_coordinator::{java_string_hash_code, partition_for_group};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use strom_protocol::messages::Response;
use strom_transactions::metadata::{ProducerIdAndEpoch, TopicPartition, TransactionVersion};

use super::authorization::may_on_group;
use super::errors::{transaction_error_code, FencedCode};
use super::BrokerContext;
use crate::groups::OFFSETS_TOPIC;

/// Handles an AddOffsetsToTxn request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AddOffsetsToTxnRequest,
) -> Reply {
    let code = match add(broker, context, &request).await {
        Ok(()) => ErrorCode::None,
        Err(code) => code,
    };
    Reply::Response(Response::AddOffsetsToTxn(
        AddOffsetsToTxnResponse::default().with_error_code(code.code()),
    ))
}

async fn add(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &AddOffsetsToTxnRequest,
) -> Result<(), ErrorCode> {
    let group_id = request.group_id.to_string();
    if !may_on_group(
        broker,
        context,
        strom_protocol::acl::operation::READ,
        &group_id,
    ) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    let partitions = broker.config.offsets_topic_num_partitions.max(1);
    let offsets_partition = TopicPartition {
        topic: OFFSETS_TOPIC.to_owned(),
        partition: partition_for_group(&group_id, partitions),
    };
    let transactional_id = request.transactional_id.to_string();
    let producer = ProducerIdAndEpoch {
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    };
    broker
        .transactions
        .coordinator
        .add_partitions(
            &transactional_id,
            java_string_hash_code(&transactional_id),
            producer,
            &BTreeSet::from([offsets_partition]),
            TransactionVersion::V0,
        )
        .await
        .map_err(|error| {
            transaction_error_code(&error, FencedCode::for_version(context.api_version, 2))
        })
}
