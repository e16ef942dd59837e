//! The cluster's [`ControllerClient`]: commands sent to any node reach the
//! active controller over TCP; an observer follows the log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_clock::{SeededRandom, SystemClock};
use strom_controller::controller::{BrokerHeartbeatRequest, BrokerRegistrationRequest};
use strom_controller::error::RuntimeError;
use strom_controller::image::Endpoint;
use strom_controller::quorum::cluster::ClusterController;
use strom_controller::quorum::tcp::{serve, TcpTransport};
use strom_controller::quorum::{QuorumConfig, QuorumController};
use strom_controller::ControllerClient;
use tokio::task::JoinHandle;

use crate::support;

use support::request;

struct TcpCluster {
    _directory: tempfile::TempDir,
    voters: BTreeMap<u64, String>,
    clients: BTreeMap<u64, Arc<ClusterController>>,
    servers: BTreeMap<u64, JoinHandle<()>>,
}

const REQUEST_TIMEOUT: Duration = Duration::from_millis(2_000);

async fn start_node(
    id: u64,
    voters: &BTreeMap<u64, String>,
    directory: &std::path::Path,
    listener: tokio::net::TcpListener,
) -> (Arc<ClusterController>, JoinHandle<()>) {
    let config = QuorumConfig::new(id, voters.clone(), directory.join(id.to_string()));
    let node = QuorumController::start(
        config,
        Arc::new(TcpTransport::new()),
        Arc::new(SystemClock),
        Arc::new(SeededRandom::new(id)),
    )
    .await
    .expect("start");
    let server = tokio::spawn(serve(listener, Arc::clone(&node)));
    let client = Arc::new(ClusterController::new(
        node,
        voters.clone(),
        REQUEST_TIMEOUT,
    ));
    (client, server)
}

async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    (listener, address)
}

impl TcpCluster {
    async fn start() -> TcpCluster {
        let directory = tempfile::tempdir().expect("tempdir");
        let mut listeners = Vec::new();
        let mut voters = BTreeMap::new();
        for id in 1..=3u64 {
            let (listener, address) = bind().await;
            voters.insert(id, address);
            listeners.push((id, listener));
        }
        let mut clients = BTreeMap::new();
        let mut servers = BTreeMap::new();
        for (id, listener) in listeners {
            let (client, server) = start_node(id, &voters, directory.path(), listener).await;
            clients.insert(id, client);
            servers.insert(id, server);
        }
        TcpCluster {
            _directory: directory,
            voters,
            clients,
            servers,
        }
    }

