//! `strom users` and `strom acls`, run as the real binary against an
//! in-process broker with the authorizer on (the PLAINTEXT listener's
//! `User:ANONYMOUS` is the super user here).

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use common::{run_strom, Run};

fn broker() -> SocketAddr {
    static BROKER: OnceLock<SocketAddr> = OnceLock::new();
    *BROKER.get_or_init(|| {
        let directory = tempfile::Builder::new()
            .prefix("strom-tools-security")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("tempdir")
            .keep();
        let mut settings = BTreeMap::new();
        for (key, value) in [
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            ("offsets.topic.num.partitions", "1"),
            ("strom.authorizer.enable", "true"),
            ("super.users", "User:ANONYMOUS"),
        ] {
            settings.insert(key.to_owned(), value.to_owned());
        }
        settings.insert(
            "log.dirs".to_owned(),
            directory.join("data").display().to_string(),
        );
        let (config, _) = strom_broker::BrokerConfig::from_map(&settings).expect("valid");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let broker = strom_broker::start(config).await.expect("broker starts");
                sender.send(broker.local_addresses()[0]).expect("report");
                std::future::pending::<()>().await;
                drop(broker);
            });
        });
        receiver
            .recv_timeout(Duration::from_secs(30))
            .expect("broker started")
    })
}

fn strom(args: &[&str]) -> Run {
    let bootstrap = broker().to_string();
    let mut full = vec!["--bootstrap-server", bootstrap.as_str()];
    full.extend_from_slice(args);
    run_strom(&full, "")
}

#[test]
fn users_set_describe_delete() {
    strom(&["users", "set", "alice", "--password", "alice-secret"]).ok();
    strom(&[
        "users",
        "set",
        "alice",
        "--password",
        "other",
        "--mechanism",
        "SCRAM-SHA-256",
        "--iterations",
        "4096",
    ])
    .ok();
    let described = strom(&["users", "describe", "alice"]).ok();
    assert!(
        described.contains("SCRAM-SHA-256 (iterations=4096)")
            && described.contains("SCRAM-SHA-512 (iterations=8192)"),
        "{described}"
    );
    strom(&["users", "delete", "alice", "--mechanism", "SCRAM-SHA-256"]).ok();
    let described = strom(&["users", "describe"]).ok();
    assert!(!described.contains("SCRAM-SHA-256"), "{described}");
    strom(&["users", "delete", "nobody"]).fails_with(1, "RESOURCE_NOT_FOUND");
    strom(&[
        "users",
        "set",
        "bob",
        "--password",
        "x",
        "--iterations",
        "10",
    ])
    .fails_with(1, "UNACCEPTABLE_CREDENTIAL");
}

#[test]
fn acls_add_list_remove() {
    strom(&[
        "acls",
        "add",
        "--allow",
        "--principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "orders",
    ])
    .ok();
    strom(&[
        "acls",
        "add",
        "--deny",
        "--principal",
        "User:bob",
        "--operation",
        "Write",
        "--topic",
        "logs-",
        "--prefixed",
    ])
    .ok();
    let listed = strom(&["acls", "list"]).ok();
    assert!(listed.contains("Topic orders (LITERAL):"), "{listed}");
    assert!(
        listed.contains("User:alice ALLOW Read from host *"),
        "{listed}"
    );
    assert!(listed.contains("Topic logs- (PREFIXED):"), "{listed}");
    assert!(listed.contains("User:bob DENY Write"), "{listed}");
    let removed = strom(&["acls", "remove", "--topic", "orders", "--operation", "Read"]).ok();
    assert!(removed.contains("Removed 1 ACL binding(s)."), "{removed}");
    let listed = strom(&["acls", "list", "--topic", "orders"]).ok();
    assert!(!listed.contains("Read"), "{listed}");
    assert!(listed.contains("Describe"), "{listed}");
    strom(&[
        "acls",
        "add",
        "--principal",
        "User:x",
        "--operation",
        "Fly",
        "--topic",
        "t",
    ])
    .fails_with(2, "--operation");
}
