//! The `ConsumerProtocol` encodings carried in JoinGroup and SyncGroup:
//! a big-endian `i16` version followed by the `ConsumerProtocolSubscription`
//! or `ConsumerProtocolAssignment` schema of that version (0-3).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use strom_protocol::kafka::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use strom_protocol::kafka::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use strom_protocol::kafka::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use strom_protocol::kafka::protocol::{Decodable, Encodable, StrBytes};

use crate::error::ConsumerError;
use crate::record::TopicPartition;

/// The subscription version this consumer sends (topics, user data, owned
/// partitions, generation id, rack id).
pub const SUBSCRIPTION_VERSION: i16 = 3;
/// The assignment version this consumer sends.
pub const ASSIGNMENT_VERSION: i16 = 3;
/// The highest schema version known; newer versions are read as this one
/// (Kafka only ever appends fields).
const HIGHEST_KNOWN_VERSION: i16 = 3;

/// A member's subscription as the group leader sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    /// The subscribed topics.
    pub topics: Vec<String>,
    /// Assignor-specific data.
    pub user_data: Option<Bytes>,
    /// The partitions the member owns now (v1+; cooperative rebalancing).
    pub owned_partitions: Vec<TopicPartition>,
    /// The generation the owned partitions come from (v2+; -1 if unknown).
    pub generation_id: i32,
    /// The member's rack (v3+).
    pub rack_id: Option<String>,
    /// The static member id from JoinGroup (not part of the encoding).
    pub group_instance_id: Option<String>,
}

/// What the leader assigned to one member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// The assigned partitions.
    pub partitions: Vec<TopicPartition>,
    /// Assignor-specific data.
    pub user_data: Option<Bytes>,
}

