//! `strom transactions`, run as the real binary against an in-process
//! broker with a transactional producer that leaves a transaction open.

use std::time::Duration;

use strom_producer::{Producer, ProducerConfig, ProducerRecord};

use crate::common;

use common::{strom, strom_with_input};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Starts a transaction of `transactional_id` with `records` records in
/// partition 0 of `topic` and leaves it open; the producer lives as long
/// as the returned runtime.
fn open_transaction(
    transactional_id: &str,
    topic: &str,
    records: usize,
) -> (tokio::runtime::Runtime, Producer) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut config = ProducerConfig::new([common::broker().address.to_string()]);
    config.transactional_id = Some(transactional_id.to_owned());
    config.transaction_timeout = Duration::from_secs(600);
    config.linger = Duration::from_millis(1);
    let producer = runtime.block_on(async {
        let producer = Producer::new(config).await.expect("producer");
        producer.init_transactions(TIMEOUT).await.expect("init");
        producer.begin_transaction().expect("begin");
        for index in 0..records {
            let record =
                ProducerRecord::new(topic.to_owned(), format!("open-{index}")).with_partition(0);
            producer
                .send(record)
                .await
                .await
                .expect("written in the transaction");
        }
        producer
    });
    (runtime, producer)
}

/// What a read_committed consumer of partition 0 sees from offset 0.
fn read_committed(topic: &str, max_messages: &str) -> String {
    strom(&[
        "consume",
        topic,
        "--partition",
        "0",
        "--offset",
        "0",
        "--max-messages",
        max_messages,
        "--timeout-ms",
        "1500",
        "--format",
        "%o %v",
        "--property",
        "isolation.level=read_committed",
    ])
    .ok()
}

fn producers_json(topic: &str) -> Vec<serde_json::Value> {
    let json = strom(&[
        "transactions",
        "describe-producers",
        "--topic",
        topic,
        "--partition",
        "0",
        "--json",
    ])
    .ok();
    serde_json::from_str(json.trim()).expect("json array")
}

