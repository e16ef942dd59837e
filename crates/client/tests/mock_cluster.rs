//! strom-client against librdkafka's mock cluster: version negotiation,
//! pipelining, metadata and admin lookups on a broker no one here wrote.

use std::time::Duration;

use rdkafka::mocking::MockCluster;
use strom_client::admin::OffsetSpec;
use strom_client::{AdminClient, ClientConfig, ClientError, Cluster};
use strom_protocol::kafka::messages::{ApiKey, MetadataRequest};
use strom_protocol::{ErrorCode, Response};

fn config(bootstrap: &str) -> ClientConfig {
    ClientConfig::new([bootstrap])
        .with_client_id("strom-client-test")
        .with_request_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn metadata_admin_and_pipelining() {
    let mock = MockCluster::new(3).expect("mock cluster");
    mock.create_topic("events", 4, 3).expect("topic");
    let cluster = tokio::time::timeout(
        Duration::from_secs(10),
        Cluster::connect(config(&mock.bootstrap_servers())),
    )
    .await
    .expect("bounded")
    .expect("connect");
    let topic = cluster.topic("events").await.expect("topic metadata");
    assert_eq!(topic.partitions.len(), 4);
    assert!(topic
        .partitions
        .iter()
        .all(|partition| partition.leader.is_some()));

    let admin = AdminClient::new(cluster.clone(), Duration::from_secs(5));
    let description = admin.describe_cluster().await.expect("describe");
    assert_eq!(description.brokers.len(), 3);
    for spec in [OffsetSpec::Earliest, OffsetSpec::Latest] {
        let offset = admin
            .list_offset("events", 2, spec)
            .await
            .expect("list offsets");
        assert_eq!(offset.offset, 0, "{spec:?} of an empty partition");
    }

    // Many requests in flight on one connection, answered in order.
    let connection = cluster.any_connection().await.expect("connection");
    assert!(
        connection
            .api_version(ApiKey::Metadata)
            .expect("negotiated")
            >= 1
    );
    let pending: Vec<_> = (0..50)
        .map(|_| {
            connection
                .submit(
                    MetadataRequest::default()
                        .with_topics(Some(Vec::new()))
                        .into(),
                    Duration::from_secs(5),
                )
                .expect("submit")
        })
        .collect();
    for response in pending {
        assert!(matches!(response.await, Ok(Response::Metadata(_))));
    }

    let missing = cluster.topic("no-such-topic").await;
    assert!(
        matches!(
            missing,
            Err(ClientError::Broker {
                code: ErrorCode::UnknownTopicOrPartition
            })
        ),
        "{missing:?}"
    );
    cluster.close();
    drop(mock);
}

#[tokio::test]
async fn slow_broker_times_out_and_the_pool_reconnects() {
    let mock = MockCluster::new(1).expect("mock cluster");
    let cluster = Cluster::connect(
        config(&mock.bootstrap_servers()).with_request_timeout(Duration::from_millis(200)),
    )
    .await
    .expect("connect");
    mock.broker_round_trip_time(1, Duration::from_millis(500))
        .expect("rtt");
    let connection = cluster.broker_connection(1).await.expect("connection");
    let error = connection
        .send(MetadataRequest::default().with_topics(Some(Vec::new())))
        .await
        .expect_err("times out");
    assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
    assert!(connection.is_closed(), "a timed-out connection is closed");
    mock.broker_round_trip_time(1, Duration::ZERO).expect("rtt");
    let fresh = cluster.broker_connection(1).await.expect("reconnect");
    assert!(!fresh.is_closed());
    assert!(fresh
        .send(MetadataRequest::default().with_topics(Some(Vec::new())))
        .await
        .is_ok());
    cluster.close();
    drop(mock);
}

#[tokio::test]
async fn group_offsets_round_trip_through_the_coordinator() {
    let mock = MockCluster::new(3).expect("mock cluster");
    mock.create_topic("orders", 3, 1).expect("topic");
    let cluster = Cluster::connect(config(&mock.bootstrap_servers()))
        .await
        .expect("connect");
    let admin = AdminClient::new(cluster.clone(), Duration::from_secs(5));
    let result = tokio::time::timeout(Duration::from_secs(10), async {
        admin
            .alter_group_offsets("billing", "orders", &[(0, 42), (2, 7)])
            .await?;
        admin
            .list_group_offsets("billing", "orders", &[0, 1, 2])
            .await
    })
    .await
    .expect("bounded")
    .expect("offsets");
    assert_eq!(result.get(&0), Some(&42));
    assert_eq!(result.get(&1), Some(&-1), "no committed offset");
    assert_eq!(result.get(&2), Some(&7));
    cluster.close();
    drop(mock);
}
