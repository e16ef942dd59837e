//! `strom metadata-quorum describe --status|--replication`: the metadata
//! quorum, printed with the fields and layout of Kafka's
//! `kafka-metadata-quorum.sh describe` (Kafka 3.9, KIP-853 form).
//!
//! `--status` prints one `Name:` line per field, the value starting at
//! column 25; voters and observers are Kafka's JSON-like objects (`"id"`,
//! `"directoryId"` when the quorum reports one, `"endpoints"` when it
//! reports listeners). `--replication` prints a table: every cell padded
//! to its column's width and followed by a tab, the leader first, then
//! the other voters (`Follower`), then the observers (`Observer`). Lag is
//! the leader's log end offset minus the replica's; an unknown log end
//! offset or timestamp is -1, as in Kafka.

use base64::Engine;
use strom_client::{QuorumInfo, QuorumReplica};

use crate::cli::{MetadataQuorumCommand, QuorumDescribeArguments};
use crate::context::Context;
use crate::error::ToolError;
use crate::output::Output;

/// Runs a `metadata-quorum` command.
pub async fn run(
    context: &Context,
    command: MetadataQuorumCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let MetadataQuorumCommand::Describe(arguments) = command;
    let admin = context.admin().await?;
    let quorum = admin
        .describe_quorum()
        .await
        .map_err(|source| ToolError::client("describe the metadata quorum", source))?;
    let text = describe(&admin, &arguments, &quorum).await?;
    out.bytes(text.as_bytes())
}

async fn describe(
    admin: &strom_client::AdminClient,
    arguments: &QuorumDescribeArguments,
    quorum: &QuorumInfo,
) -> Result<String, ToolError> {
    if arguments.replication {
        let now_ms = arguments.human_readable.then(now_ms);
        return replication_table(quorum, now_ms);
    }
    let cluster_id = admin
        .describe_cluster()
        .await
        .map_err(|source| ToolError::client("describe the cluster", source))?
        .cluster_id;
    status_text(cluster_id.as_deref(), quorum)
}

/// The wall clock in epoch milliseconds (0 if it reads before 1970).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// The leader among the voters, or the error Kafka's tool cannot print
/// without.
fn leader_of(quorum: &QuorumInfo) -> Result<&QuorumReplica, ToolError> {
    quorum.leader().ok_or(ToolError::NoQuorumLeader {
        leader_id: quorum.leader_id.unwrap_or(-1),
    })
}

fn log_end_offset(replica: &QuorumReplica) -> i64 {
    replica.log_end_offset.unwrap_or(-1)
}

/// `describe --status`.
pub fn status_text(cluster_id: Option<&str>, quorum: &QuorumInfo) -> Result<String, ToolError> {
    let leader = leader_of(quorum)?;
    // The voter with the smallest log end offset, the first one on a tie
    // (Kafka's `min` over the voters).
    let slowest = quorum
        .voters
        .iter()
        .reduce(|slowest, voter| {
            if log_end_offset(voter) < log_end_offset(slowest) {
                voter
            } else {
                slowest
            }
        })
        .unwrap_or(leader);
    let max_follower_lag = log_end_offset(leader).saturating_sub(log_end_offset(slowest));
    let max_follower_lag_time_ms = if slowest.node_id == leader.node_id {
        0
    } else {
        match (
            leader.last_caught_up_timestamp_ms,
            slowest.last_caught_up_timestamp_ms,
        ) {
            (Some(leader_ms), Some(slowest_ms)) => leader_ms.saturating_sub(slowest_ms),
            _ => -1,
        }
    };
    let fields = [
        ("ClusterId:", cluster_id.unwrap_or("null").to_owned()),
        ("LeaderId:", leader.node_id.to_string()),
        ("LeaderEpoch:", quorum.leader_epoch.to_string()),
        ("HighWatermark:", quorum.high_watermark.to_string()),
        ("MaxFollowerLag:", max_follower_lag.to_string()),
        (
            "MaxFollowerLagTimeMs:",
            max_follower_lag_time_ms.to_string(),
        ),
        ("CurrentVoters:", replica_list(quorum, &quorum.voters)),
        ("CurrentObservers:", replica_list(quorum, &quorum.observers)),
    ];
    Ok(fields
        .iter()
        .map(|(name, value)| format!("{name:<24}{value}\n"))
        .collect())
}

