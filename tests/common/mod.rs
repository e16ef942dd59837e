//! What the in-process broker tests share: a broker on a free loopback port
//! with its data in a temporary directory.

use std::collections::BTreeMap;

use strom_broker::{BrokerConfig, RunningBroker};

/// A running broker, its data directory (removed on drop) and bootstrap
/// address.
pub struct TestBroker {
    /// Kept for the broker's lifetime.
    pub _dir: tempfile::TempDir,
    /// The broker.
    pub broker: RunningBroker,
    /// `host:port` of its first listener.
    pub bootstrap: String,
}

/// Starts a broker with `extra` settings on top of the listener and data
/// directory.
pub async fn start_broker(extra: &[(&str, &str)]) -> TestBroker {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut map = BTreeMap::new();
    map.insert("listeners".to_owned(), "PLAINTEXT://127.0.0.1:0".to_owned());
    map.insert("log.dirs".to_owned(), dir.path().display().to_string());
    for (key, value) in extra {
        map.insert((*key).to_owned(), (*value).to_owned());
    }
    let config = BrokerConfig::from_map(&map).expect("valid config").0;
    let broker = strom_broker::start(config).await.expect("broker starts");
    let bootstrap = broker.local_addresses()[0].to_string();
    TestBroker {
        _dir: dir,
        broker,
        bootstrap,
    }
}
