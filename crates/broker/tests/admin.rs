//! The admin handlers over a real socket: a broker on port 0 in a temporary
//! directory, requests encoded with the protocol crate.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::delete_topics_request::DeleteTopicState;
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strom_protocol::kafka::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder};

use crate::common;

use common::{config, create_topic_answer, Client};

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

async fn create_topic(client: &mut Client, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let response = create_topic_answer(client, topic, partitions, configs).await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
}

/// Produces `count` records in one batch; returns the error code.
async fn produce(client: &mut Client, topic: &str, count: usize, acks: i16) -> i16 {
    produce_batch(
        client,
        topic,
        RecordBatchBuilder::new(Compression::None),
        count,
        acks,
    )
    .await
}

/// Produces `count` records in one batch of `builder`; returns the error code.
async fn produce_batch(
    client: &mut Client,
    topic: &str,
    mut builder: RecordBatchBuilder,
    count: usize,
    acks: i16,
) -> i16 {
    for index in 0..count {
        builder
            .append(
                1_000 + index as i64,
                None,
                Some(format!("v{index}").as_bytes()),
                &[],
            )
            .expect("append");
    }
    let records = builder.build().expect("build");
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    response.responses[0].partition_responses[0].error_code
}

fn code(error: ErrorCode) -> i16 {
    error.code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_advertise_the_admin_apis() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    let Response::ApiVersions(response) = client
        .send(Request::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    else {
        panic!("not ApiVersions");
    };
    for key in [
        ApiKey::DeleteTopics,
        ApiKey::CreatePartitions,
        ApiKey::DescribeConfigs,
        ApiKey::AlterConfigs,
        ApiKey::IncrementalAlterConfigs,
        ApiKey::DescribeCluster,
        ApiKey::DeleteRecords,
        ApiKey::OffsetForLeaderEpoch,
        ApiKey::InitProducerId,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
    ] {
        assert!(
            response
                .api_keys
                .iter()
                .any(|entry| entry.api_key == key as i16),
            "{key:?} not advertised"
        );
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_is_not_enabled_on_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let Response::SaslHandshake(response) = client.send(Request::SaslHandshake(request), 1).await
    else {
        panic!("not SaslHandshake");
    };
    assert_eq!(response.error_code, code(ErrorCode::IllegalSaslState));
    assert!(response.mechanisms.is_empty());
    let Response::SaslAuthenticate(response) = client
        .send(
            Request::SaslAuthenticate(SaslAuthenticateRequest::default()),
            2,
        )
        .await
    else {
        panic!("not SaslAuthenticate");
    };
    assert_eq!(response.error_code, code(ErrorCode::IllegalSaslState));
    broker.shutdown().await;
}

async fn init_producer_id(
    client: &mut Client,
    producer_id: i64,
    epoch: i16,
) -> InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch);
    let Response::InitProducerId(response) = client.send(Request::InitProducerId(request), 4).await
    else {
        panic!("not InitProducerId");
    };
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_ids_are_unique_across_restarts_and_epochs_bump() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    let first = init_producer_id(&mut client, -1, -1).await;
    let second = init_producer_id(&mut client, -1, -1).await;
    assert_eq!(first.error_code, 0);
    assert_eq!((first.producer_id.0, first.producer_epoch), (0, 0));
    assert_eq!((second.producer_id.0, second.producer_epoch), (1, 0));

    let bumped = init_producer_id(&mut client, 1, 0).await;
    assert_eq!(
        (
            bumped.error_code,
            bumped.producer_id.0,
            bumped.producer_epoch
        ),
        (0, 1, 1)
    );
    let unknown = init_producer_id(&mut client, 5_000_000, 0).await;
    assert_eq!(
        unknown.error_code,
        code(ErrorCode::InvalidProducerIdMapping)
    );

    let transactional = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    // Before any FindCoordinator for a transactional id there is no
    // `__transaction_state`, so no coordinator here.
    let Response::InitProducerId(response) = client
        .send(Request::InitProducerId(transactional.clone()), 4)
        .await
    else {
        panic!("not InitProducerId");
    };
    assert_eq!(response.error_code, code(ErrorCode::NotCoordinator));
    let find = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(StrBytes::from_static_str("tx"));
    let Response::FindCoordinator(found) = client.send(Request::FindCoordinator(find), 3).await
    else {
        panic!("not FindCoordinator");
    };
    assert_eq!(found.error_code, 0, "{found:?}");
    // Once its partition is loaded, the id gets a producer id at epoch 0,
    // and the next InitProducerId bumps the epoch.
    let mut epochs = Vec::new();
    for _ in 0..200 {
        let Response::InitProducerId(response) = client
            .send(Request::InitProducerId(transactional.clone()), 4)
            .await
        else {
            panic!("not InitProducerId");
        };
        if response.error_code == 0 {
            epochs.push((response.producer_id.0, response.producer_epoch));
            if epochs.len() == 2 {
                break;
            }
            continue;
        }
        assert!(
            [
                code(ErrorCode::NotCoordinator),
                code(ErrorCode::CoordinatorLoadInProgress)
            ]
            .contains(&response.error_code),
            "{response:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(epochs.len(), 2, "{epochs:?}");
    assert_eq!(epochs[0].0, epochs[1].0);
    assert_eq!((epochs[0].1, epochs[1].1), (0, 1));
    drop(client);
    broker.shutdown().await;

    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    let after_restart = init_producer_id(&mut client, -1, -1).await;
    assert_eq!(after_restart.error_code, 0);
    assert!(
        after_restart.producer_id.0 > 1,
        "an id was reused: {}",
        after_restart.producer_id.0
    );
    broker.shutdown().await;
}

async fn end_offset(client: &mut Client, topic: &str, current: i32, epoch: i32) -> (i16, i32, i64) {
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current)
                .with_leader_epoch(epoch)])]);
    let Response::OffsetForLeaderEpoch(response) =
        client.send(Request::OffsetForLeaderEpoch(request), 4).await
    else {
        panic!("not OffsetForLeaderEpoch");
    };
    let partition = &response.topics[0].partitions[0];
    (
        partition.error_code,
        partition.leader_epoch,
        partition.end_offset,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_answers_from_the_epoch_cache() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "epochs", 1, &[]).await;
    // Before any append the leader has recorded its epoch 0 at offset 0
    // (as Kafka's leaders do when they take over): it ends at the log end.
    assert_eq!(end_offset(&mut client, "epochs", -1, 0).await, (0, 0, 0));
    assert_eq!(produce(&mut client, "epochs", 3, 1).await, 0);
    // The current epoch (0) ends at the log end offset.
    assert_eq!(end_offset(&mut client, "epochs", 0, 0).await, (0, 0, 3));
    // A larger epoch than any known is unknown.
    assert_eq!(end_offset(&mut client, "epochs", -1, 7).await, (0, -1, -1));
    // A future current epoch is unknown to the leader; a past one fenced.
    assert_eq!(
        end_offset(&mut client, "epochs", 5, 0).await.0,
        code(ErrorCode::UnknownLeaderEpoch)
    );
    assert_eq!(
        end_offset(&mut client, "nope", -1, 0).await.0,
        code(ErrorCode::UnknownTopicOrPartition)
    );
    broker.shutdown().await;
}

