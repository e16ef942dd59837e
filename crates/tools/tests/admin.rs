//! `strom topics`, `strom configs`, global options, exit codes and
//! completions, run as the real binary against an in-process broker.

use crate::common;

use common::{run_strom, strom, unused_port};

#[test]
fn topics_create_list_describe_alter_delete() {
    strom(&[
        "topics",
        "create",
        "orders",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
    ])
    .ok();
    let listed = strom(&["topics", "list"]).ok();
    assert!(listed.lines().any(|line| line == "orders"), "{listed}");

    let described = strom(&["topics", "describe", "orders"]).ok();
    assert!(described.contains("Topic: orders"), "{described}");
    assert!(described.contains("PartitionCount: 2"), "{described}");
    assert!(described.contains("retention.ms=3600000"), "{described}");
    assert_eq!(described.matches("\tPartition: ").count(), 2, "{described}");
    assert!(
        !described.contains("segment.jitter.ms"),
        "defaults are not shown: {described}"
    );

    strom(&[
        "topics",
        "alter",
        "orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=60000",
    ])
    .ok();
    let json = strom(&["topics", "describe", "orders", "--json"]).ok();
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert_eq!(value["partition_count"], 3, "{json}");
    assert_eq!(value["configs"]["retention.ms"], "60000", "{json}");

    strom(&["topics", "delete", "orders"]).ok();
    let listed = strom(&["topics", "list", "--json"]).ok();
    let names: Vec<String> = serde_json::from_str(listed.trim()).expect("json array");
    assert!(!names.contains(&"orders".to_owned()), "{listed}");
}

#[test]
fn create_twice_needs_if_not_exists() {
    strom(&["topics", "create", "twice"]).ok();
    strom(&["topics", "create", "twice"]).fails_with(1, "--if-not-exists");
    let out = strom(&["topics", "create", "twice", "--if-not-exists"]).ok();
    assert!(out.contains("already exists"), "{out}");
}

#[test]
fn unknown_topics_are_reported_with_advice() {
    strom(&["topics", "describe", "no-such-topic"]).fails_with(
        1,
        "topic `no-such-topic` does not exist; list topics with `strom topics list`",
    );
    strom(&["topics", "delete", "no-such-topic"]).fails_with(1, "does not exist");
    strom(&["topics", "delete", "no-such-topic", "--if-exists"]).ok();
    strom(&["configs", "describe", "--topic", "no-such-topic"]).fails_with(1, "does not exist");
    strom(&["topics", "alter", "no-such-topic", "--partitions", "4"])
        .fails_with(1, "does not exist");
}

#[test]
fn invalid_values_are_rejected() {
    strom(&["topics", "create", "strict"]).ok();
    strom(&[
        "configs",
        "alter",
        "--topic",
        "strict",
        "--add-config",
        "retention.ms=soon",
    ])
    .fails_with(1, "INVALID_CONFIG");
    strom(&[
        "topics",
        "create",
        "bad-config",
        "--config",
        "cleanup.policy=sometimes",
    ])
    .fails_with(1, "bad-config");
    strom(&["topics", "alter", "strict", "--partitions", "0"]).fails_with(1, "INVALID_PARTITIONS");
    strom(&["topics", "create", "x", "--config", "no-equals"]).fails_with(2, "KEY=VALUE");
}

#[test]
fn configs_describe_and_alter_topics_and_brokers() {
    strom(&["topics", "create", "tuned"]).ok();
    let out = strom(&[
        "configs",
        "alter",
        "--topic",
        "tuned",
        "--add-config",
        "retention.ms=1234,segment.bytes=1048576",
    ])
    .ok();
    assert!(out.contains("Completed"), "{out}");
    let described = strom(&["configs", "describe", "--topic", "tuned"]).ok();
    assert!(described.contains("retention.ms=1234"), "{described}");
    assert!(described.contains("segment.bytes=1048576"), "{described}");
    assert!(described.contains("(DYNAMIC_TOPIC_CONFIG)"), "{described}");
    assert!(!described.contains("segment.jitter.ms"), "{described}");
    let all = strom(&["configs", "describe", "--topic", "tuned", "--all"]).ok();
    assert!(
        all.contains("segment.jitter.ms=0 (DEFAULT_CONFIG)"),
        "{all}"
    );
    strom(&[
        "configs",
        "alter",
        "--topic",
        "tuned",
        "--delete-config",
        "retention.ms",
    ])
    .ok();
    let json = strom(&["configs", "describe", "--topic", "tuned", "--json"]).ok();
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert_ne!(value["retention.ms"], "1234", "{json}");

    let broker = strom(&["configs", "describe", "--broker", "1", "--all", "--json"]);
    let broker_id = if broker.code == 0 { "1" } else { "0" };
    let json = strom(&[
        "configs", "describe", "--broker", broker_id, "--all", "--json",
    ])
    .ok();
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert!(
        value.as_object().is_some_and(|configs| !configs.is_empty()),
        "{json}"
    );
    strom(&["configs", "describe", "--broker", "4242"]).fails_with(2, "--broker");
}

