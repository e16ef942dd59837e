//! `strom metadata-quorum describe`, run as the real binary against an
//! in-process single-node broker (a quorum of one voter, itself).

use crate::common;

use common::strom;

#[test]
fn status_describes_a_one_voter_quorum() {
    let text = strom(&["metadata-quorum", "describe", "--status"]).ok();
    let lines: Vec<&str> = text.lines().collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|line| line.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        vec![
            "ClusterId:",
            "LeaderId:",
            "LeaderEpoch:",
            "HighWatermark:",
            "MaxFollowerLag:",
            "MaxFollowerLagTimeMs:",
            "CurrentVoters:",
            "CurrentObservers:",
        ],
        "{text}"
    );
    assert!(lines.iter().all(|line| line.len() > 24), "{text}");
    let value = |index: usize| lines[index][24..].to_owned();
    assert_eq!(value(0).len(), 22, "a Kafka cluster id: {text}");
    assert_eq!(value(1), "1");
    assert_eq!(value(2), "0");
    assert!(value(3).parse::<i64>().expect("a number") > 0, "{text}");
    assert_eq!(value(4), "0");
    assert_eq!(value(5), "0");
    assert_eq!(value(6), "[{\"id\": 1}]");
    assert_eq!(value(7), "[]");
}

#[test]
fn replication_lists_the_leader() {
    strom(&["topics", "create", "quorum-tool-topic"]).ok();
    let text = strom(&["metadata-quorum", "describe", "--replication"]).ok();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|line| line.split('\t').map(str::trim_end).collect())
        .collect();
    assert_eq!(
        rows[0],
        vec![
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
            ""
        ],
        "{text}"
    );
    assert_eq!(rows.len(), 2, "{text}");
    let leader = &rows[1];
    assert_eq!(leader[0], "1");
    assert_eq!(leader[1], "AAAAAAAAAAAAAAAAAAAAAA");
    assert!(leader[2].parse::<i64>().expect("offset") > 0, "{text}");
    assert_eq!(leader[3], "0");
    assert!(leader[4].parse::<i64>().expect("timestamp") > 1_700_000_000_000);
    assert_eq!(leader[6], "Leader");

    let human = strom(&[
        "metadata-quorum",
        "describe",
        "--replication",
        "--human-readable",
    ])
    .ok();
    assert!(human.contains(" ms ago"), "{human}");
}

#[test]
fn exactly_one_section_is_asked_for() {
    strom(&["metadata-quorum", "describe"]).fails_with(2, "--status");
    strom(&["metadata-quorum", "describe", "--status", "--replication"])
        .fails_with(2, "cannot be used with");
    strom(&[
        "metadata-quorum",
        "describe",
        "--status",
        "--human-readable",
    ])
    .fails_with(2, "'--status' cannot be used with '--human-readable'");
}
