//! The transactional producer against librdkafka's mock cluster (a broker
//! no one here wrote): commit, abort, offsets in a transaction, retried
//! coordinator errors, KIP-360 recovery and fencing.
//!
//! The mock serves FindCoordinator, InitProducerId (with the KIP-360 epoch
//! bump), AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn,
//! and checks the producer id and epoch of each. It does not fence: a
//! second InitProducerId for a transactional id gets a new producer id and
//! leaves the first one valid, so fencing is shown by injecting the
//! PRODUCER_FENCED answer a real coordinator gives the older producer. It
//! answers TxnOffsetCommit without storing the offsets, so the offsets'
//! commit is checked for its answer only; and an error injected into
//! FindCoordinator comes back with a null host, which is not valid Kafka,
//! so coordinator lookups are retried through NOT_COORDINATOR and
//! COORDINATOR_NOT_AVAILABLE answers of the other APIs instead.

use std::time::Duration;

use rdkafka::mocking::{MockCluster, MockCoordinator};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use strom_producer::{
    ConsumerGroupMetadata, OffsetAndMetadata, Offsets, ProduceError, Producer, ProducerConfig,
    ProducerRecord, TransactionError, TransactionState,
};
use strom_protocol::ErrorCode;

const TIMEOUT: Duration = Duration::from_secs(10);

fn config(bootstrap: &str, transactional_id: &str) -> ProducerConfig {
    let mut config = ProducerConfig::new([bootstrap.to_owned()]);
    config.transactional_id = Some(transactional_id.to_owned());
    config.linger = Duration::from_millis(2);
    config.client.retry_backoff = Duration::from_millis(20);
    config.client.request_timeout = Duration::from_millis(2_000);
    config.client.reconnect_backoff = Duration::from_millis(10);
    config.delivery_timeout = Duration::from_secs(10);
    config
}

