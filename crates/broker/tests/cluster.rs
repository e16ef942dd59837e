//! Brokers of one cluster in one process: three `broker,controller` nodes
//! and a broker-only observer, talking over 127.0.0.1 as separate
//! processes would.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{free_port, sample, wait_until, Client};
use strom_broker::{BrokerConfig, RunningBroker};
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::{
    CreateTopicsRequest, InitProducerIdRequest, MetadataRequest, MetadataResponse, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";
pub(crate) struct Ports {
    voters: String,
    controller: BTreeMap<u32, u16>,
}

pub(crate) fn ports(voters: u32) -> Ports {
    let controller: BTreeMap<u32, u16> = (1..=voters).map(|id| (id, free_port())).collect();
    let voters = controller
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    Ports { voters, controller }
}

pub(crate) fn node_config(
    dir: &std::path::Path,
    id: u32,
    ports: &Ports,
    roles: &str,
) -> BrokerConfig {
    let mut listeners = "PLAINTEXT://127.0.0.1:0".to_owned();
    if let Some(port) = ports.controller.get(&id) {
        listeners.push_str(&format!(",CONTROLLER://127.0.0.1:{port}"));
    }
    let pairs: Vec<(String, String)> = vec![
        ("process.roles".into(), roles.into()),
        ("node.id".into(), id.to_string()),
        ("controller.quorum.voters".into(), ports.voters.clone()),
        ("listeners".into(), listeners),
        ("controller.listener.names".into(), "CONTROLLER".into()),
        ("inter.broker.listener.name".into(), "PLAINTEXT".into()),
        ("strom.cluster.id".into(), CLUSTER_ID.into()),
        (
            "log.dirs".into(),
            dir.join(format!("node-{id}")).display().to_string(),
        ),
        ("offsets.topic.num.partitions".into(), "3".into()),
        ("broker.heartbeat.interval.ms".into(), "500".into()),
        ("broker.session.timeout.ms".into(), "6000".into()),
        ("strom.metrics.listener".into(), "http://127.0.0.1:0".into()),
    ];
    let map: BTreeMap<String, String> = pairs.into_iter().collect();
    BrokerConfig::from_map(&map).expect("valid config").0
}

async fn metadata(broker: &RunningBroker, topics: Option<Vec<&str>>) -> MetadataResponse {
    let request = MetadataRequest::default().with_topics(topics.map(|names| {
        names
            .into_iter()
            .map(|name| {
                strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
            })
            .collect()
    }));
    let mut client = Client::connect(broker, "cluster-test").await;
    match client.send(Request::Metadata(request), 9).await {
        Response::Metadata(response) => response,
        other => panic!("not a Metadata response: {other:?}"),
    }
}
pub(crate) async fn start_all(configs: Vec<BrokerConfig>) -> Vec<RunningBroker> {
    // The voters start together: each waits for the quorum to register.
    let handles: Vec<_> = configs
        .into_iter()
        .map(|config| tokio::spawn(strom_broker::broker::start(config)))
        .collect();
    let mut brokers = Vec::new();
    for handle in handles {
        brokers.push(handle.await.expect("join").expect("started"));
    }
    brokers
}

/// The broker's Prometheus exposition.
async fn scrape(broker: &RunningBroker) -> String {
    http_get(broker, "/metrics").await
}

/// The answer (headers and body) to `GET path` on the metrics listener.
async fn http_get(broker: &RunningBroker, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = broker.metrics_address().expect("a metrics listener");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: strom\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(common::TIMEOUT, stream.read_to_end(&mut answer))
        .await
        .expect("in time")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

async fn init_producer_id(broker: &RunningBroker) -> i64 {
    let mut client = Client::connect(broker, "cluster-test").await;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(strom_protocol::kafka::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    match client.send(Request::InitProducerId(request), 4).await {
        Response::InitProducerId(response) => {
            assert_eq!(response.error_code, 0, "InitProducerId refused");
            response.producer_id.0
        }
        other => panic!("not an InitProducerId response: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_of_one_cluster_share_metadata_commands_and_producer_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ports = ports(3);
    let configs = (1..=3)
        .map(|id| node_config(dir.path(), id, &ports, "broker,controller"))
        .collect();
    let brokers = start_all(configs).await;

    // Every broker lists the three.
    for broker in &brokers {
        wait_until("every broker lists three brokers", || async {
            metadata(broker, Some(vec![])).await.brokers.len() == 3
        })
        .await;
    }

    // CreateTopics sent to the second broker, whichever is active.
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("spread")))
        .with_num_partitions(6)
        .with_replication_factor(3);
    let mut client = Client::connect(&brokers[1], "cluster-test").await;
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(10_000);
    match client.send(Request::CreateTopics(request), 5).await {
        Response::CreateTopics(response) => {
            assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0]);
        }
        other => panic!("not a CreateTopics response: {other:?}"),
    }
    for broker in &brokers {
        wait_until("every broker shows the topic", || async {
            metadata(broker, Some(vec!["spread"])).await.topics[0].error_code == 0
        })
        .await;
        let response = metadata(broker, Some(vec!["spread"])).await;
        let partitions = &response.topics[0].partitions;
        assert_eq!(partitions.len(), 6);
        let mut leaders = BTreeSet::new();
        for partition in partitions {
            let replicas: BTreeSet<i32> = partition.replica_nodes.iter().map(|id| id.0).collect();
            assert_eq!(
                replicas,
                BTreeSet::from([1, 2, 3]),
                "spread over the brokers"
            );
            leaders.insert(partition.leader_id.0);
        }
        assert_eq!(leaders.len(), 3, "leaders spread: {leaders:?}");
    }

    // One active controller among the three; it reports every voter's
    // copy of the metadata log. (Scraped again if an election on a busy
    // machine moved it between two scrapes.)
    let mut active = Vec::new();
    let mut lags_reported = false;
    for _ in 0..20 {
        active.clear();
        lags_reported = true;
        for (index, broker) in brokers.iter().enumerate() {
            let text = scrape(broker).await;
            assert!(sample(&text, "kafka_server_raft_metrics_current_epoch")
                .is_some_and(|epoch| epoch >= 1.0));
            if sample(
                &text,
                "kafka_controller_kafkacontroller_activecontrollercount",
            ) == Some(1.0)
            {
                active.push(index);
                lags_reported &= (1..=3).all(|node| {
                    let series = format!(
                        "kafka_server_raft_metrics_replica_lag{{node=\"{node}\",role=\"voter\"}}"
                    );
                    sample(&text, &series).is_some()
                });
            }
        }
        if active.len() == 1 && lags_reported {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(active.len(), 1, "exactly one active controller: {active:?}");
    assert!(
        lags_reported,
        "the active controller reports each voter's lag"
    );
    // The console's cluster view shows the quorum.
    let answer = http_get(&brokers[0], "/api/cluster").await;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let cluster: serde_json::Value = serde_json::from_str(body).expect("JSON");
    let voters = &cluster["controller"]["quorum"]["voters"];
    assert_eq!(voters.as_array().map(Vec::len), Some(3), "{cluster}");

    // Producer ids come from the quorum: no two brokers hand out the same.
    let mut ids = BTreeSet::new();
    for broker in &brokers {
        for _ in 0..3 {
            assert!(
                ids.insert(init_producer_id(broker).await),
                "an id issued twice: {ids:?}"
            );
        }
    }

    // A broker-only node joins as an observer, sees the topic, and its
    // commands reach the active controller too.
    let observer = strom_broker::broker::start(node_config(dir.path(), 4, &ports, "broker"))
        .await
        .expect("observer started");
    wait_until("the observer shows the topic", || async {
        metadata(&observer, Some(vec!["spread"])).await.topics[0].error_code == 0
    })
    .await;
    assert!(ids.insert(init_producer_id(&observer).await));
    wait_until("every broker lists four brokers", || async {
        metadata(&brokers[0], Some(vec![])).await.brokers.len() == 4
    })
    .await;

    observer.shutdown().await;
    for broker in brokers {
        broker.shutdown().await;
    }
}
