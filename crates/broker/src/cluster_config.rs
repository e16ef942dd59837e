//! The settings of a node of a cluster (Kafka's KRaft-mode keys).
//!
//! A node is in cluster mode when `controller.quorum.voters` is set:
//! `process.roles` says whether it is a controller voter, a broker, or
//! both; the voters list every controller's `id@host:port` on its
//! controller listener. Without the voters the broker is the single-node
//! broker with an embedded controller, as before (`process.roles` may then
//! only be `broker,controller`).

use std::collections::BTreeMap;
use std::time::Duration;

use strom_config::{invalid, Listener, Lookup};
use strom_security::peer_config;

use crate::error::{ConfigError, ValueProblem};

/// Cluster-mode keys Strom acts on, with their defaults.
pub const CLUSTER_KEYS: &[(&str, &str)] = &[
    ("controller.quorum.voters", ""),
    ("controller.listener.names", ""),
    ("inter.broker.listener.name", ""),
    ("security.inter.broker.protocol", ""),
    ("broker.rack", ""),
    ("broker.session.timeout.ms", "9000"),
    ("broker.heartbeat.interval.ms", "2000"),
    ("controller.quorum.election.timeout.ms", "500"),
    ("controller.quorum.request.timeout.ms", "2000"),
    ("strom.cluster.id", ""),
    ("strom.metadata.snapshot.interval.entries", "1000"),
    ("auto.leader.rebalance.enable", "true"),
    ("leader.imbalance.per.broker.percentage", "10"),
    ("leader.imbalance.check.interval.seconds", "300"),
];

/// What `process.roles` asks this node to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    /// Serves clients: hosts partitions and groups.
    pub broker: bool,
    /// A voter of the metadata quorum.
    pub controller: bool,
}

/// A node of a cluster. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `process.roles`.
    pub roles: ProcessRoles,
    /// `controller.quorum.voters`: node id to `host:port`.
    pub voters: BTreeMap<u64, String>,
    /// The controller listener this node binds (on controller nodes).
    pub controller_listener: Option<Listener>,
    /// `inter.broker.listener.name` (or the listener named by
    /// `security.inter.broker.protocol`): the listener other nodes reach
    /// this broker on (the quorum's observers are fed through it).
    pub inter_broker_listener_name: String,
    /// How this node connects to the other brokers and to the controllers.
    pub peers: strom_security::peer_config::PeerSecurity,
    /// `strom.cluster.id`: the cluster id every node shares (Kafka's nodes
    /// get it from `kafka-storage format`).
    pub cluster_id: String,
    /// `broker.session.timeout.ms`.
    pub session_timeout: Duration,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `controller.quorum.election.timeout.ms`.
    pub election_timeout: Duration,
    /// `controller.quorum.request.timeout.ms`.
    pub request_timeout: Duration,
    /// `strom.metadata.snapshot.interval.entries`: snapshot the metadata
    /// image and truncate the quorum log after this many entries (Kafka
    /// counts bytes: `metadata.log.max.record.bytes.between.snapshots`).
    pub snapshot_interval_entries: u64,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_percentage: u32,
    /// `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval: Duration,
}

fn parse_roles(text: &str) -> Result<ProcessRoles, ConfigError> {
    let mut roles = ProcessRoles {
        broker: false,
        controller: false,
    };
    for role in text
        .split(',')
        .map(str::trim)
        .filter(|role| !role.is_empty())
    {
        match role {
            "broker" if !roles.broker => roles.broker = true,
            "controller" if !roles.controller => roles.controller = true,
            _ => {
                return Err(invalid(
                    "process.roles",
                    text,
                    ValueProblem::cluster("expected broker, controller, or broker,controller"),
                )
                .into())
            }
        }
    }
    if !roles.broker && !roles.controller {
        return Err(invalid(
            "process.roles",
            text,
            ValueProblem::cluster("at least one role is required"),
        )
        .into());
    }
    Ok(roles)
}

/// Parses `id@host:port,...`.
pub fn parse_voters(text: &str) -> Result<BTreeMap<u64, String>, ConfigError> {
    const KEY: &str = "controller.quorum.voters";
    let mut voters = BTreeMap::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (id, address) = item.split_once('@').ok_or_else(|| {
            invalid(
                KEY,
                text,
                ValueProblem::cluster("expected id@host:port,..."),
            )
        })?;
        let id: u64 = id.trim().parse().map_err(|_| {
            invalid(
                KEY,
                text,
                ValueProblem::cluster(format!("`{id}` is not a node id")),
            )
        })?;
        let (host, port) = address.rsplit_once(':').ok_or_else(|| {
            invalid(
                KEY,
                text,
                ValueProblem::cluster("expected id@host:port,..."),
            )
        })?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |port| port == 0) {
            return Err(invalid(
                KEY,
                text,
                ValueProblem::cluster(format!("`{address}` is not host:port")),
            )
            .into());
        }
        if voters.insert(id, address.to_owned()).is_some() {
            return Err(invalid(
                KEY,
                text,
                ValueProblem::cluster(format!("node {id} is listed twice")),
            )
            .into());
        }
    }
    if !matches!(voters.len(), 1 | 3 | 5) {
        return Err(invalid(
            KEY,
            text,
            ValueProblem::cluster("a quorum has 1, 3 or 5 voters"),
        )
        .into());
    }
    Ok(voters)
}

