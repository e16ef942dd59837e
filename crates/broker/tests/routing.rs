//! Every API the broker advertises reaches a handler: a request of each, at
//! the highest version served, gets an answer of its own API (a request no
//! dispatcher routes would close the connection instead). The requests are
//! empty or name nothing that exists, so each handler answers with nothing
//! to do or with an error code; what matters here is that it answers.

use strom_broker::handlers::HANDLED_APIS;
use strom_protocol::api::supported_api;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Request;

use crate::common;

use common::{config, Client};

/// A request of `api` that every handler can answer.
fn sample(api: ApiKey) -> Option<Request> {
    let group = || GroupId(StrBytes::from_static_str("routing-group"));
    let request: Request = match api {
        ApiKey::Produce => ProduceRequest::default().with_acks(1).into(),
        ApiKey::Fetch => FetchRequest::default().with_max_wait_ms(0).into(),
        ApiKey::ListOffsets => ListOffsetsRequest::default().into(),
        ApiKey::Metadata => MetadataRequest::default()
            .with_topics(Some(Vec::new()))
            .into(),
        ApiKey::SaslHandshake => SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str("PLAIN"))
            .into(),
        ApiKey::ApiVersions => ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("routing"))
            .with_client_software_version(StrBytes::from_static_str("1"))
            .into(),
        ApiKey::CreateTopics => CreateTopicsRequest::default().into(),
        ApiKey::DeleteTopics => DeleteTopicsRequest::default().into(),
        ApiKey::DeleteRecords => DeleteRecordsRequest::default().into(),
        ApiKey::InitProducerId => InitProducerIdRequest::default()
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .into(),
        ApiKey::OffsetForLeaderEpoch => OffsetForLeaderEpochRequest::default().into(),
        ApiKey::DescribeAcls => DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1)
            .into(),
        ApiKey::CreateAcls => CreateAclsRequest::default().into(),
        ApiKey::DeleteAcls => DeleteAclsRequest::default().into(),
        ApiKey::DescribeConfigs => DescribeConfigsRequest::default().into(),
        ApiKey::AlterConfigs => AlterConfigsRequest::default().into(),
        ApiKey::SaslAuthenticate => SaslAuthenticateRequest::default().into(),
        ApiKey::CreatePartitions => CreatePartitionsRequest::default().into(),
        ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::default().into(),
        ApiKey::DescribeCluster => DescribeClusterRequest::default().into(),
        ApiKey::OffsetCommit => OffsetCommitRequest::default().with_group_id(group()).into(),
        ApiKey::OffsetFetch => OffsetFetchRequest::default()
            .with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(group())
                    .with_topics(Some(Vec::new())),
            ])
            .into(),
        ApiKey::FindCoordinator => FindCoordinatorRequest::default()
            .with_coordinator_keys(vec![StrBytes::from_static_str("routing-group")])
            .into(),
        ApiKey::JoinGroup => JoinGroupRequest::default()
            .with_group_id(group())
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .into(),
        ApiKey::Heartbeat => HeartbeatRequest::default().with_group_id(group()).into(),
        ApiKey::LeaveGroup => LeaveGroupRequest::default().with_group_id(group()).into(),
        ApiKey::SyncGroup => SyncGroupRequest::default().with_group_id(group()).into(),
        ApiKey::DescribeGroups => DescribeGroupsRequest::default()
            .with_groups(vec![group()])
            .into(),
        ApiKey::ListGroups => ListGroupsRequest::default().into(),
        ApiKey::DeleteGroups => DeleteGroupsRequest::default()
            .with_groups_names(vec![group()])
            .into(),
        ApiKey::ElectLeaders => ElectLeadersRequest::default()
            .with_topic_partitions(Some(Vec::new()))
            .into(),
        ApiKey::AlterPartitionReassignments => AlterPartitionReassignmentsRequest::default().into(),
        ApiKey::ListPartitionReassignments => ListPartitionReassignmentsRequest::default()
            .with_topics(Some(Vec::new()))
            .into(),
        ApiKey::OffsetDelete => OffsetDeleteRequest::default().with_group_id(group()).into(),
        ApiKey::DescribeUserScramCredentials => DescribeUserScramCredentialsRequest::default()
            .with_users(Some(Vec::new()))
            .into(),
        ApiKey::AlterUserScramCredentials => AlterUserScramCredentialsRequest::default().into(),
        ApiKey::DescribeClientQuotas => DescribeClientQuotasRequest::default().into(),
        ApiKey::AlterClientQuotas => AlterClientQuotasRequest::default().into(),
        ApiKey::DescribeQuorum => DescribeQuorumRequest::default().into(),
        // The highest version served (v4) is the brokers' batched form.
        ApiKey::AddPartitionsToTxn => AddPartitionsToTxnRequest::default().into(),
        ApiKey::AddOffsetsToTxn => AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("t")))
            .with_group_id(group())
            .into(),
        ApiKey::EndTxn => EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("t")))
            .into(),
        ApiKey::WriteTxnMarkers => WriteTxnMarkersRequest::default().into(),
        ApiKey::TxnOffsetCommit => TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("t")))
            .with_group_id(group())
            .into(),
        ApiKey::DescribeProducers => DescribeProducersRequest::default().into(),
        ApiKey::DescribeTransactions => DescribeTransactionsRequest::default().into(),
        ApiKey::ListTransactions => ListTransactionsRequest::default()
            .with_duration_filter(-1)
            .into(),
        ApiKey::ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group())
            .into(),
        ApiKey::ConsumerGroupDescribe => ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![group()])
            .into(),
        _ => return None,
    };
    Some(request)
}

#[tokio::test]
async fn every_advertised_api_is_answered_by_its_handler() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let broker = strom_broker::start(config(dir.path(), &[]))
        .await
        .expect("broker starts");
    let mut missing = Vec::new();
    for &api in HANDLED_APIS {
        let Some(request) = sample(api) else {
            missing.push(api);
            continue;
        };
        let version = supported_api(api as i16)
            .expect("a handled API is in the protocol table")
            .max_version;
        // A fresh connection per API: a request that closed the connection
        // fails here, on its own API.
        eprintln!("{api:?} v{version}");
        let mut client = Client::connect(&broker, "routing").await;
        let response = client.send(request, version).await;
        assert_eq!(response.api_key(), api, "{api:?} answered by another API");
    }
    assert!(
        missing.is_empty(),
        "no sample request for {missing:?}: add one to tests/routing.rs"
    );
    broker.shutdown().await;
}
