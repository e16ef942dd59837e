//! `strom produce`, `consume`, `groups` and `perf`, run as the real binary
//! against an in-process broker.

use crate::common;

use common::{strom, strom_with_input};

fn create_topic(topic: &str, partitions: &str) {
    strom(&["topics", "create", topic, "--partitions", partitions]).ok();
}

#[test]
fn produce_then_consume_keys_values_and_headers() {
    create_topic("lines", "1");
    let run = strom_with_input(
        &[
            "produce",
            "lines",
            "--key-separator",
            ":",
            "--header",
            "source=test",
        ],
        "k1:first\nk2:second\nk3:third\n",
    );
    assert!(run.stderr.contains("Produced 3 record(s)"), "{run:?}");
    run.ok();
    let out = strom(&[
        "consume",
        "lines",
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "10000",
        "--format",
        "%p@%o %k=%v [%h]",
    ])
    .ok();
    assert_eq!(
        out,
        "0@0 k1=first [source=test]\n0@1 k2=second [source=test]\n0@2 k3=third [source=test]\n"
    );
    let json = strom(&[
        "consume",
        "lines",
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "1",
        "--json",
        "--timeout-ms",
        "10000",
    ])
    .ok();
    let record: serde_json::Value = serde_json::from_str(json.trim()).expect("json line");
    assert_eq!(record["offset"], 1);
    assert_eq!(record["key"], "k2");
    assert_eq!(record["value"], "second");
    assert_eq!(record["headers"][0]["key"], "source");
    assert!(record["timestamp_ms"].as_i64().is_some_and(|ms| ms > 0));
}

#[test]
fn produce_to_a_partition_from_a_file_with_compression_and_parsed_headers() {
    create_topic("spread", "3");
    let directory = tempfile::tempdir().expect("tempdir");
    let file = directory.path().join("records.txt");
    std::fs::write(&file, "trace:abc\tx\ntrace:def\ty\n").expect("write");
    strom(&[
        "produce",
        "spread",
        "--file",
        file.to_str().expect("utf-8"),
        "--partition",
        "2",
        "--parse-headers",
        "--compression",
        "zstd",
        "--acks",
        "1",
    ])
    .ok();
    let out = strom(&[
        "consume",
        "spread",
        "--partition",
        "2",
        "--offset",
        "earliest",
        "--max-messages",
        "2",
        "--timeout-ms",
        "10000",
        "--format",
        "%p %v %h",
    ])
    .ok();
    assert_eq!(out, "2 x trace=abc\n2 y trace=def\n");
    let idle = strom(&[
        "consume",
        "spread",
        "--partition",
        "0",
        "--from-beginning",
        "--timeout-ms",
        "500",
    ]);
    assert!(
        idle.stderr.contains("Processed a total of 0 messages"),
        "{idle:?}"
    );
    assert_eq!(idle.ok(), "");
}

#[test]
fn produce_and_consume_errors() {
    strom_with_input(&["produce", "missing-topic"], "x\n")
        .fails_with(1, "topic `missing-topic` does not exist");
    strom(&["consume", "missing-topic", "--timeout-ms", "100"])
        .fails_with(1, "list topics with `strom topics list`");
    create_topic("strict-lines", "1");
    strom_with_input(
        &["produce", "strict-lines", "--key-separator", ":"],
        "no separator\n",
    )
    .fails_with(2, "input line 1");
    strom_with_input(&["produce", "strict-lines", "--partition", "7"], "x\n")
        .fails_with(1, "partition 7");
    strom(&["consume", "strict-lines", "--format", "%x"]).fails_with(2, "--format");
    strom(&[
        "consume",
        "strict-lines",
        "--partition",
        "0",
        "--offset",
        "soon",
    ])
    .fails_with(2, "--offset");
}