/// Reads the cluster keys. `listeners` are all the configured listeners;
/// the controller listener is taken out of them (it is served by the
/// quorum, not by the Kafka request handlers). Returns `None` for a
/// single-node broker.
pub fn parse(
    map: &BTreeMap<String, String>,
    node_id: i32,
    listeners: &mut Vec<Listener>,
) -> Result<Option<ClusterConfig>, ConfigError> {
    let lookup = Lookup::with_defaults(map, &[CLUSTER_KEYS]);
    let roles_text = lookup.value("process.roles");
    let voters_text = lookup.value("controller.quorum.voters");
    if voters_text.is_empty() {
        if !lookup
            .value("controller.quorum.bootstrap.servers")
            .is_empty()
        {
            return Err(invalid(
                "controller.quorum.bootstrap.servers",
                lookup.value("controller.quorum.bootstrap.servers"),
                ValueProblem::cluster(
                    "Strom's quorum has a static voter set: use controller.quorum.voters",
                ),
            )
            .into());
        }
        let roles = parse_roles(if roles_text.is_empty() {
            "broker,controller"
        } else {
            roles_text
        })?;
        if !(roles.broker && roles.controller) {
            return Err(invalid(
                "process.roles",
                roles_text,
                ValueProblem::cluster(
                    "a node that is not both broker and controller needs controller.quorum.voters",
                ),
            )
            .into());
        }
        return Ok(None);
    }
    let roles = parse_roles(if roles_text.is_empty() {
        "broker,controller"
    } else {
        roles_text
    })?;
    let voters = parse_voters(voters_text)?;
    let id = u64::try_from(node_id).map_err(|_| {
        invalid(
            "node.id",
            &node_id.to_string(),
            ValueProblem::cluster("a node id is not negative"),
        )
    })?;
    if roles.controller != voters.contains_key(&id) {
        let reason = if roles.controller {
            format!("node {id} has the controller role but is not one of the voters")
        } else {
            format!("node {id} is a voter but does not have the controller role")
        };
        return Err(invalid(
            "controller.quorum.voters",
            voters_text,
            ValueProblem::cluster(reason),
        )
        .into());
    }
    let controller_listener = take_controller_listener(&lookup, roles, listeners)?;
    if let Some(listener) = &controller_listener {
        // The voters reach this node at its entry in the voters; binding
        // another port would leave them talking to nobody (or to another
        // process).
        let expected = voters.get(&id).map(String::as_str).unwrap_or_default();
        let port_matches = expected
            .rsplit_once(':')
            .is_some_and(|(_, port)| port == listener.port.to_string());
        if !port_matches {
            return Err(invalid(
                "listeners",
                lookup.value("listeners"),
                ValueProblem::cluster(format!(
                    "the controller listener's port {} is not node {id}'s port in controller.quorum.voters ({expected})",
                    listener.port
                ))).into());
        }
    }
    if roles.broker && listeners.is_empty() {
        return Err(invalid(
            "listeners",
            lookup.value("listeners"),
            ValueProblem::cluster("a broker needs a listener besides the controller listener"),
        )
        .into());
    }
    if !roles.broker {
        listeners.clear();
    }
    let inter_broker_listener_name = inter_broker_listener(&lookup, roles, listeners)?;
    let controller_listener_name = controller_listener_names(&lookup)
        .first()
        .map(|name| (*name).to_owned())
        .unwrap_or_default();
    let peers = peer_config::parse(map, &inter_broker_listener_name, &controller_listener_name)?;
    let cluster_id = lookup.value("strom.cluster.id").to_owned();
    if cluster_id.is_empty() {
        return Err(invalid(
            "strom.cluster.id",
            "",
            ValueProblem::cluster("every node of a cluster needs the same cluster id"),
        )
        .into());
    }
    // A positive number of milliseconds, the key's default when not set.
    let millis = |key| lookup.unsigned(key, 1, i64::MAX).map(Duration::from_millis);
    let snapshot_interval_entries =
        lookup.unsigned("strom.metadata.snapshot.interval.entries", 1, i64::MAX)?;
    Ok(Some(ClusterConfig {
        roles,
        voters,
        controller_listener,
        inter_broker_listener_name,
        peers,
        cluster_id,
        session_timeout: millis("broker.session.timeout.ms")?,
        heartbeat_interval: millis("broker.heartbeat.interval.ms")?,
        election_timeout: millis("controller.quorum.election.timeout.ms")?,
        request_timeout: millis("controller.quorum.request.timeout.ms")?,
        snapshot_interval_entries,
        auto_leader_rebalance_enable: lookup.boolean("auto.leader.rebalance.enable")?,
        leader_imbalance_per_broker_percentage: lookup.unsigned(
            "leader.imbalance.per.broker.percentage",
            0,
            100,
        )? as u32,
        leader_imbalance_check_interval: Duration::from_secs(lookup.unsigned(
            "leader.imbalance.check.interval.seconds",
            1,
            i64::from(u32::MAX),
        )?),
    }))
}

