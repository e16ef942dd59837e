//! Compression codecs: what other clients write decodes, bombs are capped,
//! garbage is a typed error.

use std::io::Write;

use bytes::Bytes;
use strom_protocol::records::compression::{self, snappy};
use strom_protocol::records::{
    Compression, RecordBatch, RecordBatchBuilder, RecordError, DEFAULT_MAX_DECOMPRESSED_BYTES,
};

/// An uncompressed batch of `count` records with repetitive values.
fn plain_batch(count: usize, value_bytes: usize) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for index in 0..count {
        let value = vec![b'a' + (index % 26) as u8; value_bytes];
        builder
            .append(
                10 + index as i64,
                Some(b"key"),
                Some(&value),
                &[(b"h", Some(b"1"))],
            )
            .expect("append");
    }
    builder.build().expect("build")
}

/// The batch `plain` with its records replaced by `payload` and the codec bits
/// set to `compression`; length and CRC fixed up.
fn rewrap(plain: &[u8], compression: Compression, payload: &[u8]) -> Bytes {
    let mut batch = plain[..61].to_vec();
    batch.extend_from_slice(payload);
    let batch_length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&batch_length.to_be_bytes());
    batch[22] = (batch[22] & !0x07) | compression.code();
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

fn values(batch: &RecordBatch) -> Vec<Bytes> {
    batch
        .records()
        .expect("records")
        .map(|record| record.expect("record").value_bytes().expect("value"))
        .collect()
}

fn assert_decodes_like_plain(plain: &Bytes, compression: Compression, payload: &[u8]) {
    let batch = RecordBatch::parse(rewrap(plain, compression, payload)).expect("parse");
    batch.validate_crc().expect("crc");
    let expected = values(&RecordBatch::parse(plain.clone()).expect("plain"));
    assert_eq!(values(&batch), expected, "{compression}");
}

#[test]
fn every_codec_round_trips_through_the_builder() {
    for compression in Compression::ALL {
        let mut builder = RecordBatchBuilder::new(compression);
        for index in 0..200 {
            builder
                .append(index, None, Some(&[b'z'; 1_000]), &[])
                .expect("append");
        }
        let batch = RecordBatch::parse(builder.build().expect("build")).expect("parse");
        batch.validate_crc().expect("crc");
        assert_eq!(batch.attributes().compression(), compression);
        if compression != Compression::None {
            assert!(
                batch.size_in_bytes() < 200 * 1_000 / 4,
                "{compression} compresses"
            );
        }
        assert_eq!(values(&batch).len(), 200);
    }
}

#[test]
fn snappy_xerial_framing_is_what_snappy_java_writes() {
    let input: Vec<u8> = (0..100_000u32).map(|index| (index % 251) as u8).collect();
    let framed = snappy::compress_xerial(&input).expect("compress");
    assert_eq!(&framed[..16], &snappy::XERIAL_HEADER);
    // 100,000 bytes in 32 KiB chunks: 32768 * 3 + 1696, each a raw block with a BE length.
    let mut rest = &framed[16..];
    let mut chunk_inputs = Vec::new();
    while !rest.is_empty() {
        let length = u32::from_be_bytes(rest[..4].try_into().expect("length")) as usize;
        let block = &rest[4..4 + length];
        chunk_inputs.push(snap::raw::decompress_len(block).expect("raw block"));
        rest = &rest[4 + length..];
    }
    assert_eq!(chunk_inputs, vec![32_768, 32_768, 32_768, 1_696]);
    let decoded = compression::decompress(Compression::Snappy, &framed, 1 << 20).expect("decode");
    assert_eq!(decoded, input);
}

#[test]
fn snappy_hand_made_xerial_stream_and_concatenated_streams_decode() {
    // Header, then one chunk of 5 bytes: uncompressed length 3 (03), a literal
    // of 3 bytes (tag (3 - 1) << 2 = 08), "abc".
    let stream = [
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5, 0x03,
        0x08, b'a', b'b', b'c',
    ];
    let decoded = compression::decompress(Compression::Snappy, &stream, 64).expect("decode");
    assert_eq!(&decoded[..], b"abc");
    let twice = [stream, stream].concat();
    let decoded = compression::decompress(Compression::Snappy, &twice, 64).expect("decode");
    assert_eq!(&decoded[..], b"abcabc");
}

#[test]
fn snappy_raw_blocks_as_librdkafka_writes_decode() {
    let plain = plain_batch(50, 300);
    let raw = snap::raw::Encoder::new()
        .compress_vec(&plain[61..])
        .expect("compress");
    assert_decodes_like_plain(&plain, Compression::Snappy, &raw);
}

