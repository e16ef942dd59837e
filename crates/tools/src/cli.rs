//! The command line: every command, its arguments and its examples.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `strom`: run a broker, manage topics, configs and groups, produce,
/// consume, benchmark and inspect log segments.
#[derive(Debug, Parser)]
#[command(name = "strom", version, propagate_version = true, after_help = concat!(
    "Examples:\n",
    "  strom broker                                  # single node on 127.0.0.1:9092\n",
    "  strom topics create events --partitions 3\n",
    "  seq 10 | strom produce events\n",
    "  strom consume events --from-beginning --max-messages 10\n",
    "  strom groups describe readers\n\n",
    "Exit codes:\n",
    "  0  success\n",
    "  1  the operation failed (broker error, verification failed)\n",
    "  2  usage error (bad arguments, invalid --command-config)\n",
    "  3  no broker reachable at --bootstrap-server"
))]
pub struct Arguments {
    /// Options every command shares.
    #[command(flatten)]
    pub global: GlobalOptions,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command shares.
#[derive(Debug, Clone, Args)]
pub struct GlobalOptions {
    /// Broker address(es) to bootstrap from, comma separated.
    #[arg(
        long,
        global = true,
        env = "STROM_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT"
    )]
    pub bootstrap_server: String,
    /// A client properties file with Kafka's names (client.id,
    /// request.timeout.ms, linger.ms, group.id, ...).
    #[arg(long, global = true, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a broker (single node on 127.0.0.1:9092 by default).
    #[command(after_help = "Examples:\n  \
        strom broker\n  \
        strom broker --config server.properties\n  \
        strom broker --set listeners=PLAINTEXT://127.0.0.1:9093 --set log.dirs=/tmp/strom")]
    Broker(BrokerArguments),
    /// List, describe, create, delete and alter topics.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Describe and alter topic and broker configs.
    #[command(subcommand)]
    Configs(ConfigsCommand),
    /// Send lines from stdin or a file as records.
    #[command(after_help = "Examples:\n  \
        seq 100 | strom produce events\n  \
        echo 'user-1:clicked' | strom produce events --key-separator :\n  \
        strom produce events --file records.txt --acks all --compression zstd\n  \
        printf 'source:web\\tk:v\\n' | strom produce events --parse-headers --key-separator :")]
    Produce(ProduceArguments),
    /// Print records of a topic.
    #[command(after_help = "Examples:\n  \
        strom consume events --from-beginning\n  \
        strom consume events --group readers --max-messages 10\n  \
        strom consume events --partition 0 --offset 42 --format '%p@%o %k=%v'\n  \
        strom consume events --from-beginning --json --timeout-ms 2000\n\n\
        Format tokens: %t topic, %p partition, %o offset, %T timestamp (ms),\n\
        %k key, %v value, %h headers (k=v,...), %K key length, %S value length,\n\
        %% a percent sign, \\n newline, \\t tab.")]
    Consume(ConsumeArguments),
    /// List, describe, delete consumer groups and reset their offsets.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// List, describe and abort transactions, like kafka-transactions.sh.
    #[command(subcommand)]
    Transactions(TransactionsCommand),
    /// Manage SCRAM users (set, delete, describe).
    #[command(subcommand)]
    Users(UsersCommand),
    /// Manage ACLs (add, list, remove), like kafka-acls.sh.
    #[command(subcommand)]
    Acls(AclsCommand),
    /// Benchmark producing, consuming and end-to-end latency.
    #[command(subcommand)]
    Perf(PerfCommand),
    /// Write the files of a local cluster on 127.0.0.1, or start it.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Describe the metadata quorum, like kafka-metadata-quorum.sh.
    #[command(subcommand, name = "metadata-quorum")]
    MetadataQuorum(MetadataQuorumCommand),
    /// Elect preferred or unclean leaders, like kafka-leader-election.sh.
    #[command(
        name = "leader-election",
        after_help = "Examples:\n  \
        strom leader-election --election-type preferred --all-topic-partitions\n  \
        strom leader-election --election-type preferred --topic events --partition 0\n  \
        strom leader-election --election-type unclean --path-to-json-file partitions.json\n\n\
        The JSON file is Kafka's: {\"partitions\": [{\"topic\": \"events\", \"partition\": 0}]}.\n\
        Exits with 1 when an election failed (ELECTION_NOT_NEEDED is not a failure)."
    )]
    LeaderElection(LeaderElectionArguments),
    /// Move partition replicas between brokers, like
    /// kafka-reassign-partitions.sh.
    #[command(
        name = "reassign-partitions",
        after_help = "Examples:\n  \
        strom reassign-partitions --generate --topics-to-move-json-file topics.json --broker-list 2,3,4\n  \
        strom reassign-partitions --execute --reassignment-json-file plan.json\n  \
        strom reassign-partitions --verify --reassignment-json-file plan.json\n  \
        strom reassign-partitions --cancel --reassignment-json-file plan.json\n\n\
        topics.json: {\"version\": 1, \"topics\": [{\"topic\": \"events\"}]}\n\
        plan.json:   {\"version\": 1, \"partitions\": [{\"topic\": \"events\", \"partition\": 0, \"replicas\": [2, 3, 4]}]}"
    )]
    ReassignPartitions(ReassignPartitionsArguments),
    /// Print and verify a log segment (.log), offset index (.index) or
    /// time index (.timeindex), as Kafka's DumpLogSegments.
    #[command(after_help = "Examples:\n  \
        strom dump-log data/events-0/00000000000000000000.log\n  \
        strom dump-log data/events-0/00000000000000000000.log --print-data\n  \
        strom dump-log data/events-0/00000000000000000000.index\n\n\
        An index is checked against the .log next to it: every entry must point at\n\
        the start of a batch holding its offset, and entries must increase.\n\
        Exits with 1 when a problem is found.")]
    DumpLog(DumpLogArguments),
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  \
        strom completions bash > /etc/bash_completion.d/strom\n  \
        strom completions zsh > \"${fpath[1]}/_strom\"\n  \
        strom completions fish > ~/.config/fish/completions/strom.fish")]
    Completions(CompletionsArguments),
}