async fn incremental_set(client: &mut Client, topic: &str, key: &str, value: &str) -> i16 {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.to_owned()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.to_owned())))]),
    ]);
    let Response::IncrementalAlterConfigs(response) = client
        .send(Request::IncrementalAlterConfigs(request), 1)
        .await
    else {
        panic!("not IncrementalAlterConfigs");
    };
    response.responses[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_insync_and_max_message_bytes_take_effect_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "dynamic", 1, &[]).await;
    assert_eq!(produce(&mut client, "dynamic", 1, -1).await, 0);

    assert_eq!(
        incremental_set(&mut client, "dynamic", "min.insync.replicas", "2").await,
        0
    );
    assert_eq!(
        produce(&mut client, "dynamic", 1, -1).await,
        code(ErrorCode::NotEnoughReplicas)
    );
    assert_eq!(
        produce(&mut client, "dynamic", 1, 1).await,
        0,
        "acks=1 is unaffected"
    );
    assert_eq!(
        incremental_set(&mut client, "dynamic", "min.insync.replicas", "1").await,
        0
    );
    assert_eq!(produce(&mut client, "dynamic", 1, -1).await, 0);

    assert_eq!(
        incremental_set(&mut client, "dynamic", "max.message.bytes", "20").await,
        0
    );
    assert_eq!(
        produce(&mut client, "dynamic", 5, 1).await,
        code(ErrorCode::MessageTooLarge)
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_reports_sources_synonyms_types_and_docs() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [("log.retention.hours", "2")];
    let broker = strom_broker::start(config(dir.path(), &extra))
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(
        &mut client,
        "described",
        1,
        &[("cleanup.policy", "compact")],
    )
    .await;
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(true)
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("described"))
                .with_configuration_keys(None),
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("missing"))
                .with_configuration_keys(None),
            DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("1"))
                .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                    "log.retention.hours",
                )])),
        ]);
    let Response::DescribeConfigs(response) =
        client.send(Request::DescribeConfigs(request), 4).await
    else {
        panic!("not DescribeConfigs");
    };
    let topic = &response.results[0];
    assert_eq!(topic.error_code, 0);
    let entry = |key: &str| {
        topic
            .configs
            .iter()
            .find(|entry| entry.name.as_str() == key)
            .unwrap_or_else(|| panic!("{key} missing"))
    };
    let cleanup = entry("cleanup.policy");
    assert_eq!(cleanup.value.as_deref(), Some("compact"));
    assert_eq!(cleanup.config_source, 1);
    assert_eq!(cleanup.config_type, 7, "LIST");
    assert!(cleanup.documentation.is_some());
    let retention = entry("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("7200000"));
    assert_eq!(retention.config_source, 4, "STATIC_BROKER_CONFIG");
    let synonyms: Vec<(&str, Option<&str>, i8)> = retention
        .synonyms
        .iter()
        .map(|synonym| {
            (
                synonym.name.as_str(),
                synonym.value.as_deref(),
                synonym.source,
            )
        })
        .collect();
    assert_eq!(
        synonyms,
        vec![
            ("log.retention.hours", Some("2"), 4),
            ("log.retention.ms", Some("604800000"), 5)
        ]
    );
    assert_eq!(entry("segment.bytes").config_type, 3, "INT");
    assert_eq!(
        response.results[1].error_code,
        code(ErrorCode::UnknownTopicOrPartition)
    );
    let broker_result = &response.results[2];
    assert_eq!(broker_result.error_code, 0);
    assert_eq!(broker_result.configs.len(), 1);
    assert_eq!(broker_result.configs[0].value.as_deref(), Some("2"));
    assert!(broker_result.configs[0].read_only);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_by_id_and_disabled_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "by-id", 2, &[]).await;
    let Response::Metadata(metadata) = client
        .send(
            Request::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name("by-id"))),
            ]))),
            12,
        )
        .await
    else {
        panic!("not Metadata");
    };
    let topic_id = metadata.topics[0].topic_id;
    assert!(!topic_id.is_nil());
    let partition_dir = dir.path().join("by-id-0");
    assert!(partition_dir.exists());
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![DeleteTopicState::default().with_topic_id(topic_id)]);
    let Response::DeleteTopics(response) = client.send(Request::DeleteTopics(request), 6).await
    else {
        panic!("not DeleteTopics");
    };
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        response.responses[0].name.as_ref().map(|n| n.0.as_str()),
        Some("by-id")
    );
    assert!(
        !partition_dir.exists(),
        "the partition log is deleted at once"
    );
    drop(client);
    broker.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[("delete.topic.enable", "false")]))
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "kept", 1, &[]).await;
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topic_names(vec![name("kept")]);
    let Response::DeleteTopics(response) = client.send(Request::DeleteTopics(request), 5).await
    else {
        panic!("not DeleteTopics");
    };
    assert_eq!(
        response.responses[0].error_code,
        code(ErrorCode::TopicDeletionDisabled)
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bumped_epoch_is_accepted_by_the_log_and_the_old_one_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "idempotent", 1, &[]).await;
    let first = init_producer_id(&mut client, -1, -1).await;
    let producer_id = first.producer_id.0;
    let batch = |epoch: i16, sequence: i32| {
        RecordBatchBuilder::new(Compression::None).with_producer(producer_id, epoch, sequence)
    };
    assert_eq!(
        produce_batch(&mut client, "idempotent", batch(0, 0), 2, -1).await,
        0
    );
    let bumped = init_producer_id(&mut client, producer_id, 0).await;
    assert_eq!(
        (bumped.producer_id.0, bumped.producer_epoch),
        (producer_id, 1)
    );
    // The new epoch starts its sequences again at 0.
    assert_eq!(
        produce_batch(&mut client, "idempotent", batch(1, 0), 1, -1).await,
        0
    );
    let fenced = produce_batch(&mut client, "idempotent", batch(0, 2), 1, -1).await;
    assert_ne!(fenced, 0, "a write with the old epoch must be refused");
    broker.shutdown().await;
}

