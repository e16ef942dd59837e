//! [`RemoteStorageManager`] over the `object_store` crate: a local
//! directory ([`LocalFileSystem`]) or an S3-compatible service
//! ([`AmazonS3`](object_store::aws::AmazonS3)).
//!
//! Object keys: `<prefix>/<topic>-<partition>/<base offset, 20 digits>-<uuid><suffix>`
//! with the segment's suffixes (`.log`, `.index`, `.timeindex`,
//! `.txnindex`, `.snapshot`, `.leader-epoch-checkpoint`) and `.metadata`
//! for the segment's metadata record ([`super::ObjectStoreMetadata`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::{IndexType, LogSegmentData, RemoteSegmentMetadata, RemoteStorageManager};
use crate::error::{IoContext, RemoteStorageError};
use crate::topic_partition::TopicPartition;

/// Segments larger than this are uploaded in parts of this size.
pub const UPLOAD_PART_BYTES: u64 = 8 * 1024 * 1024;

/// Where remote segments go, parsed from Kafka-style properties
/// (`rsm.config.*`, Kafka's default prefix for the storage manager's own
/// settings) and the usual AWS environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteStorageConfig {
    /// A local directory (`rsm.config.storage.backend=local`, the default;
    /// `rsm.config.local.dir`).
    LocalDirectory {
        /// The directory.
        dir: PathBuf,
        /// The key prefix inside it.
        prefix: String,
    },
    /// An S3-compatible service (`rsm.config.storage.backend=s3`).
    S3 {
        /// `rsm.config.s3.bucket.name`.
        bucket: String,
        /// `rsm.config.s3.region` (else `AWS_REGION`/`AWS_DEFAULT_REGION`).
        region: Option<String>,
        /// `rsm.config.s3.endpoint.url` (else `AWS_ENDPOINT_URL`).
        endpoint: Option<String>,
        /// `rsm.config.aws.access.key.id` (else `AWS_ACCESS_KEY_ID`).
        access_key_id: Option<String>,
        /// `rsm.config.aws.secret.access.key` (else `AWS_SECRET_ACCESS_KEY`).
        secret_access_key: Option<String>,
        /// `rsm.config.s3.path.style.access.enabled` (default true: what
        /// S3-compatible services other than AWS expect).
        path_style: bool,
        /// `rsm.config.key.prefix`.
        prefix: String,
    },
}

impl RemoteStorageConfig {
    /// Parses the `rsm.config.*` properties; `default_dir` is the local
    /// directory when none is named.
    pub fn from_properties(
        properties: &BTreeMap<String, String>,
        default_dir: &Path,
    ) -> Result<RemoteStorageConfig, RemoteStorageError> {
        let get = |key: &str| {
            properties
                .get(key)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let prefix = get("rsm.config.key.prefix").unwrap_or_default();
        let backend = get("rsm.config.storage.backend").unwrap_or_else(|| "local".to_owned());
        match backend.as_str() {
            "local" => Ok(RemoteStorageConfig::LocalDirectory {
                dir: get("rsm.config.local.dir")
                    .map_or_else(|| default_dir.to_owned(), PathBuf::from),
                prefix,
            }),
            "s3" => {
                let bucket =
                    get("rsm.config.s3.bucket.name").ok_or_else(|| RemoteStorageError::Config {
                        key: "rsm.config.s3.bucket.name".to_owned(),
                        problem: "required for the s3 backend".to_owned(),
                    })?;
                let path_style = match get("rsm.config.s3.path.style.access.enabled").as_deref() {
                    None => true,
                    Some(text) => {
                        strom_protocol::topic_config::parse_boolean(text).map_err(|_| {
                            RemoteStorageError::Config {
                                key: "rsm.config.s3.path.style.access.enabled".to_owned(),
                                problem: format!("{text} is not a boolean"),
                            }
                        })?
                    }
                };
                Ok(RemoteStorageConfig::S3 {
                    bucket,
                    region: get("rsm.config.s3.region"),
                    endpoint: get("rsm.config.s3.endpoint.url"),
                    access_key_id: get("rsm.config.aws.access.key.id"),
                    secret_access_key: get("rsm.config.aws.secret.access.key"),
                    path_style,
                    prefix,
                })
            }
            other => Err(RemoteStorageError::Config {
                key: "rsm.config.storage.backend".to_owned(),
                problem: format!("{other} is not one of: local, s3"),
            }),
        }
    }
}

/// Segment data in an object store.
#[derive(Debug, Clone)]
pub struct ObjectStoreStorage {
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

impl ObjectStoreStorage {
    /// Over any object store, with keys under `prefix` (may be empty).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> ObjectStoreStorage {
        ObjectStoreStorage {
            store,
            prefix: prefix.trim_matches('/').to_owned(),
        }
    }