/// `strom leader-election`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["all_topic_partitions", "topic", "path_to_json_file"])))]
pub struct LeaderElectionArguments {
    /// `preferred` (move leadership to the first replica) or `unclean`
    /// (elect a leader for leaderless partitions, from outside the ISR if
    /// need be).
    #[arg(long, value_enum)]
    pub election_type: ElectionTypeArgument,
    /// Every partition of the cluster.
    #[arg(long)]
    pub all_topic_partitions: bool,
    /// One topic (with --partition).
    #[arg(long, requires = "partition")]
    pub topic: Option<String>,
    /// The partition of --topic.
    #[arg(long, requires = "topic")]
    pub partition: Option<i32>,
    /// A JSON file listing the partitions.
    #[arg(long, value_name = "FILE")]
    pub path_to_json_file: Option<PathBuf>,
}

/// The election types of `strom leader-election`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ElectionTypeArgument {
    /// The preferred (first) replica.
    Preferred,
    /// Any live replica, even out of sync.
    Unclean,
}

/// `strom reassign-partitions`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("action").required(true).args(["generate", "execute", "verify", "cancel"])))]
pub struct ReassignPartitionsArguments {
    /// Print the current assignment of the topics in
    /// --topics-to-move-json-file and a proposal over --broker-list.
    #[arg(long, requires_all = ["topics_to_move_json_file", "broker_list"])]
    pub generate: bool,
    /// Start the reassignment in --reassignment-json-file.
    #[arg(long, requires = "reassignment_json_file")]
    pub execute: bool,
    /// Report, per partition of --reassignment-json-file, whether its
    /// reassignment is complete or still in progress.
    #[arg(long, requires = "reassignment_json_file")]
    pub verify: bool,
    /// Cancel the reassignments of --reassignment-json-file.
    #[arg(long, requires = "reassignment_json_file")]
    pub cancel: bool,
    /// The topics to move (for --generate).
    #[arg(long, value_name = "FILE")]
    pub topics_to_move_json_file: Option<PathBuf>,
    /// The brokers to place replicas on, comma separated (for --generate).
    #[arg(long, value_name = "IDS")]
    pub broker_list: Option<String>,
    /// The reassignment plan (Kafka's JSON format).
    #[arg(long, value_name = "FILE")]
    pub reassignment_json_file: Option<PathBuf>,
}