#[test]
fn configs_alter_and_describe_the_broker_defaults() {
    let out = strom(&[
        "configs",
        "alter",
        "--broker-defaults",
        "--add-config",
        "log.cleaner.threads=2",
    ])
    .ok();
    assert!(out.contains("Completed"), "{out}");
    // kafka-configs.sh's form names the same resource.
    let described = strom(&[
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-default",
    ])
    .ok();
    assert!(
        described.contains("log.cleaner.threads=2 (DYNAMIC_DEFAULT_BROKER_CONFIG)"),
        "{described}"
    );
    let one = strom(&[
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--all",
    ])
    .ok();
    assert!(
        one.contains("log.cleaner.threads=2 (DYNAMIC_DEFAULT_BROKER_CONFIG)"),
        "{one}"
    );
    strom(&[
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "one",
    ])
    .fails_with(2, "broker id");
    strom(&[
        "configs",
        "alter",
        "--broker-defaults",
        "--add-config",
        "log.dirs=/elsewhere",
    ])
    .fails_with(1, "INVALID_REQUEST");
    strom(&[
        "configs",
        "alter",
        "--broker-defaults",
        "--delete-config",
        "log.cleaner.threads",
    ])
    .ok();
    let described = strom(&["configs", "describe", "--broker-defaults", "--json"]).ok();
    assert_eq!(described.trim(), "{}", "{described}");
    strom(&["configs", "describe", "--broker-defaults", "--broker", "1"])
        .fails_with(2, "cannot be used with");
}

#[test]
fn an_unreachable_broker_exits_with_3() {
    let address = format!("127.0.0.1:{}", unused_port());
    run_strom(&["--bootstrap-server", &address, "topics", "list"], "")
        .fails_with(3, "cannot reach a broker at");
    run_strom(&["--bootstrap-server", &address, "groups", "list"], "")
        .fails_with(3, "strom broker");
}

#[test]
fn the_bootstrap_server_comes_from_the_environment_too() {
    let address = common::broker().address.to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(["topics", "list"])
        .env("STROM_BOOTSTRAP", &address)
        .output()
        .expect("run strom");
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn command_config_is_applied_and_checked() {
    let directory = tempfile::tempdir().expect("tempdir");
    let good = directory.path().join("good.properties");
    std::fs::write(
        &good,
        "client.id=ops-tool\nrequest.timeout.ms=5000\nlinger.ms=1\nfrobnication.level=9\n",
    )
    .expect("write");
    let run = strom(&[
        "--command-config",
        good.to_str().expect("utf-8"),
        "topics",
        "list",
    ]);
    assert!(
        run.stderr
            .contains("ignoring unknown client property `frobnication.level`"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("linger.ms"), "{run:?}");
    run.ok();
    let bad = directory.path().join("bad.properties");
    std::fs::write(&bad, "request.timeout.ms=soon\n").expect("write");
    strom(&[
        "--command-config",
        bad.to_str().expect("utf-8"),
        "topics",
        "list",
    ])
    .fails_with(2, "request.timeout.ms");
    strom(&[
        "--command-config",
        "/nonexistent/client.properties",
        "topics",
        "list",
    ])
    .fails_with(2, "cannot read");
}

#[test]
fn usage_errors_exit_with_2_and_help_has_examples() {
    run_strom(&["topics", "frobnicate"], "").fails_with(2, "frobnicate");
    run_strom(&["groups", "reset-offsets", "g", "--topic", "t"], "").fails_with(2, "required");
    for command in [
        vec!["--help"],
        vec!["topics", "create", "--help"],
        vec!["produce", "--help"],
        vec!["consume", "--help"],
        vec!["groups", "reset-offsets", "--help"],
        vec!["perf", "e2e-latency", "--help"],
        vec!["dump-log", "--help"],
    ] {
        let out = run_strom(&command, "").ok();
        assert!(out.contains("Examples:"), "{command:?}: {out}");
    }
    let out = run_strom(&["--help"], "").ok();
    assert!(out.contains("Exit codes:"), "{out}");
}

#[test]
fn completions_are_generated_for_each_shell() {
    let bash = run_strom(&["completions", "bash"], "").ok();
    assert!(bash.contains("_strom"), "bash script");
    assert!(
        bash.contains("reset-offsets"),
        "bash script lists subcommands"
    );
    let zsh = run_strom(&["completions", "zsh"], "").ok();
    assert!(zsh.starts_with("#compdef strom"), "zsh script");
    let fish = run_strom(&["completions", "fish"], "").ok();
    assert!(fish.contains("complete -c strom"), "fish script");
    run_strom(&["completions", "tcsh"], "").fails_with(2, "tcsh");
}
