//! Transactions on the wire, one node: the misuse cases get Kafka's codes
//! (never a hang or a closed connection), the producer-fencing codes
//! follow the request version (KIP-588), and with an authorizer a
//! principal without WRITE on the transactional id is refused.

use std::time::Duration;

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder};

use crate::common;

use common::{config, create_topic_answer, Client};

pub(crate) fn code(error: ErrorCode) -> i16 {
    error.code()
}

pub(crate) fn id(text: &'static str) -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(text))
}

fn init(transactional_id: &'static str, timeout_ms: i32) -> Request {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(id(transactional_id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
        .into()
}

/// FindCoordinator for `transactional_id` (creating `__transaction_state`),
/// then InitProducerId until the partition is loaded: (producer id, epoch).
pub(crate) async fn initialised(client: &mut Client, transactional_id: &'static str) -> (i64, i16) {
    let find = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(StrBytes::from_static_str(transactional_id));
    let Response::FindCoordinator(found) = client.send(find.into(), 3).await else {
        panic!("not FindCoordinator");
    };
    assert_eq!(found.error_code, 0, "{found:?}");
    for _ in 0..250 {
        let Response::InitProducerId(response) =
            client.send(init(transactional_id, 60_000), 4).await
        else {
            panic!("not InitProducerId");
        };
        if response.error_code == 0 {
            return (response.producer_id.0, response.producer_epoch);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("InitProducerId never succeeded");
}

pub(crate) fn add_partitions(
    transactional_id: &'static str,
    producer: (i64, i16),
    topic: &'static str,
) -> Request {
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(id(transactional_id))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partitions(vec![0])])
        .into()
}

pub(crate) fn partition_codes(response: &Response) -> Vec<i16> {
    let Response::AddPartitionsToTxn(response) = response else {
        panic!("not AddPartitionsToTxn: {response:?}");
    };
    response
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|topic| topic.results_by_partition.iter())
        .map(|partition| partition.partition_error_code)
        .collect()
}

