//! CRC-32C by carry-less folding in 512-bit registers (AVX-512 with
//! VPCLMULQDQ), for CPUs that have it.
//!
//! The buffer is read 256 bytes at a time into four accumulators of four
//! 128-bit chunks each. Folding a 128-bit chunk `C = H·x^64 + L` (H the
//! first eight bytes, as the CRC is bit-reflected) forward by `d` bits
//! replaces it with a value congruent to `C·x^d` modulo P:
//! `clmul(H, x^(d+63) mod P) ^ clmul(L, x^(d-1) mod P)` (a reflected
//! carry-less product carries an extra factor x). The accumulators are
//! folded into one 128-bit value congruent to everything read so far; its
//! CRC, and that of the last few bytes, come from the `crc32` instruction.
//! The initial CRC is XORed into the first four bytes, which is what
//! starting the register at it means.

use std::arch::x86_64::{
    __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32,
    _mm512_mask_blend_epi64, _mm512_set_epi64, _mm512_setzero_si512, _mm512_ternarylogic_epi64,
    _mm512_xor_si512, _mm_clmulepi64_si128, _mm_crc32_u64, _mm_cvtsi128_si64, _mm_extract_epi64,
    _mm_set_epi64x, _mm_xor_si128,
};

use super::x_power;

/// The multipliers that move a 128-bit chunk `distance_bits` later: for the
/// first eight bytes x^(d+63) mod P, for the last eight x^(d-1) mod P, each
/// in the high half of a reflected 64-bit lane (the low lane first).
const fn fold_constants(distance_bits: u32) -> [i64; 2] {
    let first = (x_power(distance_bits + 63) as u64) << 32;
    let last = (x_power(distance_bits - 1) as u64) << 32;
    [first as i64, last as i64]
}

/// Four 512-bit accumulators: each 128-bit chunk folds 2,048 bits ahead.
const FOLD_2048: [i64; 2] = fold_constants(2048);
/// `FOLD_CHUNKS[k]` folds a 128-bit chunk `k` chunks (16k bytes) ahead
/// (entry 0 unused).
const FOLD_CHUNKS: [[i64; 2]; 16] = fold_chunk_table();
/// Per accumulator, the constants that fold each of its 128-bit lanes onto
/// the last chunk of the block: accumulator `i`, lane `j` sits at byte
/// `64i + 16j` of 256, so `15 - 4i - j` chunks before the last one (the
/// last lane itself gets zeros and is kept as it is).
const BLOCK_LANES: [[i64; 8]; 4] = block_lane_table();

const fn fold_chunk_table() -> [[i64; 2]; 16] {
    let mut table = [[0i64; 2]; 16];
    let mut chunks = 1;
    while chunks < 16 {
        table[chunks] = fold_constants(128 * chunks as u32);
        chunks += 1;
    }
    table
}

const fn block_lane_table() -> [[i64; 8]; 4] {
    let mut table = [[0i64; 8]; 4];
    let mut accumulator = 0;
    while accumulator < 4 {
        let mut lane = 0;
        while lane < 4 {
            let chunks = 15 - 4 * accumulator - lane;
            if chunks > 0 {
                let constants = fold_constants(128 * chunks as u32);
                table[accumulator][2 * lane] = constants[0];
                table[accumulator][2 * lane + 1] = constants[1];
            }
            lane += 1;
        }
        accumulator += 1;
    }
    table
}

/// Whether the CPU has what [`append`] needs (cached by the standard library).
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("vpclmulqdq")
        && std::arch::is_x86_feature_detected!("pclmulqdq")
        && std::arch::is_x86_feature_detected!("sse4.2")
}

/// [`super::crc32c_append`] by folding; `bytes` should hold at least 256
/// bytes (shorter input goes to the three-lane code).
#[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
pub(super) fn append(crc: u32, bytes: &[u8]) -> u32 {
    let (blocks, rest) = bytes.as_chunks::<256>();
    let Some((first, blocks)) = blocks.split_first() else {
        return super::x86::finish(u64::from(!crc), bytes);
    };
    let mut accumulators = load_block(first);
    let mut seed = [0u8; 16];
    seed[..4].copy_from_slice(&(!crc).to_le_bytes());
    accumulators[0] = _mm512_xor_si512(accumulators[0], broadcast_first_lane(seed));
    let fold_2048 = broadcast(FOLD_2048);
    for block in blocks {
        for (accumulator, next) in accumulators.iter_mut().zip(load_block(block)) {
            *accumulator = _mm512_xor_si512(fold_512_bits(*accumulator, fold_2048), next);
        }
    }
    let value = join_block(accumulators);
    let (chunks, rest) = rest.as_chunks::<16>();
    let value = join_chunks(value, chunks);
    let state = _mm_crc32_u64(0, _mm_cvtsi128_si64(value) as u64);
    let state = _mm_crc32_u64(state, _mm_extract_epi64::<1>(value) as u64);
    super::x86::finish(state, rest)
}