/// `strom broker`.
#[derive(Debug, Args)]
pub struct BrokerArguments {
    /// A server.properties file with Kafka's broker settings.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a setting, e.g. --set num.partitions=3 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// `strom topics ...`.
#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// List topic names.
    #[command(
        after_help = "Examples:\n  strom topics list\n  strom topics list --internal --json"
    )]
    List {
        /// Include internal topics such as __consumer_offsets.
        #[arg(long)]
        internal: bool,
        /// One JSON array instead of one name per line.
        #[arg(long)]
        json: bool,
    },
    /// Show partitions, leaders, replicas and ISR of topics (all by default).
    #[command(
        after_help = "Examples:\n  strom topics describe events\n  strom topics describe --json"
    )]
    Describe {
        /// The topics (all when omitted).
        topics: Vec<String>,
        /// One JSON object per topic.
        #[arg(long)]
        json: bool,
    },
    /// Create a topic.
    #[command(after_help = "Examples:\n  \
        strom topics create events --partitions 6\n  \
        strom topics create compacted --config cleanup.policy=compact --if-not-exists")]
    Create {
        /// The topic name.
        topic: String,
        /// Number of partitions (the broker's num.partitions by default).
        #[arg(long)]
        partitions: Option<i32>,
        /// Replicas per partition (the broker's default by default).
        #[arg(long)]
        replication_factor: Option<i16>,
        /// A topic config, e.g. retention.ms=60000 (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Succeed when the topic already exists.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// Delete topics.
    #[command(
        after_help = "Examples:\n  strom topics delete events\n  strom topics delete a b c --if-exists"
    )]
    Delete {
        /// The topics.
        #[arg(required = true)]
        topics: Vec<String>,
        /// Succeed when a topic does not exist.
        #[arg(long)]
        if_exists: bool,
    },
    /// Add partitions or change configs of a topic.
    #[command(after_help = "Examples:\n  \
        strom topics alter events --partitions 12\n  \
        strom topics alter events --config retention.ms=3600000 --delete-config cleanup.policy")]
    Alter {
        /// The topic name.
        topic: String,
        /// The new (larger) partition count.
        #[arg(long)]
        partitions: Option<i32>,
        /// Set a topic config (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Revert a topic config to its default (repeatable).
        #[arg(long = "delete-config", value_name = "KEY")]
        delete_configs: Vec<String>,
    },
}

/// Which resource `strom configs` works on (or a client quota entity,
/// see [`QuotaEntityArgs`]).
#[derive(Debug, Clone, Args)]
#[group(required = false, multiple = false)]
pub struct ConfigResource {
    /// A topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// A broker, by id.
    #[arg(long, value_name = "ID")]
    pub broker: Option<i32>,
    /// The cluster-wide default of every broker's dynamic configs
    /// (kafka-configs.sh's `--entity-type brokers --entity-default`).
    #[arg(long, conflicts_with_all = ["topic", "broker"])]
    pub broker_defaults: bool,
}

/// The entity type, as kafka-configs.sh names it: client quotas of users
/// or client ids, or the configs of brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QuotaEntityType {
    /// User principals.
    Users,
    /// Client ids.
    Clients,
    /// Brokers (`--entity-name ID`), or with `--entity-default` the
    /// cluster-wide dynamic broker defaults: the same as `--broker ID` and
    /// `--broker-defaults`.
    Brokers,
}

/// A client quota entity, as kafka-configs.sh takes it: `--entity-type`
/// with `--entity-name` or `--entity-default`, or `--user`/`--user-defaults`
/// with `--client`/`--client-defaults` for a user and client id together.
#[derive(Debug, Clone, Default, Args)]
pub struct QuotaEntityArgs {
    /// Client quotas of users or of client ids.
    #[arg(long, value_enum, conflicts_with_all = ["user", "user_defaults", "client", "client_defaults"])]
    pub entity_type: Option<QuotaEntityType>,
    /// The user or client id (with --entity-type).
    #[arg(long, requires = "entity_type", conflicts_with = "entity_default")]
    pub entity_name: Option<String>,
    /// The `<default>` user or client id (with --entity-type).
    #[arg(long, requires = "entity_type")]
    pub entity_default: bool,
    /// A user principal's quotas.
    #[arg(long, conflicts_with = "user_defaults")]
    pub user: Option<String>,
    /// The default user's quotas.
    #[arg(long)]
    pub user_defaults: bool,
    /// A client id's quotas.
    #[arg(long, conflicts_with = "client_defaults")]
    pub client: Option<String>,
    /// The default client id's quotas.
    #[arg(long)]
    pub client_defaults: bool,
}

