//! A cluster whose brokers talk to each other over SASL_SSL and to the
//! controllers over SSL, both with `ssl.client.auth=required`: three
//! `broker,controller` nodes in one process with one SASL_SSL listener
//! (SCRAM-SHA-512, the inter-broker listener, also used by the test's
//! clients) and an SSL controller listener. Certificates are made by
//! rcgen; the brokers read them from files.
//!
//! A topic with replication factor 3 and `min.insync.replicas=2` takes
//! `acks=all` records and every follower's log gets them with the ISR at
//! three. Node 3 restarted with a wrong inter-broker password is refused
//! by the leaders: on a topic created afterwards it leaves the ISR of the
//! partitions others lead, gets none of their records and never rejoins,
//! while `acks=all` writes go on.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use strom_broker::{BrokerConfig, RunningBroker};
use strom_client::admin::{AdminClient, NewTopic};
use strom_client::{ClientConfig, ClientError, Cluster};
use strom_controller::controller::ScramChange;
use strom_controller::security_records::UserScramCredentialRecord;
use strom_producer::{Producer, ProducerConfig, ProducerRecord};
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism};
use strom_protocol::ErrorCode;
use strom_storage::TopicPartition;

const CLUSTER_ID: &str = "SW50ZXJCcm9rZXJTZWMx";
const TOPIC: &str = "secured";
/// The topic created once node 3 runs with a wrong password.
const LATER_TOPIC: &str = "secured-later";
const BROKER_PASSWORD: &str = "broker-secret";
const ADMIN_PASSWORD: &str = "admin-secret";
/// How long any one wait of the test may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// The CA and one certificate (for 127.0.0.1) every node and the test's
/// clients present, in files.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    keystore: PathBuf,
    certificate: PathBuf,
    key: PathBuf,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "cluster CA");
    let ca_key = KeyPair::generate().expect("key");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let mut node_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    node_params
        .distinguished_name
        .push(DnType::CommonName, "strom-node");
    node_params.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
    let node_key = KeyPair::generate().expect("key");
    let node = node_params
        .signed_by(&node_key, &ca, &ca_key)
        .expect("node certificate");
    let dir = tempfile::tempdir().expect("dir");
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("written");
        path
    };
    Pki {
        ca: write("ca.pem", ca.pem()),
        keystore: write(
            "node-keystore.pem",
            format!("{}{}", node.pem(), node_key.serialize_pem()),
        ),
        certificate: write("node.pem", node.pem()),
        key: write("node-key.pem", node_key.serialize_pem()),
        _dir: dir,
    }
}

fn jaas(password: &str) -> String {
    format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"broker\" password=\"{password}\";"
    )
}

fn node_config(
    dir: &Path,
    pki: &Pki,
    id: u32,
    ports: &BTreeMap<u32, u16>,
    password: &str,
) -> BrokerConfig {
    let voters = ports
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let pairs = [
        ("process.roles", "broker,controller".to_owned()),
        ("node.id", id.to_string()),
        ("controller.quorum.voters", voters),
        (
            "listeners",
            format!(
                "INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:{}",
                ports[&id]
            ),
        ),
        (
            "listener.security.protocol.map",
            "INTERNAL:SASL_SSL,CONTROLLER:SSL".to_owned(),
        ),
        ("inter.broker.listener.name", "INTERNAL".to_owned()),
        ("controller.listener.names", "CONTROLLER".to_owned()),
        ("ssl.keystore.location", pki.keystore.display().to_string()),
        ("ssl.truststore.location", pki.ca.display().to_string()),
        ("ssl.client.auth", "required".to_owned()),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512".to_owned()),
        (
            "sasl.mechanism.inter.broker.protocol",
            "SCRAM-SHA-512".to_owned(),
        ),
        (
            "listener.name.internal.scram-sha-512.sasl.jaas.config",
            jaas(password),
        ),
        ("strom.authorizer.enable", "true".to_owned()),
        ("super.users", "User:broker;User:admin".to_owned()),
        ("strom.cluster.id", CLUSTER_ID.to_owned()),
        (
            "log.dirs",
            dir.join(format!("node-{id}")).display().to_string(),
        ),
        ("replica.lag.time.max.ms", "1500".to_owned()),
        ("replica.fetch.wait.max.ms", "200".to_owned()),
        ("replica.fetch.backoff.ms", "100".to_owned()),
        ("broker.session.timeout.ms", "6000".to_owned()),
        ("broker.heartbeat.interval.ms", "500".to_owned()),
        ("offsets.topic.num.partitions", "1".to_owned()),
    ];
    let map: BTreeMap<String, String> = pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    BrokerConfig::from_map(&map).expect("valid config").0
}

