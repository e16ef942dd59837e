//! The [`Producer`] handle.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use strom_client::Cluster;
use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::ErrorCode;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::task::JoinHandle;

use crate::accumulator::{Accumulator, AccumulatorConfig, TopicPartition};
use crate::config::{Acks, ProducerConfig};
use crate::coordinator::{Coordinators, Transactions};
use crate::error::{ProduceError, ProducerCreateError};
use crate::partitioner::{DefaultPartitioner, Partitioner};
use crate::record::{ProducerRecord, RecordMetadata};
use crate::sender::{self, Idempotence, Shared};
use crate::transaction::TransactionManager;

/// The outcome of one record: resolves once the broker acknowledged it (or
/// it failed).
pub struct DeliveryFuture {
    state: DeliveryState,
}

enum DeliveryState {
    Waiting(oneshot::Receiver<Result<RecordMetadata, ProduceError>>),
    Failed(Option<ProduceError>),
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            DeliveryState::Waiting(receiver) => Pin::new(receiver)
                .poll(context)
                .map(|result| result.unwrap_or(Err(ProduceError::Closed))),
            DeliveryState::Failed(error) => {
                Poll::Ready(Err(error.take().unwrap_or(ProduceError::Closed)))
            }
        }
    }
}

impl DeliveryFuture {
    fn failed(error: ProduceError) -> Self {
        DeliveryFuture {
            state: DeliveryState::Failed(Some(error)),
        }
    }
}

/// Owns the sender task; aborts it when the last producer handle is dropped
/// without `close`.
struct SenderTask(Mutex<Option<JoinHandle<()>>>);