/// `strom configs ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigsCommand {
    /// Show the configs of a topic or broker.
    #[command(
        after_help = "Examples:\n  strom configs describe --topic events\n  strom configs describe --broker 1 --all --json\n  strom configs describe --broker-defaults\n  strom configs describe --entity-type users --entity-name alice\n  strom configs describe --entity-type clients\n\nWithout --all, only values that differ from the defaults are shown."
    )]
    Describe {
        /// The resource.
        #[command(flatten)]
        resource: ConfigResource,
        /// A client quota entity instead of a topic or broker.
        #[command(flatten)]
        quota: QuotaEntityArgs,
        /// Also show configs at their default values.
        #[arg(long)]
        all: bool,
        /// One JSON object of name to value.
        #[arg(long)]
        json: bool,
    },
    /// Set or delete configs of a topic or broker.
    #[command(after_help = "Examples:\n  \
        strom configs alter --topic events --add-config retention.ms=60000,cleanup.policy=delete\n  \
        strom configs alter --topic events --delete-config retention.ms\n  \
        strom configs alter --broker-defaults --add-config log.retention.ms=3600000\n  \
        strom configs alter --broker 1 --add-config max.connections.per.ip=100\n  \
        strom configs alter --entity-type users --entity-default --add-config producer_byte_rate=1048576\n  \
        strom configs alter --user alice --client app --add-config consumer_byte_rate=2097152")]
    Alter {
        /// The resource.
        #[command(flatten)]
        resource: ConfigResource,
        /// A client quota entity instead of a topic or broker.
        #[command(flatten)]
        quota: QuotaEntityArgs,
        /// Configs to set, KEY=VALUE, comma separated or repeated.
        #[arg(long, value_name = "KEY=VALUE,...", value_delimiter = ',')]
        add_config: Vec<String>,
        /// Configs to revert to their defaults, comma separated or repeated.
        #[arg(long, value_name = "KEY,...", value_delimiter = ',')]
        delete_config: Vec<String>,
    },
}

/// `acks` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AcksArgument {
    /// No acknowledgement.
    #[value(name = "0")]
    Zero,
    /// The leader wrote it.
    #[value(name = "1")]
    One,
    /// Every in-sync replica has it.
    #[value(name = "all", alias = "-1")]
    All,
}

impl AcksArgument {
    /// The producer setting.
    pub fn acks(self) -> strom_producer::Acks {
        match self {
            AcksArgument::Zero => strom_producer::Acks::None,
            AcksArgument::One => strom_producer::Acks::Leader,
            AcksArgument::All => strom_producer::Acks::All,
        }
    }
}

/// `compression.type` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArgument {
    /// Uncompressed.
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl CompressionArgument {
    /// The codec.
    pub fn compression(self) -> strom_protocol::records::Compression {
        use strom_protocol::records::Compression;
        match self {
            CompressionArgument::None => Compression::None,
            CompressionArgument::Gzip => Compression::Gzip,
            CompressionArgument::Snappy => Compression::Snappy,
            CompressionArgument::Lz4 => Compression::Lz4,
            CompressionArgument::Zstd => Compression::Zstd,
        }
    }
}

/// `strom produce`.
#[derive(Debug, Args)]
pub struct ProduceArguments {
    /// The topic.
    pub topic: String,
    /// Read records from this file instead of stdin, one per line.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Split each line into key and value at the first occurrence of this.
    #[arg(long, value_name = "SEPARATOR")]
    pub key_separator: Option<String>,
    /// A header added to every record, KEY=VALUE (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE")]
    pub headers: Vec<String>,
    /// Each line starts with headers `k:v,k:v` followed by a tab.
    #[arg(long)]
    pub parse_headers: bool,
    /// Send every record to this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Acknowledgements to wait for.
    #[arg(long, value_enum, default_value = "all")]
    pub acks: AcksArgument,
    /// Compression codec of the batches.
    #[arg(long, value_enum, default_value = "none")]
    pub compression: CompressionArgument,
    /// A producer property, e.g. linger.ms=10 (repeatable; overrides --command-config).
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
}

/// `strom consume`.
#[derive(Debug, Args)]
pub struct ConsumeArguments {
    /// The topic.
    pub topic: String,
    /// Start at the earliest offset when there is no committed offset
    /// (default: only new records).
    #[arg(long)]
    pub from_beginning: bool,
    /// Consume as a member of this group (offsets are committed).
    #[arg(long, conflicts_with = "partition")]
    pub group: Option<String>,
    /// Read only this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Start offset with --partition: a number, `earliest` or `latest`.
    #[arg(long, requires = "partition", value_name = "OFFSET")]
    pub offset: Option<String>,
    /// Stop after this many records.
    #[arg(long, value_name = "COUNT")]
    pub max_messages: Option<u64>,
    /// Stop when no record arrives for this long.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Output format (see the tokens below).
    #[arg(long, default_value = "%v", conflicts_with = "json")]
    pub format: String,
    /// One JSON object per record with every field.
    #[arg(long)]
    pub json: bool,
    /// A consumer property, e.g. fetch.max.wait.ms=100 (repeatable).
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
}

