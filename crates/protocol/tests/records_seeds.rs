//! The fuzz seed corpus (`fuzz/seeds/record_batch_decode`) holds valid batches
//! that still decode; `STROM_WRITE_SEEDS=1` regenerates it.

use std::path::PathBuf;

use bytes::Bytes;
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};

fn seed_directory() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/record_batch_decode")
}

fn seeds() -> Vec<(String, Bytes)> {
    let mut seeds = Vec::new();
    for compression in Compression::ALL {
        let mut builder = RecordBatchBuilder::new(compression)
            .with_base_offset(10)
            .with_producer(3, 0, 0);
        for index in 0..4u8 {
            let key = [b'k', index];
            let value = vec![index; 20 + usize::from(index) * 30];
            let headers: &[(&[u8], Option<&[u8]>)] = if index % 2 == 0 {
                &[(b"trace", Some(b"abc")), (b"null", None)]
            } else {
                &[]
            };
            let key = if index == 3 { None } else { Some(&key[..]) };
            builder
                .append(
                    1_700_000_000_000 + i64::from(index),
                    key,
                    Some(&value),
                    headers,
                )
                .expect("append");
        }
        seeds.push((
            format!("{compression}.bin"),
            builder.build().expect("build"),
        ));
    }
    let mut two = Vec::new();
    for base_offset in [0, 1] {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(base_offset);
        builder.append(-5, None, None, &[]).expect("append");
        two.extend_from_slice(&builder.build().expect("build"));
    }
    seeds.push(("two-batches.bin".to_owned(), Bytes::from(two)));
    seeds
}

#[test]
fn seed_corpus_is_current_and_decodes() {
    let directory = seed_directory();
    if std::env::var_os("STROM_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(&directory).expect("create seeds");
        for (name, bytes) in seeds() {
            std::fs::write(directory.join(name), &bytes).expect("write seed");
        }
    }
    for (name, bytes) in seeds() {
        let stored = std::fs::read(directory.join(&name)).expect("seed file");
        let mut records = 0;
        for batch in RecordBatches::new(Bytes::from(stored)) {
            let batch = batch.expect("batch");
            batch.validate_crc().expect("crc");
            records += batch
                .records()
                .expect("records")
                .filter(Result::is_ok)
                .count();
        }
        assert!(records > 0, "{name}");
        // Uncompressed seeds must equal what the builder writes today.
        if name.starts_with("none") || name.starts_with("two") {
            assert_eq!(
                std::fs::read(directory.join(&name)).expect("seed"),
                bytes.to_vec()
            );
        }
    }
}
