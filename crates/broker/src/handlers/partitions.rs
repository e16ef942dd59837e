//! Whether the partitions a request names exist, checked against the
//! metadata image before a request reaches a coordinator or a log: Kafka
//! answers `UNKNOWN_TOPIC_OR_PARTITION` for a partition of a topic that does
//! not exist, or beyond the topic's partition count, and never hands it on.

use strom_controller::image::MetadataImage;

/// Whether partition `index` of `topic` exists.
pub fn exists(image: &MetadataImage, topic: &str, index: i32) -> bool {
    image
        .topic_by_name(topic)
        .and_then(|found| found.partition(index))
        .is_some()
}

/// The `(topic, partitions)` of `topics` that exist; topics left with no
/// existing partition are dropped.
pub fn existing(
    image: &MetadataImage,
    topics: impl IntoIterator<Item = (String, Vec<i32>)>,
) -> Vec<(String, Vec<i32>)> {
    topics
        .into_iter()
        .filter_map(|(topic, partitions)| {
            let partitions: Vec<i32> = partitions
                .into_iter()
                .filter(|index| exists(image, &topic, *index))
                .collect();
            (!partitions.is_empty()).then_some((topic, partitions))
        })
        .collect()
}