/// `strom transactions ...`.
#[derive(Debug, Subcommand)]
pub enum TransactionsCommand {
    /// List the transactional ids of every broker's coordinator.
    #[command(after_help = "Examples:\n  \
        strom transactions list\n  \
        strom transactions list --duration-filter 60000 --json\n\n\
        Columns: TransactionalId, Coordinator, ProducerId, TransactionState.\n\
        Exits with 1 when a broker could not be asked (the others are still listed).")]
    List {
        /// Only transactions open for at least this many milliseconds.
        #[arg(long, value_name = "MS")]
        duration_filter: Option<i64>,
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Describe a transactional id at its coordinator: state, producer id
    /// and epoch, timeout, start time, duration and partitions.
    #[command(after_help = "Examples:\n  \
        strom transactions describe --transactional-id orders-writer\n  \
        strom transactions describe --transactional-id orders-writer --json")]
    Describe {
        /// The transactional id.
        #[arg(long)]
        transactional_id: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Show the active producers of a partition, as its leader knows them.
    #[command(
        name = "describe-producers",
        after_help = "Examples:\n  strom transactions describe-producers --topic events --partition 0\n\n\
        CurrentTransactionStartOffset is the first offset of the producer's open\n\
        transaction (None when it has none): pass it to `abort --start-offset`."
    )]
    DescribeProducers {
        /// The topic.
        #[arg(long)]
        topic: String,
        /// The partition.
        #[arg(long)]
        partition: i32,
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Abort a hanging transaction in one partition by writing an abort
    /// marker (needs CLUSTER_ACTION on the cluster).
    #[command(after_help = "Examples:\n  \
        strom transactions abort --topic events --partition 0 --start-offset 42\n  \
        strom transactions abort --topic events --partition 0 --producer-id 7 --producer-epoch 0 --coordinator-epoch 0\n\n\
        With --start-offset, the producer whose open transaction starts at that\n\
        offset is looked up with describe-producers and its transaction aborted.")]
    Abort(AbortTransactionArguments),
    /// Find open transactions the coordinator has forgotten: producers
    /// silent for longer than the maximum transaction timeout whose
    /// transactional id no longer includes the partition.
    #[command(
        name = "find-hanging",
        after_help = "Examples:\n  \
        strom transactions find-hanging --broker-id 1\n  \
        strom transactions find-hanging --topic events --partition 0 --max-transaction-timeout 5"
    )]
    FindHanging(FindHangingArguments),
}

/// `strom transactions abort`: the transaction by its start offset, or by
/// producer id, producer epoch and coordinator epoch.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transaction").required(true).args(["start_offset", "producer_id"])))]
pub struct AbortTransactionArguments {
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// The partition.
    #[arg(long)]
    pub partition: i32,
    /// The first offset of the transaction to abort.
    #[arg(long, value_name = "OFFSET")]
    pub start_offset: Option<i64>,
    /// The producer id (with --producer-epoch and --coordinator-epoch).
    #[arg(long, requires_all = ["producer_epoch", "coordinator_epoch"])]
    pub producer_id: Option<i64>,
    /// The producer epoch.
    #[arg(long, requires = "producer_id")]
    pub producer_epoch: Option<i16>,
    /// The coordinator epoch (a negative one is sent as 0).
    #[arg(long, requires = "producer_id", allow_negative_numbers = true)]
    pub coordinator_epoch: Option<i32>,
}

/// `strom transactions find-hanging`: where to look.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).multiple(true).args(["broker_id", "topic"])))]
pub struct FindHangingArguments {
    /// Only partitions with a replica on this broker.
    #[arg(long)]
    pub broker_id: Option<i32>,
    /// Only this topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Only this partition of --topic.
    #[arg(long, requires = "topic")]
    pub partition: Option<i32>,
    /// The cluster's transaction.max.timeout.ms, in minutes: producers
    /// silent for less long are not suspected.
    #[arg(long, default_value_t = 15, value_name = "MINUTES")]
    pub max_transaction_timeout: u64,
    /// One JSON array.
    #[arg(long)]
    pub json: bool,
}

/// `strom users ...`.
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Set a user's SCRAM credential (the password is salted here).
    #[command(
        after_help = "Examples:\n  strom users set alice --password alice-secret\n  \
        strom users set alice --password s3 --mechanism SCRAM-SHA-256 --iterations 8192"
    )]
    Set {
        /// The user name.
        user: String,
        /// The password.
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// PBKDF2 iterations (4096 to 16384).
        #[arg(long, default_value_t = 8192)]
        iterations: u32,
    },
    /// Delete a user's SCRAM credential.
    #[command(after_help = "Examples:\n  strom users delete alice --mechanism SCRAM-SHA-512")]
    Delete {
        /// The user name.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
    },
    /// Show users' mechanisms and iteration counts (all users without names).
    #[command(after_help = "Examples:\n  strom users describe\n  strom users describe alice")]
    Describe {
        /// The users.
        users: Vec<String>,
    },
}

