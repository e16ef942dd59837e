//! `strom broker`: the real binary starts a broker that the other commands
//! use, stops cleanly on SIGTERM, and rejects bad settings with exit code 2.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_strom, unused_port};

/// Kills the broker if the test fails before stopping it.
struct BrokerProcess(Child);

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_exit(child: &mut Child, timeout: Duration) -> Option<i32> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn strom_broker_serves_until_sigterm() {
    let directory = tempfile::tempdir().expect("tempdir");
    let port = unused_port();
    let listeners = format!("listeners=PLAINTEXT://127.0.0.1:{port}");
    let log_dirs = format!("log.dirs={}", directory.path().join("data").display());
    let mut broker = BrokerProcess(
        Command::new(env!("CARGO_BIN_EXE_strom"))
            .args(["broker", "--set", &listeners, "--set", &log_dirs])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn strom broker"),
    );
    let bootstrap = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = run_strom(&["--bootstrap-server", &bootstrap, "topics", "list"], "");
        if run.code == 0 {
            break;
        }
        assert_eq!(run.code, 3, "only 'unreachable' while starting: {run:?}");
        assert!(
            Instant::now() < deadline,
            "the broker did not start: {run:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    run_strom(
        &[
            "--bootstrap-server",
            &bootstrap,
            "topics",
            "create",
            "from-cli",
        ],
        "",
    )
    .ok();
    assert!(directory.path().join("data").join("from-cli-0").is_dir());

    let status = Command::new("kill")
        .args(["-TERM", &broker.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert_eq!(
        wait_for_exit(&mut broker.0, Duration::from_secs(30)),
        Some(0)
    );
}

#[test]
fn bad_broker_settings_exit_with_2() {
    run_strom(&["broker", "--set", "no-equals-sign"], "").fails_with(2, "no-equals-sign");
    run_strom(&["broker", "--set", "num.partitions=many"], "").fails_with(2, "num.partitions");
    run_strom(
        &["broker", "--config", "/nonexistent/server.properties"],
        "",
    )
    .fails_with(2, "/nonexistent/server.properties");
}
