//! What the `strom` binary tests share: one in-process broker per test file
//! (on 127.0.0.1:0 with a temporary data directory) and a way to run the
//! real `strom` binary with a deadline.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// How long one `strom` invocation may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A broker running for the whole test binary.
pub struct TestBroker {
    /// Its listener.
    pub address: SocketAddr,
    /// Its log directory.
    pub data_dir: PathBuf,
}

/// The broker of this test binary, started on first use.
pub fn broker() -> &'static TestBroker {
    static BROKER: OnceLock<TestBroker> = OnceLock::new();
    BROKER.get_or_init(start_broker)
}

fn start_broker() -> TestBroker {
    // The broker lives as long as the test process, so its directory is
    // kept, in Cargo's scratch space for tests rather than in /tmp.
    let directory = tempfile::Builder::new()
        .prefix("strom-tools-broker")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir")
        .keep();
    let data_dir = directory.join("data");
    let mut settings = BTreeMap::new();
    for (key, value) in [
        ("listeners", "PLAINTEXT://127.0.0.1:0"),
        ("num.partitions", "1"),
        ("offsets.topic.num.partitions", "1"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("transaction.state.log.num.partitions", "1"),
    ] {
        settings.insert(key.to_owned(), value.to_owned());
    }
    settings.insert("log.dirs".to_owned(), data_dir.display().to_string());
    let (config, _) = strom_broker::BrokerConfig::from_map(&settings).expect("valid config");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let broker = strom_broker::start(config).await.expect("broker starts");
            sender
                .send(broker.local_addresses()[0])
                .expect("report address");
            std::future::pending::<()>().await;
            drop(broker);
        });
    });
    let address = receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("broker started in time");
    TestBroker { address, data_dir }
}

/// What one invocation of `strom` did.
#[derive(Debug)]
pub struct Run {
    /// The exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Asserts exit code 0 and returns stdout.
    pub fn ok(self) -> String {
        assert_eq!(self.code, 0, "strom failed: {self:?}");
        self.stdout
    }

    /// Asserts `code` and that stderr mentions `needle`.
    pub fn fails_with(self, code: i32, needle: &str) -> Run {
        assert_eq!(self.code, code, "unexpected exit code: {self:?}");
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}: {self:?}"
        );
        self
    }
}

/// Runs `strom ARGS` against this file's broker.
pub fn strom(args: &[&str]) -> Run {
    strom_with_input(args, "")
}

/// Runs `strom ARGS` against this file's broker with `input` on stdin.
pub fn strom_with_input(args: &[&str], input: &str) -> Run {
    let bootstrap = broker().address.to_string();
    let mut full = vec!["--bootstrap-server", bootstrap.as_str()];
    full.extend_from_slice(args);
    run_strom(&full, input)
}

/// Runs `strom ARGS` with no broker option added.
pub fn run_strom(args: &[&str], input: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(args)
        .env_remove("STROM_BOOTSTRAP")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strom");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write stdin");
    drop(stdin);
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    let output = match receiver.recv_timeout(COMMAND_TIMEOUT) {
        Ok(output) => output.expect("output"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("strom {args:?} did not finish within {COMMAND_TIMEOUT:?}");
        }
    };
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A loopback port nobody listens on (bound, then released).
pub fn unused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// A `strom` process running in the background against this file's
/// broker; killed when dropped.
pub struct Background(pub std::process::Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `strom ARGS` in the background (output discarded).
pub fn spawn_strom(args: &[&str]) -> Background {
    let bootstrap = broker().address.to_string();
    Background(
        Command::new(env!("CARGO_BIN_EXE_strom"))
            .args(["--bootstrap-server", bootstrap.as_str()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn strom"),
    )
}
