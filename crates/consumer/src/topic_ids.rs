//! Fetch v13 and later name topics by id: this module fills the ids into
//! a request the [`crate::fetcher`] built with names, and puts the names
//! back into the response, so the fetcher itself only knows names.
//!
//! The ids come from the cluster metadata (Metadata v10+). When a topic of
//! the request has no known id, the request goes out at the last
//! name-based version (12) instead; a fetch session that switches between
//! ids and names is answered with a session error, which restarts it.

use std::collections::HashMap;

use strom_client::ClusterMetadata;
use strom_protocol::kafka::messages::{FetchRequest, FetchResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use uuid::Uuid;

/// The first Fetch version that names topics by id.
pub const FETCH_TOPIC_ID_VERSION: i16 = 13;

/// Sets the topic id of every topic and forgotten topic of `request` from
/// `ids` (name to id); `false`, with the request unchanged, if one is
/// unknown or nil.
pub fn assign_topic_ids(request: &mut FetchRequest, ids: &HashMap<&str, Uuid>) -> bool {
    let known = |name: &TopicName| ids.get(name.0.as_str()).filter(|id| !id.is_nil());
    let all_known = request
        .topics
        .iter()
        .all(|topic| known(&topic.topic).is_some())
        && request
            .forgotten_topics_data
            .iter()
            .all(|topic| known(&topic.topic).is_some());
    if !all_known {
        return false;
    }
    for topic in &mut request.topics {
        if let Some(id) = known(&topic.topic) {
            topic.topic_id = *id;
        }
    }
    for topic in &mut request.forgotten_topics_data {
        if let Some(id) = known(&topic.topic) {
            topic.topic_id = *id;
        }
    }
    true
}

/// Names the topics of a v13+ `response` from `names` (id to name).
/// Topics with an unknown id keep an empty name, so the fetcher ignores
/// them as partitions it did not ask for.
pub fn restore_topic_names(response: &mut FetchResponse, names: &HashMap<Uuid, &str>) {
    for topic in &mut response.responses {
        if topic.topic.0.is_empty() {
            if let Some(name) = names.get(&topic.topic_id) {
                topic.topic = TopicName(StrBytes::from_string((*name).to_owned()));
            }
        }
    }
}

/// Name to id for every topic in `metadata`.
pub fn ids_by_name(metadata: &ClusterMetadata) -> HashMap<&str, Uuid> {
    metadata
        .topics
        .values()
        .map(|topic| (topic.name.as_str(), topic.topic_id))
        .collect()
}

/// Id to name for every topic in `metadata` with a known id.
pub fn names_by_id(metadata: &ClusterMetadata) -> HashMap<Uuid, &str> {
    metadata
        .topics
        .values()
        .filter(|topic| !topic.topic_id.is_nil())
        .map(|topic| (topic.topic_id, topic.name.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use strom_protocol::kafka::messages::fetch_request::{FetchTopic, ForgottenTopic};
    use strom_protocol::kafka::messages::fetch_response::FetchableTopicResponse;

    use super::*;

    fn name(topic: &str) -> TopicName {
        TopicName(StrBytes::from_string(topic.to_owned()))
    }

    fn request(topics: &[&str], forgotten: &[&str]) -> FetchRequest {
        FetchRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|topic| FetchTopic::default().with_topic(name(topic)))
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .iter()
                    .map(|topic| ForgottenTopic::default().with_topic(name(topic)))
                    .collect(),
            )
    }

    #[test]
    fn ids_are_filled_when_every_topic_is_known() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let ids = HashMap::from([("a", a), ("b", b)]);
        let mut fetch = request(&["a"], &["b"]);
        assert!(assign_topic_ids(&mut fetch, &ids));
        assert_eq!(fetch.topics[0].topic_id, a);
        assert_eq!(fetch.forgotten_topics_data[0].topic_id, b);
    }

    #[test]
    fn an_unknown_or_nil_id_leaves_the_request_by_name() {
        let ids = HashMap::from([("a", Uuid::from_u128(1)), ("nil", Uuid::nil())]);
        for (topics, forgotten) in [(&["a", "c"][..], &[][..]), (&["a"], &["nil"])] {
            let mut fetch = request(topics, forgotten);
            assert!(!assign_topic_ids(&mut fetch, &ids));
            assert!(fetch.topics.iter().all(|topic| topic.topic_id.is_nil()));
        }
    }

    #[test]
    fn names_come_back_from_ids() {
        let a = Uuid::from_u128(7);
        let names = HashMap::from([(a, "a")]);
        let mut response = FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default().with_topic_id(a),
            FetchableTopicResponse::default().with_topic_id(Uuid::from_u128(8)),
        ]);
        restore_topic_names(&mut response, &names);
        assert_eq!(response.responses[0].topic.0.as_str(), "a");
        assert_eq!(response.responses[1].topic.0.as_str(), "");
    }
}
