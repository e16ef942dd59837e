//! Iterating an uncompressed batch allocates nothing per record: keys, values
//! and headers are slices of the batch's `Bytes`; checking its records
//! (`RecordBatch::check_records`) allocates nothing at all.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use strom_protocol::records::{CheckedRecords, Compression, RecordBatch, RecordBatchBuilder};

/// Counts every allocation of the process (this file holds a single test).
struct CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator, which
// upholds GlobalAlloc's contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are passed on as they are.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` was allocated by `System.alloc` with this `layout`.
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn iterating_an_uncompressed_batch_allocates_nothing_per_record() {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for index in 0..1_000i64 {
        builder
            .append(
                index,
                Some(b"key"),
                Some(&[7u8; 100]),
                &[(b"a", Some(b"1")), (b"b", None)],
            )
            .expect("append");
    }
    let batch = RecordBatch::parse(builder.build().expect("build")).expect("parse");
    let records = batch.records().expect("records");

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut value_bytes = 0;
    let mut headers = 0;
    for record in records {
        let record = record.expect("record");
        value_bytes += record.value().map_or(0, |value| value.len());
        headers += record
            .headers()
            .iter()
            .filter(|header| header.value.is_some())
            .count();
    }
    let during = ALLOCATIONS.load(Ordering::Relaxed) - before;

    assert_eq!((value_bytes, headers), (100_000, 1_000));
    assert_eq!(during, 0, "allocations while iterating 1,000 records");

    // The checks a broker makes before appending walk the same bytes, also
    // without allocating.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut keyed = 0;
    let checked = batch
        .check_records(1 << 20, |summary| keyed += usize::from(summary.has_key))
        .expect("valid records");
    let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!((keyed, checked), (1_000, CheckedRecords::InPlace));
    assert_eq!(during, 0, "allocations while checking 1,000 records");

    // The counter works: a compressed batch allocates its decompressed buffer.
    let mut builder = RecordBatchBuilder::new(Compression::Lz4);
    builder
        .append(0, None, Some(&[1u8; 1_000]), &[])
        .expect("append");
    let compressed = RecordBatch::parse(builder.build().expect("build")).expect("parse");
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    assert_eq!(compressed.records().expect("records").count(), 1);
    assert!(ALLOCATIONS.load(Ordering::Relaxed) > before);
}
