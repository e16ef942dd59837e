//! Errors of the `strom` program and the exit codes they map to.

use std::path::PathBuf;
use std::process::ExitCode;

use strom_client::{ClientError, ConfigError, TransactionAdminError};
use strom_consumer::ConsumerError;
use strom_producer::{ProduceError, ProducerCreateError, TransactionError};
use strom_protocol::ErrorCode;

/// The exit codes scripts can rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: the command did what was asked.
    Success,
    /// 1: the operation failed (a broker error, a failed verification).
    Failed,
    /// 2: the command line is invalid, or a file it names cannot be read.
    Usage,
    /// 3: no broker could be reached.
    Unreachable,
}

impl ExitStatus {
    /// The numeric process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failed => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Unreachable => 3,
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status.code())
    }
}

/// A command failed. The Display text says what went wrong and, where there
/// is one, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// No bootstrap server answered.
    #[error(
        "cannot reach a broker at {bootstrap}; start one with `strom broker` \
         or point --bootstrap-server (or STROM_BOOTSTRAP) at a running broker"
    )]
    Unreachable {
        /// The bootstrap servers tried.
        bootstrap: String,
        /// Why the connection failed.
        #[source]
        source: ClientError,
    },
    /// The topic is not in the cluster.
    #[error("topic `{topic}` does not exist; list topics with `strom topics list`")]
    UnknownTopic {
        /// The topic name.
        topic: String,
    },
    /// The topic already exists.
    #[error("topic `{topic}` already exists; pass --if-not-exists to ignore this")]
    TopicExists {
        /// The topic name.
        topic: String,
    },
    /// The group is not known to its coordinator.
    #[error("group `{group}` does not exist; list groups with `strom groups list`")]
    UnknownGroup {
        /// The group id.
        group: String,
    },
    /// The group has members, so its offsets cannot be changed from outside.
    #[error(
        "group `{group}` has {members} active member(s); stop its consumers \
         before resetting offsets or deleting it"
    )]
    GroupNotEmpty {
        /// The group id.
        group: String,
        /// Members in the group.
        members: usize,
    },
    /// A partition the command names does not exist.
    #[error(
        "partition {partition} of topic `{topic}` does not exist (the topic has {partitions})"
    )]
    UnknownPartition {
        /// The topic name.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// The partition count.
        partitions: usize,
    },
    /// The broker refused an operation on a resource.
    #[error("{operation} `{resource}` failed: the broker returned {code}{hint}")]
    Rejected {
        /// What was attempted (`create topic`, `alter config of topic`, ...).
        operation: &'static str,
        /// The topic, group or broker.
        resource: String,
        /// The broker's error code.
        code: ErrorCode,
        /// Advice for the error code, starting with "; " (or empty).
        hint: &'static str,
    },
    /// The broker's answer did not mention the resource asked about.
    #[error("{operation} `{resource}`: the broker's answer does not mention it")]
    MissingResult {
        /// What was attempted.
        operation: &'static str,
        /// The topic, group or broker.
        resource: String,
    },
    /// A client request failed in another way.
    #[error("{operation} failed")]
    Client {
        /// What was attempted.
        operation: &'static str,
        /// The client error.
        #[source]
        source: ClientError,
    },
    /// A transaction admin operation failed.
    #[error("{operation} failed")]
    Transaction {
        /// What was attempted (`describe transactional id `x``, ...).
        operation: String,
        /// The typed error.
        #[source]
        source: TransactionAdminError,
    },
    /// `transactions abort --start-offset` found no producer whose open
    /// transaction starts there.
    #[error(
        "no open transaction starts at offset {start_offset} in {topic_partition}; \
         see the open ones with `strom transactions describe-producers`"
    )]
    NoOpenTransaction {
        /// The partition, as `topic-partition`.
        topic_partition: String,
        /// The offset given.
        start_offset: i64,
    },
    /// Some brokers did not answer (each was reported on stderr).
    #[error("{operation} failed on {failed} broker(s)")]
    BrokersFailed {
        /// What was attempted.
        operation: &'static str,
        /// How many brokers failed.
        failed: usize,
    },
    /// The producer could not be created or a record was not delivered.
    #[error("producing to `{topic}` failed")]
    Produce {
        /// The topic.
        topic: String,
        /// The producer error.
        #[source]
        source: ProduceError,
    },
    /// The producer could not start.
    #[error("cannot start the producer")]
    ProducerCreate {
        /// The producer error.
        #[source]
        source: ProducerCreateError,
    },
    /// The consumer failed.
    #[error("consuming from `{topic}` failed")]
    Consume {
        /// The topic.
        topic: String,
        /// The consumer error.
        #[source]
        source: ConsumerError,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Output could not be written.
    #[error("cannot write the output")]
    Output {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--command-config` file holds an invalid client property.
    #[error("invalid client property in {path}; see `strom --help` for --command-config")]
    CommandConfig {
        /// The properties file.
        path: PathBuf,
        /// The bad property.
        #[source]
        source: ConfigError,
    },
    /// The `--command-config` file is not a valid properties file.
    #[error("cannot parse {path}")]
    PropertiesFile {
        /// The properties file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: strom_config::ConfigError,
    },
    /// A command-line value does not parse.
    #[error("invalid {what} `{text}`: expected {expected}")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// The text given.
        text: String,
        /// What was expected.
        expected: &'static str,
    },
    /// An input line of `strom produce` does not have the expected shape.
    #[error("input line {line_number} (`{text}`) does not have the expected shape: {expected}")]
    BadInputLine {
        /// The line number, from 1.
        line_number: u64,
        /// The line (its first 80 characters).
        text: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A transaction call of a transactional producer failed.
    #[error("{operation} of transactional id `{transactional_id}` failed")]
    ProducerTransaction {
        /// The producer's `transactional.id`.
        transactional_id: String,
        /// `init_transactions`, `begin_transaction`, `commit_transaction`
        /// or `abort_transaction`.
        operation: &'static str,
        /// The producer's error.
        #[source]
        source: TransactionError,
    },
    /// A benchmark did not complete.
    #[error("the benchmark failed: {count} {what}")]
    PerfFailed {
        /// What went wrong.
        what: &'static str,
        /// How many records were affected.
        count: u64,
    },
    /// `dump-log` found problems in a segment or index.
    #[error("{problems} problem(s) found in {path}")]
    VerificationFailed {
        /// The file dumped.
        path: PathBuf,
        /// How many problems were reported.
        problems: usize,
    },
    /// The metadata quorum reports no leader among its voters.
    #[error(
        "the metadata quorum has no leader among its voters (leader id {leader_id}); \
         retry once the controllers have elected one"
    )]
    NoQuorumLeader {
        /// The leader id reported (-1: none).
        leader_id: i32,
    },
    /// A file or directory of a local cluster could not be written.
    #[error("cannot write {path}")]
    WriteFile {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The cluster directory holds another cluster's files.
    #[error(
        "{dir} holds the files of {found} node(s), not of the {nodes} asked for; \
         pass --nodes {found} to use that cluster, or another --dir"
    )]
    ClusterDirectory {
        /// The cluster directory.
        dir: PathBuf,
        /// How many nodes' files it holds.
        found: usize,
        /// How many nodes were asked for.
        nodes: u8,
    },
    /// A node's `server.properties` lacks a setting `strom cluster` needs.
    #[error("{path} has no usable `{key}`; remove the cluster directory to write new files")]
    ClusterFile {
        /// The file.
        path: PathBuf,
        /// The setting.
        key: &'static str,
    },
    /// The system random generator failed.
    #[error("cannot make a cluster id: the system random generator failed")]
    NoRandomness,
    /// The path of this program is unknown.
    #[error("cannot find this program's path to start the nodes")]
    CurrentExe {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A node could not be started.
    #[error("cannot start node {node_id}")]
    StartNode {
        /// The node.
        node_id: u8,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Every node of a local cluster exited by itself.
    #[error("every node of the cluster exited; see the broker.log of each node in {dir}")]
    ClusterStopped {
        /// The cluster directory.
        dir: PathBuf,
    },
    /// A JSON file does not parse.
    #[error("{path} is not valid JSON")]
    JsonFile {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A JSON file parses but lacks what the command needs.
    #[error("{path} does not have the expected shape: {expected}")]
    JsonShape {
        /// The file.
        path: PathBuf,
        /// What was expected.
        expected: &'static str,
    },
    /// Some partitions of a leader election or reassignment failed (each
    /// was reported on stdout).
    #[error("{operation} failed for {failed} partition(s)")]
    PartitionsFailed {
        /// What was attempted.
        operation: &'static str,
        /// How many partitions failed.
        failed: usize,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl ToolError {
    /// The exit code this error ends the process with.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            ToolError::Unreachable { .. } => ExitStatus::Unreachable,
            ToolError::CommandConfig { .. }
            | ToolError::PropertiesFile { .. }
            | ToolError::ReadFile { .. }
            | ToolError::BadInputLine { .. }
            | ToolError::InvalidArgument { .. }
            | ToolError::JsonFile { .. }
            | ToolError::JsonShape { .. }
            | ToolError::ClusterDirectory { .. }
            | ToolError::ClusterFile { .. } => ExitStatus::Usage,
            ToolError::Client { source, .. } if is_unreachable(source) => ExitStatus::Unreachable,
            ToolError::Transaction {
                source: TransactionAdminError::Client(source),
                ..
            } if is_unreachable(source) => ExitStatus::Unreachable,
            _ => ExitStatus::Failed,
        }
    }

    /// Wraps a client error, classifying "cannot connect" as unreachable.
    pub fn client(operation: &'static str, source: ClientError) -> ToolError {
        ToolError::Client { operation, source }
    }

    /// A broker error code on a named resource, with advice where known.
    pub fn rejected(operation: &'static str, resource: &str, code: ErrorCode) -> ToolError {
        ToolError::Rejected {
            operation,
            resource: resource.to_owned(),
            code,
            hint: hint(code),
        }
    }

    /// The error and its sources on one line.
    pub fn chain(&self) -> String {
        strom_config::error_chain(self)
    }
}

/// Whether a client error means no broker could be reached at all.
pub fn is_unreachable(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Connect { .. } | ClientError::NoBrokerAvailable { .. }
    )
}

fn hint(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidConfig => "; check the name and value against Kafka's topic configs",
        ErrorCode::InvalidPartitions => "; the partition count can only grow",
        ErrorCode::InvalidReplicationFactor => {
            "; the replication factor cannot exceed the number of brokers"
        }
        ErrorCode::TopicAlreadyExists => "; pass --if-not-exists to ignore this",
        ErrorCode::NonEmptyGroup => "; stop the group's consumers first",
        ErrorCode::GroupIdNotFound => "; list groups with `strom groups list`",
        ErrorCode::UnknownTopicOrPartition => "; list topics with `strom topics list`",
        ErrorCode::InvalidTopicException => {
            "; topic names use letters, digits, '.', '_' and '-' (at most 249)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_stable() {
        let codes = [
            ExitStatus::Success,
            ExitStatus::Failed,
            ExitStatus::Usage,
            ExitStatus::Unreachable,
        ]
        .map(ExitStatus::code);
        assert_eq!(codes, [0, 1, 2, 3]);
    }

    #[test]
    fn connection_failures_map_to_unreachable() {
        let error = ToolError::client(
            "list topics",
            ClientError::NoBrokerAvailable { attempted: 1 },
        );
        assert_eq!(error.exit_status(), ExitStatus::Unreachable);
        let error = ToolError::client(
            "list topics",
            ClientError::Broker {
                code: ErrorCode::InvalidConfig,
            },
        );
        assert_eq!(error.exit_status(), ExitStatus::Failed);
        let error = ToolError::InvalidArgument {
            what: "offset",
            text: "x".to_owned(),
            expected: "a number",
        };
        assert_eq!(error.exit_status(), ExitStatus::Usage);
    }

    #[test]
    fn rejections_carry_advice() {
        let error = ToolError::rejected("create topic", "t", ErrorCode::TopicAlreadyExists);
        assert!(error.to_string().contains("--if-not-exists"), "{error}");
    }
}