/// `strom acls ...`.
#[derive(Debug, Subcommand)]
pub enum AclsCommand {
    /// Add ACL bindings: every principal times every operation.
    #[command(after_help = "Examples:\n  \
        strom acls add --allow --principal User:alice --operation Read --topic orders\n  \
        strom acls add --allow --principal User:alice --operation Write --topic logs- --prefixed\n  \
        strom acls add --deny --principal User:bob --operation All --group payments")]
    Add(AclArguments),
    /// List ACL bindings (all, or those matching the options).
    #[command(after_help = "Examples:\n  strom acls list\n  strom acls list --topic orders")]
    List(AclArguments),
    /// Remove the ACL bindings of a resource that match the options.
    #[command(after_help = "Examples:\n  strom acls remove --topic orders --principal User:alice")]
    Remove(AclArguments),
}

/// The options of `strom acls`, as `kafka-acls.sh` names them.
#[derive(Debug, Args)]
pub struct AclArguments {
    /// A topic (or topic prefix with --prefixed).
    #[arg(long)]
    pub topic: Option<String>,
    /// A group (or prefix).
    #[arg(long)]
    pub group: Option<String>,
    /// A transactional id (or prefix).
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// The cluster.
    #[arg(long)]
    pub cluster: bool,
    /// The resource name is a prefix.
    #[arg(long)]
    pub prefixed: bool,
    /// Principals, e.g. User:alice (repeatable).
    #[arg(long = "principal")]
    pub principals: Vec<String>,
    /// Operations, e.g. Read (repeatable).
    #[arg(long = "operation")]
    pub operations: Vec<String>,
    /// The host the binding applies to.
    #[arg(long, default_value = "*")]
    pub host: String,
    /// ALLOW bindings (the default for add).
    #[arg(long, conflicts_with = "deny")]
    pub allow: bool,
    /// DENY bindings.
    #[arg(long)]
    pub deny: bool,
}

/// `strom groups ...`.
#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// List groups.
    #[command(after_help = "Examples:\n  strom groups list\n  strom groups list --json")]
    List {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show a group's state, members, assignment, committed offsets and lag.
    #[command(
        after_help = "Examples:\n  strom groups describe readers\n  strom groups describe readers --json"
    )]
    Describe {
        /// The group id.
        group: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Delete empty groups and their committed offsets.
    #[command(after_help = "Examples:\n  strom groups delete readers")]
    Delete {
        /// The group ids.
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Change a group's committed offsets (dry run unless --execute).
    #[command(after_help = "Examples:\n  \
        strom groups reset-offsets readers --topic events --to-earliest\n  \
        strom groups reset-offsets readers --topic events:0,1 --shift-by -10 --execute\n  \
        strom groups reset-offsets readers --topic events --to-datetime 2024-05-01T00:00:00Z --execute\n\n\
        The group must have no active members. Without --execute the new offsets\n\
        are only printed.")]
    ResetOffsets(ResetOffsetsArguments),
}

/// Where `reset-offsets` moves the offsets.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct ResetTarget {
    /// The log start offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// The log end offset.
    #[arg(long)]
    pub to_latest: bool,
    /// This offset (clamped to the log range).
    #[arg(long, value_name = "OFFSET")]
    pub to_offset: Option<i64>,
    /// The first offset at or after this time: RFC 3339
    /// (2024-05-01T12:00:00Z, +02:00 offsets, fractions) or epoch milliseconds.
    #[arg(long, value_name = "DATETIME")]
    pub to_datetime: Option<String>,
    /// Move the committed offset by this many (negative: back).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
}

/// `strom groups reset-offsets`.
#[derive(Debug, Args)]
pub struct ResetOffsetsArguments {
    /// The group id.
    pub group: String,
    /// The topic, optionally with partitions: `events` or `events:0,2`.
    #[arg(long, value_name = "TOPIC[:P,...]")]
    pub topic: String,
    /// The target.
    #[command(flatten)]
    pub target: ResetTarget,
    /// Apply the change (without it, only print the plan).
    #[arg(long)]
    pub execute: bool,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `strom perf ...`.
#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Produce fixed-size records as fast as possible (or at --throughput).
    #[command(after_help = "Examples:\n  \
        strom perf produce bench --num-records 1000000 --record-size 100\n  \
        strom perf produce bench --num-records 100000 --throughput 10000 --json\n  \
        strom perf produce bench --num-records 1000000 --transactional-id perf --transaction-duration-ms 100\n  \
        strom perf produce bench --transactional-id perf --transaction-duration-ms 100 --abort-every 10")]
    Produce(PerfProduceArguments),
    /// Consume records and report the rate.
    #[command(after_help = "Examples:\n  \
        strom perf consume bench --messages 1000000 --json\n  \
        strom perf consume bench --messages 900000 --isolation-level read_committed")]
    Consume(PerfConsumeArguments),
    /// Produce with acks=all and consume each record: report p50, p99,
    /// p99.9 and max of the produce-to-consume latency.
    #[command(
        name = "e2e-latency",
        after_help = "Examples:\n  \
        strom perf e2e-latency bench --num-records 10000 --record-size 100\n  \
        strom perf e2e-latency bench --num-records 1000 --transactional-id perf-e2e --records-per-transaction 5"
    )]
    EndToEndLatency(PerfLatencyArguments),
}