/// Writes SCRAM-SHA-512 credentials through the metadata log (as
/// `kafka-storage format --add-scram` or AlterUserScramCredentials would).
async fn add_users(broker: &RunningBroker, users: &[(&str, &str)]) {
    let mechanism = ScramMechanism::Sha512;
    let changes = users
        .iter()
        .map(|(user, password)| {
            let credential =
                ScramCredential::from_password(mechanism, password, b"salt", 4096).expect("valid");
            ScramChange::Upsert(UserScramCredentialRecord {
                name: (*user).to_owned(),
                mechanism: i32::from(mechanism.code()),
                salt: credential.salt,
                stored_key: credential.stored_key,
                server_key: credential.server_key,
                iterations: credential.iterations,
            })
        })
        .collect();
    let applied = broker
        .controller()
        .alter_scram_credentials(changes)
        .await
        .expect("written");
    assert!(applied.iter().all(|applied| *applied));
}

/// Whether `broker`'s metadata image holds every user's credential (a
/// broker that is not the active controller applies the log a little
/// later).
fn knows_users(broker: &RunningBroker, users: &[(&str, &str)]) -> bool {
    let image = broker.controller().image();
    let code = i32::from(ScramMechanism::Sha512.code());
    users
        .iter()
        .all(|(user, _)| image.security().scram_credential(user, code).is_some())
}

/// The client properties of the admin user over SASL_SSL with a client
/// certificate.
fn client_properties(broker: &RunningBroker, pki: &Pki) -> Vec<(&'static str, String)> {
    vec![
        ("bootstrap.servers", broker.local_addresses()[0].to_string()),
        ("security.protocol", "SASL_SSL".to_owned()),
        ("ssl.ca.location", pki.ca.display().to_string()),
        (
            "ssl.certificate.location",
            pki.certificate.display().to_string(),
        ),
        ("ssl.key.location", pki.key.display().to_string()),
        ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
        ("sasl.username", "admin".to_owned()),
        ("sasl.password", ADMIN_PASSWORD.to_owned()),
    ]
}

fn borrowed<'a>(properties: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    properties.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

async fn create_topic(broker: &RunningBroker, pki: &Pki, name: &str, partitions: i32) {
    let properties = client_properties(broker, pki);
    let (config, _) = ClientConfig::from_properties(borrowed(&properties)).expect("valid");
    let cluster = Cluster::connect(config).await.expect("admin connects");
    let admin = AdminClient::new(cluster, Duration::from_secs(10));
    let mut topic = NewTopic::new(name, partitions, 3);
    topic.configs = vec![("min.insync.replicas".to_owned(), "2".to_owned())];
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let mut outcomes = admin
            .create_topics(std::slice::from_ref(&topic), false)
            .await
            .expect("answered");
        // REQUEST_TIMED_OUT while the quorum elects a controller (node 3
        // may have been the active one) is retried, as Kafka clients do;
        // a retry may find the topic the timed-out attempt created.
        match outcomes.remove(name).expect("an outcome") {
            Ok(()) => return,
            Err(ClientError::Broker {
                code: ErrorCode::TopicAlreadyExists,
            }) => return,
            Err(ClientError::Broker {
                code: ErrorCode::RequestTimedOut,
            }) if Instant::now() < deadline => {}
            Err(other) => panic!("topic {name} not created: {other}"),
        }
    }
}

async fn produce(producer: &Producer, (topic, partition): (&str, i32), from: usize, count: usize) {
    let mut deliveries = Vec::new();
    for index in from..from + count {
        deliveries.push(
            producer
                .send(
                    ProducerRecord::new(topic, format!("record-{index}")).with_partition(partition),
                )
                .await,
        );
    }
    for delivery in deliveries {
        tokio::time::timeout(STEP_TIMEOUT, delivery)
            .await
            .expect("acknowledged in time")
            .expect("acknowledged with acks=all");
    }
}

/// A partition's ISR in `broker`'s metadata image.
fn isr(broker: &RunningBroker, (topic, partition): (&str, i32)) -> Vec<i32> {
    let image = broker.controller().image();
    let mut isr = image
        .topic_by_name(topic)
        .and_then(|found| found.partition(partition))
        .map(|partition| partition.isr.clone())
        .unwrap_or_default();
    isr.sort_unstable();
    isr
}

/// A partition's leader in `broker`'s metadata image.
fn leader(broker: &RunningBroker, (topic, partition): (&str, i32)) -> Option<i32> {
    broker
        .controller()
        .image()
        .topic_by_name(topic)
        .and_then(|found| found.partition(partition))
        .and_then(|found| found.leader)
}

