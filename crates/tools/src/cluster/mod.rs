//! `strom cluster config|up`: a local cluster on 127.0.0.1 in one command.
//!
//! `config` writes `DIR/node-I/server.properties` for every node
//! ([`plan`]); `up` does the same and then runs every node as a child
//! process, `strom broker --config DIR/node-I/server.properties`, with its
//! output in `DIR/node-I/broker.log` ([`supervisor`]). A directory that
//! already holds a cluster's files is reused as it is (same cluster id,
//! ports and data), so `up` on it restarts that cluster.

pub mod plan;
pub mod supervisor;

use std::path::{Path, PathBuf};

use strom_broker::cluster_config::ProcessRoles;

use crate::cli::{ClusterArguments, ClusterCommand};
use crate::error::ToolError;
use crate::output::Output;
use plan::{node_dir, ClusterShape, BROKER_LOG, SERVER_PROPERTIES};

/// One node of a cluster directory, as its `server.properties` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFiles {
    /// `node.id`.
    pub node_id: u8,
    /// Its `server.properties`.
    pub config: PathBuf,
    /// Where its output goes.
    pub log: PathBuf,
    /// Whether `process.roles` includes `controller`.
    pub controller: bool,
    /// Its client listener, `host:port`.
    pub broker_address: String,
    /// Its controller listener, `host:port`, if it is a voter.
    pub controller_address: Option<String>,
    /// `strom.cluster.id`.
    pub cluster_id: String,
}

/// The nodes of a cluster directory and whether their files were already
/// there.
#[derive(Debug)]
pub struct ClusterFiles {
    /// The cluster directory (absolute).
    pub dir: PathBuf,
    /// The nodes, by id.
    pub nodes: Vec<NodeFiles>,
    /// True when the files existed and were kept.
    pub reused: bool,
}

impl ClusterFiles {
    /// The client listeners, comma separated.
    pub fn bootstrap_servers(&self) -> String {
        self.nodes
            .iter()
            .map(|node| node.broker_address.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Runs a `cluster` command.
pub fn run(command: ClusterCommand, out: &mut Output) -> Result<(), ToolError> {
    match command {
        ClusterCommand::Config(arguments) => {
            let files = prepare(&arguments)?;
            print_files(&files, out)?;
            out.line(&format!(
                "Start it with: strom cluster up --nodes {} --dir {}",
                files.nodes.len(),
                files.dir.display()
            ))
        }
        ClusterCommand::Up(arguments) => {
            let files = prepare(&arguments)?;
            supervisor::run(&files, out)
        }
    }
}

/// Checks the arguments, then writes the files (or finds them).
fn prepare(arguments: &ClusterArguments) -> Result<ClusterFiles, ToolError> {
    let shape = ClusterShape::new(arguments.nodes, arguments.controllers, arguments.base_port)?;
    ensure_files(&arguments.dir, &shape)
}

/// Prints what each node is and where its files are.
pub fn print_files(files: &ClusterFiles, out: &mut Output) -> Result<(), ToolError> {
    let verb = if files.reused { "Kept" } else { "Wrote" };
    for node in &files.nodes {
        let listeners = match &node.controller_address {
            Some(controller) => format!(
                "broker,controller; PLAINTEXT {}, CONTROLLER {controller}",
                node.broker_address
            ),
            None => format!("broker; PLAINTEXT {}", node.broker_address),
        };
        out.line(&format!("{verb} {} ({listeners})", node.config.display()))?;
    }
    if let Some(first) = files.nodes.first() {
        out.line(&format!("Cluster id: {}", first.cluster_id))?;
    }
    out.line(&format!("Bootstrap servers: {}", files.bootstrap_servers()))
}

/// Writes every node's `server.properties` into `dir`, unless `dir`
/// already holds a cluster of `shape.nodes` nodes, whose files are kept.
pub fn ensure_files(dir: &Path, shape: &ClusterShape) -> Result<ClusterFiles, ToolError> {
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| ToolError::WriteFile { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    let dir = std::fs::canonicalize(dir).map_err(write_error(dir))?;
    let existing = existing_node_ids(&dir)?;
    let reused = !existing.is_empty();
    if reused {
        let expected: Vec<u8> = (1..=shape.nodes).collect();
        if existing != expected {
            return Err(ToolError::ClusterDirectory {
                dir,
                found: existing.len(),
                nodes: shape.nodes,
            });
        }
    } else {
        let cluster_id = plan::new_cluster_id()?;
        for node_id in 1..=shape.nodes {
            let node_dir = node_dir(&dir, node_id);
            let data_dir = node_dir.join("data");
            std::fs::create_dir_all(&data_dir).map_err(write_error(&data_dir))?;
            let text = shape.server_properties(node_id, &cluster_id, &data_dir);
            write_atomically(&node_dir.join(SERVER_PROPERTIES), &text)?;
        }
    }
    let nodes = (1..=shape.nodes)
        .map(|node_id| read_node(&dir, node_id))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClusterFiles { dir, nodes, reused })
}

/// The ids `I` of the `node-I` directories of `dir` that hold a
/// `server.properties`, ascending.
fn existing_node_ids(dir: &Path) -> Result<Vec<u8>, ToolError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ToolError::ReadFile {
        path: dir.to_owned(),
        source,
    })?;
    let mut ids: Vec<u8> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let id = name.to_str()?.strip_prefix("node-")?.parse::<u8>().ok()?;
            entry.path().join(SERVER_PROPERTIES).is_file().then_some(id)
        })
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