pub(crate) fn end(
    transactional_id: &'static str,
    producer: (i64, i16),
    committed: bool,
) -> Request {
    EndTxnRequest::default()
        .with_transactional_id(id(transactional_id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(committed)
        .into()
}

pub(crate) async fn end_code(client: &mut Client, request: Request, version: i16) -> i16 {
    let Response::EndTxn(response) = client.send(request, version).await else {
        panic!("not EndTxn");
    };
    response.error_code
}

#[tokio::test]
async fn misuse_gets_kafkas_codes() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let broker = strom_broker::start(config(dir.path(), &[]))
        .await
        .expect("broker starts");
    let mut client = Client::connect(&broker, "txn-misuse").await;
    let created = create_topic_answer(&mut client, "orders", 1, &[]).await;
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let producer = initialised(&mut client, "app").await;
    assert_eq!(producer.1, 0);

    // EndTxn without a transaction open: nothing to commit.
    assert_eq!(
        end_code(&mut client, end("app", producer, true), 3).await,
        code(ErrorCode::InvalidTxnState)
    );
    // An id that never called InitProducerId.
    assert_eq!(
        end_code(&mut client, end("stranger", (producer.0, 0), true), 3).await,
        code(ErrorCode::InvalidProducerIdMapping)
    );
    // A producer id that is not the id's.
    assert_eq!(
        end_code(&mut client, end("app", (producer.0 + 1, 0), true), 3).await,
        code(ErrorCode::InvalidProducerIdMapping)
    );
    // A timeout above transaction.max.timeout.ms (900000 by default).
    let Response::InitProducerId(too_long) = client.send(init("app", 900_001), 4).await else {
        panic!("not InitProducerId");
    };
    assert_eq!(
        too_long.error_code,
        code(ErrorCode::InvalidTransactionTimeout)
    );
    // An empty transactional id.
    let Response::InitProducerId(empty) = client.send(init("", 60_000), 4).await else {
        panic!("not InitProducerId");
    };
    assert_eq!(empty.error_code, code(ErrorCode::InvalidRequest));

    // A partition of a topic that does not exist.
    let unknown = client
        .send(add_partitions("app", producer, "no-such-topic"), 3)
        .await;
    assert_eq!(
        partition_codes(&unknown),
        vec![code(ErrorCode::UnknownTopicOrPartition)]
    );

    // A newer producer fences the older: its requests get PRODUCER_FENCED
    // from the versions of KIP-588 on, INVALID_PRODUCER_EPOCH before.
    let successor = initialised(&mut client, "app").await;
    assert_eq!(successor, (producer.0, 1));
    let fenced_new = client
        .send(add_partitions("app", producer, "orders"), 2)
        .await;
    assert_eq!(
        partition_codes(&fenced_new),
        vec![code(ErrorCode::ProducerFenced)]
    );
    let fenced_old = client
        .send(add_partitions("app", producer, "orders"), 1)
        .await;
    assert_eq!(
        partition_codes(&fenced_old),
        vec![code(ErrorCode::InvalidProducerEpoch)]
    );

    // The successor commits a transaction; a retried EndTxn of it is
    // answered the same, an abort of it is refused.
    let added = client
        .send(add_partitions("app", successor, "orders"), 3)
        .await;
    assert_eq!(partition_codes(&added), vec![0]);
    assert_eq!(
        end_code(&mut client, end("app", successor, true), 3).await,
        0
    );
    let mut retried = code(ErrorCode::ConcurrentTransactions);
    for _ in 0..100 {
        retried = end_code(&mut client, end("app", successor, true), 3).await;
        if retried != code(ErrorCode::ConcurrentTransactions) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(retried, 0);
    assert_eq!(
        end_code(&mut client, end("app", successor, false), 3).await,
        code(ErrorCode::InvalidTxnState)
    );
    drop(client);
    broker.shutdown().await;
}

#[tokio::test]
async fn without_write_on_the_transactional_id_requests_are_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let broker = strom_broker::start(config(dir.path(), &[("strom.authorizer.enable", "true")]))
        .await
        .expect("broker starts");
    let mut client = Client::connect(&broker, "txn-acl").await;
    let Response::InitProducerId(init_refused) = client.send(init("app", 60_000), 4).await else {
        panic!("not InitProducerId");
    };
    assert_eq!(
        init_refused.error_code,
        code(ErrorCode::TransactionalIdAuthorizationFailed)
    );
    let find = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(StrBytes::from_static_str("app"));
    let Response::FindCoordinator(found) = client.send(find.into(), 3).await else {
        panic!("not FindCoordinator");
    };
    assert_eq!(
        found.error_code,
        code(ErrorCode::TransactionalIdAuthorizationFailed)
    );
    let added = client
        .send(add_partitions("app", (1, 0), "orders"), 3)
        .await;
    assert_eq!(
        partition_codes(&added),
        vec![code(ErrorCode::TransactionalIdAuthorizationFailed)]
    );
    assert_eq!(
        end_code(&mut client, end("app", (1, 0), true), 3).await,
        code(ErrorCode::TransactionalIdAuthorizationFailed)
    );
    let Response::WriteTxnMarkers(markers) = client
        .send(
            WriteTxnMarkersRequest::default()
                .with_markers(vec![write_txn_markers_request::WritableTxnMarker::default(
                )
                .with_producer_id(ProducerId(1))
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("orders")))
                        .with_partition_indexes(vec![0]),
                ])])
                .into(),
            1,
        )
        .await
    else {
        panic!("not WriteTxnMarkers");
    };
    assert_eq!(
        markers.markers[0].topics[0].partitions[0].error_code,
        code(ErrorCode::ClusterAuthorizationFailed)
    );
    // A transactional produce names the id: WRITE on it is needed too.
    let produce = transactional_produce(Some("app"), "orders", transactional_batch((1, 0), 0));
    assert_eq!(
        produce_code(&mut client, produce, 9).await.0,
        code(ErrorCode::TransactionalIdAuthorizationFailed)
    );
    // Verification (AddPartitionsToTxn v4) is for brokers only.
    let Response::AddPartitionsToTxn(verify) =
        client.send(verify_only("app", (1, 0), "orders"), 4).await
    else {
        panic!("not AddPartitionsToTxn");
    };
    assert_eq!(
        verify.error_code,
        code(ErrorCode::ClusterAuthorizationFailed)
    );
    drop(client);
    broker.shutdown().await;
}

/// A transactional batch of one record from `producer` at `sequence`.
pub(crate) fn transactional_batch(producer: (i64, i16), sequence: i32) -> bytes::Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(producer.0, producer.1, sequence)
        .with_transactional(true);
    builder
        .append(1_000, None, Some(b"value"), &[])
        .expect("record");
    builder.build().expect("batch")
}

pub(crate) fn transactional_produce(
    transactional_id: Option<&'static str>,
    topic: &'static str,
    records: bytes::Bytes,
) -> Request {
    use strom_protocol::kafka::messages::produce_request::{
        PartitionProduceData, TopicProduceData,
    };
    ProduceRequest::default()
        .with_transactional_id(transactional_id.map(id))
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
        .into()
}