    /// Opens the store `config` names (creating a local directory).
    pub fn open(config: &RemoteStorageConfig) -> Result<ObjectStoreStorage, RemoteStorageError> {
        match config {
            RemoteStorageConfig::LocalDirectory { dir, prefix } => {
                std::fs::create_dir_all(dir).at(dir)?;
                let store = LocalFileSystem::new_with_prefix(dir).map_err(|source| {
                    RemoteStorageError::Store {
                        operation: "open",
                        key: dir.display().to_string(),
                        source,
                    }
                })?;
                Ok(ObjectStoreStorage::new(Arc::new(store), prefix))
            }
            RemoteStorageConfig::S3 { bucket, prefix, .. } => {
                let store =
                    s3_builder(config)
                        .build()
                        .map_err(|source| RemoteStorageError::Store {
                            operation: "open",
                            key: bucket.clone(),
                            source,
                        })?;
                Ok(ObjectStoreStorage::new(Arc::new(store), prefix))
            }
        }
    }

    /// The underlying store (shared with the metadata records).
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The key of the partition's folder.
    pub(crate) fn partition_key(&self, partition: &TopicPartition) -> ObjectPath {
        let folder = format!("{}-{}", partition.topic, partition.partition);
        match self.prefix.is_empty() {
            true => ObjectPath::from(folder),
            false => ObjectPath::from(format!("{}/{folder}", self.prefix)),
        }
    }

    /// The key of one object of a segment.
    pub(crate) fn object_key(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        suffix: &str,
    ) -> ObjectPath {
        let name = format!(
            "{}-{}{suffix}",
            crate::segment::file_stem(segment.base_offset),
            segment.id
        );
        self.partition_key(partition).child(name)
    }

    async fn put_file(&self, key: &ObjectPath, path: &Path) -> Result<(), RemoteStorageError> {
        let file = File::open(path).at(path)?;
        let size = file.metadata().at(path)?.len();
        if size <= UPLOAD_PART_BYTES {
            let bytes = read_range(&file, path, 0, size)?;
            return self.put_bytes(key, bytes).await;
        }
        let store_error = |source| RemoteStorageError::Store {
            operation: "put",
            key: key.to_string(),
            source,
        };
        let mut upload = self.store.put_multipart(key).await.map_err(store_error)?;
        let mut position = 0;
        while position < size {
            let length = UPLOAD_PART_BYTES.min(size - position);
            let part = read_range(&file, path, position, length)?;
            if let Err(source) = upload.put_part(PutPayload::from(part)).await {
                upload.abort().await.ok();
                return Err(store_error(source));
            }
            position += length;
        }
        upload.complete().await.map_err(store_error)?;
        Ok(())
    }

    pub(crate) async fn put_bytes(
        &self,
        key: &ObjectPath,
        bytes: Bytes,
    ) -> Result<(), RemoteStorageError> {
        self.store
            .put(key, PutPayload::from(bytes))
            .await
            .map_err(|source| RemoteStorageError::Store {
                operation: "put",
                key: key.to_string(),
                source,
            })?;
        Ok(())
    }

