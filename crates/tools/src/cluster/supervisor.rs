//! `strom cluster up`: every node as a child process, watched until
//! Ctrl-C or SIGTERM, then stopped in order.
//!
//! Each child is `<this program> broker --config DIR/node-I/server.properties`
//! with standard output and error appended to `DIR/node-I/broker.log`. The
//! children run in process groups of their own, so a Ctrl-C in the
//! terminal reaches only this process, which then stops them in order:
//! SIGTERM to the nodes that are brokers only, wait for them, then SIGTERM
//! to the controller voters (a broker's controlled shutdown needs the
//! controllers). A node that does not stop within [`STOP_TIMEOUT`] is
//! killed. On Linux every child also gets SIGTERM from the kernel if this
//! process dies without stopping it (`PR_SET_PDEATHSIG`), so no node
//! outlives it. A node that exits by itself is reported and the others
//! keep running; when none is left, the command fails.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{print_files, ClusterFiles, NodeFiles};
use crate::error::ToolError;
use crate::output::Output;

/// How often the children are checked.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// How long a node may take to stop after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A node and its process, `None` once it has exited and been reaped.
struct RunningNode<'a> {
    node: &'a NodeFiles,
    process: Option<Child>,
}

/// Starts every node of `files`, prints where they are, and watches them
/// until a signal asks to stop (then stops them all).
pub fn run(files: &ClusterFiles, out: &mut Output) -> Result<(), ToolError> {
    let program = std::env::current_exe().map_err(|source| ToolError::CurrentExe { source })?;
    // One thread: the children's parent-death signal follows the thread
    // that started them, and this one lives until the command ends.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| ToolError::Runtime { source })?;
    runtime.block_on(async {
        let mut signals = Signals::new().map_err(|source| ToolError::Runtime { source })?;
        let mut nodes: Vec<RunningNode<'_>> = Vec::new();
        for node in &files.nodes {
            match start_node(&program, node) {
                Ok(process) => nodes.push(RunningNode {
                    node,
                    process: Some(process),
                }),
                Err(source) => {
                    stop_all(&mut nodes).await;
                    return Err(ToolError::StartNode {
                        node_id: node.node_id,
                        source,
                    });
                }
            }
        }
        print_started(files, &nodes, out)?;
        let outcome = watch(files, &mut nodes, &mut signals).await;
        stop_all(&mut nodes).await;
        outcome
    })
}

fn print_started(
    files: &ClusterFiles,
    nodes: &[RunningNode<'_>],
    out: &mut Output,
) -> Result<(), ToolError> {
    print_files(files, out)?;
    for running in nodes {
        let pid = running.process.as_ref().map_or(0, Child::id);
        out.line(&format!(
            "Started node {} (pid {pid}), log {}",
            running.node.node_id,
            running.node.log.display()
        ))?;
    }
    out.line(&format!(
        "Logs: {}",
        files
            .dir
            .join("node-*")
            .join(super::plan::BROKER_LOG)
            .display()
    ))?;
    out.line("Stop with Ctrl-C or SIGTERM: brokers stop first, controllers last.")?;
    out.flush()
}

/// Spawns one node, its output appended to its log.
fn start_node(program: &Path, node: &NodeFiles) -> std::io::Result<Child> {
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&node.log)?;
    writeln!(
        log,
        "--- strom cluster up: starting node {} with {}",
        node.node_id,
        node.config.display()
    )?;
    let mut command = Command::new(program);
    command
        .arg("broker")
        .arg("--config")
        .arg(&node.config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    own_process_group(&mut command);
    stop_with_parent(&mut command);
    command.spawn()
}

fn own_process_group(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
}

/// Asks the kernel to send the child SIGTERM when the thread that spawns
/// it ends (so when this process dies, however it dies).
#[cfg(target_os = "linux")]
fn stop_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    let hook = move || {
        // SAFETY: `prctl(PR_SET_PDEATHSIG, ...)` and `getppid()` are plain
        // system calls on the calling process: they take no pointers,
        // allocate nothing and take no locks, so they are safe to call in
        // the child between fork and exec.
        let (result, parent_now) = unsafe {
            (
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM),
                libc::getppid(),
            )
        };
        if result != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if parent_now != parent {
            // The parent died before the request took effect.
            return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        }
        Ok(())
    };
    // SAFETY: the hook only makes the two system calls above and builds
    // `io::Error`s from an errno or a kind, which does not allocate: it is
    // async-signal-safe, as a `pre_exec` hook must be.
    unsafe {
        command.pre_exec(hook);
    }
}

#[cfg(not(target_os = "linux"))]
fn stop_with_parent(_command: &mut Command) {}