pub(crate) async fn produce_code(
    client: &mut Client,
    request: Request,
    version: i16,
) -> (i16, i64) {
    let Response::Produce(response) = client.send(request, version).await else {
        panic!("not Produce");
    };
    let partition = &response.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

async fn log_end(client: &mut Client, topic: &'static str) -> i64 {
    use strom_protocol::kafka::messages::list_offsets_request::{
        ListOffsetsPartition, ListOffsetsTopic,
    };
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let Response::ListOffsets(response) = client.send(request.into(), 7).await else {
        panic!("not ListOffsets");
    };
    response.topics[0].partitions[0].offset
}

/// KIP-890 part 1: a transactional batch to a partition the producer never
/// added to its transaction is refused (no hanging transaction is opened),
/// with the code each Produce version's clients know; once added, the
/// same batch is written; a broker with verification off writes it.
#[tokio::test]
async fn a_batch_outside_the_transaction_is_refused_by_verification() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let broker = strom_broker::start(config(dir.path(), &[]))
        .await
        .expect("broker starts");
    let mut client = Client::connect(&broker, "txn-verify").await;
    let created = create_topic_answer(&mut client, "orders", 1, &[]).await;
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let producer = initialised(&mut client, "app").await;

    let unadded = transactional_produce(Some("app"), "orders", transactional_batch(producer, 0));
    assert_eq!(
        produce_code(&mut client, unadded.clone(), 9).await.0,
        code(ErrorCode::InvalidTxnState)
    );
    assert_eq!(
        produce_code(&mut client, unadded, 11).await.0,
        code(ErrorCode::TransactionAbortable)
    );
    // Without a transactional id nothing can vouch for the batch.
    let anonymous = transactional_produce(None, "orders", transactional_batch(producer, 0));
    assert_eq!(
        produce_code(&mut client, anonymous, 9).await.0,
        code(ErrorCode::InvalidTxnState)
    );
    assert_eq!(log_end(&mut client, "orders").await, 0, "nothing written");

    // A verify-only AddPartitionsToTxn (v4, what leaders send) agrees.
    let verify = verify_only("app", producer, "orders");
    assert_eq!(
        batched_codes(&client.send(verify.clone(), 4).await),
        vec![code(ErrorCode::TransactionAbortable)]
    );

    let added = client
        .send(add_partitions("app", producer, "orders"), 3)
        .await;
    assert_eq!(partition_codes(&added), vec![0]);
    assert_eq!(batched_codes(&client.send(verify, 4).await), vec![0]);
    let first = transactional_produce(Some("app"), "orders", transactional_batch(producer, 0));
    assert_eq!(produce_code(&mut client, first, 9).await, (0, 0));
    // The transaction is ongoing in the partition: no verification needed.
    let second = transactional_produce(Some("app"), "orders", transactional_batch(producer, 1));
    assert_eq!(produce_code(&mut client, second, 9).await, (0, 1));
    assert_eq!(
        end_code(&mut client, end("app", producer, false), 3).await,
        0
    );
    broker.shutdown().await;

    let dir = tempfile::tempdir().expect("temporary directory");
    let unverified = strom_broker::start(config(
        dir.path(),
        &[("transaction.partition.verification.enable", "false")],
    ))
    .await
    .expect("broker starts");
    let mut client = Client::connect(&unverified, "txn-no-verify").await;
    create_topic_answer(&mut client, "orders", 1, &[]).await;
    let producer = initialised(&mut client, "app").await;
    let unadded = transactional_produce(Some("app"), "orders", transactional_batch(producer, 0));
    assert_eq!(produce_code(&mut client, unadded, 9).await, (0, 0));
    unverified.shutdown().await;
}

fn verify_only(
    transactional_id: &'static str,
    producer: (i64, i16),
    topic: &'static str,
) -> Request {
    use strom_protocol::kafka::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
    AddPartitionsToTxnRequest::default()
        .with_transactions(vec![AddPartitionsToTxnTransaction::default()
            .with_transactional_id(id(transactional_id))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_partitions(vec![0])])])
        .into()
}

fn batched_codes(response: &Response) -> Vec<i16> {
    let Response::AddPartitionsToTxn(response) = response else {
        panic!("not AddPartitionsToTxn: {response:?}");
    };
    assert_eq!(response.error_code, 0, "{response:?}");
    response
        .results_by_transaction
        .iter()
        .flat_map(|transaction| transaction.topic_results.iter())
        .flat_map(|topic| topic.results_by_partition.iter())
        .map(|partition| partition.partition_error_code)
        .collect()
}