    pub(crate) async fn delete_key(&self, key: &ObjectPath) -> Result<(), RemoteStorageError> {
        match self.store.delete(key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(RemoteStorageError::Store {
                operation: "delete",
                key: key.to_string(),
                source,
            }),
        }
    }
}

/// The S3 client builder: the AWS environment first, then the properties.
fn s3_builder(config: &RemoteStorageConfig) -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env();
    if let RemoteStorageConfig::S3 {
        bucket,
        region,
        endpoint,
        access_key_id,
        secret_access_key,
        path_style,
        ..
    } = config
    {
        builder = builder
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(!path_style);
        if let Some(region) = region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = endpoint {
            builder = builder
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint);
        }
        if let Some(key) = access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
    }
    builder
}

/// `length` bytes of `file` from `position`.
fn read_range(
    file: &File,
    path: &Path,
    position: u64,
    length: u64,
) -> Result<Bytes, RemoteStorageError> {
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    let mut buffer = vec![0u8; length];
    file.read_exact_at(&mut buffer, position).at(path)?;
    Ok(Bytes::from(buffer))
}

#[async_trait]
impl RemoteStorageManager for ObjectStoreStorage {
    async fn copy_log_segment_data(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        data: &LogSegmentData,
    ) -> Result<(), RemoteStorageError> {
        let files = [
            (IndexType::Offset.suffix(), Some(&data.offset_index)),
            (IndexType::Timestamp.suffix(), Some(&data.time_index)),
            (
                IndexType::Transaction.suffix(),
                data.transaction_index.as_ref(),
            ),
            (
                IndexType::ProducerSnapshot.suffix(),
                data.producer_snapshot.as_ref(),
            ),
            (".log", Some(&data.log)),
        ];
        for (suffix, path) in files {
            if let Some(path) = path {
                self.put_file(&self.object_key(partition, segment, suffix), path)
                    .await?;
            }
        }
        let epochs = self.object_key(partition, segment, IndexType::LeaderEpoch.suffix());
        self.put_bytes(&epochs, data.leader_epoch_index.clone())
            .await
    }

    async fn fetch_log_segment(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        start: u64,
        end: u64,
    ) -> Result<Bytes, RemoteStorageError> {
        let key = self.object_key(partition, segment, ".log");
        let end = end.min(segment.size_bytes);
        if start >= end {
            return Ok(Bytes::new());
        }
        self.store
            .get_range(&key, start..end)
            .await
            .map_err(|source| get_error(&key, source))
    }

    async fn fetch_index(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        index: IndexType,
    ) -> Result<Bytes, RemoteStorageError> {
        let key = self.object_key(partition, segment, index.suffix());
        let optional = matches!(index, IndexType::Transaction | IndexType::ProducerSnapshot);
        let result = match self.store.get(&key).await {
            Ok(found) => found.bytes().await,
            Err(error) => Err(error),
        };
        match result {
            Ok(bytes) => Ok(bytes),
            Err(object_store::Error::NotFound { .. }) if optional => Ok(Bytes::new()),
            Err(source) => Err(get_error(&key, source)),
        }
    }

    async fn delete_log_segment_data(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        self.delete_key(&self.object_key(partition, segment, ".log"))
            .await?;
        for index in IndexType::ALL {
            self.delete_key(&self.object_key(partition, segment, index.suffix()))
                .await?;
        }
        Ok(())
    }
}

/// A failed get: a missing object is [`RemoteStorageError::Missing`].
fn get_error(key: &ObjectPath, source: object_store::Error) -> RemoteStorageError {
    match source {
        object_store::Error::NotFound { .. } => RemoteStorageError::Missing {
            key: key.to_string(),
        },
        source => RemoteStorageError::Store {
            operation: "get",
            key: key.to_string(),
            source,
        },
    }
}