fn grouped(partitions: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut topics: Vec<(String, Vec<i32>)> = Vec::new();
    for tp in partitions {
        match topics.iter_mut().find(|(topic, _)| **topic == *tp.topic) {
            Some((_, indexes)) => indexes.push(tp.partition),
            None => topics.push((tp.topic.to_string(), vec![tp.partition])),
        }
    }
    topics
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Encodes a subscription at `version` (0-3).
pub fn encode_subscription(subscription: &Subscription, version: i16) -> Bytes {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(
            subscription
                .topics
                .iter()
                .map(|topic| StrBytes::from_string(topic.clone()))
                .collect(),
        )
        .with_user_data(subscription.user_data.clone())
        .with_owned_partitions(
            grouped(&subscription.owned_partitions)
                .into_iter()
                .map(|(topic, partitions)| {
                    OwnedTopic::default()
                        .with_topic(name(&topic))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_generation_id(subscription.generation_id)
        .with_rack_id(subscription.rack_id.clone().map(StrBytes::from_string));
    encode_versioned(&message, version)
}

/// Encodes an assignment at `version` (0-3).
pub fn encode_assignment(assignment: &Assignment, version: i16) -> Bytes {
    let message = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            grouped(&assignment.partitions)
                .into_iter()
                .map(|(topic, partitions)| {
                    AssignedTopic::default()
                        .with_topic(name(&topic))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_user_data(assignment.user_data.clone());
    encode_versioned(&message, version)
}

fn encode_versioned(message: &impl Encodable, version: i16) -> Bytes {
    let version = version.clamp(0, HIGHEST_KNOWN_VERSION);
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // Encoding only fails for fields a version cannot carry; the schema
    // versions here carry every field this consumer sets, or drop it.
    if message.encode(&mut buf, version).is_err() {
        debug_assert!(false, "consumer protocol message failed to encode");
    }
    buf.freeze()
}

fn read_version(bytes: &mut Bytes, what: &'static str) -> Result<i16, ConsumerError> {
    if bytes.remaining() < 2 {
        return Err(ConsumerError::BadGroupProtocol { what });
    }
    let version = bytes.get_i16();
    if version < 0 {
        return Err(ConsumerError::BadGroupProtocol { what });
    }
    Ok(version.min(HIGHEST_KNOWN_VERSION))
}

/// Decodes a subscription of any version.
pub fn decode_subscription(bytes: &Bytes) -> Result<Subscription, ConsumerError> {
    let what = "subscription";
    let mut bytes = bytes.clone();
    let version = read_version(&mut bytes, what)?;
    let message = ConsumerProtocolSubscription::decode(&mut bytes, version)
        .map_err(|_| ConsumerError::BadGroupProtocol { what })?;
    Ok(Subscription {
        topics: message
            .topics
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect(),
        user_data: message.user_data,
        owned_partitions: message
            .owned_partitions
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(|p| TopicPartition::new(topic.topic.0.as_str(), *p))
            })
            .collect(),
        generation_id: if version >= 2 {
            message.generation_id
        } else {
            -1
        },
        rack_id: message.rack_id.map(|rack| rack.as_str().to_owned()),
        group_instance_id: None,
    })
}

/// Decodes an assignment of any version; empty bytes are an empty assignment
/// (what a coordinator sends a member it has nothing for).
pub fn decode_assignment(bytes: &Bytes) -> Result<Assignment, ConsumerError> {
    let what = "assignment";
    if bytes.is_empty() {
        return Ok(Assignment::default());
    }
    let mut bytes = bytes.clone();
    let version = read_version(&mut bytes, what)?;
    let message = ConsumerProtocolAssignment::decode(&mut bytes, version)
        .map_err(|_| ConsumerError::BadGroupProtocol { what })?;
    Ok(Assignment {
        partitions: message
            .assigned_partitions
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(|p| TopicPartition::new(topic.topic.0.as_str(), *p))
            })
            .collect(),
        user_data: message.user_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_v0_matches_the_java_layout() {
        let subscription = Subscription {
            topics: vec!["ab".to_owned()],
            ..Subscription::default()
        };
        let bytes = encode_subscription(&subscription, 0);
        // version, topic count, "ab", null user data
        let expected: &[u8] = &[0, 0, 0, 0, 0, 1, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(&bytes[..], expected);
        let decoded = decode_subscription(&bytes).unwrap();
        assert_eq!(decoded.topics, ["ab"]);
        assert_eq!(decoded.generation_id, -1);
    }

    #[test]
    fn subscription_v3_round_trips_every_field() {
        let subscription = Subscription {
            topics: vec!["a".to_owned(), "b".to_owned()],
            user_data: Some(Bytes::from_static(b"u")),
            owned_partitions: vec![
                TopicPartition::new("a", 0),
                TopicPartition::new("a", 2),
                TopicPartition::new("b", 1),
            ],
            generation_id: 7,
            rack_id: Some("r1".to_owned()),
            group_instance_id: None,
        };
        let bytes = encode_subscription(&subscription, 3);
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(decode_subscription(&bytes).unwrap(), subscription);
    }

    #[test]
    fn assignment_round_trips_and_empty_bytes_mean_nothing_assigned() {
        let assignment = Assignment {
            partitions: vec![TopicPartition::new("a", 1), TopicPartition::new("b", 0)],
            user_data: None,
        };
        for version in 0..=3 {
            let bytes = encode_assignment(&assignment, version);
            assert_eq!(decode_assignment(&bytes).unwrap(), assignment);
        }
        assert_eq!(
            decode_assignment(&Bytes::new()).unwrap(),
            Assignment::default()
        );
    }

    #[test]
    fn newer_versions_decode_as_the_highest_known() {
        let mut bytes = encode_subscription(
            &Subscription {
                topics: vec!["t".to_owned()],
                ..Subscription::default()
            },
            3,
        )
        .to_vec();
        bytes[1] = 9;
        assert_eq!(
            decode_subscription(&Bytes::from(bytes)).unwrap().topics,
            ["t"]
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [
            &[0u8][..],
            &[0, 1, 0xff, 0xff, 0xff, 0x7f],
            &[0xff, 0xff, 0, 0],
        ] {
            assert!(decode_subscription(&Bytes::copy_from_slice(bytes)).is_err());
        }
        assert!(decode_assignment(&Bytes::from_static(&[0, 0, 0, 0, 0, 9])).is_err());
    }
}
