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
    ("strom.controller.fence.unreachable.brokers", "true"),
];

/// What `process.roles` asks this node to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    /// Serves clients: hosts partitions and groups.
    pub broker: bool,
    /// A voter of the metadata quorum.
    pub controller: bool,
}

impl ProcessRoles {
    /// `broker,controller`: Kafka's combined node, and the only roles of
    /// the single-node broker.
    pub const COMBINED: ProcessRoles = ProcessRoles {
        broker: true,
        controller: true,
    };
    /// `broker`: a node that is not a voter.
    pub const BROKER: ProcessRoles = ProcessRoles {
        broker: true,
        controller: false,
    };
    /// The roles of a node whose `process.roles` is not set.
    pub const DEFAULT: ProcessRoles = ProcessRoles::COMBINED;

    /// The value of `process.roles` that asks for these roles (empty for
    /// none).
    pub const fn name(self) -> &'static str {
        match (self.broker, self.controller) {
            (true, true) => "broker,controller",
            (true, false) => "broker",
            (false, true) => "controller",
            (false, false) => "",
        }
    }

    /// Parses `process.roles`: `broker`, `controller` or both, each once.
    pub fn parse(text: &str) -> Result<ProcessRoles, ConfigError> {
        const KEY: &str = "process.roles";
        let refuse = |reason| ConfigError::from(invalid(KEY, text, ValueProblem::cluster(reason)));
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
                _ => return Err(refuse("expected broker, controller, or broker,controller")),
            }
        }
        if !roles.broker && !roles.controller {
            return Err(refuse("at least one role is required"));
        }
        Ok(roles)
    }
}

/// A node of a cluster. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `process.roles`.
    pub roles: ProcessRoles,
    /// `controller.quorum.voters`: node id to `host:port`.
    pub voters: BTreeMap<u64, String>,
    /// `controller.listener.names`, never empty in cluster mode: the
    /// first is the listener the controllers are reached on.
    pub controller_listener_names: Vec<String>,
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
    /// `strom.controller.fence.unreachable.brokers`: the active controller
    /// fences a broker at once when its heartbeat connection closed and
    /// its listener refuses connections (docs/replication.md).
    pub fence_unreachable_brokers: bool,
}

impl ClusterConfig {
    /// The name of the listener the controllers are reached on: the first
    /// of `controller.listener.names`.
    pub fn controller_listener_name(&self) -> &str {
        self.controller_listener_names
            .first()
            .map_or("", String::as_str)
    }
}

/// Parses `id@host:port,...`.
pub fn parse_voters(text: &str) -> Result<BTreeMap<u64, String>, ConfigError> {
    const KEY: &str = "controller.quorum.voters";
    let refuse =
        |reason: String| ConfigError::from(invalid(KEY, text, ValueProblem::cluster(reason)));
    let syntax = || refuse("expected id@host:port,...".to_owned());
    let mut voters = BTreeMap::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (id, address) = item.split_once('@').ok_or_else(syntax)?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| refuse(format!("`{id}` is not a node id")))?;
        let (host, port) = address.rsplit_once(':').ok_or_else(syntax)?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |port| port == 0) {
            return Err(refuse(format!("`{address}` is not host:port")));
        }
        if voters.insert(id, address.to_owned()).is_some() {
            return Err(refuse(format!("node {id} is listed twice")));
        }
    }
    if !matches!(voters.len(), 1 | 3 | 5) {
        return Err(refuse("a quorum has 1, 3 or 5 voters".to_owned()));
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
    let voters_text = lookup.value("controller.quorum.voters");
    if voters_text.is_empty() {
        check_single_node(&lookup)?;
        return Ok(None);
    }
    let roles = roles(&lookup)?;
    let voters = parse_voters(voters_text)?;
    let id = u64::try_from(node_id).map_err(|_| {
        let reason = ValueProblem::cluster("a node id is not negative");
        invalid("node.id", &node_id.to_string(), reason)
    })?;
    check_voter_role(id, roles, &voters, voters_text)?;
    let controller_listener_names = controller_listener_names(&lookup)?;
    let controller_listener =
        take_controller_listener(&lookup, &controller_listener_names, roles, listeners)?;
    if let Some(listener) = &controller_listener {
        check_controller_port(&lookup, id, listener, &voters)?;
    }
    if roles.broker && listeners.is_empty() {
        let reason = "a broker needs a listener besides the controller listener";
        return Err(invalid_listeners(&lookup, reason.to_owned()));
    }
    if !roles.broker {
        listeners.clear();
    }
    let inter_broker_listener_name = inter_broker_listener(&lookup, roles, listeners)?;
    let controller_listener_name = controller_listener_names.first().map_or("", String::as_str);
    let peers = peer_config::parse(map, &inter_broker_listener_name, controller_listener_name)?;
    let cluster_id = cluster_id(&lookup)?;
    // A positive number of milliseconds, the key's default when not set.
    let millis = |key| lookup.unsigned(key, 1, i64::MAX).map(Duration::from_millis);
    let snapshot_interval_entries =
        lookup.unsigned("strom.metadata.snapshot.interval.entries", 1, i64::MAX)?;
    Ok(Some(ClusterConfig {
        roles,
        voters,
        controller_listener_names,
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
        fence_unreachable_brokers: lookup.boolean("strom.controller.fence.unreachable.brokers")?,
    }))
}

/// `strom.cluster.id`, which every node of a cluster needs.
fn cluster_id(lookup: &Lookup<'_>) -> Result<String, ConfigError> {
    match lookup.value("strom.cluster.id") {
        "" => {
            let reason = ValueProblem::cluster("every node of a cluster needs the same cluster id");
            Err(invalid("strom.cluster.id", "", reason).into())
        }
        cluster_id => Ok(cluster_id.to_owned()),
    }
}