fn write_atomically(path: &Path, text: &str) -> Result<(), ToolError> {
    let temporary = path.with_extension("properties.tmp");
    let error = |source| ToolError::WriteFile {
        path: path.to_owned(),
        source,
    };
    std::fs::write(&temporary, text).map_err(error)?;
    std::fs::rename(&temporary, path).map_err(error)
}

/// Node `node_id` as its `server.properties` describes it.
fn read_node(dir: &Path, node_id: u8) -> Result<NodeFiles, ToolError> {
    let node_dir = node_dir(dir, node_id);
    let config = node_dir.join(SERVER_PROPERTIES);
    let map: std::collections::BTreeMap<String, String> = crate::context::read_properties(&config)?
        .into_iter()
        .collect();
    let missing = |key: &'static str| ToolError::ClusterFile {
        path: config.clone(),
        key,
    };
    let get = |key: &'static str| map.get(key).map(String::as_str).ok_or_else(|| missing(key));
    if get("node.id")?.trim() != node_id.to_string() {
        return Err(missing("node.id"));
    }
    let listeners = map
        .get("advertised.listeners")
        .filter(|value| !value.trim().is_empty())
        .map_or_else(|| get("listeners"), |value| Ok(value.as_str()))?;
    let broker_address = listener_address(listeners, |name| name != "CONTROLLER")
        .ok_or_else(|| missing("listeners"))?;
    let controller_address = listener_address(get("listeners")?, |name| name == "CONTROLLER");
    Ok(NodeFiles {
        node_id,
        log: node_dir.join(BROKER_LOG),
        controller: ProcessRoles::parse(get("process.roles")?).is_ok_and(|roles| roles.controller),
        broker_address,
        controller_address,
        cluster_id: get("strom.cluster.id")?.trim().to_owned(),
        config,
    })
}

/// The `host:port` of the first listener in `listeners` whose name
/// `wanted` accepts.
fn listener_address(listeners: &str, wanted: impl Fn(&str) -> bool) -> Option<String> {
    listeners.split(',').find_map(|listener| {
        let (name, address) = listener.trim().split_once("://")?;
        wanted(name).then(|| address.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(nodes: u8) -> ClusterShape {
        ClusterShape::new(nodes, None, 9092).unwrap()
    }

    #[test]
    fn files_are_written_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = dir.path().join("cluster");
        let written = ensure_files(&cluster, &shape(3)).unwrap();
        assert!(!written.reused);
        assert_eq!(written.nodes.len(), 3);
        assert_eq!(
            written.bootstrap_servers(),
            "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
        );
        let node = &written.nodes[1];
        assert_eq!(node.node_id, 2);
        assert!(node.controller);
        assert_eq!(node.controller_address.as_deref(), Some("127.0.0.1:9193"));
        assert!(node.config.is_absolute());
        assert!(node.config.ends_with("node-2/server.properties"));
        assert!(node.log.ends_with("node-2/broker.log"));
        assert!(written.dir.join("node-2/data").is_dir());
        let ids: Vec<&str> = written
            .nodes
            .iter()
            .map(|n| n.cluster_id.as_str())
            .collect();
        assert!(ids.iter().all(|id| *id == ids[0] && id.len() == 22));

        let before = std::fs::read_to_string(&node.config).unwrap();
        let again =
            ensure_files(&cluster, &ClusterShape::new(3, Some(1), 20_000).unwrap()).unwrap();
        assert!(again.reused);
        assert_eq!(again.nodes, written.nodes, "the files are kept as they are");
        assert_eq!(std::fs::read_to_string(&node.config).unwrap(), before);
    }

    #[test]
    fn another_node_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        ensure_files(dir.path(), &shape(3)).unwrap();
        let error = ensure_files(dir.path(), &shape(4)).unwrap_err();
        assert!(
            matches!(
                error,
                ToolError::ClusterDirectory {
                    found: 3,
                    nodes: 4,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(error.exit_status(), crate::error::ExitStatus::Usage);
    }

    #[test]
    fn brokers_only_nodes_have_no_controller_listener() {
        let dir = tempfile::tempdir().unwrap();
        let files =
            ensure_files(dir.path(), &ClusterShape::new(4, Some(3), 9092).unwrap()).unwrap();
        let last = &files.nodes[3];
        assert!(!last.controller);
        assert_eq!(last.controller_address, None);
        assert_eq!(last.broker_address, "127.0.0.1:9095");
    }

    #[test]
    fn a_file_for_another_node_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = ensure_files(dir.path(), &shape(2)).unwrap();
        let text = std::fs::read_to_string(&files.nodes[1].config)
            .unwrap()
            .replace("node.id=2", "node.id=1");
        std::fs::write(&files.nodes[1].config, text).unwrap();
        let error = ensure_files(dir.path(), &shape(2)).unwrap_err();
        assert!(
            matches!(error, ToolError::ClusterFile { key: "node.id", .. }),
            "{error}"
        );
    }

    #[test]
    fn listener_addresses_are_found_by_name() {
        let listeners = "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192";
        assert_eq!(
            listener_address(listeners, |name| name == "CONTROLLER").as_deref(),
            Some("127.0.0.1:9192")
        );
        assert_eq!(
            listener_address(listeners, |name| name != "CONTROLLER").as_deref(),
            Some("127.0.0.1:9092")
        );
        assert_eq!(listener_address("garbage", |_| true), None);
    }
}