    async fn active(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some((id, _)) = self
                .clients
                .iter()
                .find(|(_, client)| client.node().is_active())
            {
                return *id;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no active controller");
    }

    async fn kill(&mut self, id: u64) {
        if let Some(server) = self.servers.remove(&id) {
            server.abort();
        }
        if let Some(client) = self.clients.remove(&id) {
            client.node().shutdown().await;
        }
    }
}

/// Registers and unfences broker 100 through `client` (forwarded unless
/// `client` is the active controller's), so topics have a replica.
async fn register_broker(client: &ClusterController) {
    let reply = client
        .register_broker(BrokerRegistrationRequest {
            broker_id: 100,
            incarnation_id: uuid::Uuid::from_u128(100),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: None,
        })
        .await
        .expect("delivered")
        .expect("registered");
    let heartbeat = client
        .broker_heartbeat(BrokerHeartbeatRequest {
            broker_id: 100,
            broker_epoch: reply.broker_epoch,
            want_fence: false,
            want_shutdown: false,
        })
        .await
        .expect("delivered")
        .expect("accepted");
    assert!(!heartbeat.is_fenced);
}

async fn wait_for_topic(client: &ClusterController, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.image().topic_by_name(name).is_none() {
        assert!(Instant::now() < deadline, "{name} never reached the node");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create(client: &ClusterController, name: &str) -> Result<(), RuntimeError> {
    let outcomes = client.create_topics(request(name)).await?;
    assert_eq!(outcomes.len(), 1);
    assert!(outcomes[0].result.is_ok(), "{:?}", outcomes[0].result);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_sent_to_a_follower_or_an_observer_reach_the_active_controller() {
    let cluster = TcpCluster::start().await;
    let active = cluster.active().await;
    let follower = *cluster.voters.keys().find(|id| **id != active).unwrap();
    register_broker(&cluster.clients[&follower]).await;
    create(&cluster.clients[&follower], "via-follower")
        .await
        .expect("forwarded");
    for client in cluster.clients.values() {
        wait_for_topic(client, "via-follower").await;
    }

    // A node that is not a voter joins as an observer and follows the log.
    let directory = tempfile::tempdir().expect("tempdir");
    let (listener, address) = bind().await;
    let (observer, _server) = start_node(4, &cluster.voters, directory.path(), listener).await;
    observer.join_as_observer(address).await.expect("joined");
    wait_for_topic(&observer, "via-follower").await;
    create(&observer, "via-observer").await.expect("forwarded");
    for client in cluster.clients.values() {
        wait_for_topic(client, "via-observer").await;
    }
    wait_for_topic(&observer, "via-observer").await;

    let status = observer
        .describe_quorum()
        .await
        .expect("answered")
        .expect("a quorum");
    // (The active controller may have changed since the start on a busy
    // machine: the answer comes from whichever is active now.)
    assert!(status.is_active, "answered by the active controller");
    assert_eq!(status.leader, Some(status.node_id));
    assert!(cluster.voters.contains_key(&status.node_id));
    assert_eq!(
        status.voters.iter().map(|v| v.node_id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        status
            .observers
            .iter()
            .map(|o| o.node_id)
            .collect::<Vec<_>>(),
        [4]
    );
    assert_eq!(observer.quorum_voters(), cluster.voters);

    // The observer restarts on another port: it joins again and the log
    // follows it there.
    _server.abort();
    observer.node().shutdown().await;
    drop(observer);
    let (listener, address) = bind().await;
    let (observer, _server) = start_node(4, &cluster.voters, directory.path(), listener).await;
    observer
        .join_as_observer(address)
        .await
        .expect("joined again");
    create(&cluster.clients[&follower], "after-observer-restart")
        .await
        .expect("committed");
    wait_for_topic(&observer, "after-observer-restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waits_through_a_failover_and_times_out_without_a_majority() {
    let mut cluster = TcpCluster::start().await;
    let first = cluster.active().await;
    register_broker(&cluster.clients[&first]).await;
    cluster.kill(first).await;
    let survivor = *cluster.clients.keys().next().unwrap();
    let started = Instant::now();
    // Sent while the election is still on (or just over): it waits for the
    // new active controller rather than failing with NOT_CONTROLLER.
    let mut created = create(&cluster.clients[&survivor], "after-failover").await;
    while matches!(created, Err(RuntimeError::QuorumTimeout { .. }))
        && started.elapsed() < Duration::from_secs(20)
    {
        created = create(&cluster.clients[&survivor], "after-failover").await;
    }
    created.expect("committed by the new active controller");

    // Two of three voters gone: writes fail within the request timeout,
    // and nothing is applied.
    let other = *cluster.clients.keys().find(|id| **id != survivor).unwrap();
    cluster.kill(other).await;
    let started = Instant::now();
    let result = create(&cluster.clients[&survivor], "no-majority").await;
    let elapsed = started.elapsed();
    assert!(
        matches!(
            result,
            Err(RuntimeError::QuorumTimeout { .. } | RuntimeError::NoMajority)
        ),
        "{result:?}"
    );
    assert!(
        elapsed < REQUEST_TIMEOUT + Duration::from_millis(1_500),
        "took {elapsed:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(cluster.clients[&survivor]
        .image()
        .topic_by_name("no-majority")
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassignments_and_elections_sent_to_a_follower_reach_the_active_controller() {
    use strom_controller::controller::{ElectLeadersRequest, ElectionType, PartitionReassignment};
    use strom_controller::error::ControllerError;

    let cluster = TcpCluster::start().await;
    let active = cluster.active().await;
    let follower = *cluster.voters.keys().find(|id| **id != active).unwrap();
    let client = &cluster.clients[&follower];
    register_broker(client).await;
    create(client, "moved").await.expect("forwarded");
    let reassign = |target: Option<Vec<i32>>| PartitionReassignment {
        topic: "moved".into(),
        partition_index: 0,
        target_replicas: target,
    };
    let outcomes = client
        .alter_partition_reassignments(vec![
            reassign(Some(vec![100, 7])),
            reassign(None),
            reassign(Some(vec![100])),
        ])
        .await
        .expect("forwarded");
    assert!(
        matches!(
            outcomes[0].result,
            Err(ControllerError::InvalidReplicaAssignment { .. })
        ),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            outcomes[1].result,
            Err(ControllerError::NoReassignmentInProgress { .. })
        ),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[2].result, Ok(()));
    let ongoing = client
        .list_partition_reassignments(Some(vec![("moved".into(), 0)]))
        .await
        .expect("forwarded");
    assert!(ongoing.is_empty(), "{ongoing:?}");
    let elections = client
        .elect_leaders(ElectLeadersRequest {
            election_type: ElectionType::Preferred,
            partitions: Some(vec![("moved".into(), 0)]),
        })
        .await
        .expect("forwarded");
    assert!(
        matches!(
            elections[0].result,
            Err(ControllerError::ElectionNotNeeded { .. })
        ),
        "{elections:?}"
    );
}