/// `process.roles`, [`ProcessRoles::DEFAULT`] when not set.
fn roles(lookup: &Lookup<'_>) -> Result<ProcessRoles, ConfigError> {
    match lookup.value("process.roles") {
        "" => Ok(ProcessRoles::DEFAULT),
        text => ProcessRoles::parse(text),
    }
}

/// Without voters: Strom's quorum has a static voter set, and the
/// single-node broker is both broker and controller.
fn check_single_node(lookup: &Lookup<'_>) -> Result<(), ConfigError> {
    const BOOTSTRAP_KEY: &str = "controller.quorum.bootstrap.servers";
    if !lookup.value(BOOTSTRAP_KEY).is_empty() {
        let reason = "Strom's quorum has a static voter set: use controller.quorum.voters";
        let problem = ValueProblem::cluster(reason);
        return Err(invalid(BOOTSTRAP_KEY, lookup.value(BOOTSTRAP_KEY), problem).into());
    }
    if roles(lookup)? != ProcessRoles::COMBINED {
        let reason = "a node that is not both broker and controller needs controller.quorum.voters";
        let problem = ValueProblem::cluster(reason);
        return Err(invalid("process.roles", lookup.value("process.roles"), problem).into());
    }
    Ok(())
}

/// A node has the controller role exactly when it is one of the voters.
fn check_voter_role(
    id: u64,
    roles: ProcessRoles,
    voters: &BTreeMap<u64, String>,
    voters_text: &str,
) -> Result<(), ConfigError> {
    if roles.controller == voters.contains_key(&id) {
        return Ok(());
    }
    let reason = if roles.controller {
        format!("node {id} has the controller role but is not one of the voters")
    } else {
        format!("node {id} is a voter but does not have the controller role")
    };
    let problem = ValueProblem::cluster(reason);
    Err(invalid("controller.quorum.voters", voters_text, problem).into())
}

/// The voters reach this node at its entry in the voters; binding another
/// port would leave them talking to nobody (or to another process).
fn check_controller_port(
    lookup: &Lookup<'_>,
    id: u64,
    listener: &Listener,
    voters: &BTreeMap<u64, String>,
) -> Result<(), ConfigError> {
    let expected = voters.get(&id).map(String::as_str).unwrap_or_default();
    let port_matches = expected
        .rsplit_once(':')
        .is_some_and(|(_, port)| port == listener.port.to_string());
    if port_matches {
        return Ok(());
    }
    Err(invalid_listeners(
        lookup,
        format!(
            "the controller listener's port {} is not node {id}'s port in controller.quorum.voters ({expected})",
            listener.port
        ),
    ))
}

/// `listeners` does not fit the cluster settings, for `reason`.
fn invalid_listeners(lookup: &Lookup<'_>, reason: String) -> ConfigError {
    let problem = ValueProblem::cluster(reason);
    invalid("listeners", lookup.value("listeners"), problem).into()
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
    let refuse = |key: &str, value: &str, reason: String| {
        ConfigError::from(invalid(key, value, ValueProblem::cluster(reason)))
    };
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
                let expected = "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL";
                refuse(PROTOCOL_KEY, protocol, expected.to_owned())
            })?
            .name()
            .to_owned(),
        (_, protocol) => {
            let reason = format!("set only one of {NAME_KEY} and {PROTOCOL_KEY}");
            return Err(refuse(PROTOCOL_KEY, protocol, reason));
        }
    };
    if roles.broker && !listeners.iter().any(|l| l.name == name) {
        let key = if lookup.value(NAME_KEY).is_empty() {
            PROTOCOL_KEY
        } else {
            NAME_KEY
        };
        let reason = format!("no listener of this broker is named {name}");
        return Err(refuse(key, lookup.value(key), reason));
    }
    Ok(name)
}

/// `controller.listener.names`: the names, refused when there is none
/// (cluster mode needs the controller listener's name).
fn controller_listener_names(lookup: &Lookup<'_>) -> Result<Vec<String>, ConfigError> {
    let names: Vec<String> = lookup
        .value("controller.listener.names")
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        let reason = ValueProblem::cluster("cluster mode needs the controller listener's name");
        return Err(invalid("controller.listener.names", "", reason).into());
    }
    Ok(names)
}

/// Finds the controller listener (the first of `names` that `listeners`
/// has) among `listeners` and removes it from them. A controller must
/// have it; a broker-only node must not.
fn take_controller_listener(
    lookup: &Lookup<'_>,
    names: &[String],
    roles: ProcessRoles,
    listeners: &mut Vec<Listener>,
) -> Result<Option<Listener>, ConfigError> {
    const KEY: &str = "controller.listener.names";
    let named = |listener: &Listener| names.contains(&listener.name);
    match (roles.controller, listeners.iter().position(named)) {
        (true, Some(index)) => {
            let listener = listeners.remove(index);
            if listeners.iter().any(named) {
                let reason = ValueProblem::cluster("bind one controller listener");
                return Err(invalid(KEY, lookup.value(KEY), reason).into());
            }
            Ok(Some(listener))
        }
        (true, None) => Err(invalid_listeners(
            lookup,
            format!(
                "a controller needs its controller listener ({}) in listeners",
                names.join(",")
            ),
        )),
        (false, Some(_)) => Err(invalid_listeners(
            lookup,
            "a node without the controller role must not bind the controller listener".to_owned(),
        )),
        (false, None) => Ok(None),
    }
}

#[cfg(test)]
#[path = "cluster_config_tests.rs"]
mod tests;