#[test]
fn groups_list_describe_reset_and_delete() {
    create_topic("grouped", "2");
    let input: String = (0..10)
        .map(|index| format!("k{index}:v{index}\n"))
        .collect();
    strom_with_input(&["produce", "grouped", "--key-separator", ":"], &input).ok();
    let consumed = strom(&[
        "consume",
        "grouped",
        "--group",
        "readers",
        "--from-beginning",
        "--max-messages",
        "10",
        "--timeout-ms",
        "15000",
    ])
    .ok();
    assert_eq!(consumed.lines().count(), 10, "{consumed}");

    let groups = strom(&["groups", "list"]).ok();
    assert!(groups.lines().any(|line| line == "readers"), "{groups}");
    let json = strom(&["groups", "describe", "readers", "--json"]).ok();
    let described: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    let offsets = described["offsets"].as_array().expect("offsets");
    assert_eq!(offsets.len(), 2, "{json}");
    let committed: i64 = offsets
        .iter()
        .filter_map(|row| row["committed_offset"].as_i64())
        .sum();
    let log_end: i64 = offsets
        .iter()
        .filter_map(|row| row["log_end_offset"].as_i64())
        .sum();
    let lag: i64 = offsets.iter().filter_map(|row| row["lag"].as_i64()).sum();
    assert_eq!(log_end, 10, "{json}");
    assert_eq!(committed + lag, log_end, "{json}");
    let text = strom(&["groups", "describe", "readers"]).ok();
    assert!(
        text.contains("LOG-END-OFFSET") && text.contains("grouped"),
        "{text}"
    );

    let dry = strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped",
        "--to-earliest",
        "--json",
    ]);
    assert!(dry.stderr.contains("Dry run"), "{dry:?}");
    let plan: serde_json::Value = serde_json::from_str(dry.ok().trim()).expect("json");
    assert!(plan["partitions"]
        .as_array()
        .expect("rows")
        .iter()
        .all(|row| row["new_offset"] == 0));
    let after_dry = strom(&["groups", "describe", "readers", "--json"]).ok();
    assert_eq!(after_dry, json, "a dry run changes nothing");

    strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped:0,1",
        "--to-earliest",
        "--execute",
    ])
    .ok();
    strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped:0",
        "--shift-by",
        "2",
        "--execute",
    ])
    .ok();
    let json = strom(&["groups", "describe", "readers", "--json"]).ok();
    let described: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    let committed: Vec<(i64, i64)> = described["offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .map(|row| {
            (
                row["partition"].as_i64().unwrap_or(-1),
                row["committed_offset"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    let partition_zero_end = offsets
        .iter()
        .find(|row| row["partition"] == 0)
        .and_then(|row| row["log_end_offset"].as_i64())
        .expect("partition 0");
    assert_eq!(
        committed,
        [(0, 2.min(partition_zero_end)), (1, 0)],
        "{json}"
    );
    strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped",
        "--to-datetime",
        "2000-01-01T00:00:00Z",
        "--execute",
    ])
    .ok();
    strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped",
        "--to-latest",
        "--execute",
    ])
    .ok();
    let json = strom(&["groups", "describe", "readers", "--json"]).ok();
    let described: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    let lag: i64 = described["offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .filter_map(|row| row["lag"].as_i64())
        .sum();
    assert_eq!(lag, 0, "{json}");

    strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped",
        "--to-datetime",
        "last week",
    ])
    .fails_with(2, "--to-datetime");
    strom(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped:9",
        "--to-earliest",
    ])
    .fails_with(1, "partition 9");
    strom(&["groups", "delete", "readers"]).ok();
    strom(&["groups", "describe", "readers"]).fails_with(1, "group `readers` does not exist");
    strom(&["groups", "delete", "readers"]).fails_with(1, "does not exist");
}

#[test]
fn perf_produce_consume_and_latency() {
    create_topic("bench", "1");
    let produced = strom(&[
        "perf",
        "produce",
        "bench",
        "--num-records",
        "2000",
        "--record-size",
        "64",
        "--json",
    ])
    .ok();
    let report: serde_json::Value = serde_json::from_str(produced.trim()).expect("one json line");
    assert_eq!(report["records"], 2000, "{produced}");
    assert_eq!(report["failed"], 0, "{produced}");
    let human = strom(&["perf", "produce", "bench", "--num-records", "100"]).ok();
    assert!(human.contains("records/sec"), "{human}");

    let consumed = strom(&["perf", "consume", "bench", "--messages", "2100", "--json"]).ok();
    let report: serde_json::Value = serde_json::from_str(consumed.trim()).expect("one json line");
    assert_eq!(report["records"], 2100, "{consumed}");
    strom(&[
        "perf",
        "consume",
        "bench",
        "--messages",
        "5000",
        "--timeout-ms",
        "500",
    ])
    .fails_with(1, "did not arrive");

    let latency = strom(&[
        "perf",
        "e2e-latency",
        "bench",
        "--num-records",
        "50",
        "--json",
    ])
    .ok();
    let report: serde_json::Value = serde_json::from_str(latency.trim()).expect("one json line");
    assert_eq!(report["records"], 50, "{latency}");
    let p50 = report["p50_latency_ms"].as_f64().expect("p50");
    let max = report["max_latency_ms"].as_f64().expect("max");
    assert!(p50 > 0.0 && p50 <= max, "{latency}");
    let human = strom(&["perf", "e2e-latency", "bench", "--num-records", "5"]).ok();
    assert!(human.contains("p99.9"), "{human}");
    strom(&["perf", "produce", "no-bench"]).fails_with(1, "does not exist");
}