async fn delete_records(client: &mut Client, topic: &str, offset: i64) -> (i16, i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(offset),
            ])]);
    let Response::DeleteRecords(response) = client.send(Request::DeleteRecords(request), 2).await
    else {
        panic!("not DeleteRecords");
    };
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.low_watermark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_low_watermark_durably() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "trimmed", 1, &[]).await;
    assert_eq!(produce(&mut client, "trimmed", 5, 1).await, 0);
    assert_eq!(delete_records(&mut client, "trimmed", 3).await, (0, 3));
    // Below the current start: nothing changes.
    assert_eq!(delete_records(&mut client, "trimmed", 1).await, (0, 3));
    assert_eq!(
        delete_records(&mut client, "trimmed", 6).await.0,
        code(ErrorCode::OffsetOutOfRange)
    );
    assert_eq!(
        delete_records(&mut client, "trimmed", -2).await.0,
        code(ErrorCode::OffsetOutOfRange)
    );
    assert_eq!(
        delete_records(&mut client, "absent", 0).await.0,
        code(ErrorCode::UnknownTopicOrPartition)
    );
    drop(client);
    broker.shutdown().await;

    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    // -1: up to the high watermark; the start offset survived the restart.
    assert_eq!(delete_records(&mut client, "trimmed", 1).await, (0, 3));
    assert_eq!(delete_records(&mut client, "trimmed", -1).await, (0, 5));
    broker.shutdown().await;
}

