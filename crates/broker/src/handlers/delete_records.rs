//! DeleteRecords: moves a partition's log start offset forward, up to the
//! high watermark (`-1` means the high watermark). Segments wholly below the
//! new start are removed by the next retention pass.

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::delete_records_request::DeleteRecordsPartition;
use strom_protocol::kafka::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use strom_protocol::kafka::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use strom_protocol::messages::Response;
use strom_storage::TopicPartition;

use super::errors::{delete_records_error_code, offline_error_code};
use super::{partitions, BrokerContext};

/// The offset that means "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Handles a DeleteRecords request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DeleteRecordsRequest,
) -> Reply {
    let image = broker.controller.image();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let allowed = super::authorization::authorize(
                broker,
                context,
                strom_protocol::acl::operation::DELETE,
                strom_protocol::acl::resource::TOPIC,
                &name,
            );
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| match allowed {
                    true => {
                        let exists = partitions::exists(&image, &name, partition.partition_index);
                        delete_partition(broker, &name, exists, partition)
                    }
                    false => DeleteRecordsPartitionResult::default()
                        .with_partition_index(partition.partition_index)
                        .with_low_watermark(-1)
                        .with_error_code(ErrorCode::TopicAuthorizationFailed.code()),
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    Reply::Response(Response::DeleteRecords(
        DeleteRecordsResponse::default().with_topics(topics),
    ))
}

/// One partition; `exists` says whether the metadata image has it (Kafka
/// answers UNKNOWN_TOPIC_OR_PARTITION for a partition it does not have,
/// NOT_LEADER_OR_FOLLOWER for one this broker does not lead).
fn delete_partition(
    broker: &BrokerContext,
    topic: &str,
    exists: bool,
    partition: &DeleteRecordsPartition,
) -> DeleteRecordsPartitionResult {
    let result = DeleteRecordsPartitionResult::default()
        .with_partition_index(partition.partition_index)
        .with_low_watermark(-1);
    let topic_partition = TopicPartition::new(topic.to_owned(), partition.partition_index);
    let Some(replica) = broker.replicas.get(&topic_partition) else {
        let error = if exists {
            ErrorCode::NotLeaderOrFollower
        } else {
            ErrorCode::UnknownTopicOrPartition
        };
        return result.with_error_code(error.code());
    };
    // Moving the log start removes producer snapshots below it (directory
    // reads and unlinks), holding the partition's write lock.
    let outcome = crate::blocking::blocking(|| {
        replica.with_log_mut(|log| {
            let new_start = match partition.offset {
                HIGH_WATERMARK => log.high_watermark(),
                offset if offset < 0 => return Ok(None),
                offset => offset,
            };
            log.increment_log_start_offset(new_start)?;
            Ok(Some(log.log_start_offset()))
        })
    });
    match outcome {
        Ok(Ok(Some(low_watermark))) => result.with_low_watermark(low_watermark),
        Ok(Ok(None)) => result.with_error_code(ErrorCode::OffsetOutOfRange.code()),
        Ok(Err(error)) => result.with_error_code(delete_records_error_code(&error).code()),
        Err(offline) => result.with_error_code(offline_error_code(&offline).code()),
    }
}
