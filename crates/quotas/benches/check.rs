//! The per-request cost of the quota check, measured directly (no
//! criterion): what a Produce pays in `ClientQuotaManager::record` with a
//! quota that applies and is not exceeded, among a table of many
//! entities, and the check that finds no quota configured at all.
//!
//! `cargo bench -p strom-quotas --bench check`

use std::hint::black_box;
use std::time::Instant;

use strom_quotas::{
    ClientQuotaManager, EntityName, QuotaEntity, QuotaKey, QuotaTable, QuotaWindow,
};

const ITERATIONS: u64 = 2_000_000;

fn table(entities: usize) -> QuotaTable {
    let mut table = QuotaTable::new();
    for index in 0..entities {
        table.set(
            QuotaEntity::client(EntityName::Named(format!("client-{index}"))),
            QuotaKey::ProducerByteRate,
            1e12,
        );
        table.set(
            QuotaEntity::user(EntityName::Named(format!("user-{index}"))),
            QuotaKey::ConsumerByteRate,
            1e12,
        );
    }
    table.set(
        QuotaEntity::client(EntityName::Default),
        QuotaKey::ProducerByteRate,
        1e12,
    );
    table
}

/// Nanoseconds per call of `step`, best of three runs.
fn measure(mut step: impl FnMut(u64)) -> f64 {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            for iteration in 0..ITERATIONS {
                step(iteration);
            }
            started.elapsed().as_nanos() as f64 / ITERATIONS as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    for entities in [0usize, 10, 1_000] {
        let mut manager = ClientQuotaManager::new(QuotaWindow::default());
        manager.set_table(table(entities));
        // One produce of 16 KB per microsecond of simulated time.
        let record = measure(|iteration| {
            black_box(manager.record(
                QuotaKey::ProducerByteRate,
                black_box("alice"),
                black_box("producer-7"),
                16_384.0,
                iteration / 1_000,
            ));
        });
        println!("record (quota applies, not exceeded), {entities} other entities: {record:.1} ns");
    }
    let empty = QuotaTable::new();
    let disabled = measure(|_| {
        black_box(
            black_box(&empty).is_empty() || black_box(&empty).has_key(QuotaKey::ProducerByteRate),
        );
    });
    println!("no quota configured (the check that skips recording): {disabled:.1} ns");
    let many = table(1_000);
    let enabled = measure(|_| {
        black_box(black_box(&many).has_key(QuotaKey::ProducerByteRate));
    });
    println!("is a producer_byte_rate configured, 2,001 entities: {enabled:.1} ns");
}