/// Folds the sixteen 128-bit chunks of the last block, all at once, into one
/// value standing where the block's last chunk does.
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn join_block(accumulators: [__m512i; 4]) -> __m128i {
    let [first, second, third, fourth] = accumulators;
    let folded_fourth = fold_512_bits(fourth, constants_512(BLOCK_LANES[3]));
    // The last lane (bits 384..512, mask of its two 64-bit halves) stays.
    let fourth = _mm512_mask_blend_epi64(0b1100_0000, folded_fourth, fourth);
    let joined = _mm512_ternarylogic_epi64::<0x96>(
        fold_512_bits(first, constants_512(BLOCK_LANES[0])),
        fold_512_bits(second, constants_512(BLOCK_LANES[1])),
        fold_512_bits(third, constants_512(BLOCK_LANES[2])),
    );
    let joined = _mm512_xor_si512(joined, fourth);
    _mm_xor_si128(
        _mm_xor_si128(
            _mm512_extracti32x4_epi32::<0>(joined),
            _mm512_extracti32x4_epi32::<1>(joined),
        ),
        _mm_xor_si128(
            _mm512_extracti32x4_epi32::<2>(joined),
            _mm512_extracti32x4_epi32::<3>(joined),
        ),
    )
}

/// Moves `value` past the (at most fifteen) whole 16-byte `chunks` after it,
/// each chunk folded onto the last one independently of the others.
#[target_feature(enable = "avx512f,pclmulqdq")]
fn join_chunks(value: __m128i, chunks: &[[u8; 16]]) -> __m128i {
    let Some(last) = chunks.len().checked_sub(1) else {
        return value;
    };
    let constants = |distance: usize| {
        let [first, second] = FOLD_CHUNKS[distance];
        _mm_set_epi64x(second, first)
    };
    let mut joined = fold_128_bits(value, constants(chunks.len()));
    for (index, chunk) in chunks.iter().enumerate() {
        let chunk = load_128(chunk);
        joined = _mm_xor_si128(
            joined,
            if index == last {
                chunk
            } else {
                fold_128_bits(chunk, constants(last - index))
            },
        );
    }
    joined
}

/// Eight 64-bit lanes, the first lowest.
#[target_feature(enable = "avx512f")]
fn constants_512(values: [i64; 8]) -> __m512i {
    let [v0, v1, v2, v3, v4, v5, v6, v7] = values;
    _mm512_set_epi64(v7, v6, v5, v4, v3, v2, v1, v0)
}

/// Moves each 128-bit chunk of `value` forward by the distance `constants`
/// stand for.
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold_512_bits(value: __m512i, constants: __m512i) -> __m512i {
    _mm512_xor_si512(
        _mm512_clmulepi64_epi128::<0x00>(value, constants),
        _mm512_clmulepi64_epi128::<0x11>(value, constants),
    )
}

/// [`fold_512_bits`] for one 128-bit chunk.
#[target_feature(enable = "pclmulqdq")]
fn fold_128_bits(value: __m128i, constants: __m128i) -> __m128i {
    _mm_xor_si128(
        _mm_clmulepi64_si128::<0x00>(value, constants),
        _mm_clmulepi64_si128::<0x11>(value, constants),
    )
}

/// The fold constants in every 128-bit lane.
#[target_feature(enable = "avx512f")]
fn broadcast(constants: [i64; 2]) -> __m512i {
    _mm512_broadcast_i32x4(_mm_set_epi64x(constants[1], constants[0]))
}

/// A 512-bit value holding `bytes` in its first 16 bytes and zeros after.
#[target_feature(enable = "avx512f")]
fn broadcast_first_lane(bytes: [u8; 16]) -> __m512i {
    let mut wide = [0u8; 64];
    wide[..16].copy_from_slice(&bytes);
    load_512(&wide)
}

/// The four 64-byte registers of a 256-byte block.
#[target_feature(enable = "avx512f")]
fn load_block(block: &[u8; 256]) -> [__m512i; 4] {
    let (chunks, _) = block.as_chunks::<64>();
    let mut registers = [_mm512_setzero_si512(); 4];
    for (register, chunk) in registers.iter_mut().zip(chunks) {
        *register = load_512(chunk);
    }
    registers
}

/// 64 bytes as a 512-bit register.
#[target_feature(enable = "avx512f")]
fn load_512(bytes: &[u8; 64]) -> __m512i {
    // SAFETY: `bytes` is 64 readable bytes, the size of `__m512i`, a plain
    // integer vector valid for any bit pattern; `read_unaligned` needs no
    // alignment.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<__m512i>()) }
}

/// 16 bytes as a 128-bit register.
#[target_feature(enable = "sse4.2")]
fn load_128(bytes: &[u8; 16]) -> __m128i {
    // SAFETY: `bytes` is 16 readable bytes, the size of `__m128i`, a plain
    // integer vector valid for any bit pattern; `read_unaligned` needs no
    // alignment.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<__m128i>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_around_the_block_sizes_matches_the_crate() {
        if !available() {
            // This CPU never takes the path under test.
            eprintln!("not run: the CPU lacks AVX-512 and VPCLMULQDQ");
            return;
        }
        let mut rng = fastrand::Rng::with_seed(11);
        let bytes: Vec<u8> = (0..4 * 256 + 300).map(|_| rng.u8(..)).collect();
        for length in 0..bytes.len() {
            for start in [0, 1, 7] {
                let slice = &bytes[start.min(length)..length];
                let initial = rng.u32(..);
                // SAFETY: `available` confirmed every feature `append` enables.
                let folded = unsafe { append(initial, slice) };
                assert_eq!(
                    folded,
                    ::crc32c::crc32c_append(initial, slice),
                    "length {} from {start}",
                    slice.len()
                );
            }
        }
    }
}
