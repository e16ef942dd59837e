//! The batch codecs: gzip, snappy, lz4 and zstd.
//!
//! Compression writes what the Java client writes: a gzip member, snappy in
//! the xerial framing of `SnappyOutputStream` (32 KiB input chunks), an LZ4
//! frame with independent 64 KiB blocks and no checksums, a zstd frame at
//! level 3. The compressed bytes themselves depend on the codec library, so
//! only uncompressed batches are byte-identical to Java's.
//!
//! Decompression accepts what any Kafka client writes (snappy both raw, as
//! librdkafka writes it, and xerial-framed; LZ4 frames with or without
//! checksums and content size) and stops with
//! [`RecordError::DecompressedTooLarge`] once the output passes a caller-given
//! maximum, so a decompression bomb costs at most that much memory.

use std::io::{self, Read, Write};

use bytes::Bytes;

use super::{Compression, RecordError};

/// Compresses `input` with `compression` (`None` copies it).
pub fn compress(compression: Compression, input: &[u8]) -> Result<Vec<u8>, RecordError> {
    compress_into(compression, input, Vec::new())
}

/// Compresses `input` with `compression`, appending to `output`.
pub fn compress_into(
    compression: Compression,
    input: &[u8],
    mut output: Vec<u8>,
) -> Result<Vec<u8>, RecordError> {
    output.reserve(input.len() / 2 + 64);
    let result = match compression {
        Compression::None => {
            output.extend_from_slice(input);
            Ok(output)
        }
        Compression::Gzip => compress_gzip(input, output),
        Compression::Snappy => snappy::compress_xerial_into(input, output),
        Compression::Lz4 => compress_lz4(input, output),
        Compression::Zstd => compress_zstd(input, output),
    };
    result.map_err(|source| RecordError::Compression {
        compression,
        source,
    })
}

