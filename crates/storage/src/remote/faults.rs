//! A fault-injecting remote tier for tests: wraps a storage manager and a
//! metadata manager and fails chosen operations, leaves partial uploads,
//! or loses the `COPY_SEGMENT_FINISHED` record (a crash between the upload
//! and the metadata).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    IndexType, LogSegmentData, RemoteLogMetadataManager, RemoteSegmentMetadata, RemoteSegmentState,
    RemoteStorageManager,
};
use crate::error::RemoteStorageError;
use crate::topic_partition::TopicPartition;

/// A fault the next matching operation suffers (each fires once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RemoteFault {
    /// A copy fails before uploading anything.
    FailCopy,
    /// A copy uploads the offset index only, then fails.
    PartialCopy,
    /// The `COPY_SEGMENT_FINISHED` record is not written (the broker
    /// crashed after the upload).
    LoseFinishedRecord,
    /// A fetch of segment bytes or an index fails.
    FailFetch,
    /// A deletion fails.
    FailDelete,
}

/// Both remote roles with injectable faults.
#[derive(Debug)]
pub struct FaultyRemote {
    storage: Arc<dyn RemoteStorageManager>,
    metadata: Arc<dyn RemoteLogMetadataManager>,
    armed: Mutex<BTreeSet<RemoteFault>>,
}

impl FaultyRemote {
    /// Wraps the two roles; no fault is armed.
    pub fn new(
        storage: Arc<dyn RemoteStorageManager>,
        metadata: Arc<dyn RemoteLogMetadataManager>,
    ) -> FaultyRemote {
        FaultyRemote {
            storage,
            metadata,
            armed: Mutex::new(BTreeSet::new()),
        }
    }

    /// Arms `fault` for the next operation it applies to.
    pub fn arm(&self, fault: RemoteFault) {
        self.lock().insert(fault);
    }

    /// Disarms every fault.
    pub fn disarm_all(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<RemoteFault>> {
        self.armed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fires (and disarms) `fault` when armed.
    fn fires(&self, fault: RemoteFault) -> bool {
        self.lock().remove(&fault)
    }
}

fn injected(operation: &'static str) -> RemoteStorageError {
    RemoteStorageError::Injected { operation }
}

#[async_trait]
impl RemoteStorageManager for FaultyRemote {
    async fn copy_log_segment_data(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        data: &LogSegmentData,
    ) -> Result<(), RemoteStorageError> {
        if self.fires(RemoteFault::FailCopy) {
            return Err(injected("copy"));
        }
        if self.fires(RemoteFault::PartialCopy) {
            let partial = LogSegmentData {
                log: data.offset_index.clone(),
                transaction_index: None,
                producer_snapshot: None,
                ..data.clone()
            };
            self.storage
                .copy_log_segment_data(partition, segment, &partial)
                .await?;
            return Err(injected("copy"));
        }
        self.storage
            .copy_log_segment_data(partition, segment, data)
            .await
    }

    async fn fetch_log_segment(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        start: u64,
        end: u64,
    ) -> Result<Bytes, RemoteStorageError> {
        if self.fires(RemoteFault::FailFetch) {
            return Err(injected("fetch"));
        }
        self.storage
            .fetch_log_segment(partition, segment, start, end)
            .await
    }

    async fn fetch_index(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        index: IndexType,
    ) -> Result<Bytes, RemoteStorageError> {
        if self.fires(RemoteFault::FailFetch) {
            return Err(injected("fetch index"));
        }
        self.storage.fetch_index(partition, segment, index).await
    }

    async fn delete_log_segment_data(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        if self.fires(RemoteFault::FailDelete) {
            return Err(injected("delete"));
        }
        self.storage
            .delete_log_segment_data(partition, segment)
            .await
    }
}

#[async_trait]
impl RemoteLogMetadataManager for FaultyRemote {
    async fn put_segment_metadata(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        if segment.state == RemoteSegmentState::CopySegmentFinished
            && self.fires(RemoteFault::LoseFinishedRecord)
        {
            return Err(injected("metadata"));
        }
        self.metadata.put_segment_metadata(partition, segment).await
    }

    async fn remove_segment_metadata(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        self.metadata
            .remove_segment_metadata(partition, segment)
            .await
    }

    async fn list_segments(
        &self,
        partition: &TopicPartition,
    ) -> Result<Vec<RemoteSegmentMetadata>, RemoteStorageError> {
        self.metadata.list_segments(partition).await
    }
}
