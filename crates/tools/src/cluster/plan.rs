//! The layout of a local cluster and each node's `server.properties`.
//!
//! Node `I` (from 1) of a cluster with base port `P` listens for clients on
//! `127.0.0.1:P+I-1` and, if it is one of the first `K` nodes (the
//! controller voters, `process.roles=broker,controller`), for the quorum on
//! `127.0.0.1:P+100+I-1`; the other nodes are brokers only. Every node
//! names the same voters and the same `strom.cluster.id`, and keeps its
//! data in `DIR/node-I/data`.

use std::path::{Path, PathBuf};

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::ToolError;

/// The most nodes a local cluster has.
pub const MAX_NODES: u8 = 9;
/// How far above the broker ports the controller ports start.
pub const CONTROLLER_PORT_OFFSET: u16 = 100;
/// The host every node listens on.
pub const HOST: &str = "127.0.0.1";
/// The name of each node's configuration file.
pub const SERVER_PROPERTIES: &str = "server.properties";
/// The name of each node's log file (its standard output and error).
pub const BROKER_LOG: &str = "broker.log";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterShape {
    /// Nodes, 1 to [`MAX_NODES`].
    pub nodes: u8,
    /// Controller voters among them: 1, 3 or 5, at most `nodes`.
    pub controllers: u8,
    /// The first node's broker port.
    pub base_port: u16,
}

impl ClusterShape {
    /// Checks the numbers; `controllers` defaults to 3, or 1 for fewer
    /// than 3 nodes.
    pub fn new(nodes: u8, controllers: Option<u8>, base_port: u16) -> Result<Self, ToolError> {
        if !(1..=MAX_NODES).contains(&nodes) {
            return Err(ToolError::InvalidArgument {
                what: "--nodes",
                text: nodes.to_string(),
                expected: "1 to 9 nodes",
            });
        }
        let controllers = controllers.unwrap_or(if nodes >= 3 { 3 } else { 1 });
        if ![1, 3, 5].contains(&controllers) || controllers > nodes {
            return Err(ToolError::InvalidArgument {
                what: "--controllers",
                text: controllers.to_string(),
                expected: "1, 3 or 5 controllers, at most --nodes",
            });
        }
        let highest =
            u32::from(base_port) + u32::from(CONTROLLER_PORT_OFFSET) + u32::from(nodes) - 1;
        if base_port == 0 || highest > u32::from(u16::MAX) {
            return Err(ToolError::InvalidArgument {
                what: "--base-port",
                text: base_port.to_string(),
                expected: "a port from 1 that leaves room for the nodes' ports (base + 100 + nodes - 1 <= 65535)",
            });
        }
        Ok(ClusterShape {
            nodes,
            controllers,
            base_port,
        })
    }

    /// Node `node_id`'s broker port.
    pub fn broker_port(&self, node_id: u8) -> u16 {
        debug_assert!((1..=self.nodes).contains(&node_id));
        self.base_port + u16::from(node_id) - 1
    }

    /// Node `node_id`'s controller port, if it is a voter.
    pub fn controller_port(&self, node_id: u8) -> Option<u16> {
        (node_id <= self.controllers)
            .then(|| self.base_port + CONTROLLER_PORT_OFFSET + u16::from(node_id) - 1)
    }