impl SenderTask {
    fn take(&self) -> Option<JoinHandle<()>> {
        // One `Option`, taken whole: reused after a panic.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl Drop for SenderTask {
    fn drop(&mut self) {
        if let Some(task) = self.take() {
            task.abort();
        }
    }
}

/// An async Kafka producer. Cheap to clone; all clones share one sender.
#[derive(Clone)]
pub struct Producer {
    pub(crate) cluster: Cluster,
    pub(crate) config: Arc<ProducerConfig>,
    pub(crate) shared: Arc<Shared>,
    partitioner: Arc<dyn Partitioner>,
    buffer: Arc<Semaphore>,
    sender: Arc<SenderTask>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Producer")
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl Producer {
    /// Connects and starts the sender, with the default partitioner.
    pub async fn new(config: ProducerConfig) -> Result<Producer, ProducerCreateError> {
        Self::with_partitioner(config, Arc::new(DefaultPartitioner::default())).await
    }

    /// Connects and starts the sender with a custom partitioner.
    pub async fn with_partitioner(
        config: ProducerConfig,
        partitioner: Arc<dyn Partitioner>,
    ) -> Result<Producer, ProducerCreateError> {
        config.validate()?;
        let cluster = Cluster::connect(config.client.clone()).await?;
        let transactional = config.transactional_id.is_some();
        let supported = transactional
            || (config.enable_idempotence.is_none()
                && config.acks == Acks::All
                && broker_supports_idempotence(&cluster).await);
        let idempotent = config.idempotence_enabled(supported);
        let mut idempotence = Idempotence::default();
        // A transactional producer gets its id in `init_transactions`.
        if idempotent && !transactional {
            idempotence.producer = Some(sender::init_producer_id(&cluster).await?);
        }
        let transactions = config
            .transactional_id
            .clone()
            .map(|transactional_id| Transactions {
                manager: Mutex::new(TransactionManager::new(transactional_id.clone())),
                coordinators: Coordinators::new(
                    cluster.clone(),
                    transactional_id,
                    config.client.retry_backoff,
                ),
                transaction_timeout: config.transaction_timeout,
            });
        let shared = Arc::new(Shared {
            accumulator: Mutex::new(Accumulator::new(AccumulatorConfig {
                batch_size: config.batch_size,
                linger: config.linger,
                compression: config.compression,
                max_in_flight_per_partition: config.max_in_flight_requests_per_connection,
                transactional,
            })),
            idempotence: Mutex::new(idempotence),
            idempotent,
            wake: tokio::sync::Notify::new(),
            drained: tokio::sync::Notify::new(),
            closing: std::sync::atomic::AtomicBool::new(false),
            transactions,
        });
        let buffer = Arc::new(Semaphore::new(
            config.buffer_memory.min(Semaphore::MAX_PERMITS),
        ));
        let task = tokio::spawn(sender::run(
            Arc::clone(&shared),
            cluster.clone(),
            config.clone(),
        ));
        Ok(Producer {
            cluster,
            config: Arc::new(config),
            shared,
            partitioner,
            buffer,
            sender: Arc::new(SenderTask(Mutex::new(Some(task)))),
        })
    }

    /// Whether this producer uses idempotence.
    pub fn is_idempotent(&self) -> bool {
        self.shared.idempotent
    }

    /// The cluster handle (for metadata or admin use).
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Queues a record. Awaits only for buffer space (up to `max.block.ms`)
    /// and the topic's metadata; the returned future resolves when the
    /// record is acknowledged.
    pub async fn send(&self, record: ProducerRecord) -> DeliveryFuture {
        match self.enqueue(record).await {
            Ok(receiver) => DeliveryFuture {
                state: DeliveryState::Waiting(receiver),
            },
            Err(error) => DeliveryFuture::failed(error),
        }
    }

    async fn enqueue(
        &self,
        record: ProducerRecord,
    ) -> Result<oneshot::Receiver<Result<RecordMetadata, ProduceError>>, ProduceError> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(ProduceError::Closed);
        }
        let size_bytes = record.estimated_size_bytes();
        if size_bytes > self.config.max_request_size || size_bytes > self.config.buffer_memory {
            return Err(ProduceError::RecordTooLarge { size_bytes });
        }
        let started = Instant::now();
        let partitions = self.partition_count(&record.topic).await?;
        let partition = match record.partition {
            Some(partition) if (0..partitions).contains(&partition) => partition,
            Some(partition) => {
                return Err(ProduceError::UnknownTopicOrPartition {
                    topic: record.topic.to_string(),
                    partition,
                })
            }
            None => self
                .partitioner
                .partition(&record.topic, record.key.as_deref(), partitions),
        };
        let topic_partition = TopicPartition {
            topic: record.topic.to_string(),
            partition,
        };
        self.check_transactional_send(&topic_partition)?;
        let (permit, now) = self.buffer_memory(size_bytes, started).await?;
        let timestamp_ms = record.timestamp_ms.unwrap_or_else(now_ms);
        let (completion, receiver) = oneshot::channel();
        // The transaction's state is checked again under its lock, held
        // while appending: an abort that started meanwhile drops every
        // queued batch after it changed the state, so none is left behind.
        let mut manager = self
            .shared
            .transactions
            .as_ref()
            .map(|transactions| transactions.manager());
        if let Some(manager) = manager.as_mut() {
            manager
                .check_send(&topic_partition)
                .map_err(ProduceError::Transaction)?;
        }
        let appended = self.shared.accumulator().append(
            (&record.topic, partition),
            &record,
            timestamp_ms,
            completion,
            Some(permit),
            now,
        );
        drop(manager);
        let new_batch = appended.map_err(|(error, _)| error)?;
        if new_batch {
            if record.partition.is_none() && record.key.is_none() {
                self.partitioner
                    .on_new_batch(&record.topic, partition, partitions);
            }
            self.shared.wake.notify_one();
        } else if self.config.linger.is_zero() {
            self.shared.wake.notify_one();
        }
        Ok(receiver)
    }

    /// With a `transactional.id`, whether a record may be sent to
    /// `topic_partition` now (in a transaction); a partition new to the
    /// transaction is queued to be added to it.
    fn check_transactional_send(
        &self,
        topic_partition: &TopicPartition,
    ) -> Result<(), ProduceError> {
        match &self.shared.transactions {
            Some(transactions) => transactions
                .manager()
                .check_send(topic_partition)
                .map_err(ProduceError::Transaction),
            None => Ok(()),
        }
    }