/// `strom perf produce`.
#[derive(Debug, Args)]
pub struct PerfProduceArguments {
    /// The topic (must exist).
    pub topic: String,
    /// Records to send.
    #[arg(long, default_value_t = 100_000)]
    pub num_records: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    /// Records per second cap (no cap by default).
    #[arg(long)]
    pub throughput: Option<u64>,
    /// Acknowledgements to wait for [default: --command-config's acks, else all].
    #[arg(long, value_enum)]
    pub acks: Option<AcksArgument>,
    /// linger.ms [default: --command-config's linger.ms, else 5].
    #[arg(long)]
    pub linger_ms: Option<u64>,
    /// batch.size in bytes [default: --command-config's batch.size, else 16384].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Compression codec [default: --command-config's compression.type, else none].
    #[arg(long, value_enum)]
    pub compression: Option<CompressionArgument>,
    /// Send in transactions with this transactional.id (idempotent,
    /// acks=all): begin, send for --transaction-duration-ms, commit, repeat.
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// How long each transaction stays open.
    #[arg(
        long,
        alias = "transaction-ms",
        default_value_t = 3_000,
        value_name = "MS",
        requires = "transactional_id"
    )]
    pub transaction_duration_ms: u64,
    /// Abort every N-th transaction (its records flushed to the log first)
    /// instead of committing it.
    #[arg(
        long,
        value_name = "N",
        requires = "transactional_id",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub abort_every: Option<u64>,
    /// One JSON line instead of the human summary.
    #[arg(long)]
    pub json: bool,
}

/// `strom perf consume`.
#[derive(Debug, Args)]
pub struct PerfConsumeArguments {
    /// The topic.
    pub topic: String,
    /// Records to consume.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Consume as a member of this group (default: assign every partition).
    #[arg(long)]
    pub group: Option<String>,
    /// Give up when no record arrives for this long.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub timeout_ms: u64,
    /// isolation.level [default: --command-config's isolation.level, else
    /// read_uncommitted].
    #[arg(long, value_enum)]
    pub isolation_level: Option<IsolationLevelArgument>,
    /// One JSON line instead of the human summary.
    #[arg(long)]
    pub json: bool,
}

/// `isolation.level` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationLevelArgument {
    /// Every record up to the high watermark, aborted ones included.
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    /// Records up to the last stable offset, without aborted transactions.
    #[value(name = "read_committed")]
    ReadCommitted,
}

impl IsolationLevelArgument {
    /// The consumer setting.
    pub fn isolation_level(self) -> strom_consumer::IsolationLevel {
        match self {
            IsolationLevelArgument::ReadUncommitted => {
                strom_consumer::IsolationLevel::ReadUncommitted
            }
            IsolationLevelArgument::ReadCommitted => strom_consumer::IsolationLevel::ReadCommitted,
        }
    }
}

/// `strom perf e2e-latency`.
#[derive(Debug, Args)]
pub struct PerfLatencyArguments {
    /// The topic (must exist).
    pub topic: String,
    /// Records to send, one at a time (with --transactional-id: the
    /// transactions to commit, one at a time).
    #[arg(long, default_value_t = 1_000)]
    pub num_records: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    /// Give up when a record does not come back within this long.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub timeout_ms: u64,
    /// The consumer's fetch.max.wait.ms.
    #[arg(long, default_value_t = 10, value_name = "MS")]
    pub fetch_max_wait_ms: u64,
    /// Send in transactions with this transactional.id and read with
    /// isolation.level=read_committed: each sample is one transaction of
    /// --records-per-transaction records, timed from commit_transaction
    /// returning to its last record being read.
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// Records per transaction.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub records_per_transaction: u64,
    /// One JSON line instead of the human summary.
    #[arg(long)]
    pub json: bool,
}