    /// `controller.quorum.voters`: `1@127.0.0.1:P+100,2@...`.
    pub fn quorum_voters(&self) -> String {
        (1..=self.controllers)
            .filter_map(|node_id| {
                let port = self.controller_port(node_id)?;
                Some(format!("{node_id}@{HOST}:{port}"))
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `server.properties` of node `node_id`, with its data in
    /// `data_dir`.
    pub fn server_properties(&self, node_id: u8, cluster_id: &str, data_dir: &Path) -> String {
        let broker = format!("PLAINTEXT://{HOST}:{}", self.broker_port(node_id));
        let (roles, listeners) = match self.controller_port(node_id) {
            Some(port) => (
                "broker,controller",
                format!("{broker},CONTROLLER://{HOST}:{port}"),
            ),
            None => ("broker", broker.clone()),
        };
        let lines = [
            format!(
                "# Node {node_id} of a local Strom cluster of {} nodes ({} controller voters),",
                self.nodes, self.controllers
            ),
            "# written by `strom cluster config`; `strom cluster up` starts it.".to_owned(),
            format!("process.roles={roles}"),
            format!("node.id={node_id}"),
            format!("controller.quorum.voters={}", self.quorum_voters()),
            format!("listeners={listeners}"),
            format!("advertised.listeners={broker}"),
            "controller.listener.names=CONTROLLER".to_owned(),
            "inter.broker.listener.name=PLAINTEXT".to_owned(),
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_owned(),
            format!("strom.cluster.id={cluster_id}"),
            format!("log.dirs={}", data_dir.display()),
            "group.initial.rebalance.delay.ms=0".to_owned(),
        ];
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}

/// Node `node_id`'s directory in the cluster directory `dir`.
pub fn node_dir(dir: &Path, node_id: u8) -> PathBuf {
    dir.join(format!("node-{node_id}"))
}

/// A random cluster id as Kafka makes them: 16 random bytes, URL-safe
/// base64 without padding, never starting with `-` (so that it is never
/// read as an option).
pub fn new_cluster_id() -> Result<String, ToolError> {
    let random = SystemRandom::new();
    loop {
        let mut bytes = [0u8; 16];
        random
            .fill(&mut bytes)
            .map_err(|_| ToolError::NoRandomness)?;
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn parsed(text: &str) -> BTreeMap<String, String> {
        strom_config::parse_properties(text, "test").expect("valid properties")
    }

    #[test]
    fn three_nodes_are_three_combined_voters() {
        let shape = ClusterShape::new(3, None, 9092).unwrap();
        assert_eq!(shape.controllers, 3);
        let text =
            shape.server_properties(2, "abcdefghijklmnopqrstuv", Path::new("/c/node-2/data"));
        let map = parsed(&text);
        let get = |key: &str| map.get(key).map(String::as_str);
        assert_eq!(get("process.roles"), Some("broker,controller"));
        assert_eq!(get("node.id"), Some("2"));
        assert_eq!(
            get("controller.quorum.voters"),
            Some("1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194")
        );
        assert_eq!(
            get("listeners"),
            Some("PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9193")
        );
        assert_eq!(
            get("advertised.listeners"),
            Some("PLAINTEXT://127.0.0.1:9093")
        );
        assert_eq!(get("controller.listener.names"), Some("CONTROLLER"));
        assert_eq!(get("inter.broker.listener.name"), Some("PLAINTEXT"));
        assert_eq!(
            get("listener.security.protocol.map"),
            Some("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT")
        );
        assert_eq!(get("strom.cluster.id"), Some("abcdefghijklmnopqrstuv"));
        assert_eq!(get("log.dirs"), Some("/c/node-2/data"));
        // Left at its default (3, capped to the live brokers): the group
        // coordinator moves with its partition's leader.
        assert_eq!(get("offsets.topic.replication.factor"), None);
    }

    #[test]
    fn nodes_past_the_voters_are_brokers_only() {
        let shape = ClusterShape::new(5, Some(3), 19092).unwrap();
        let map = parsed(&shape.server_properties(5, "id", Path::new("d")));
        assert_eq!(map["process.roles"], "broker");
        assert_eq!(map["listeners"], "PLAINTEXT://127.0.0.1:19096");
        assert_eq!(
            map["controller.quorum.voters"],
            "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
        );
        assert!(!map["listeners"].contains("CONTROLLER"));
        assert_eq!(shape.controller_port(4), None);
        assert_eq!(shape.controller_port(3), Some(19194));
    }

    #[test]
    fn every_node_agrees_on_voters_and_cluster_id() {
        let shape = ClusterShape::new(9, Some(5), 9092).unwrap();
        let maps: Vec<_> = (1..=9)
            .map(|node_id| parsed(&shape.server_properties(node_id, "same", Path::new("d"))))
            .collect();
        for map in &maps {
            assert_eq!(
                map["controller.quorum.voters"],
                maps[0]["controller.quorum.voters"]
            );
            assert_eq!(map["strom.cluster.id"], "same");
        }
        let ports: std::collections::BTreeSet<_> =
            maps.iter().map(|map| map["listeners"].clone()).collect();
        assert_eq!(ports.len(), 9, "every node listens on its own ports");
        assert_eq!(
            maps.iter()
                .filter(|map| map["process.roles"] == "broker,controller")
                .count(),
            5
        );
    }

    #[test]
    fn default_controllers_follow_the_node_count() {
        assert_eq!(ClusterShape::new(1, None, 9092).unwrap().controllers, 1);
        assert_eq!(ClusterShape::new(2, None, 9092).unwrap().controllers, 1);
        assert_eq!(ClusterShape::new(3, None, 9092).unwrap().controllers, 3);
        assert_eq!(ClusterShape::new(9, None, 9092).unwrap().controllers, 3);
    }

    #[test]
    fn bad_shapes_are_refused() {
        let refused =
            |nodes, controllers, port| ClusterShape::new(nodes, controllers, port).is_err();
        assert!(refused(0, None, 9092));
        assert!(refused(10, None, 9092));
        assert!(refused(3, Some(2), 9092));
        assert!(refused(3, Some(5), 9092));
        assert!(refused(5, Some(4), 9092));
        assert!(refused(3, None, 0));
        assert!(refused(3, None, 65_434));
        assert!(!refused(3, None, 65_433));
        assert!(!refused(5, Some(5), 9092));
    }

    #[test]
    fn single_node_cluster_is_one_voter() {
        let shape = ClusterShape::new(1, None, 9092).unwrap();
        assert_eq!(shape.quorum_voters(), "1@127.0.0.1:9192");
    }

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let first = new_cluster_id().unwrap();
        let second = new_cluster_id().unwrap();
        assert_eq!(first.len(), 22);
        assert_ne!(first, second);
        assert!(!first.starts_with('-'));
        assert!(first
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    }
}