async fn leader_epoch(client: &mut Client, topic: &str) -> i32 {
    let Response::Metadata(metadata) = client
        .send(
            Request::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
            ]))),
            12,
        )
        .await
    else {
        panic!("not Metadata");
    };
    metadata.topics[0].partitions[0].leader_epoch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_epoch_ends_where_the_next_one_starts() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    create_topic(&mut client, "history", 1, &[]).await;
    let first_epoch = leader_epoch(&mut client, "history").await;
    assert_eq!(produce(&mut client, "history", 3, 1).await, 0);
    drop(client);
    broker.shutdown().await;

    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "admin-test").await;
    let second_epoch = leader_epoch(&mut client, "history").await;
    assert!(
        second_epoch > first_epoch,
        "a restart elects with a new epoch"
    );
    assert_eq!(produce(&mut client, "history", 2, 1).await, 0);
    assert_eq!(
        end_offset(&mut client, "history", second_epoch, first_epoch).await,
        (0, first_epoch, 3)
    );
    if second_epoch > first_epoch + 1 {
        // An epoch that never appended: the largest known epoch below it,
        // ending where the next known epoch starts.
        assert_eq!(
            end_offset(&mut client, "history", second_epoch, first_epoch + 1).await,
            (0, first_epoch, 3)
        );
    }
    assert_eq!(
        end_offset(&mut client, "history", second_epoch, second_epoch).await,
        (0, second_epoch, 5)
    );
    assert_eq!(
        end_offset(&mut client, "history", first_epoch, second_epoch)
            .await
            .0,
        code(ErrorCode::FencedLeaderEpoch)
    );
    broker.shutdown().await;
}
