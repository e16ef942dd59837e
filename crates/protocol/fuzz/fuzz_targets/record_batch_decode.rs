//! Arbitrary bytes as concatenated record batches: every batch is CRC-checked,
//! its records go through the broker's checks (`check_records`) and all its
//! records and headers are read. Any panic, or memory beyond the
//! decompression cap, is a bug.
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strom_protocol::records::RecordBatches;

/// Keeps each input's decompressed size well inside libFuzzer's malloc limit.
const MAX_DECOMPRESSED_BYTES: usize = 16 * 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut batches = RecordBatches::new(Bytes::copy_from_slice(data));
    for batch in batches.by_ref() {
        let Ok(batch) = batch else { break };
        // Read the records whether or not the CRC matches: the fuzzer rarely
        // produces a valid CRC, and decoding must be safe without one.
        let _ = batch.validate_crc();
        let _ = batch.last_sequence();
        let _ = batch.check_records(MAX_DECOMPRESSED_BYTES, |_| {});
        let Ok(records) = batch.records_with_limit(MAX_DECOMPRESSED_BYTES) else {
            continue;
        };
        for record in records {
            let Ok(record) = record else { break };
            let _ = batch.record_timestamp(&record);
            let _ = record.offset(batch.base_offset());
            for header in record.headers() {
                let _ = header.key_str();
            }
        }
    }
    assert!(batches.truncated_tail() <= data.len());
});