/// The inter-broker listener: `inter.broker.listener.name`, or the
/// listener named after `security.inter.broker.protocol` (Kafka refuses
/// both at once), or the first listener.
fn inter_broker_listener(
    lookup: &Lookup<'_>,
    roles: ProcessRoles,
    listeners: &[Listener],
) -> Result<String, ConfigError> {
    const NAME_KEY: &str = "inter.broker.listener.name";
    const PROTOCOL_KEY: &str = "security.inter.broker.protocol";
    let name = match (lookup.value(NAME_KEY), lookup.value(PROTOCOL_KEY)) {
        ("", "") => {
            return Ok(listeners
                .first()
                .map(|l| l.name.clone())
                .unwrap_or_default())
        }
        (name, "") => name.to_owned(),
        ("", protocol) => strom_security::SecurityProtocol::from_name(protocol)
            .ok_or_else(|| {
                invalid(
                    PROTOCOL_KEY,
                    protocol,
                    ValueProblem::cluster("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
                )
            })?
            .name()
            .to_owned(),
        (_, protocol) => {
            return Err(invalid(
                PROTOCOL_KEY,
                protocol,
                ValueProblem::cluster(format!("set only one of {NAME_KEY} and {PROTOCOL_KEY}")),
            )
            .into())
        }
    };
    if roles.broker && !listeners.iter().any(|l| l.name == name) {
        let key = if lookup.value(NAME_KEY).is_empty() {
            PROTOCOL_KEY
        } else {
            NAME_KEY
        };
        return Err(invalid(
            key,
            lookup.value(key),
            ValueProblem::cluster(format!("no listener of this broker is named {name}")),
        )
        .into());
    }
    Ok(name)
}

/// `controller.listener.names`.
fn controller_listener_names<'a>(lookup: &Lookup<'a>) -> Vec<&'a str> {
    lookup
        .value("controller.listener.names")
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect()
}

/// Finds the controller listener (`controller.listener.names`, first
/// name) among `listeners` and removes it from them. A controller must
/// have it; a broker-only node must not.
fn take_controller_listener(
    lookup: &Lookup<'_>,
    roles: ProcessRoles,
    listeners: &mut Vec<Listener>,
) -> Result<Option<Listener>, ConfigError> {
    const KEY: &str = "controller.listener.names";
    let names = controller_listener_names(lookup);
    if names.is_empty() {
        return Err(invalid(
            KEY,
            "",
            ValueProblem::cluster("cluster mode needs the controller listener's name"),
        )
        .into());
    }
    let position = listeners
        .iter()
        .position(|l| names.contains(&l.name.as_str()));
    match (roles.controller, position) {
        (true, Some(index)) => {
            let listener = listeners.remove(index);
            if listeners.iter().any(|l| names.contains(&l.name.as_str())) {
                return Err(invalid(
                    KEY,
                    lookup.value(KEY),
                    ValueProblem::cluster("bind one controller listener"),
                )
                .into());
            }
            Ok(Some(listener))
        }
        (true, None) => Err(invalid(
            "listeners",
            lookup.value("listeners"),
            ValueProblem::cluster(format!(
                "a controller needs its controller listener ({}) in listeners",
                names.join(",")
            )),
        )
        .into()),
        (false, Some(_)) => Err(invalid(
            "listeners",
            lookup.value("listeners"),
            ValueProblem::cluster(
                "a node without the controller role must not bind the controller listener",
            ),
        )
        .into()),
        (false, None) => Ok(None),
    }
}

#[cfg(test)]
#[path = "cluster_config_tests.rs"]
mod tests;
