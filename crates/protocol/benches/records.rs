//! Record batch throughput: validate (parse + CRC-32C) and record iteration
//! against raw CRC-32C and memcpy on the same buffers, and build + compress /
//! decompress + iterate per codec. See docs/benchmarks.md.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use strom_protocol::records::{Compression, RecordBatch, RecordBatchBuilder};

/// A JSON-ish value of `bytes` bytes, deterministic, moderately compressible.
fn value(seed: u64, bytes: usize) -> Vec<u8> {
    const WORDS: [&str; 8] = [
        "\"user\":",
        "\"event\":",
        "click",
        "view",
        "\"ts\":",
        "purchase",
        "{",
        "}",
    ];
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut out = Vec::with_capacity(bytes + 16);
    while out.len() < bytes {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.extend_from_slice(WORDS[(state >> 61) as usize].as_bytes());
        out.extend_from_slice(format!("{}", (state >> 40) % 10_000).as_bytes());
    }
    out.truncate(bytes);
    out
}

/// The input records of a batch of about `target_bytes` (100-byte values).
fn inputs(target_bytes: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let count = (target_bytes / 125).max(1);
    (0..count as u64)
        .map(|index| (format!("key-{index}").into_bytes(), value(index, 100)))
        .collect()
}

fn build(compression: Compression, records: &[(Vec<u8>, Vec<u8>)]) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    for (index, (key, value)) in records.iter().enumerate() {
        builder
            .append(
                1_700_000_000_000 + index as i64,
                Some(key),
                Some(value),
                &[(b"source", Some(b"bench"))],
            )
            .expect("append");
    }
    builder.build().expect("build")
}

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
}

fn validate_and_iterate(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("records/uncompressed");
    configure(&mut group);
    for (label, size) in [("1KiB", 1 << 10), ("16KiB", 16 << 10), ("1MiB", 1 << 20)] {
        let bytes = build(Compression::None, &inputs(size));
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("validate", label),
            &bytes,
            |bench, bytes| {
                bench.iter(|| {
                    let batch = RecordBatch::parse(bytes.clone()).expect("parse");
                    batch.validate_crc().expect("crc");
                    black_box(batch.record_count())
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("iterate", label),
            &bytes,
            |bench, bytes| {
                bench.iter(|| {
                    let batch = RecordBatch::parse(bytes.clone()).expect("parse");
                    let mut total = 0usize;
                    for record in batch.records().expect("records") {
                        let record = record.expect("record");
                        total += record.value().map_or(0, |value| value.len());
                        total += record.headers().len();
                    }
                    black_box(total)
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("raw_crc32c", label),
            &bytes,
            |bench, bytes| bench.iter(|| black_box(crc32c::crc32c(black_box(&bytes[21..])))),
        );
        let mut target = vec![0u8; bytes.len()];
        group.bench_with_input(BenchmarkId::new("memcpy", label), &bytes, |bench, bytes| {
            bench.iter(|| {
                target.copy_from_slice(black_box(bytes));
                black_box(target.as_ptr());
            })
        });
    }
    group.finish();
}

fn codecs(criterion: &mut Criterion) {
    let records = inputs(256 << 10);
    let uncompressed_bytes = build(Compression::None, &records).len() as u64;
    let mut group = criterion.benchmark_group("records/codec");
    configure(&mut group);
    group.throughput(Throughput::Bytes(uncompressed_bytes));
    for compression in Compression::ALL {
        let name = compression.name();
        group.bench_with_input(
            BenchmarkId::new("build", name),
            &records,
            |bench, records| bench.iter(|| black_box(build(compression, records))),
        );
        let bytes = build(compression, &records);
        group.bench_with_input(BenchmarkId::new("read", name), &bytes, |bench, bytes| {
            bench.iter(|| {
                let batch = RecordBatch::parse(bytes.clone()).expect("parse");
                batch.validate_crc().expect("crc");
                let count = batch
                    .records()
                    .expect("records")
                    .filter(Result::is_ok)
                    .count();
                black_box(count)
            })
        });
    }
    group.finish();
}

/// Runs every record batch benchmark (written out instead of
/// `criterion_group!`, whose generated function has no doc comment).
fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    validate_and_iterate(&mut criterion);
    codecs(&mut criterion);
}

criterion_main!(benches);
