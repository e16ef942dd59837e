//! Topic metadata as the tools ask for it: every topic, or one by name.

use std::collections::BTreeMap;
use std::time::Instant;

use strom_client::{Cluster, ClusterMetadata, TopicInfo};
use strom_protocol::kafka::messages::MetadataRequest;
use strom_protocol::{ErrorCode, Response};

use crate::error::ToolError;

/// Every topic the cluster has, by name.
pub async fn all_topics(cluster: &Cluster) -> Result<BTreeMap<String, TopicInfo>, ToolError> {
    let connection = cluster
        .any_connection()
        .await
        .map_err(|source| ToolError::client("fetch metadata", source))?;
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    let response = connection
        .send(request)
        .await
        .map_err(|source| ToolError::client("fetch metadata", source))?;
    let Response::Metadata(response) = response else {
        return Err(ToolError::client(
            "fetch metadata",
            strom_client::ClientError::UnexpectedResponse {
                api_key: strom_protocol::kafka::messages::ApiKey::Metadata as i16,
            },
        ));
    };
    let now = Instant::now();
    let metadata = ClusterMetadata::empty(now).merged(&response, now);
    Ok(metadata
        .topics
        .into_iter()
        .filter(|(_, info)| info.error == ErrorCode::None)
        .collect())
}

/// The metadata of one topic, or an error naming it when it does not exist.
pub async fn topic_info(cluster: &Cluster, topic: &str) -> Result<TopicInfo, ToolError> {
    let mut topics = all_topics(cluster).await?;
    topics.remove(topic).ok_or_else(|| ToolError::UnknownTopic {
        topic: topic.to_owned(),
    })
}
