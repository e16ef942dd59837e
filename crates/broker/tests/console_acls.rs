//! The console behind `strom.http.authentication=basic` on a broker with
//! the authorizer on: a SCRAM user created with AlterUserScramCredentials
//! logs in with HTTP Basic and sees through the console API only what its
//! ACLs let a Kafka client of the same principal see; a wrong password is
//! refused and counted; a super user sees everything.

use crate::common;

use std::net::SocketAddr;
use std::num::NonZeroU32;

use base64::Engine;
use bytes::Bytes;
use common::{config, wait_until, Client, TIMEOUT};
use strom_protocol::kafka::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use strom_protocol::kafka::messages::create_acls_request::AclCreation;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, CreateTopicsRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::sasl::scram::ScramMechanism;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Kafka's resource, pattern, operation and permission codes.
const TOPIC: i8 = 2;
const LITERAL: i8 = 3;
const DESCRIBE: i8 = 8;
const ALLOW: i8 = 3;

/// One HTTP/1.1 GET with Basic `credentials` (`user:password`) if any:
/// (status, the whole answer with its headers).
async fn get(address: SocketAddr, path: &str, credentials: Option<&str>) -> (u16, String) {
    let authorization = credentials.map_or(String::new(), |credentials| {
        let token = base64::engine::general_purpose::STANDARD.encode(credentials);
        format!("Authorization: Basic {token}\r\n")
    });
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: strom\r\n{authorization}Connection: close\r\n\r\n");
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("read");
        answer
    };
    let answer = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .expect("answer in time");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// The names `/api/topics` lists to `credentials`.
async fn listed_topics(address: SocketAddr, credentials: &str) -> Vec<String> {
    let (status, text) = get(address, "/api/topics", Some(credentials)).await;
    assert_eq!(status, 200, "{text}");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let value: serde_json::Value = serde_json::from_str(body.trim()).expect("JSON");
    value["topics"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|topic| topic["name"].as_str().map(str::to_owned))
        .collect()
}

async fn create_topics(client: &mut Client, names: &[&str]) {
    let topics = names
        .iter()
        .map(|name| {
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                .with_num_partitions(1)
                .with_replication_factor(1)
        })
        .collect();
    let request = CreateTopicsRequest::default().with_topics(topics);
    match client.send(Request::CreateTopics(request), 5).await {
        Response::CreateTopics(response) => {
            for topic in &response.topics {
                assert_eq!(topic.error_code, 0, "{topic:?}");
            }
        }
        other => panic!("not a CreateTopics response: {other:?}"),
    }
}

async fn set_password(client: &mut Client, user: &str, password: &str) {
    let mechanism = ScramMechanism::Sha512;
    let (salt, iterations) = (b"console-test-salt", 4096);
    let salted = mechanism.salted_password(
        password,
        salt,
        NonZeroU32::new(iterations).expect("not zero"),
    );
    let upsertion = ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(user.to_owned()))
        .with_mechanism(mechanism.code())
        .with_iterations(i32::try_from(iterations).expect("small"))
        .with_salt(Bytes::from_static(salt))
        .with_salted_password(Bytes::from(salted));
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
    match client
        .send(Request::AlterUserScramCredentials(request), 0)
        .await
    {
        Response::AlterUserScramCredentials(response) => {
            assert_eq!(response.results[0].error_code, 0, "{response:?}");
        }
        other => panic!("not an AlterUserScramCredentials response: {other:?}"),
    }
}

async fn allow_describe(client: &mut Client, user: &str, topic: &str) {
    let creation = AclCreation::default()
        .with_resource_type(TOPIC)
        .with_resource_name(StrBytes::from_string(topic.to_owned()))
        .with_resource_pattern_type(LITERAL)
        .with_principal(StrBytes::from_string(format!("User:{user}")))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(DESCRIBE)
        .with_permission_type(ALLOW);
    let request = CreateAclsRequest::default().with_creations(vec![creation]);
    match client.send(Request::CreateAcls(request), 3).await {
        Response::CreateAcls(response) => assert_eq!(response.results[0].error_code, 0),
        other => panic!("not a CreateAcls response: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_scram_user_what_its_acls_allow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(
        dir.path(),
        &[
            ("strom.metrics.listener", "http://127.0.0.1:0"),
            ("strom.http.authentication", "basic"),
            ("strom.authorizer.enable", "true"),
            // The operator's PLAINTEXT connection, and the console's admin.
            ("super.users", "User:ANONYMOUS;User:admin"),
            ("offsets.topic.num.partitions", "1"),
        ],
    );
    let broker = strom_broker::start(config).await.expect("broker starts");
    let address = broker.metrics_address().expect("an HTTP listener");
    let mut operator = Client::connect(&broker, "operator").await;
    create_topics(&mut operator, &["visible", "hidden"]).await;
    set_password(&mut operator, "alice", "alice-secret").await;
    set_password(&mut operator, "admin", "admin-secret").await;
    allow_describe(&mut operator, "alice", "visible").await;

    let (status, text) = get(address, "/api/topics", None).await;
    assert_eq!(status, 401, "{text}");
    assert!(
        text.contains("www-authenticate: Basic realm=\"strom\""),
        "{text}"
    );
    let (status, _) = get(address, "/api/topics", Some("alice:wrong")).await;
    assert_eq!(status, 401);
    let (status, text) = get(address, "/metrics", None).await;
    assert_eq!(status, 200, "metrics need no credentials by default");
    assert!(
        text.contains("strom_http_authentication_failures_total 1"),
        "{text}"
    );

    wait_until("alice sees the topic she may describe", || async {
        listed_topics(address, "alice:alice-secret").await == ["visible"]
    })
    .await;
    let (status, _) = get(address, "/api/topics/hidden", Some("alice:alice-secret")).await;
    assert_eq!(status, 403);
    let records = "/api/topics/visible/records?partition=0";
    let (status, _) = get(address, records, Some("alice:alice-secret")).await;
    assert_eq!(status, 403, "DESCRIBE does not let alice read");

    let everything = listed_topics(address, "admin:admin-secret").await;
    for topic in ["visible", "hidden"] {
        assert!(
            everything.iter().any(|name| name == topic),
            "{everything:?}"
        );
    }
    let (status, text) = get(address, records, Some("admin:admin-secret")).await;
    assert_eq!(status, 200, "{text}");
    broker.shutdown().await;
}
