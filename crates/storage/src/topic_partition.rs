//! Topic-partition names and their directory form `<topic>-<partition>`.

use std::fmt;

/// A topic name and partition number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
}

impl TopicPartition {
    /// Creates a topic-partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// Parses a partition directory name `<topic>-<partition>` (the topic may
    /// itself contain `-`; the partition follows the last one).
    pub fn from_directory_name(name: &str) -> Option<TopicPartition> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() || !is_valid_topic_name(topic) {
            return None;
        }
        let partition: i32 = partition.parse().ok()?;
        (partition >= 0).then(|| TopicPartition::new(topic, partition))
    }

    /// The directory name `<topic>-<partition>`.
    pub fn directory_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}-{}", self.topic, self.partition)
    }
}

/// Kafka's topic name rule: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn is_valid_topic_name(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names_round_trip() {
        let partition = TopicPartition::new("my-topic", 12);
        assert_eq!(partition.directory_name(), "my-topic-12");
        assert_eq!(
            TopicPartition::from_directory_name("my-topic-12"),
            Some(partition)
        );
        assert_eq!(TopicPartition::from_directory_name("nopartition"), None);
        assert_eq!(TopicPartition::from_directory_name("topic-x"), None);
        assert_eq!(
            TopicPartition::from_directory_name("topic--1"),
            Some(TopicPartition::new("topic-", 1))
        );
        assert_eq!(TopicPartition::from_directory_name("-3"), None);
        assert!(!is_valid_topic_name("a/b"));
        assert!(!is_valid_topic_name(".."));
    }
}