/// The end offset of `broker`'s replica of a partition (0 while it hosts
/// none).
fn log_end(broker: &RunningBroker, (topic, partition): (&str, i32)) -> i64 {
    broker
        .replicas()
        .logs()
        .get(&TopicPartition::new(topic.to_owned(), partition))
        .map_or(0, |log| log.read().expect("log lock").log_end_offset())
}

async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + STEP_TIMEOUT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the voters together (each waits for the quorum to register).
async fn start_all(configs: Vec<BrokerConfig>) -> Vec<RunningBroker> {
    let mut starting = tokio::task::JoinSet::new();
    for (index, config) in configs.into_iter().enumerate() {
        starting.spawn(async move { (index, strom_broker::broker::start(config).await) });
    }
    let mut started: Vec<(usize, RunningBroker)> = Vec::new();
    while let Some(joined) = starting.join_next().await {
        let (index, broker) = joined.expect("join");
        started.push((index, broker.expect("started")));
    }
    started.sort_by_key(|(index, _)| *index);
    started.into_iter().map(|(_, broker)| broker).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_replicate_over_sasl_ssl_and_a_wrong_password_stays_out_of_the_isr() {
    let pki = pki();
    let dir = tempfile::tempdir().expect("tempdir");
    let ports: BTreeMap<u32, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let configs = (1..=3)
        .map(|id| node_config(dir.path(), &pki, id, &ports, BROKER_PASSWORD))
        .collect();
    // The nodes form the quorum and register over the SSL controller
    // listener; replication authenticates once the users exist.
    let mut brokers = start_all(configs).await;
    let users = [("broker", BROKER_PASSWORD), ("admin", ADMIN_PASSWORD)];
    add_users(&brokers[0], &users).await;
    wait_until("every broker knows the users", || {
        brokers.iter().all(|broker| knows_users(broker, &users))
    })
    .await;
    create_topic(&brokers[0], &pki, TOPIC, 1).await;
    let properties = client_properties(&brokers[0], &pki);
    let mut producer_properties = borrowed(&properties);
    producer_properties.push(("acks", "all"));
    let (config, _) = ProducerConfig::from_properties(producer_properties).expect("valid");
    let producer = Arc::new(Producer::new(config).await.expect("producer connects"));

    let first = (TOPIC, 0);
    produce(&producer, first, 0, 20).await;
    wait_until("every replica has the 20 records", || {
        brokers.iter().all(|broker| log_end(broker, first) == 20)
    })
    .await;
    assert_eq!(isr(&brokers[0], first), vec![1, 2, 3]);

    // Node 3 comes back with a wrong inter-broker password: it rejoins
    // the quorum (SSL, no SASL there) but leaders refuse its fetches.
    let third = brokers.pop().expect("node 3");
    third.shutdown().await;
    let config = node_config(dir.path(), &pki, 3, &ports, "wrong-password");
    brokers.push(
        strom_broker::broker::start(config)
            .await
            .expect("restarted"),
    );
    // A topic created now has node 3 among the replicas of each partition.
    // Where another node leads, node 3 leaves the ISR after
    // replica.lag.time.max.ms, gets no record and never comes back, while
    // acks=all writes go on.
    create_topic(&brokers[0], &pki, LATER_TOPIC, 3).await;
    let partitions: Vec<(&str, i32)> = (0..3).map(|partition| (LATER_TOPIC, partition)).collect();
    wait_until("the new partitions have leaders", || {
        partitions
            .iter()
            .all(|partition| leader(&brokers[0], *partition).is_some())
    })
    .await;
    let led_elsewhere: Vec<((&str, i32), i32)> = partitions
        .iter()
        .filter_map(|partition| {
            let leader = leader(&brokers[0], *partition)?;
            (leader != 3).then_some((*partition, leader))
        })
        .collect();
    assert!(!led_elsewhere.is_empty(), "three partitions, three leaders");
    for (partition, _) in &led_elsewhere {
        produce(&producer, *partition, 0, 10).await;
    }
    wait_until("node 3 is out of those partitions' ISR", || {
        led_elsewhere
            .iter()
            .all(|(partition, _)| !isr(&brokers[0], *partition).contains(&3))
    })
    .await;
    let watch_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < watch_until {
        for (partition, leader) in &led_elsewhere {
            let current = isr(&brokers[0], *partition);
            assert!(
                !current.contains(&3),
                "{partition:?}: node 3 rejoined {current:?}"
            );
            assert_eq!(
                log_end(&brokers[2], *partition),
                0,
                "node 3 fetched nothing"
            );
            let leader_index = usize::try_from(leader - 1).expect("a node id");
            assert_eq!(log_end(&brokers[leader_index], *partition), 10);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The first topic keeps serving acks=all writes as well.
    produce(&producer, first, 20, 5).await;

    producer.close(Duration::from_secs(5)).await;
    for broker in brokers {
        broker.shutdown().await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}
