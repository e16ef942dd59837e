//! The client listener refuses connections until the broker can answer:
//! a cluster node waiting for its quorum has its controller listener up
//! (the quorum needs it) but refuses clients, then answers them once
//! started, at the port it registered.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use strom_broker::BrokerConfig;
use strom_protocol::kafka::messages::{ApiVersionsRequest, BrokerId, MetadataRequest};
use strom_protocol::messages::{Request, Response};
use tokio::net::TcpStream;

use crate::common;

use common::{free_port, Client};

const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

/// A `broker,controller` node of three voters, its client listener on
/// `client_port`.
fn voter_config(dir: &std::path::Path, id: u32, voters: &str, ports: (u16, u16)) -> BrokerConfig {
    let (client_port, controller_port) = ports;
    let pairs = [
        ("process.roles", "broker,controller".to_owned()),
        ("node.id", id.to_string()),
        ("controller.quorum.voters", voters.to_owned()),
        (
            "listeners",
            format!("PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}"),
        ),
        ("controller.listener.names", "CONTROLLER".to_owned()),
        ("inter.broker.listener.name", "PLAINTEXT".to_owned()),
        ("strom.cluster.id", CLUSTER_ID.to_owned()),
        (
            "log.dirs",
            dir.join(format!("node-{id}")).display().to_string(),
        ),
        ("offsets.topic.num.partitions", "3".to_owned()),
        ("broker.heartbeat.interval.ms", "500".to_owned()),
        ("broker.session.timeout.ms", "6000".to_owned()),
    ];
    let map: BTreeMap<String, String> = pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    BrokerConfig::from_map(&map).expect("valid config").0
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Whether a connection to `address` is refused.
async fn refused(address: SocketAddr) -> bool {
    match tokio::time::timeout(common::TIMEOUT, TcpStream::connect(address)).await {
        Ok(Err(error)) => error.kind() == std::io::ErrorKind::ConnectionRefused,
        Ok(Ok(_)) => false,
        Err(_) => panic!("connecting to {address} neither succeeded nor failed in time"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_waiting_for_its_quorum_refuses_clients_and_answers_them_once_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let voters = ports
        .iter()
        .zip(1..)
        .map(|((_, controller), id)| format!("{id}@127.0.0.1:{controller}"))
        .collect::<Vec<_>>()
        .join(",");
    let first = tokio::spawn(strom_broker::broker::start(voter_config(
        dir.path(),
        1,
        &voters,
        ports[0],
    )));
    // The quorum member listens at once (its peers must reach it) ...
    common::wait_until("node 1's controller listener accepts", || async {
        TcpStream::connect(loopback(ports[0].1)).await.is_ok()
    })
    .await;
    // ... while the client listener, bound already, refuses: without a
    // majority the node cannot register, let alone answer.
    for _ in 0..10 {
        assert!(
            refused(loopback(ports[0].0)).await,
            "a node that cannot answer must refuse connections"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !first.is_finished(),
        "node 1 cannot start without a majority"
    );

    let others: Vec<_> = (2..=3)
        .map(|id| {
            let config = voter_config(dir.path(), id, &voters, ports[id as usize - 1]);
            tokio::spawn(strom_broker::broker::start(config))
        })
        .collect();
    let mut brokers = vec![first.await.expect("join").expect("node 1 started")];
    for handle in others {
        brokers.push(handle.await.expect("join").expect("started"));
    }
    assert_eq!(brokers[0].local_addresses(), [loopback(ports[0].0)]);

    let mut client = Client::connect_to(loopback(ports[0].0), "late-listeners").await;
    let request = Request::ApiVersions(ApiVersionsRequest::default());
    let Response::ApiVersions(versions) = client.send(request, 0).await else {
        panic!("not an ApiVersions response");
    };
    assert_eq!(versions.error_code, 0);
    // Node 1 registered the port it listens on: another node's Metadata
    // sends clients there.
    let mut other = Client::connect(&brokers[1], "late-listeners").await;
    let Response::Metadata(metadata) = other
        .send(Request::Metadata(MetadataRequest::default()), 9)
        .await
    else {
        panic!("not a Metadata response");
    };
    let node_1 = metadata
        .brokers
        .iter()
        .find(|broker| broker.node_id == BrokerId(1))
        .expect("node 1 in the metadata");
    assert_eq!(node_1.port, i32::from(ports[0].0));
    for broker in brokers {
        broker.shutdown().await;
    }
}