/// `[{"id": 1, "endpoints": ["CONTROLLER://127.0.0.1:9192"]}, ...]`.
fn replica_list(quorum: &QuorumInfo, replicas: &[QuorumReplica]) -> String {
    let entries: Vec<String> = replicas
        .iter()
        .map(|replica| {
            let mut entry = format!("{{\"id\": {}", replica.node_id);
            if let Some(directory_id) = replica.directory_id {
                entry.push_str(&format!(
                    ", \"directoryId\": \"{}\"",
                    kafka_uuid(directory_id.as_bytes())
                ));
            }
            let endpoints: Vec<String> = quorum
                .nodes
                .get(&replica.node_id)
                .into_iter()
                .flatten()
                .map(|endpoint| {
                    let host = if endpoint.host.contains(':') {
                        format!("[{}]", endpoint.host)
                    } else {
                        endpoint.host.clone()
                    };
                    format!("\"{}://{host}:{}\"", endpoint.listener, endpoint.port)
                })
                .collect();
            if !endpoints.is_empty() {
                entry.push_str(&format!(", \"endpoints\": [{}]", endpoints.join(", ")));
            }
            entry.push('}');
            entry
        })
        .collect();
    format!("[{}]", entries.join(", "))
}

/// Kafka's text form of a UUID: URL-safe base64 without padding.
pub fn kafka_uuid(bytes: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `describe --replication`; with `now_ms`, timestamps read "N ms ago"
/// (`--human-readable`).
pub fn replication_table(quorum: &QuorumInfo, now_ms: Option<i64>) -> Result<String, ToolError> {
    let leader = leader_of(quorum)?;
    let followers = quorum
        .voters
        .iter()
        .filter(|voter| voter.node_id != leader.node_id);
    let rows: Vec<Vec<String>> = std::iter::once((leader, "Leader"))
        .chain(followers.map(|voter| (voter, "Follower")))
        .chain(
            quorum
                .observers
                .iter()
                .map(|observer| (observer, "Observer")),
        )
        .map(|(replica, status)| replication_row(leader, replica, status, now_ms))
        .collect();
    let header = [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    .map(str::to_owned)
    .to_vec();
    Ok(padded_table(&header, &rows))
}

fn replication_row(
    leader: &QuorumReplica,
    replica: &QuorumReplica,
    status: &str,
    now_ms: Option<i64>,
) -> Vec<String> {
    let timestamp = |timestamp_ms: Option<i64>| match (timestamp_ms, now_ms) {
        (None, _) => "-1".to_owned(),
        (Some(timestamp_ms), None) => timestamp_ms.to_string(),
        (Some(timestamp_ms), Some(now_ms)) => {
            format!("{} ms ago", now_ms.saturating_sub(timestamp_ms).max(0))
        }
    };
    let directory_id = replica.directory_id.unwrap_or_default();
    vec![
        replica.node_id.to_string(),
        kafka_uuid(directory_id.as_bytes()),
        log_end_offset(replica).to_string(),
        log_end_offset(leader)
            .saturating_sub(log_end_offset(replica))
            .to_string(),
        timestamp(replica.last_fetch_timestamp_ms),
        timestamp(replica.last_caught_up_timestamp_ms),
        status.to_owned(),
    ]
}

/// Kafka's `prettyPrintTable`: each cell padded to its column's width and
/// followed by a tab.
fn padded_table(header: &[String], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            std::iter::once(header)
                .chain(rows.iter().map(Vec::as_slice))
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (cell, width) in row.iter().zip(&widths) {
            text.push_str(&format!("{cell:<width$}\t"));
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use strom_client::QuorumEndpoint;

    use super::*;

    fn replica(node_id: i32, log_end_offset: i64, timestamp_ms: Option<i64>) -> QuorumReplica {
        QuorumReplica {
            node_id,
            directory_id: None,
            log_end_offset: Some(log_end_offset),
            last_fetch_timestamp_ms: timestamp_ms,
            last_caught_up_timestamp_ms: timestamp_ms,
        }
    }

    fn controller(port: u16) -> Vec<QuorumEndpoint> {
        vec![QuorumEndpoint {
            listener: "CONTROLLER".to_owned(),
            host: format!("kafka-{}", port - 29090),
            port: 29093,
        }]
    }

    /// A three-voter quorum; its `--replication` table is the one Kafka
    /// 3.9 printed for these values in a published example.
    fn three_voters() -> QuorumInfo {
        QuorumInfo {
            leader_id: Some(1),
            leader_epoch: 4,
            high_watermark: 2380,
            voters: vec![
                replica(1, 2406, Some(1_785_399_538_284)),
                QuorumReplica {
                    last_caught_up_timestamp_ms: Some(1_785_399_537_799),
                    ..replica(2, 2405, Some(1_785_399_538_230))
                },
                replica(3, 2406, Some(1_785_399_538_274)),
            ],
            observers: Vec::new(),
            nodes: BTreeMap::from([
                (1, controller(29091)),
                (2, controller(29092)),
                (3, controller(29093)),
            ]),
        }
    }

    #[test]
    fn status_has_kafkas_fields_and_layout() {
        let text = status_text(Some("MkU3OEVBNTcwNTJENDM2Qk"), &three_voters()).unwrap();
        let expected = "\
ClusterId:              MkU3OEVBNTcwNTJENDM2Qk
LeaderId:               1
LeaderEpoch:            4
HighWatermark:          2380
MaxFollowerLag:         1
MaxFollowerLagTimeMs:   485
CurrentVoters:          [{\"id\": 1, \"endpoints\": [\"CONTROLLER://kafka-1:29093\"]}, {\"id\": 2, \"endpoints\": [\"CONTROLLER://kafka-2:29093\"]}, {\"id\": 3, \"endpoints\": [\"CONTROLLER://kafka-3:29093\"]}]
CurrentObservers:       []
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_caught_up_quorum_led_by_its_first_voter_lags_zero() {
        let mut quorum = three_voters();
        quorum.voters[1].log_end_offset = Some(2406);
        let text = status_text(None, &quorum).unwrap();
        assert!(text.contains("MaxFollowerLag:         0\n"), "{text}");
        assert!(text.contains("MaxFollowerLagTimeMs:   0\n"), "{text}");
        assert!(text.starts_with("ClusterId:              null\n"), "{text}");
    }

    #[test]
    fn unknown_follower_times_give_minus_one() {
        let quorum = QuorumInfo {
            leader_id: Some(2),
            leader_epoch: 1,
            high_watermark: 10,
            voters: vec![replica(1, 10, None), replica(2, 10, Some(5))],
            observers: vec![QuorumReplica {
                directory_id: Some(uuid_of([0xff; 16])),
                ..replica(4, 9, None)
            }],
            nodes: BTreeMap::new(),
        };
        let text = status_text(Some("c"), &quorum).unwrap();
        assert!(text.contains("MaxFollowerLagTimeMs:   -1\n"), "{text}");
        assert!(
            text.contains("CurrentVoters:          [{\"id\": 1}, {\"id\": 2}]\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "CurrentObservers:       [{\"id\": 4, \"directoryId\": \"_____________________w\"}]\n"
            ),
            "{text}"
        );
    }

    fn uuid_of(bytes: [u8; 16]) -> uuid::Uuid {
        uuid::Uuid::from_bytes(bytes)
    }

    #[test]
    fn replication_is_kafkas_padded_table() {
        let text = replication_table(&three_voters(), None).unwrap();
        let expected = "\
NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t
1     \tAAAAAAAAAAAAAAAAAAAAAA\t2406        \t0  \t1785399538284     \t1785399538284        \tLeader  \t
2     \tAAAAAAAAAAAAAAAAAAAAAA\t2405        \t1  \t1785399538230     \t1785399537799        \tFollower\t
3     \tAAAAAAAAAAAAAAAAAAAAAA\t2406        \t0  \t1785399538274     \t1785399538274        \tFollower\t
";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_leader_comes_first_then_followers_then_observers() {
        let mut quorum = three_voters();
        quorum.leader_id = Some(3);
        quorum.observers = vec![replica(7, -1, None)];
        quorum.observers[0].log_end_offset = None;
        let text = replication_table(&quorum, Some(1_785_399_538_300)).unwrap();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(1)
            .map(|line| line.split('\t').map(str::trim).collect())
            .collect();
        let columns = |index: usize| -> Vec<&str> { rows.iter().map(|row| row[index]).collect() };
        assert_eq!(columns(0), vec!["3", "1", "2", "7"]);
        assert_eq!(
            columns(6),
            vec!["Leader", "Follower", "Follower", "Observer"]
        );
        assert_eq!(columns(3), vec!["0", "0", "1", "2407"]);
        assert_eq!(columns(2)[3], "-1");
        assert_eq!(
            columns(4),
            vec!["26 ms ago", "16 ms ago", "70 ms ago", "-1"]
        );
    }

    #[test]
    fn no_leader_is_an_error() {
        let mut quorum = three_voters();
        quorum.leader_id = None;
        assert!(matches!(
            status_text(Some("c"), &quorum),
            Err(ToolError::NoQuorumLeader { leader_id: -1 })
        ));
        quorum.leader_id = Some(9);
        assert!(matches!(
            replication_table(&quorum, None),
            Err(ToolError::NoQuorumLeader { leader_id: 9 })
        ));
    }

    #[test]
    fn uuids_print_as_kafka_prints_them() {
        assert_eq!(kafka_uuid(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(kafka_uuid(&[0xff; 16]), "_____________________w");
    }
}