/// Sends SIGTERM to a child that has not been reaped yet.
fn terminate(child: &Child) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `kill` takes no pointers. The child has not been waited for
    // (`RunningNode::process` is cleared when it is reaped), so `pid` still
    // names it, a zombie at worst, and never a process that reused the id.
    let result = unsafe { libc::kill(pid, libc::SIGTERM) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// SIGTERM and SIGINT.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// Waits for a signal, reporting nodes that exit by themselves; fails
/// when every node has exited.
async fn watch(
    files: &ClusterFiles,
    nodes: &mut [RunningNode<'_>],
    signals: &mut Signals,
) -> Result<(), ToolError> {
    let mut ticker = tokio::time::interval(POLL_INTERVAL);
    loop {
        tokio::select! {
            () = signals.recv() => {
                eprintln!("strom: stopping the cluster");
                return Ok(());
            }
            _ = ticker.tick() => {
                for running in nodes.iter_mut() {
                    if let Some(status) = reap(running) {
                        eprintln!(
                            "strom: node {} exited by itself ({status}); see {}; the other nodes keep running",
                            running.node.node_id,
                            running.node.log.display()
                        );
                    }
                }
                if nodes.iter().all(|running| running.process.is_none()) {
                    return Err(ToolError::ClusterStopped { dir: files.dir.clone() });
                }
            }
        }
    }
}

/// The exit status of a node that has exited (it is then reaped).
fn reap(running: &mut RunningNode<'_>) -> Option<std::process::ExitStatus> {
    let process = running.process.as_mut()?;
    match process.try_wait() {
        Ok(Some(status)) => {
            running.process = None;
            Some(status)
        }
        Ok(None) => None,
        Err(error) => {
            eprintln!("strom: cannot check node {}: {error}", running.node.node_id);
            None
        }
    }
}

/// The order in which nodes stop: first those that are brokers only, then
/// the controller voters. Indexes into `controller`.
pub fn stop_order(controller: &[bool]) -> [Vec<usize>; 2] {
    let of = |wanted: bool| {
        (0..controller.len())
            .filter(|&index| controller[index] == wanted)
            .collect()
    };
    [of(false), of(true)]
}

/// Stops every running node: brokers only first, controllers last.
async fn stop_all(nodes: &mut [RunningNode<'_>]) {
    let controller: Vec<bool> = nodes
        .iter()
        .map(|running| running.node.controller)
        .collect();
    for group in stop_order(&controller) {
        for &index in &group {
            if let Some(process) = &nodes[index].process {
                if let Err(error) = terminate(process) {
                    eprintln!(
                        "strom: cannot signal node {}: {error}",
                        nodes[index].node.node_id
                    );
                }
            }
        }
        wait_for(nodes, &group).await;
    }
}

/// Waits for the nodes of `group` to exit, killing any still running
/// after [`STOP_TIMEOUT`].
async fn wait_for(nodes: &mut [RunningNode<'_>], group: &[usize]) {
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        for &index in group {
            if let Some(status) = reap(&mut nodes[index]) {
                eprintln!(
                    "strom: node {} stopped ({status})",
                    nodes[index].node.node_id
                );
            }
        }
        let still_running: Vec<usize> = group
            .iter()
            .copied()
            .filter(|&index| nodes[index].process.is_some())
            .collect();
        if still_running.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for index in still_running {
                eprintln!(
                    "strom: node {} did not stop within {} s; killing it",
                    nodes[index].node.node_id,
                    STOP_TIMEOUT.as_secs()
                );
                if let Some(mut process) = nodes[index].process.take() {
                    let _ = process.kill();
                    let _ = process.wait();
                }
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn brokers_stop_before_controllers() {
        let [brokers, controllers] = stop_order(&[true, true, true, false, false]);
        assert_eq!(brokers, vec![3, 4]);
        assert_eq!(controllers, vec![0, 1, 2]);
        let [brokers, controllers] = stop_order(&[true]);
        assert!(brokers.is_empty());
        assert_eq!(controllers, vec![0]);
    }

    /// Waits up to 10 s for `child` to exit; kills it otherwise.
    fn exit_of(mut child: Child) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn sleeper() -> Command {
        let mut command = Command::new("sleep");
        command.arg("30").stdin(Stdio::null());
        command
    }

    #[test]
    fn terminate_sends_sigterm() {
        let child = sleeper().spawn().expect("spawn sleep");
        terminate(&child).expect("signal");
        let status = exit_of(child).expect("sleep stopped");
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_stops_when_the_thread_that_started_it_ends() {
        let child = std::thread::spawn(|| {
            let mut command = sleeper();
            own_process_group(&mut command);
            stop_with_parent(&mut command);
            command.spawn().expect("spawn sleep")
        })
        .join()
        .expect("thread");
        let status = exit_of(child).expect("sleep stopped with the thread that started it");
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }
}
