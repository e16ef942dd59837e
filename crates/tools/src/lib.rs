//! The `strom` command-line program: what an operator or developer types to
//! run a broker and work with a Kafka-compatible cluster.
//!
//! This crate owns the command line and nothing below it: argument parsing
//! ([`cli`], clap), turning `--bootstrap-server` and `--command-config`
//! into client configurations ([`context`]), one module per command
//! ([`topics`], [`configs`], [`produce`], [`consume`], [`groups`] with
//! [`reset`], [`transactions`] with [`hanging`], [`metadata_quorum`], [`leader_election`], [`reassign`],
//! [`cluster`], [`perf`], [`dump`]), output
//! formatting ([`format`](mod@format), [`output`]), progress bars
//! ([`progress`]) and exit codes ([`error`]).
//! It does not speak the protocol itself beyond assembling requests the
//! admin client lacks (DescribeGroups, an all-topics Metadata, an
//! all-partitions OffsetFetch); connections, version negotiation, batching
//! and group membership come from `strom-client`, `strom-producer` and
//! `strom-consumer`, `strom broker` is `strom-broker`'s launcher, and
//! `strom cluster up` runs several `strom broker` processes as children
//! ([`cluster`]).
//!
//! Design decisions a newcomer must know:
//!
//! * **Exit codes are a contract.** 0 success, 1 the operation failed (a
//!   broker error, a failed verification), 2 usage error (bad arguments, a
//!   file that cannot be read, an invalid `--command-config`), 3 no broker
//!   reachable. Every error is a typed [`error::ToolError`] whose message
//!   says what went wrong and what to do next; the mapping to exit codes
//!   lives in one place, [`error::ToolError::exit_status`].
//! * **Results on stdout, everything else on stderr.** Progress bars are
//!   drawn on stderr and only when it is a terminal; summaries such as
//!   "Processed a total of N messages" go to stderr too, so stdout can be
//!   piped.
//! * **`dump-log` parses independently of the broker**: batches with
//!   `strom-protocol`'s record batch code, indexes by reading the files with
//!   `strom-storage`'s entry layout (never through its mapped indexes, which
//!   resize files), so it inspects segments written by Apache Kafka too.
//!
//! The crate has no feature flags.

pub mod acls;
pub mod cli;
pub mod cluster;
pub mod configs;
pub mod consume;
pub mod context;
pub mod datetime;
pub mod dump;
pub mod error;
pub mod format;
pub mod group_description;
pub mod groups;
pub mod hanging;
pub mod leader_election;
pub mod metadata_quorum;
pub mod output;
pub mod perf;
pub mod produce;
pub mod progress;
pub mod quota_configs;
pub mod reassign;
pub mod reset;
pub mod topic_metadata;
pub mod topics;
pub mod transactions;
pub mod users;

use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{Arguments, Command, ShellArgument};
use crate::context::Context;
use crate::error::{ExitStatus, ToolError};
use crate::output::Output;

/// Runs a parsed command line and returns the process exit code. Errors
/// are printed to stderr.
pub fn run(arguments: Arguments) -> ExitCode {
    let mut out = Output::stdout();
    let result = match arguments.command {
        Command::Broker(broker) => {
            return strom_broker::launch::run(strom_broker::launch::LaunchOptions {
                config_file: broker.config,
                overrides: broker.overrides,
            });
        }
        Command::Completions(completions) => completions_script(completions.shell, &mut out),
        Command::DumpLog(dump) => dump::run(&dump, &mut out),
        Command::Cluster(command) => cluster::run(command, &mut out),
        command => run_networked(&arguments.global, command, &mut out),
    };
    let result = result.and_then(|()| out.flush());
    match result {
        Ok(()) => ExitStatus::Success.into(),
        Err(ToolError::Output { source }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitStatus::Success.into()
        }
        Err(error) => {
            let _ = out.flush();
            eprintln!("strom: {}", error.chain());
            error.exit_status().into()
        }
    }
}

fn run_networked(
    global: &cli::GlobalOptions,
    command: Command,
    out: &mut Output,
) -> Result<(), ToolError> {
    let context = Context::new(global)?;
    for key in context.unknown_properties() {
        eprintln!("strom: warning: ignoring unknown client property `{key}` in --command-config");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| ToolError::Runtime { source })?;
    runtime.block_on(async move {
        match command {
            Command::Topics(command) => topics::run(&context, command, out).await,
            Command::Configs(command) => configs::run(&context, command, out).await,
            Command::Produce(arguments) => produce::run(&context, arguments).await,
            Command::Consume(arguments) => consume::run(&context, arguments, out).await,
            Command::Groups(command) => groups::run(&context, command, out).await,
            Command::Transactions(command) => transactions::run(&context, command, out).await,
            Command::Users(command) => users::run(&context, command, out).await,
            Command::Acls(command) => acls::run(&context, command, out).await,
            Command::MetadataQuorum(command) => metadata_quorum::run(&context, command, out).await,
            Command::LeaderElection(arguments) => {
                leader_election::run(&context, &arguments, out).await
            }
            Command::ReassignPartitions(arguments) => {
                reassign::run(&context, &arguments, out).await
            }
            Command::Perf(command) => perf::run(&context, command, out).await,
            Command::Broker(_)
            | Command::Cluster(_)
            | Command::Completions(_)
            | Command::DumpLog(_) => Ok(()),
        }
    })
}

fn completions_script(shell: ShellArgument, out: &mut Output) -> Result<(), ToolError> {
    use clap_complete::Shell;
    let shell = match shell {
        ShellArgument::Bash => Shell::Bash,
        ShellArgument::Zsh => Shell::Zsh,
        ShellArgument::Fish => Shell::Fish,
        ShellArgument::Powershell => Shell::PowerShell,
        ShellArgument::Elvish => Shell::Elvish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Arguments::command(), "strom", &mut script);
    out.bytes(&script)
}