#[test]
fn perf_transactions_commit_abort_and_read_committed() {
    create_topic("bench-txn", "2");
    // A zero duration ends the transaction after every record: 200
    // transactions, every 4th aborted.
    let produced = strom(&[
        "perf",
        "produce",
        "bench-txn",
        "--num-records",
        "200",
        "--record-size",
        "20",
        "--transactional-id",
        "perf-transactions",
        "--transaction-duration-ms",
        "0",
        "--abort-every",
        "4",
        "--json",
    ])
    .ok();
    let report: serde_json::Value = serde_json::from_str(produced.trim()).expect("one json line");
    assert_eq!(report["records"], 200, "{produced}");
    let transactions = &report["transactions"];
    assert_eq!(transactions["committed"], 150, "{produced}");
    assert_eq!(transactions["committed_records"], 150, "{produced}");
    assert_eq!(transactions["aborted"], 50, "{produced}");
    assert_eq!(transactions["aborted_records"], 50, "{produced}");

    let read = |isolation_level: &str, messages: &str| {
        strom(&[
            "perf",
            "consume",
            "bench-txn",
            "--messages",
            messages,
            "--isolation-level",
            isolation_level,
            "--timeout-ms",
            "1500",
            "--json",
        ])
    };
    let committed = read("read_committed", "150").ok();
    let report: serde_json::Value = serde_json::from_str(committed.trim()).expect("json line");
    assert_eq!(report["records"], 150, "{committed}");
    // Not one record more: the aborted ones and the markers are skipped.
    let run = read("read_committed", "151").fails_with(1, "did not arrive");
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("json line");
    assert_eq!(report["records"], 150, "{run:?}");
    let uncommitted = read("read_uncommitted", "200").ok();
    let report: serde_json::Value = serde_json::from_str(uncommitted.trim()).expect("json line");
    assert_eq!(report["records"], 200, "{uncommitted}");

    let latency = strom(&[
        "perf",
        "e2e-latency",
        "bench-txn",
        "--num-records",
        "5",
        "--transactional-id",
        "perf-transactions-latency",
        "--records-per-transaction",
        "3",
        "--json",
    ])
    .ok();
    let report: serde_json::Value = serde_json::from_str(latency.trim()).expect("one json line");
    assert_eq!(report["records"], 5, "{latency}");
    assert_eq!(report["commit"]["records"], 5, "{latency}");
    let human = strom(&[
        "perf",
        "e2e-latency",
        "bench-txn",
        "--num-records",
        "2",
        "--transactional-id",
        "perf-transactions-latency",
    ])
    .ok();
    assert!(human.contains("commit-to-read latency"), "{human}");

    strom(&["perf", "produce", "bench-txn", "--abort-every", "2"])
        .fails_with(2, "--transactional-id");
    strom(&[
        "perf",
        "produce",
        "bench-txn",
        "--transactional-id",
        "x",
        "--abort-every",
        "0",
    ])
    .fails_with(2, "abort-every");
}

