//! [`RemoteLogMetadataManager`] kept in the object store itself: one
//! `.metadata` object per remote segment, next to its data, rewritten at
//! every state change (an object put is atomic) and removed when the
//! segment's deletion finished.
//!
//! A record is text, one `key=value` per line:
//!
//! ```text
//! version=1
//! id=<uuid>
//! base_offset=<i64>
//! end_offset=<i64>
//! max_timestamp_ms=<i64>
//! size_bytes=<u64>
//! state=COPY_SEGMENT_FINISHED
//! epoch=<epoch>:<start offset>     (one line per leader epoch)
//! ```

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use uuid::Uuid;

use super::{
    ObjectStoreStorage, RemoteLogMetadataManager, RemoteSegmentMetadata, RemoteSegmentState,
};
use crate::error::RemoteStorageError;
use crate::topic_partition::TopicPartition;

/// The suffix of a segment's metadata record.
pub const METADATA_SUFFIX: &str = ".metadata";

/// A metadata record is never larger than this (a corrupt or foreign
/// object is refused before it is parsed).
const METADATA_MAX_BYTES: usize = 1024 * 1024;

/// Remote segment metadata as objects beside the segments' data.
#[derive(Debug, Clone)]
pub struct ObjectStoreMetadata {
    storage: ObjectStoreStorage,
}

impl ObjectStoreMetadata {
    /// Records in the same store (and under the same prefix) as `storage`.
    pub fn new(storage: ObjectStoreStorage) -> ObjectStoreMetadata {
        ObjectStoreMetadata { storage }
    }
}

/// The text of a metadata record.
pub fn encode_metadata(segment: &RemoteSegmentMetadata) -> Bytes {
    let mut text = format!(
        "version=1\nid={}\nbase_offset={}\nend_offset={}\nmax_timestamp_ms={}\nsize_bytes={}\nstate={}\n",
        segment.id,
        segment.base_offset,
        segment.end_offset,
        segment.max_timestamp_ms,
        segment.size_bytes,
        segment.state.name()
    );
    for (epoch, start) in &segment.leader_epochs {
        text.push_str(&format!("epoch={epoch}:{start}\n"));
    }
    Bytes::from(text)
}

/// Parses a metadata record; `key` names it in errors.
pub fn decode_metadata(
    key: &str,
    bytes: &[u8],
) -> Result<RemoteSegmentMetadata, RemoteStorageError> {
    let invalid = |problem| RemoteStorageError::InvalidMetadata {
        key: key.to_owned(),
        problem,
    };
    if bytes.len() > METADATA_MAX_BYTES {
        return Err(invalid("too large"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8"))?;
    let mut fields = std::collections::BTreeMap::new();
    let mut leader_epochs = Vec::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| invalid("a line is not key=value"))?;
        if name == "epoch" {
            let (epoch, start) = value.split_once(':').ok_or_else(|| invalid("bad epoch"))?;
            let epoch = epoch.parse().map_err(|_| invalid("bad epoch"))?;
            let start = start.parse().map_err(|_| invalid("bad epoch start"))?;
            leader_epochs.push((epoch, start));
        } else {
            fields.insert(name, value);
        }
    }
    if fields.get("version") != Some(&"1") {
        return Err(invalid("unknown version"));
    }
    let field = |name: &str| {
        fields
            .get(name)
            .copied()
            .ok_or_else(|| invalid("a field is missing"))
    };
    let number = |name: &str| {
        field(name)?
            .parse::<i64>()
            .map_err(|_| invalid("a number is invalid"))
    };
    let segment = RemoteSegmentMetadata {
        id: Uuid::parse_str(field("id")?).map_err(|_| invalid("bad id"))?,
        base_offset: number("base_offset")?,
        end_offset: number("end_offset")?,
        max_timestamp_ms: number("max_timestamp_ms")?,
        size_bytes: u64::try_from(number("size_bytes")?).map_err(|_| invalid("negative size"))?,
        leader_epochs,
        state: RemoteSegmentState::from_name(field("state")?)
            .ok_or_else(|| invalid("bad state"))?,
    };
    if segment.base_offset < 0 || segment.end_offset < segment.base_offset {
        return Err(invalid("offsets out of order"));
    }
    Ok(segment)
}

#[async_trait]
impl RemoteLogMetadataManager for ObjectStoreMetadata {
    async fn put_segment_metadata(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let key = self.storage.object_key(partition, segment, METADATA_SUFFIX);
        self.storage.put_bytes(&key, encode_metadata(segment)).await
    }

    async fn remove_segment_metadata(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let key = self.storage.object_key(partition, segment, METADATA_SUFFIX);
        self.storage.delete_key(&key).await
    }

    async fn list_segments(
        &self,
        partition: &TopicPartition,
    ) -> Result<Vec<RemoteSegmentMetadata>, RemoteStorageError> {
        let folder = self.storage.partition_key(partition);
        let store = self.storage.store();
        let listed: Vec<_> = store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|source| RemoteStorageError::Store {
                operation: "list",
                key: folder.to_string(),
                source,
            })?;
        let mut segments = Vec::new();
        for object in listed {
            let key = object.location.to_string();
            if !key.ends_with(METADATA_SUFFIX) {
                continue;
            }
            let bytes = match store.get(&object.location).await {
                Ok(found) => found.bytes().await,
                Err(error) => Err(error),
            };
            let bytes = match bytes {
                Ok(bytes) => bytes,
                // Removed between the listing and the read: deletion finished.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(source) => {
                    return Err(RemoteStorageError::Store {
                        operation: "get",
                        key,
                        source,
                    })
                }
            };
            segments.push(decode_metadata(&key, &bytes)?);
        }
        segments.sort_by_key(|segment| (segment.base_offset, segment.end_offset));
        Ok(segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RemoteSegmentMetadata {
        RemoteSegmentMetadata {
            id: Uuid::new_v4(),
            base_offset: 100,
            end_offset: 199,
            max_timestamp_ms: 1_700_000_000_000,
            size_bytes: 4096,
            leader_epochs: vec![(3, 100), (4, 150)],
            state: RemoteSegmentState::CopySegmentFinished,
        }
    }

    #[test]
    fn records_round_trip() {
        let segment = sample();
        let decoded = decode_metadata("k", &encode_metadata(&segment)).expect("decode");
        assert_eq!(decoded, segment);
    }

    #[test]
    fn bad_records_are_refused() {
        let good = String::from_utf8(encode_metadata(&sample()).to_vec()).expect("text");
        let cases = [
            good.replace("version=1", "version=2"),
            good.replace("state=COPY_SEGMENT_FINISHED", "state=GONE"),
            good.replace("base_offset=100", "base_offset=300"),
            good.replace("size_bytes=4096", "size_bytes=-1"),
            good.replace("epoch=3:100", "epoch=3"),
            good.replace("id=", "identity="),
            "no equals sign".to_owned(),
        ];
        for case in cases {
            assert!(
                matches!(
                    decode_metadata("k", case.as_bytes()),
                    Err(RemoteStorageError::InvalidMetadata { .. })
                ),
                "{case}"
            );
        }
        assert!(decode_metadata("k", &[0xff, 0xfe]).is_err());
        assert!(decode_metadata("k", &vec![b'a'; METADATA_MAX_BYTES + 1]).is_err());
    }
}
