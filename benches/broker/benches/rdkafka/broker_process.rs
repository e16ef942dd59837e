//! A Strom broker run as a child process of the benchmark, so that its
//! memory can be read from `/proc/<pid>/status` apart from the client's.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the broker gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `strom-broker` child with its own data directory.
pub struct BrokerProcess {
    child: Child,
    address: SocketAddr,
    _data: tempfile::TempDir,
}

impl BrokerProcess {
    /// Starts `binary` listening on a free loopback port with a fresh data
    /// directory and `settings` (`key=value`, after the bench's own), and
    /// waits until it accepts connections.
    pub fn start(
        binary: &Path,
        partitions: i32,
        settings: &[String],
    ) -> Result<BrokerProcess, String> {
        let data = tempfile::tempdir().map_err(|error| format!("temp dir: {error}"))?;
        let address = free_port()?;
        let mut command = Command::new(binary);
        command
            .arg("--set")
            .arg(format!("listeners=PLAINTEXT://{address}"))
            .arg("--set")
            .arg(format!("log.dirs={}", data.path().display()))
            .arg("--set")
            .arg(format!("num.partitions={partitions}"));
        for setting in settings {
            command.arg("--set").arg(setting);
        }
        let child = command
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", binary.display()))?;
        let mut broker = BrokerProcess {
            child,
            address,
            _data: data,
        };
        let started = Instant::now();
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = broker.child.try_wait() {
                return Err(format!("strom-broker exited at start: {status}"));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err("strom-broker did not accept connections in time".to_owned());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(broker)
    }

    /// host:port of the broker.
    pub fn bootstrap(&self) -> String {
        self.address.to_string()
    }

    /// CPU time used by all of the broker's threads so far (nanoseconds,
    /// from `/proc/<pid>/task/*/schedstat`). Not every bench that includes
    /// this file reads it.
    #[allow(dead_code)]
    pub fn cpu_ns(&self) -> Option<u64> {
        threads_cpu_ns(self.child.id(), |_| true)
    }

    /// The broker's resident set and its peak, in kB (`VmRSS`, `VmHWM`).
    pub fn memory_kb(&self) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        Some((
            status_field(&status, "VmRSS:")?,
            status_field(&status, "VmHWM:")?,
        ))
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        // SIGTERM lets the broker shut down cleanly; SIGKILL if it hangs.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address whose port was free a moment ago.
fn free_port() -> Result<SocketAddr, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|error| format!("no free port: {error}"))?;
    listener
        .local_addr()
        .map_err(|error| format!("no local address: {error}"))
}

/// CPU time of the threads of process `pid` whose name passes `keep`, in
/// nanoseconds (the first field of each thread's `schedstat`). Not every
/// bench that includes this file reads it.
#[allow(dead_code)]
pub fn threads_cpu_ns(pid: u32, keep: impl Fn(&str) -> bool) -> Option<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = entry.ok()?.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !keep(name.trim_end()) {
            continue;
        }
        // A thread that ended between the listing and the read counts as 0.
        total += schedstat_ns(&path.join("schedstat")).unwrap_or(0);
    }
    Some(total)
}

/// The CPU time in a `schedstat` file (its first field), in nanoseconds.
#[allow(dead_code)]
pub fn schedstat_ns(path: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A `Key:   123 kB` line of `/proc/<pid>/status`, in kB.
fn status_field(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(key))?;
    line.get(key.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Where `cargo build --release -p strom-broker` put the broker: next to the
/// directory holding this benchmark's executable (`target/release/deps`).
pub fn default_broker_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("STROM_BROKER_BIN") {
        return Some(PathBuf::from(path));
    }
    let executable = std::env::current_exe().ok()?;
    let profile_dir = executable.parent()?.parent()?;
    Some(profile_dir.join("strom-broker"))
}
