//! `strom perf produce`'s benchmark run against librdkafka's in-process
//! mock cluster: every record is sent and acknowledged, and the report's
//! figures are consistent.

use std::time::Duration;

use rdkafka::mocking::MockCluster;
use strom_producer::Acks;
use strom_protocol::records::Compression;
use strom_tools::perf::produce_run::{run, PerfOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_produce_benchmark_reports_every_record() {
    let mock = MockCluster::new(1).expect("mock cluster");
    mock.create_topic("perf", 3, 1).expect("topic");
    let options = PerfOptions {
        bootstrap_servers: mock.bootstrap_servers(),
        topic: "perf".to_owned(),
        num_records: 5_000,
        record_size: 100,
        throughput: None,
        acks: Some(Acks::Leader),
        linger: Some(Duration::from_millis(2)),
        batch_size: Some(16_384),
        compression: Some(Compression::Lz4),
    };
    let report = tokio::time::timeout(Duration::from_secs(30), run(&options))
        .await
        .expect("bounded")
        .expect("perf run");
    assert_eq!((report.records, report.failed), (5_000, 0));
    assert!(report.records_per_second > 0.0);
    assert!(report.p50_latency_ms <= report.p99_latency_ms);
    assert!(report.p99_latency_ms <= report.max_latency_ms);
    drop(mock);
}
