//! Every served request and response, at every advertised version, round
//! trips with default values and with values filled in by hand.

use crate::wire_support;

use bytes::Bytes;
use strom_protocol::api::SUPPORTED_APIS;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{Request, Response};
use wire_support::{assert_request_round_trip, assert_response_round_trip};

#[test]
fn defaults_round_trip_at_every_advertised_version() {
    let mut checked = 0;
    for api in SUPPORTED_APIS {
        for version in api.min_version..=api.max_version {
            let request = Request::default_for(api.api_key).expect(api.name);
            assert_request_round_trip(&request, version);
            let response = Response::default_for(api.api_key).expect(api.name);
            assert_response_round_trip(&response, version);
            checked += 1;
        }
    }
    assert!(checked > 150, "only {checked} versions checked");
}

fn text(value: &'static str) -> StrBytes {
    StrBytes::from_static_str(value)
}

fn topic(value: &'static str) -> TopicName {
    TopicName(text(value))
}

#[test]
fn hand_filled_admin_requests_round_trip() {
    let describe_configs = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configuration_keys(Some(vec![text("retention.ms")])),
    ]);
    let create_partitions = CreatePartitionsRequest::default()
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic("orders"))
                .with_count(12)
                .with_assignments(None),
        ])
        .with_timeout_ms(30_000)
        .with_validate_only(true);
    let delete_records = DeleteRecordsRequest::default()
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(topic("orders"))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(3)
                    .with_offset(1_000),
            ])])
        .with_timeout_ms(5_000);
    let delete_topics = DeleteTopicsRequest::default().with_timeout_ms(1_500);
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(GroupId(text("payments")))
        .with_generation_id(7)
        .with_member_id(text("member-1"));
    let sasl =
        SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0user\0pass"));
    let find = FindCoordinatorRequest::default().with_key_type(0);
    let cases: Vec<Request> = vec![
        describe_configs.into(),
        create_partitions.into(),
        delete_records.into(),
        delete_topics.into(),
        heartbeat.into(),
        sasl.into(),
        find.into(),
    ];
    for request in cases {
        let api = SUPPORTED_APIS
            .iter()
            .find(|api| api.api_key == request.api_key())
            .unwrap();
        for version in api.min_version..=api.max_version {
            assert_request_round_trip(&request, version);
        }
    }
}

#[test]
fn hand_filled_responses_round_trip() {
    let init_producer_id = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(4_000))
        .with_producer_epoch(3)
        .with_throttle_time_ms(10);
    let heartbeat = HeartbeatResponse::default().with_error_code(27);
    let describe_cluster = DescribeClusterResponse::default()
        .with_cluster_id(text("strom-cluster"))
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![
            describe_cluster_response::DescribeClusterBroker::default()
                .with_broker_id(BrokerId(1))
                .with_host(text("127.0.0.1"))
                .with_port(9092),
        ]);
    let cases: Vec<Response> = vec![
        init_producer_id.into(),
        heartbeat.into(),
        describe_cluster.into(),
    ];
    for response in cases {
        let api = SUPPORTED_APIS
            .iter()
            .find(|api| api.api_key == response.api_key())
            .unwrap();
        for version in api.min_version..=api.max_version {
            assert_response_round_trip(&response, version);
        }
    }
}