#[test]
fn an_open_transaction_is_listed_described_and_aborted() {
    strom(&["topics", "create", "txn-open", "--partitions", "1"]).ok();
    let (_runtime, producer) = open_transaction("tools-open", "txn-open", 2);
    strom_with_input(&["produce", "txn-open", "--partition", "0"], "after\n").ok();
    assert_eq!(
        read_committed("txn-open", "1"),
        "",
        "the open transaction holds the LSO"
    );

    let listed = strom(&["transactions", "list"]).ok();
    let header = listed.lines().next().expect("header");
    for column in [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ] {
        assert!(header.contains(column), "{listed}");
    }
    let row = listed
        .lines()
        .find(|line| line.starts_with("tools-open"))
        .unwrap_or_else(|| panic!("not listed: {listed}"));
    assert!(row.trim_end().ends_with("Ongoing"), "{row}");
    let ongoing = strom(&["transactions", "list", "--duration-filter", "0", "--json"]).ok();
    let ongoing: Vec<serde_json::Value> = serde_json::from_str(ongoing.trim()).expect("json");
    assert!(
        ongoing
            .iter()
            .any(|listing| listing["transactional_id"] == "tools-open"
                && listing["state"] == "Ongoing"),
        "{ongoing:?}"
    );

    let described = strom(&[
        "transactions",
        "describe",
        "--transactional-id",
        "tools-open",
    ])
    .ok();
    assert!(described.contains("txn-open-0"), "{described}");
    assert!(described.contains("Ongoing"), "{described}");
    assert!(described.contains("TransactionDurationMs"), "{described}");
    let json = strom(&[
        "transactions",
        "describe",
        "--transactional-id",
        "tools-open",
        "--json",
    ])
    .ok();
    let description: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert_eq!(description["partitions"][0]["topic"], "txn-open", "{json}");
    assert_eq!(description["partitions"][0]["partition"], 0, "{json}");
    assert_eq!(description["transaction_timeout_ms"], 600_000, "{json}");
    assert!(
        description["transaction_start_time_ms"].as_i64().is_some(),
        "{json}"
    );
    let producer_id = description["producer_id"].as_i64().expect("producer id");

    let text = strom(&[
        "transactions",
        "describe-producers",
        "--topic",
        "txn-open",
        "--partition",
        "0",
    ])
    .ok();
    assert!(text.starts_with("ProducerId"), "{text}");
    assert!(text.contains("CurrentTransactionStartOffset"), "{text}");
    let producers = producers_json("txn-open");
    let open = producers
        .iter()
        .find(|state| state["producer_id"] == producer_id)
        .unwrap_or_else(|| panic!("producer {producer_id} not active: {producers:?}"));
    assert_eq!(open["current_transaction_start_offset"], 0, "{producers:?}");

    let hanging = strom(&[
        "transactions",
        "find-hanging",
        "--topic",
        "txn-open",
        "--max-transaction-timeout",
        "0",
    ])
    .ok();
    assert_eq!(
        hanging.lines().count(),
        1,
        "the coordinator still tracks the partition, so it is not hanging: {hanging}"
    );

    let aborted = strom(&[
        "transactions",
        "abort",
        "--topic",
        "txn-open",
        "--partition",
        "0",
        "--start-offset",
        "0",
    ])
    .ok();
    assert!(
        aborted.contains(&format!("producer {producer_id}")),
        "{aborted}"
    );
    let producers = producers_json("txn-open");
    let closed = producers
        .iter()
        .find(|state| state["producer_id"] == producer_id)
        .expect("still active");
    assert!(
        closed["current_transaction_start_offset"].is_null(),
        "{producers:?}"
    );
    assert_eq!(
        read_committed("txn-open", "1"),
        "2 after\n",
        "the LSO moved past the aborted records to the later one"
    );

    strom(&[
        "transactions",
        "abort",
        "--topic",
        "txn-open",
        "--partition",
        "0",
        "--start-offset",
        "0",
    ])
    .fails_with(1, "no open transaction starts at offset 0 in txn-open-0");
    drop(producer);
}

#[test]
fn unknown_transactional_ids_and_partitions_are_reported() {
    strom(&[
        "transactions",
        "describe",
        "--transactional-id",
        "no-such-id",
    ])
    .fails_with(1, "TRANSACTIONAL_ID_NOT_FOUND")
    .fails_with(1, "no-such-id");
    strom(&[
        "transactions",
        "describe-producers",
        "--topic",
        "no-such-topic",
        "--partition",
        "0",
    ])
    .fails_with(1, "UNKNOWN_TOPIC_OR_PARTITION");
    strom(&["topics", "create", "txn-small", "--partitions", "1"]).ok();
    strom(&[
        "transactions",
        "abort",
        "--topic",
        "txn-small",
        "--partition",
        "7",
        "--start-offset",
        "0",
    ])
    .fails_with(1, "partition 7 of topic `txn-small` does not exist");
    strom(&[
        "transactions",
        "abort",
        "--topic",
        "txn-small",
        "--partition",
        "7",
        "--producer-id",
        "5",
        "--producer-epoch",
        "0",
        "--coordinator-epoch",
        "0",
    ])
    .fails_with(1, "UNKNOWN_TOPIC_OR_PARTITION");
}

#[test]
fn bad_arguments_are_usage_errors() {
    strom(&["transactions", "abort", "--topic", "t", "--partition", "0"])
        .fails_with(2, "--start-offset");
    strom(&[
        "transactions",
        "abort",
        "--topic",
        "t",
        "--partition",
        "0",
        "--producer-id",
        "5",
    ])
    .fails_with(2, "--producer-epoch");
    strom(&["transactions", "find-hanging"]).fails_with(2, "--broker-id");
    strom(&[
        "transactions",
        "find-hanging",
        "--partition",
        "0",
        "--broker-id",
        "1",
    ])
    .fails_with(2, "--topic");
}