/// `strom cluster ...`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Write DIR/node-I/server.properties for every node (files already
    /// there are kept).
    #[command(after_help = "Examples:\n  \
        strom cluster config --nodes 3 --dir /tmp/strom-cluster\n  \
        strom cluster config --nodes 5 --controllers 3 --base-port 19092 --dir cluster\n\n\
        Node I listens for clients on 127.0.0.1:BASE+I-1 and, if it is one of the\n\
        first --controllers nodes (the controller voters), for the quorum on\n\
        127.0.0.1:BASE+100+I-1. Its data goes to DIR/node-I/data.")]
    Config(ClusterArguments),
    /// Start every node of a local cluster (writing its files first if
    /// needed); Ctrl-C or SIGTERM stops them all.
    #[command(after_help = "Examples:\n  \
        strom cluster up --nodes 3 --dir /tmp/strom-cluster\n  \
        strom --bootstrap-server 127.0.0.1:9093 topics create events --replication-factor 3\n\n\
        Each node runs as `strom broker --config DIR/node-I/server.properties`, its\n\
        output appended to DIR/node-I/broker.log. A directory that already holds a\n\
        cluster's files is reused as it is, so running this again restarts that\n\
        cluster. On Ctrl-C or SIGTERM the nodes that are brokers only stop first,\n\
        the controllers last. A node that exits by itself is reported and the\n\
        others keep running.")]
    Up(ClusterArguments),
}

/// The shape and place of a local cluster.
#[derive(Debug, Clone, Args)]
pub struct ClusterArguments {
    /// Nodes, 1 to 9.
    #[arg(long, default_value_t = 3)]
    pub nodes: u8,
    /// The cluster directory: one node-I directory per node.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Node I's client port is BASE+I-1, its controller port BASE+100+I-1.
    #[arg(long, default_value_t = 9092, value_name = "BASE")]
    pub base_port: u16,
    /// Controller voters, the first nodes: 1, 3 or 5 [default: 3, or 1 for
    /// fewer than 3 nodes].
    #[arg(long, value_name = "K")]
    pub controllers: Option<u8>,
}

/// `strom metadata-quorum ...`.
#[derive(Debug, Subcommand)]
pub enum MetadataQuorumCommand {
    /// Show the quorum's leader, epoch, high watermark and lag (--status),
    /// or each voter's and observer's replication progress (--replication).
    #[command(after_help = "Examples:\n  \
        strom metadata-quorum describe --status\n  \
        strom metadata-quorum describe --replication\n  \
        strom metadata-quorum describe --replication --human-readable\n\n\
        The output has the fields and layout of Kafka's kafka-metadata-quorum.sh.")]
    Describe(QuorumDescribeArguments),
}

/// `strom metadata-quorum describe`: exactly one of `--status` and
/// `--replication`.
#[derive(Debug, Clone, Args)]
pub struct QuorumDescribeArguments {
    /// A short summary of the quorum.
    #[arg(
        long,
        conflicts_with = "replication",
        required_unless_present = "replication"
    )]
    pub status: bool,
    /// Each voter's and observer's log end offset, lag and fetch times.
    #[arg(long)]
    pub replication: bool,
    /// Timestamps as "N ms ago" (with --replication only).
    #[arg(long, conflicts_with = "status")]
    pub human_readable: bool,
}

/// `strom dump-log`.
#[derive(Debug, Args)]
pub struct DumpLogArguments {
    /// Segment files: `.log`, `.index` or `.timeindex`.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print every record's key, value and headers.
    #[arg(long)]
    pub print_data: bool,
    /// Only verify and print problems and a summary.
    #[arg(long)]
    pub verify_only: bool,
}

/// The shells completions are generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShellArgument {
    /// bash.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
    /// PowerShell.
    Powershell,
    /// elvish.
    Elvish,
}

/// `strom completions`.
#[derive(Debug, Args)]
pub struct CompletionsArguments {
    /// The shell.
    #[arg(value_enum)]
    pub shell: ShellArgument,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Arguments::command().debug_assert();
    }

    #[test]
    fn every_command_has_examples() {
        fn check(command: &clap::Command, path: &str) {
            let path = format!("{path} {}", command.get_name());
            if command.get_subcommands().next().is_none() {
                let help = command.get_after_help().map(|text| text.to_string());
                assert!(
                    help.is_some_and(|text| text.contains("Examples")),
                    "{path} has no examples"
                );
            }
            for sub in command.get_subcommands() {
                if sub.get_name() != "help" {
                    check(sub, &path);
                }
            }
        }
        check(&Arguments::command(), "");
    }

    #[test]
    fn reset_needs_exactly_one_target() {
        let parsed = Arguments::try_parse_from([
            "strom",
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "t",
            "--to-earliest",
            "--to-latest",
        ]);
        assert!(parsed.is_err());
        let parsed = Arguments::try_parse_from([
            "strom",
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "t",
            "--shift-by",
            "-5",
        ]);
        assert!(parsed.is_ok(), "{parsed:?}");
    }
}
