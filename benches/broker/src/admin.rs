//! Topic setup and end offsets: CreateTopics, Metadata and ListOffsets.

use std::time::{Duration, Instant};

use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::{
    BrokerId, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Request, Response};

use crate::connection::Connection;
use crate::error::LoadError;

/// CreateTopics version the tool sends.
const CREATE_TOPICS_VERSION: i16 = 5;
/// Metadata version the tool sends.
const METADATA_VERSION: i16 = 12;
/// ListOffsets version the tool sends.
const LIST_OFFSETS_VERSION: i16 = 7;
/// How long to wait for every partition to have a leader.
const LEADER_WAIT: Duration = Duration::from_secs(10);

/// A topic name as the generated messages want it.
pub fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Creates `topic` with `partitions` partitions (replication factor 1) unless
/// it exists, then waits until every partition has a leader. Returns the
/// topic's partition count as the broker reports it.
pub async fn ensure_topic(
    connection: &mut Connection,
    topic: &str,
    partitions: i32,
) -> Result<i32, LoadError> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let response = connection
        .round_trip(Request::from(request), CREATE_TOPICS_VERSION)
        .await?;
    let Response::CreateTopics(response) = response else {
        return Err(LoadError::UnexpectedResponse {
            expected: "CreateTopics",
        });
    };
    for result in &response.topics {
        let code = ErrorCode::from(result.error_code);
        if !code.is_none() && code != ErrorCode::TopicAlreadyExists {
            return Err(broker_error("CreateTopics", topic, -1, code));
        }
    }
    wait_for_leaders(connection, topic).await
}

async fn wait_for_leaders(connection: &mut Connection, topic: &str) -> Result<i32, LoadError> {
    let started = Instant::now();
    loop {
        if let Some(count) = led_partition_count(connection, topic).await? {
            return Ok(count);
        }
        if started.elapsed() > LEADER_WAIT {
            return Err(LoadError::NoLeader {
                topic: topic.to_owned(),
                waited_ms: LEADER_WAIT.as_millis() as u64,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The partition count if every partition of `topic` has a leader.
async fn led_partition_count(
    connection: &mut Connection,
    topic: &str,
) -> Result<Option<i32>, LoadError> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
    ]));
    let Response::Metadata(response) = connection
        .round_trip(Request::from(request), METADATA_VERSION)
        .await?
    else {
        return Err(LoadError::UnexpectedResponse {
            expected: "Metadata",
        });
    };
    let Some(found) = response.topics.first() else {
        return Ok(None);
    };
    if found.error_code != 0 || found.partitions.is_empty() {
        return Ok(None);
    }
    let all_led = found
        .partitions
        .iter()
        .all(|partition| partition.error_code == 0 && partition.leader_id >= BrokerId(0));
    Ok(all_led.then_some(found.partitions.len() as i32))
}

/// The log end offset of each of `partitions` partitions of `topic`, by index.
pub async fn end_offsets(
    connection: &mut Connection,
    topic: &str,
    partitions: i32,
) -> Result<Vec<i64>, LoadError> {
    end_offsets_at(connection, topic, partitions, 0).await
}

/// The end offset of each of `partitions` partitions of `topic` as seen at
/// `isolation_level` (0: the high watermark, 1: the last stable offset).
pub async fn end_offsets_at(
    connection: &mut Connection,
    topic: &str,
    partitions: i32,
    isolation_level: i8,
) -> Result<Vec<i64>, LoadError> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                (0..partitions)
                    .map(|index| {
                        ListOffsetsPartition::default()
                            .with_partition_index(index)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let Response::ListOffsets(response) = connection
        .round_trip(Request::from(request), LIST_OFFSETS_VERSION)
        .await?
    else {
        return Err(LoadError::UnexpectedResponse {
            expected: "ListOffsets",
        });
    };
    let mut offsets = vec![0_i64; partitions.max(0) as usize];
    for answer in response.topics.iter().flat_map(|topic| &topic.partitions) {
        let code = ErrorCode::from(answer.error_code);
        if !code.is_none() {
            return Err(broker_error(
                "ListOffsets",
                topic,
                answer.partition_index,
                code,
            ));
        }
        if let Some(slot) = usize::try_from(answer.partition_index)
            .ok()
            .and_then(|index| offsets.get_mut(index))
        {
            *slot = answer.offset;
        }
    }
    Ok(offsets)
}

/// A [`LoadError::Broker`].
pub fn broker_error(api: &'static str, topic: &str, partition: i32, code: ErrorCode) -> LoadError {
    LoadError::Broker {
        api,
        topic: topic.to_owned(),
        partition,
        code,
    }
}
