use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::fake_broker::{FakeBroker, Grant};
use crate::http::access::percent_decode;
use crate::view::Viewer;
use strom_protocol::acl::CLUSTER_NAME;

fn get(path: &str, query: Option<&str>) -> Option<Value> {
    let broker = FakeBroker::default();
    let access = Access::new(&broker, None);
    match api(&access, &History::default(), path, query) {
        Answer::Json(value) => Some(value),
        // Unknown or malformed: no body either way.
        Answer::NotFound | Answer::BadRequest(_) => None,
        Answer::Forbidden => panic!("nothing is refused without a viewer"),
        Answer::Raw { .. } => panic!("no raw path is asked for"),
    }
}

/// What `user` gets for `path` from the fake broker with `grants`, and a
/// history of one sample.
fn get_as(user: &str, grants: &[Grant], path: &str, query: Option<&str>) -> Answer {
    let broker = FakeBroker {
        grants: grants.to_vec(),
        ..FakeBroker::default()
    };
    let viewer = Viewer {
        user: user.to_owned(),
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let access = Access::new(&broker, Some(&viewer));
    let history = History::default();
    history.record(&broker);
    api(&access, &history, path, query)
}

fn json_as(user: &str, grants: &[Grant], path: &str) -> Value {
    match get_as(user, grants, path, None) {
        Answer::Json(value) => value,
        other => panic!("{path} as {user}: {other:?}"),
    }
}

const DESCRIBE_ORDERS: Grant = ("alice", operation::DESCRIBE, resource::TOPIC, "orders");
const READ_ORDERS: Grant = ("alice", operation::READ, resource::TOPIC, "orders");
const DESCRIBE_READERS: Grant = ("alice", operation::DESCRIBE, resource::GROUP, "readers");

#[test]
fn a_viewer_without_describe_sees_no_topic() {
    let topics = json_as("bob", &[], "/api/topics");
    assert_eq!(topics["topics"], json!([]));
    let cluster = json_as("bob", &[], "/api/cluster");
    assert_eq!(cluster["topics"], 0);
    assert_eq!(cluster["partitions"], 0);
    assert_eq!(
        cluster["brokers"][0]["id"], 1,
        "DescribeCluster shows brokers"
    );
    assert_eq!(
        cluster["controller"]["metadata_log_end_offset"],
        Value::Null
    );
    assert_eq!(
        get_as("bob", &[], "/api/topics/orders", None),
        Answer::Forbidden
    );
    assert_eq!(
        get_as("bob", &[], "/api/topics/nope", None),
        Answer::Forbidden,
        "a topic's existence is not told to who may not describe it"
    );
    let history = json_as("bob", &[], "/api/history");
    assert_eq!(history["samples"][0]["topics"], json!({}));
    assert_eq!(history["samples"][0]["lag"], json!({}));
}

#[test]
fn describe_shows_a_topic_but_records_need_read() {
    let topics = json_as("alice", &[DESCRIBE_ORDERS], "/api/topics");
    assert_eq!(topics["topics"][0]["name"], "orders");
    assert_eq!(
        topics["topics"][0]["size_bytes"],
        Value::Null,
        "DescribeLogDirs needs the cluster"
    );
    let topic = json_as("alice", &[DESCRIBE_ORDERS], "/api/topics/orders");
    assert_eq!(topic["partitions"][0]["high_watermark"], 10);
    assert_eq!(topic["configs"], json!({}), "configs need DESCRIBE_CONFIGS");
    assert_eq!(
        get_as(
            "alice",
            &[DESCRIBE_ORDERS],
            "/api/topics/orders/records",
            None
        ),
        Answer::Forbidden
    );
    assert_eq!(
        get_as(
            "bob",
            &[DESCRIBE_ORDERS],
            "/api/topics/orders/records",
            None
        ),
        Answer::Forbidden,
        "another user's grant does not count"
    );
    let records = get_as("alice", &[READ_ORDERS], "/api/topics/orders/records", None);
    assert!(matches!(records, Answer::Json(ref body) if body["high_watermark"] == 10));
    let history = json_as("alice", &[READ_ORDERS], "/api/history");
    // A zero baseline one interval before the first sample, then the sample.
    assert_eq!(history["samples"][0]["topics"]["orders"]["messages_in"], 0);
    assert_eq!(history["samples"][1]["topics"]["orders"]["messages_in"], 10);
    let interval = SAMPLE_INTERVAL.as_millis() as i64;
    assert_eq!(
        history["samples"][1]["time_ms"].as_i64().unwrap()
            - history["samples"][0]["time_ms"].as_i64().unwrap(),
        interval
    );
}

#[test]
fn groups_need_describe_and_show_the_lag_of_described_topics() {
    assert_eq!(
        json_as("alice", &[READ_ORDERS], "/api/groups")["groups"],
        json!([])
    );
    assert_eq!(
        get_as("alice", &[READ_ORDERS], "/api/groups/readers", None),
        Answer::Forbidden
    );
    let groups = json_as("alice", &[DESCRIBE_READERS], "/api/groups");
    assert_eq!(groups["groups"][0]["group"], "readers");
    assert_eq!(
        groups["groups"][0]["lag"], 0,
        "no topic described, no lag shown"
    );
    let group = json_as("alice", &[DESCRIBE_READERS], "/api/groups/readers");
    assert_eq!(group["offsets"], json!([]));
    let both = [DESCRIBE_READERS, DESCRIBE_ORDERS];
    assert_eq!(
        json_as("alice", &both, "/api/groups")["groups"][0]["lag"],
        3
    );
    let history = json_as("alice", &both, "/api/history");
    assert_eq!(history["samples"][1]["lag"]["readers"], 3);
}

#[test]
fn transactions_and_the_quorum_need_their_own_grants() {
    assert_eq!(
        json_as("alice", &[], "/api/transactions")["transactions"],
        json!([])
    );
    let grant = (
        "alice",
        operation::DESCRIBE,
        resource::TRANSACTIONAL_ID,
        "payments-app",
    );
    let listed = json_as("alice", &[grant], "/api/transactions");
    assert_eq!(
        listed["transactions"][0]["transactional_id"],
        "payments-app"
    );
    let cluster_grant = (
        "alice",
        operation::DESCRIBE,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    let cluster = json_as("alice", &[cluster_grant], "/api/cluster");
    assert_eq!(cluster["controller"]["metadata_log_end_offset"], 42);
}

#[test]
fn a_super_user_sees_everything() {
    let topics = json_as("root", &[], "/api/topics");
    assert_eq!(topics["topics"][0]["size_bytes"], 100);
    let topic = json_as("root", &[], "/api/topics/orders");
    assert_eq!(topic["configs"]["min.insync.replicas"], "2");
    assert_eq!(
        topic["config_entries"],
        json!([{ "name": "min.insync.replicas", "value": "2", "source": "DYNAMIC_TOPIC_CONFIG" }])
    );
    assert!(matches!(
        get_as("root", &[], "/api/topics/orders/records", None),
        Answer::Json(_)
    ));
    assert_eq!(json_as("root", &[], "/api/groups")["groups"][0]["lag"], 3);
    assert_eq!(json_as("root", &[], "/api/cluster")["topics"], 1);
    assert_eq!(
        get_as("root", &[], "/api/topics/nope", None),
        Answer::NotFound
    );
}

#[test]
fn the_api_answers_from_the_view() {
    let cluster = get("/api/cluster", None).expect("cluster");
    assert_eq!(cluster["cluster_id"], "fake-cluster");
    assert_eq!(cluster["partitions"], 2);
    assert_eq!(cluster["brokers"][1]["fenced"], true);
    assert_eq!(
        cluster["brokers"][0]["endpoints"][0],
        "PLAINTEXT://127.0.0.1:9092"
    );
    assert_eq!(
        cluster["controller"]["mode"],
        "embedded single-node controller"
    );
    assert_eq!(cluster["controller"]["metadata_log_end_offset"], 42);
    let topics = get("/api/topics", None).expect("topics");
    assert_eq!(topics["topics"][0]["size_bytes"], 100);
    assert_eq!(topics["topics"][0]["messages_in"], 10);
    let topic = get("/api/topics/orders", None).expect("topic");
    assert_eq!(topic["partitions"][0]["high_watermark"], 10);
    assert_eq!(topic["partitions"][1]["high_watermark"], Value::Null);
    assert_eq!(topic["configs"]["min.insync.replicas"], "2");
    let records = get("/api/topics/orders/records", Some("partition=0")).expect("records");
    assert_eq!(records["high_watermark"], 10);
    assert_eq!(records["records"], json!([]));
    let groups = get("/api/groups", None).expect("groups");
    assert_eq!(groups["groups"][0]["lag"], 3);
    let group = get("/api/groups/readers", None).expect("group");
    assert_eq!(group["state"], "Stable");
    assert_eq!(group["offsets"][1]["lag"], Value::Null);
    let transactions = get("/api/transactions", None).expect("transactions");
    assert_eq!(transactions["transactions"][0]["state"], "Ongoing");
    assert_eq!(transactions["transactions"][0]["producer_id"], 4000);
    let topic = get("/api/topics/orders", None).expect("topic");
    assert_eq!(topic["partitions"][0]["last_stable_offset"], 8);
    assert_eq!(topic["partitions"][0]["open_transactions"], 1);
    for missing in [
        "/api/topics/nope",
        "/api/topics/orders/records?partition=1",
        "/api/groups/nope%zz",
        "/api/nothing",
    ] {
        let (path, query) = missing
            .split_once('?')
            .map_or((missing, None), |(path, query)| (path, Some(query)));
        assert_eq!(get(path, query), None, "{missing}");
    }
}

#[test]
fn path_segments_are_percent_decoded() {
    assert_eq!(percent_decode("my%20group").as_deref(), Some("my group"));
    assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
    assert_eq!(percent_decode("bad%2"), None);
    assert_eq!(percent_decode("bad%zz"), None);
    assert_eq!(percent_decode("%ff"), None);
}