async fn transactional_producer(bootstrap: &str, transactional_id: &str) -> Producer {
    let producer = Producer::new(config(bootstrap, transactional_id))
        .await
        .expect("producer");
    assert_eq!(
        producer.transaction_state(),
        Some(TransactionState::Uninitialized)
    );
    producer.init_transactions(TIMEOUT).await.expect("init");
    assert_eq!(producer.transaction_state(), Some(TransactionState::Ready));
    producer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_then_abort_then_commit_with_offsets() {
    let mock = MockCluster::new(3).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    mock.create_topic("out", 3, 3).expect("topic");
    mock.create_topic("in", 1, 3).expect("topic");
    let producer = transactional_producer(&bootstrap, "writer-1").await;

    producer.begin_transaction().expect("begin");
    let mut deliveries = Vec::new();
    for index in 0..30 {
        let record = ProducerRecord::new("out", format!("v{index}")).with_partition(index % 3);
        deliveries.push(producer.send(record).await);
    }
    producer.commit_transaction(TIMEOUT).await.expect("commit");
    assert_eq!(producer.transaction_state(), Some(TransactionState::Ready));
    for delivery in deliveries {
        let metadata = delivery.await.expect("acknowledged before the commit");
        assert!(metadata.offset >= 0);
    }

    // Records still queued when the transaction aborts fail with Aborted.
    let mut slow = config(&bootstrap, "writer-2");
    slow.linger = Duration::from_secs(30);
    slow.batch_size = 1 << 20;
    let lingering = Producer::new(slow).await.expect("producer");
    lingering.init_transactions(TIMEOUT).await.expect("init");
    lingering.begin_transaction().expect("begin");
    let queued = lingering
        .send(ProducerRecord::new("out", "dropped").with_partition(0))
        .await;
    lingering.abort_transaction(TIMEOUT).await.expect("abort");
    assert_eq!(
        queued.await,
        Err(ProduceError::Transaction(TransactionError::Aborted))
    );
    assert_eq!(lingering.transaction_state(), Some(TransactionState::Ready));
    lingering.close(Duration::from_secs(2)).await;

    // A transaction with the consumed offsets (KIP-447), after its
    // coordinator moved (NOT_COORDINATOR, then a new lookup).
    mock.coordinator(MockCoordinator::Transaction("writer-1".to_owned()), 2)
        .expect("move the coordinator");
    producer.begin_transaction().expect("begin");
    let delivery = producer
        .send(ProducerRecord::new("out", "with offsets").with_partition(1))
        .await;
    let mut offsets = Offsets::new();
    offsets.insert(("in".to_owned(), 0), OffsetAndMetadata::new(42));
    let group = ConsumerGroupMetadata::new("readers");
    producer
        .send_offsets_to_transaction(&offsets, &group)
        .await
        .expect("offsets in the transaction");
    producer.commit_transaction(TIMEOUT).await.expect("commit");
    delivery.await.expect("acknowledged");
    producer.close(Duration::from_secs(2)).await;
    drop(mock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn illegal_calls_fail_typed() {
    let mock = MockCluster::new(1).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    mock.create_topic("out", 1, 1).expect("topic");
    let producer = Producer::new(config(&bootstrap, "writer-3"))
        .await
        .expect("producer");
    let before_init = producer.send(ProducerRecord::new("out", "v")).await.await;
    assert_eq!(
        before_init,
        Err(ProduceError::Transaction(TransactionError::InvalidState {
            operation: strom_producer::TransactionOperation::Send,
            state: TransactionState::Uninitialized,
        }))
    );
    assert!(matches!(
        producer.begin_transaction(),
        Err(TransactionError::InvalidState { .. })
    ));
    producer.init_transactions(TIMEOUT).await.expect("init");
    assert!(matches!(
        producer.commit_transaction(TIMEOUT).await,
        Err(TransactionError::InvalidState {
            state: TransactionState::Ready,
            ..
        })
    ));
    producer.begin_transaction().expect("begin");
    assert!(matches!(
        producer.begin_transaction(),
        Err(TransactionError::InvalidState {
            state: TransactionState::InTransaction,
            ..
        })
    ));
    // Nothing was sent: no EndTxn is needed.
    producer.abort_transaction(TIMEOUT).await.expect("abort");
    producer.close(Duration::from_secs(2)).await;

    let mut plain = ProducerConfig::new([bootstrap.clone()]);
    plain.client.request_timeout = Duration::from_millis(2_000);
    let plain = Producer::new(plain).await.expect("producer");
    assert_eq!(plain.transaction_state(), None);
    assert_eq!(
        plain.begin_transaction(),
        Err(TransactionError::NotTransactional)
    );
    plain.close(Duration::from_secs(2)).await;
    drop(mock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_errors_are_retried() {
    let mock = MockCluster::new(3).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    mock.create_topic("out", 2, 3).expect("topic");
    mock.request_errors(
        RDKafkaApiKey::InitProducerId,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS,
        ],
    );
    let producer = transactional_producer(&bootstrap, "writer-4").await;
    mock.request_errors(
        RDKafkaApiKey::AddPartitionsToTxn,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
        ],
    );
    mock.request_errors(
        RDKafkaApiKey::EndTxn,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
        ],
    );
    producer.begin_transaction().expect("begin");
    let first = producer
        .send(ProducerRecord::new("out", "a").with_partition(0))
        .await;
    let second = producer
        .send(ProducerRecord::new("out", "b").with_partition(1))
        .await;
    producer.commit_transaction(TIMEOUT).await.expect("commit");
    first.await.expect("acknowledged");
    second.await.expect("acknowledged");
    producer.close(Duration::from_secs(2)).await;
    drop(mock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_producer_id_aborts_then_bumps_the_epoch_and_goes_on() {
    let mock = MockCluster::new(1).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    mock.create_topic("out", 1, 1).expect("topic");
    let producer = transactional_producer(&bootstrap, "writer-5").await;
    producer.begin_transaction().expect("begin");
    mock.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID],
    );
    let failed = producer
        .send(ProducerRecord::new("out", "lost").with_partition(0))
        .await;
    assert_eq!(
        failed.await,
        Err(ProduceError::Broker {
            code: ErrorCode::UnknownProducerId
        })
    );
    assert_eq!(
        producer.commit_transaction(TIMEOUT).await,
        Err(TransactionError::UnknownProducerId)
    );
    assert_eq!(
        producer.transaction_state(),
        Some(TransactionState::AbortableError)
    );
    // Records sent in an abortable transaction fail at once.
    let refused = producer
        .send(ProducerRecord::new("out", "refused").with_partition(0))
        .await
        .await;
    assert_eq!(
        refused,
        Err(ProduceError::Transaction(
            TransactionError::UnknownProducerId
        ))
    );
    // The abort bumps the epoch (the mock checks the epoch of every later
    // request, and refuses the old one).
    producer.abort_transaction(TIMEOUT).await.expect("abort");
    assert_eq!(producer.transaction_state(), Some(TransactionState::Ready));
    producer.begin_transaction().expect("begin");
    let delivery = producer
        .send(ProducerRecord::new("out", "after the bump").with_partition(0))
        .await;
    producer.commit_transaction(TIMEOUT).await.expect("commit");
    delivery.await.expect("acknowledged");
    producer.close(Duration::from_secs(2)).await;
    drop(mock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_producer_fails_fatally() {
    let mock = MockCluster::new(1).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    mock.create_topic("out", 1, 1).expect("topic");
    let first = transactional_producer(&bootstrap, "shared-id").await;
    // A second producer with the same transactional id takes over; a real
    // coordinator then answers the first one PRODUCER_FENCED (the mock
    // does not fence on its own, so the answer is injected).
    let second = transactional_producer(&bootstrap, "shared-id").await;
    first.begin_transaction().expect("begin");
    let delivery = first
        .send(ProducerRecord::new("out", "zombie").with_partition(0))
        .await;
    delivery
        .await
        .expect("written before the takeover was seen");
    mock.request_errors(
        RDKafkaApiKey::EndTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    );
    let fenced = TransactionError::ProducerFenced {
        code: ErrorCode::ProducerFenced,
    };
    assert_eq!(first.commit_transaction(TIMEOUT).await, Err(fenced.clone()));
    assert!(fenced.is_fatal());
    assert_eq!(
        first.transaction_state(),
        Some(TransactionState::FatalError)
    );
    // Every later call fails with the fenced error.
    assert_eq!(first.begin_transaction(), Err(fenced.clone()));
    assert_eq!(first.abort_transaction(TIMEOUT).await, Err(fenced.clone()));
    first.close(Duration::from_secs(2)).await;
    // The new producer goes on.
    second.begin_transaction().expect("begin");
    let delivery = second
        .send(ProducerRecord::new("out", "owner").with_partition(0))
        .await;
    second.commit_transaction(TIMEOUT).await.expect("commit");
    delivery.await.expect("acknowledged");
    second.close(Duration::from_secs(2)).await;
    drop(mock);
}