    /// `size_bytes` of buffer memory: at once when free, else waiting up to
    /// what is left of `max.block.ms` since `started`. Returns the permit and
    /// the time after it was obtained.
    async fn buffer_memory(
        &self,
        size_bytes: usize,
        started: Instant,
    ) -> Result<(OwnedSemaphorePermit, Instant), ProduceError> {
        let permits = u32::try_from(size_bytes).unwrap_or(u32::MAX);
        match Arc::clone(&self.buffer).try_acquire_many_owned(permits) {
            Ok(permit) => return Ok((permit, started)),
            Err(TryAcquireError::Closed) => return Err(ProduceError::Closed),
            Err(TryAcquireError::NoPermits) => {}
        }
        let remaining = self.config.max_block.saturating_sub(started.elapsed());
        let permit = tokio::time::timeout(
            remaining,
            Arc::clone(&self.buffer).acquire_many_owned(permits),
        )
        .await
        .map_err(|_| ProduceError::Timeout {
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })?
        .map_err(|_| ProduceError::Closed)?;
        Ok((permit, Instant::now()))
    }

    /// The topic's partition count from the cached metadata, unless a
    /// refresh was requested: the hot path of `send`, without the clone and
    /// the bookkeeping of [`Cluster::topic`]. Once a topic was looked up, the
    /// sender task keeps its metadata within `metadata.max.age.ms`.
    fn cached_partition_count(&self, topic: &str) -> Option<i32> {
        if self.cluster.is_metadata_stale() {
            return None;
        }
        let snapshot = self.cluster.metadata();
        snapshot
            .topics
            .get(topic)
            .filter(|info| info.error == ErrorCode::None && !info.partitions.is_empty())
            .map(|info| i32::try_from(info.partitions.len()).unwrap_or(i32::MAX))
    }

    async fn partition_count(&self, topic: &str) -> Result<i32, ProduceError> {
        if let Some(count) = self.cached_partition_count(topic) {
            return Ok(count);
        }
        let deadline = Instant::now() + self.config.max_block;
        loop {
            match self.cluster.topic(topic).await {
                Ok(info) if !info.partitions.is_empty() => {
                    return Ok(i32::try_from(info.partitions.len()).unwrap_or(i32::MAX))
                }
                Ok(_) => {}
                Err(strom_client::ClientError::Broker {
                    code: ErrorCode::TopicAuthorizationFailed,
                }) => {
                    return Err(ProduceError::Authorization {
                        topic: topic.to_owned(),
                    })
                }
                Err(error) if !error.is_retriable() => return Err(error.into()),
                Err(_) => {}
            }
            if Instant::now() + self.config.client.retry_backoff >= deadline {
                return Err(ProduceError::UnknownTopicOrPartition {
                    topic: topic.to_owned(),
                    partition: -1,
                });
            }
            self.cluster.request_metadata_refresh();
            tokio::time::sleep(self.config.client.retry_backoff).await;
        }
    }

    /// Sends everything queued now and waits until it is acknowledged or
    /// failed.
    pub async fn flush(&self) {
        self.shared.accumulator().set_flushing(true);
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.shared.accumulator().is_empty() {
                break;
            }
            self.shared.wake.notify_one();
            let _ = tokio::time::timeout(Duration::from_millis(50), drained).await;
        }
        self.shared.accumulator().set_flushing(false);
    }

    /// Flushes for at most `timeout`, then stops the sender; records still
    /// queued fail with [`ProduceError::Closed`].
    pub async fn close(&self, timeout: Duration) {
        self.shared.closing.store(true, Ordering::Release);
        let _ = tokio::time::timeout(timeout, self.flush()).await;
        if let Some(task) = self.sender.take() {
            task.abort();
        }
        for batch in self.shared.accumulator().take_all() {
            batch.fail(ProduceError::Closed);
        }
        self.buffer.close();
        self.cluster.close();
    }
}

async fn broker_supports_idempotence(cluster: &Cluster) -> bool {
    match cluster.any_connection().await {
        Ok(connection) => connection.api_version(ApiKey::InitProducerId).is_ok(),
        Err(_) => false,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