#[test]
fn perf_produce_applies_the_command_config() {
    create_topic("bench-config", "1");
    let directory = tempfile::tempdir().expect("tempdir");
    // Requests may not exceed 500 bytes: 1,000-byte records cannot be sent.
    let small = directory.path().join("small.properties");
    std::fs::write(&small, "max.request.size=500\n").expect("write");
    let arguments = |config: &str| {
        vec![
            "--command-config".to_owned(),
            config.to_owned(),
            "perf".to_owned(),
            "produce".to_owned(),
            "bench-config".to_owned(),
            "--num-records".to_owned(),
            "20".to_owned(),
            "--record-size".to_owned(),
            "1000".to_owned(),
        ]
    };
    let refused = arguments(small.to_str().expect("utf-8"));
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    strom(&refused).fails_with(1, "not acknowledged");
    let roomy = directory.path().join("roomy.properties");
    std::fs::write(&roomy, "max.request.size=1048576\n").expect("write");
    let accepted = arguments(roomy.to_str().expect("utf-8"));
    let accepted: Vec<&str> = accepted.iter().map(String::as_str).collect();
    let report = strom(&accepted).ok();
    assert!(report.contains("20 records sent (0 failed)"), "{report}");
}

#[test]
fn perf_produce_takes_the_command_configs_linger_unless_told_otherwise() {
    create_topic("bench-linger", "1");
    let directory = tempfile::tempdir().expect("tempdir");
    // Two records half a second apart: with linger.ms=3000 the first waits
    // in its batch until the run's final flush, half a second later.
    let lingering = directory.path().join("linger.properties");
    std::fs::write(&lingering, "linger.ms=3000\n").expect("write");
    let run = |extra: &[&str]| -> f64 {
        let mut arguments = vec![
            "--command-config",
            lingering.to_str().expect("utf-8"),
            "perf",
            "produce",
            "bench-linger",
            "--num-records",
            "2",
            "--throughput",
            "2",
            "--json",
        ];
        arguments.extend_from_slice(extra);
        let output = strom(&arguments).ok();
        let report: serde_json::Value = serde_json::from_str(output.trim()).expect("one json line");
        assert_eq!(report["records"], 2, "{output}");
        report["max_latency_ms"].as_f64().expect("max latency")
    };
    let from_the_file = run(&[]);
    assert!(
        from_the_file >= 400.0,
        "linger.ms=3000 from the file should hold the first record: {from_the_file} ms"
    );
    let from_the_option = run(&["--linger-ms", "0"]);
    assert!(
        from_the_option < 400.0,
        "--linger-ms 0 should win over the file: {from_the_option} ms"
    );
}

#[test]
fn a_group_with_live_members_shows_them_and_refuses_changes() {
    create_topic("live", "1");
    strom_with_input(&["produce", "live"], "a\nb\nc\n").ok();
    let _member = common::spawn_strom(&[
        "consume",
        "live",
        "--group",
        "watchers",
        "--from-beginning",
        "--timeout-ms",
        "20000",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let described = loop {
        let run = strom(&["groups", "describe", "watchers", "--json"]);
        if run.code == 0 {
            let value: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("json");
            let assigned = value["members"].as_array().is_some_and(|members| {
                members
                    .iter()
                    .any(|m| m["assignment"][0]["topic"] == "live")
            });
            if assigned {
                break value;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no member joined: {run:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(described["state"], "Stable", "{described}");
    let text = strom(&["groups", "describe", "watchers"]).ok();
    assert!(
        text.contains("MEMBER-ID") && text.contains("live-0"),
        "{text}"
    );
    strom(&[
        "groups",
        "reset-offsets",
        "watchers",
        "--topic",
        "live",
        "--to-earliest",
        "--execute",
    ])
    .fails_with(1, "active member");
    strom(&["groups", "delete", "watchers"]).fails_with(1, "NON_EMPTY_GROUP");
}

#[test]
fn a_group_consume_with_max_messages_commits_only_what_it_printed() {
    create_topic("paged", "1");
    let input: String = (0..10).map(|index| format!("v{index}\n")).collect();
    strom_with_input(&["produce", "paged"], &input).ok();
    let page = |expected: &str| {
        let out = strom(&[
            "consume",
            "paged",
            "--group",
            "pager",
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "15000",
            "--format",
            "%o=%v",
        ])
        .ok();
        assert_eq!(out, expected);
    };
    // One poll returns all ten records; only three are printed each time,
    // and the next run starts right after them: nothing skipped.
    page("0=v0\n1=v1\n2=v2\n");
    page("3=v3\n4=v4\n5=v5\n");
    page("6=v6\n7=v7\n8=v8\n");
}