/// Decompresses `input`, failing once the output would exceed `max_output_bytes`.
pub fn decompress(
    compression: Compression,
    input: &[u8],
    max_output_bytes: usize,
) -> Result<Bytes, RecordError> {
    let output = match compression {
        Compression::None => {
            if input.len() > max_output_bytes {
                return Err(RecordError::DecompressedTooLarge {
                    compression,
                    limit_bytes: max_output_bytes,
                });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => read_capped(
            flate2::read::MultiGzDecoder::new(input),
            compression,
            input.len(),
            max_output_bytes,
        ),
        Compression::Snappy => snappy::decompress(input, max_output_bytes),
        Compression::Lz4 => check_lz4_end_mark(input).and_then(|()| {
            read_capped(
                lz4_flex::frame::FrameDecoder::new(input),
                compression,
                input.len(),
                max_output_bytes,
            )
        }),
        Compression::Zstd => zstd::stream::read::Decoder::with_buffer(input)
            .map_err(|source| RecordError::Decompression {
                compression,
                source,
            })
            .and_then(|decoder| read_capped(decoder, compression, input.len(), max_output_bytes)),
    }?;
    Ok(Bytes::from(output))
}

/// Reads `reader` to its end, but never more than `max_output_bytes`.
fn read_capped(
    reader: impl Read,
    compression: Compression,
    input_bytes: usize,
    max_output_bytes: usize,
) -> Result<Vec<u8>, RecordError> {
    let mut output = Vec::with_capacity(input_bytes.saturating_mul(4).min(max_output_bytes));
    let limit = u64::try_from(max_output_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut output)
        .map_err(|source| RecordError::Decompression {
            compression,
            source,
        })?;
    if output.len() > max_output_bytes {
        return Err(RecordError::DecompressedTooLarge {
            compression,
            limit_bytes: max_output_bytes,
        });
    }
    Ok(output)
}

/// Rejects an LZ4 frame that does not end with its end mark (and content
/// checksum when the descriptor announces one).
///
/// The frame decoder treats input ending at a block boundary as a complete
/// frame, where Kafka's Java reader fails; a truncated frame that slips past
/// this check still fails the record count check when records are read.
fn check_lz4_end_mark(input: &[u8]) -> Result<(), RecordError> {
    const CONTENT_CHECKSUM_FLAG: u8 = 0x04;
    let checksum_bytes = match input.get(4) {
        Some(flags) if flags & CONTENT_CHECKSUM_FLAG != 0 => 4,
        _ => 0,
    };
    let end_mark = input
        .len()
        .checked_sub(4 + checksum_bytes)
        .and_then(|start| input.get(start..start + 4));
    if end_mark == Some(&[0, 0, 0, 0][..]) {
        Ok(())
    } else {
        Err(RecordError::Decompression {
            compression: Compression::Lz4,
            source: io::Error::new(io::ErrorKind::InvalidData, "lz4 frame without end mark"),
        })
    }
}

fn compress_gzip(input: &[u8], output: Vec<u8>) -> io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
    encoder.write_all(input)?;
    encoder.finish()
}

fn compress_lz4(input: &[u8], output: Vec<u8>) -> io::Result<Vec<u8>> {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    let frame_info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(BlockMode::Independent)
        .block_checksums(false)
        .content_checksum(false);
    let mut encoder = FrameEncoder::with_frame_info(frame_info, output);
    encoder.write_all(input)?;
    encoder.finish().map_err(io::Error::from)
}

/// zstd's default level, which the Java client uses.
const ZSTD_LEVEL: i32 = 3;

fn compress_zstd(input: &[u8], output: Vec<u8>) -> io::Result<Vec<u8>> {
    let mut encoder = zstd::stream::write::Encoder::new(output, ZSTD_LEVEL)?;
    encoder.write_all(input)?;
    encoder.finish()
}

/// Snappy: raw blocks and the xerial framing of snappy-java.
pub mod snappy {
    use std::io;

    use super::{Compression, RecordError};

    /// The 8-byte magic that starts a xerial stream.
    pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
    /// Magic, then version 1 and minimum compatible version 1 (big-endian int32s).
    pub const XERIAL_HEADER: [u8; 16] = [
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    /// Input bytes per xerial chunk (snappy-java's default block size).
    pub const XERIAL_CHUNK_BYTES: usize = 32 * 1024;

    /// Compresses as snappy-java's `SnappyOutputStream` does: the header, then
    /// for every 32 KiB of input a big-endian length and a raw snappy block.
    pub fn compress_xerial(input: &[u8]) -> io::Result<Vec<u8>> {
        compress_xerial_into(input, Vec::new())
    }

    /// [`compress_xerial`], appending to `output`.
    pub fn compress_xerial_into(input: &[u8], mut output: Vec<u8>) -> io::Result<Vec<u8>> {
        output.reserve(
            XERIAL_HEADER.len() + snap::raw::max_compress_len(input.len()) + input.len() / 4096,
        );
        output.extend_from_slice(&XERIAL_HEADER);
        let mut encoder = snap::raw::Encoder::new();
        for chunk in input.chunks(XERIAL_CHUNK_BYTES) {
            let length_at = output.len();
            output.extend_from_slice(&[0; 4]);
            let block_at = output.len();
            output.resize(block_at + snap::raw::max_compress_len(chunk.len()), 0);
            let written = encoder.compress(chunk, &mut output[block_at..])?;
            output.truncate(block_at + written);
            output[length_at..block_at].copy_from_slice(&(written as u32).to_be_bytes());
        }
        Ok(output)
    }

    /// Decompresses xerial-framed (recognised by its magic) or raw snappy.
    pub fn decompress(input: &[u8], max_output_bytes: usize) -> Result<Vec<u8>, RecordError> {
        let mut output = Vec::new();
        if input.starts_with(&XERIAL_MAGIC) {
            decompress_xerial(input, &mut output, max_output_bytes)?;
        } else {
            decompress_raw(input, &mut output, max_output_bytes)?;
        }
        Ok(output)
    }

    fn decompress_xerial(
        mut input: &[u8],
        output: &mut Vec<u8>,
        max_output_bytes: usize,
    ) -> Result<(), RecordError> {
        while !input.is_empty() {
            // snappy-java reads concatenated streams, each with its header.
            if input.starts_with(&XERIAL_MAGIC) {
                input = input
                    .get(XERIAL_HEADER.len()..)
                    .ok_or_else(|| invalid("xerial snappy header truncated"))?;
                continue;
            }
            let (length, rest) = input
                .split_first_chunk::<4>()
                .ok_or_else(|| invalid("xerial snappy chunk length truncated"))?;
            let length = u32::from_be_bytes(*length) as usize;
            if length > rest.len() {
                return Err(invalid("xerial snappy chunk truncated"));
            }
            let (block, rest) = rest.split_at(length);
            decompress_raw(block, output, max_output_bytes)?;
            input = rest;
        }
        Ok(())
    }

    fn decompress_raw(
        block: &[u8],
        output: &mut Vec<u8>,
        max_output_bytes: usize,
    ) -> Result<(), RecordError> {
        let length = snap::raw::decompress_len(block).map_err(snappy_error)?;
        let start = output.len();
        if length > max_output_bytes.saturating_sub(start) {
            return Err(RecordError::DecompressedTooLarge {
                compression: Compression::Snappy,
                limit_bytes: max_output_bytes,
            });
        }
        output.resize(start + length, 0);
        let written = snap::raw::Decoder::new()
            .decompress(block, &mut output[start..])
            .map_err(snappy_error)?;
        output.truncate(start + written);
        Ok(())
    }

    fn snappy_error(error: snap::Error) -> RecordError {
        RecordError::Decompression {
            compression: Compression::Snappy,
            source: io::Error::from(error),
        }
    }

    fn invalid(what: &'static str) -> RecordError {
        RecordError::Decompression {
            compression: Compression::Snappy,
            source: io::Error::new(io::ErrorKind::InvalidData, what),
        }
    }
}