#[test]
fn lz4_frames_with_any_options_decode() {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    let plain = plain_batch(300, 700);
    let options = [
        // What Java writes: independent 64 KiB blocks, no checksums.
        FrameInfo::new()
            .block_size(BlockSize::Max64KB)
            .block_mode(BlockMode::Independent),
        // librdkafka's LZ4F defaults: linked blocks, content checksum, content size.
        FrameInfo::new()
            .block_size(BlockSize::Max64KB)
            .block_mode(BlockMode::Linked)
            .content_checksum(true)
            .content_size(Some((plain.len() - 61) as u64)),
        FrameInfo::new()
            .block_size(BlockSize::Max4MB)
            .block_checksums(true),
    ];
    for frame_info in options {
        let mut encoder = FrameEncoder::with_frame_info(frame_info, Vec::new());
        encoder.write_all(&plain[61..]).expect("write");
        let frame = encoder.finish().expect("finish");
        assert_decodes_like_plain(&plain, Compression::Lz4, &frame);
    }
}

#[test]
fn lz4_output_has_java_frame_descriptor() {
    let frame = compression::compress(Compression::Lz4, b"some records").expect("compress");
    // Magic 0x184D2204, FLG = version 01, block independence, no checksums or size (0x60),
    // BD = 64 KiB blocks (0x40).
    assert_eq!(&frame[..6], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
}

#[test]
fn gzip_multi_member_and_zstd_with_content_size_decode() {
    let plain = plain_batch(100, 200);
    let records = &plain[61..];
    let (first, second) = records.split_at(records.len() / 3);
    let mut members = Vec::new();
    for part in [first, second] {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(part).expect("write");
        members.extend(encoder.finish().expect("finish"));
    }
    assert_decodes_like_plain(&plain, Compression::Gzip, &members);
    let zstd_bulk = zstd::bulk::compress(records, 19).expect("zstd");
    assert_decodes_like_plain(&plain, Compression::Zstd, &zstd_bulk);
}

#[test]
fn decompression_bombs_are_capped_for_every_codec() {
    let zeros = vec![0u8; 4 << 20];
    for compression in Compression::ALL {
        let bomb = compression::compress(compression, &zeros).expect("compress");
        let error = compression::decompress(compression, &bomb, 1 << 20).expect_err("capped");
        assert!(
            matches!(error, RecordError::DecompressedTooLarge { limit_bytes, .. } if limit_bytes == 1 << 20),
            "{compression}: {error}"
        );
        assert_eq!(
            compression::decompress(compression, &bomb, 4 << 20)
                .expect("at the limit")
                .len(),
            4 << 20
        );
    }
}

#[test]
fn a_bomb_inside_a_batch_fails_records_with_the_default_cap() {
    let zeros = vec![0u8; DEFAULT_MAX_DECOMPRESSED_BYTES + 1];
    let bomb = compression::compress(Compression::Zstd, &zeros).expect("compress");
    assert!(bomb.len() < 64 * 1024);
    let batch =
        RecordBatch::parse(rewrap(&plain_batch(1, 1), Compression::Zstd, &bomb)).expect("parse");
    batch.validate_crc().expect("crc");
    assert!(matches!(
        batch.records(),
        Err(RecordError::DecompressedTooLarge {
            compression: Compression::Zstd,
            ..
        })
    ));
    // Snappy announces its length first: a 4 GiB claim fails before allocating.
    let claim = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
    assert!(matches!(
        compression::decompress(Compression::Snappy, &claim, DEFAULT_MAX_DECOMPRESSED_BYTES),
        Err(RecordError::DecompressedTooLarge { .. })
    ));
}

#[test]
fn invalid_compressed_data_is_a_typed_error() {
    let garbage: Vec<u8> = (0..512u32).map(|index| (index * 7 + 3) as u8).collect();
    for compression in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
        let error = compression::decompress(compression, &garbage, 1 << 20).expect_err("garbage");
        assert!(
            matches!(error, RecordError::Decompression { compression: found, .. } if found == compression),
            "{compression}: {error}"
        );
    }
    let truncated_xerial = [&snappy::XERIAL_HEADER[..], &[0, 0, 0, 9, 1]].concat();
    assert!(matches!(
        compression::decompress(Compression::Snappy, &truncated_xerial, 1 << 20),
        Err(RecordError::Decompression {
            compression: Compression::Snappy,
            ..
        })
    ));
    for compression in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let valid = compression::compress(compression, &[7u8; 10_000]).expect("compress");
        for cut in [1, valid.len() / 2, valid.len() - 1] {
            assert!(
                compression::decompress(compression, &valid[..cut], 1 << 20).is_err(),
                "{compression} cut at {cut}"
            );
        }
    }
    // Inside a batch the error surfaces from records().
    let plain = plain_batch(3, 10);
    let batch = RecordBatch::parse(rewrap(&plain, Compression::Gzip, &garbage)).expect("parse");
    assert!(matches!(
        batch.records(),
        Err(RecordError::Decompression { .. })
    ));
}
