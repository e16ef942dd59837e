//! CRC-32C (Castagnoli) for record batch checks, fast on mid-sized buffers.
//!
//! This is the one CRC-32C of the record batch format: the batch view and
//! builder here and the log in `strom-storage` (appends, recovery, producer
//! state snapshots) all call it.
//!
//! The `crc32c` crate runs three `crc32` instruction streams in parallel only
//! over whole 768-byte (or 24 KiB) chunks and the rest of a buffer serially,
//! so a 1 KiB batch spends most of its time in one dependent chain (one
//! 8-byte step per three cycles). This module has two faster paths on x86-64,
//! chosen by run-time feature detection:
//!
//! - with AVX-512 and VPCLMULQDQ, from [`FOLD_MIN_BYTES`]: carry-less
//!   folding of 256 bytes per step in four 512-bit accumulators (`fold`);
//! - with SSE 4.2 and PCLMULQDQ, from [`PARALLEL_MIN_BYTES`]: the *whole*
//!   buffer split into three equal lanes, one `crc32` stream per lane, the
//!   lane CRCs joined with a carry-less multiply (advancing a CRC over `n`
//!   zero bytes is `crc32(0, clmul(crc, x^(8n - 33) mod P))`, with the
//!   constants for every lane length in a table computed at compile time).
//!
//! Other CPUs and shorter buffers use the `crc32c` crate. Every path gives
//! the crate's value for every input (a property test checks lengths up to
//! 70,000 bytes at unaligned starts with random initial CRCs; exhaustive
//! tests cover every length around each path's block sizes).

/// Buffers shorter than this go to the `crc32c` crate: three lanes and their
/// join cost more than they save on a few dozen bytes.
pub const PARALLEL_MIN_BYTES: usize = 192;

/// From this length on, CPUs with AVX-512 and VPCLMULQDQ fold 256 bytes at
/// a time with carry-less multiplies (see `crc/fold.rs`).
pub const FOLD_MIN_BYTES: usize = 256;

#[cfg(target_arch = "x86_64")]
mod fold;

/// The CRC-32C polynomial, bit-reflected (bit 0 is the x^31 coefficient).
#[cfg(target_arch = "x86_64")]
const POLYNOMIAL_REFLECTED: u32 = 0x82F6_3B78;

/// Multiplies a reflected polynomial by x modulo P.
#[cfg(target_arch = "x86_64")]
const fn times_x(value: u32) -> u32 {
    if value & 1 == 0 {
        value >> 1
    } else {
        (value >> 1) ^ POLYNOMIAL_REFLECTED
    }
}

/// x^exponent mod P, bit-reflected (x^0 is bit 31).
#[cfg(target_arch = "x86_64")]
const fn x_power(exponent: u32) -> u32 {
    let mut value = 0x8000_0000u32;
    let mut step = 0;
    while step < exponent {
        value = times_x(value);
        step += 1;
    }
    value
}

/// The CRC-32C of `bytes` (the value Kafka stores in a batch header).
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c_append(0, bytes)
}

/// Continues the CRC-32C `crc` of earlier bytes over `bytes`: the result is
/// the CRC-32C of the earlier bytes followed by `bytes`, as
/// `crc32c::crc32c_append` computes it.
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= FOLD_MIN_BYTES && fold::available() {
        // SAFETY: `available` checked at run time that the CPU has every
        // target feature `fold::append` enables.
        return unsafe { fold::append(crc, bytes) };
    }
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= PARALLEL_MIN_BYTES && x86::available() {
        // SAFETY: `available` checked at run time that the CPU has SSE 4.2
        // and PCLMULQDQ, the only target features `append` enables.
        return unsafe { x86::append(crc, bytes) };
    }
    ::crc32c::crc32c_append(crc, bytes)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_crc32_u64, _mm_crc32_u8, _mm_cvtsi128_si64, _mm_cvtsi32_si128,
        _mm_cvtsi64_si128,
    };

    use super::times_x;

    /// Longest lane, in 8-byte words; longer buffers are done in blocks of
    /// three such lanes (6 KiB), each join costing two multiplies.
    const LANE_WORDS_MAX: usize = 256;
    /// Below this many words per lane the rest is done serially.
    const LANE_WORDS_MIN: usize = 8;
    /// `SHIFT[words]` is x^(64 * words - 33) mod P, bit-reflected.
    const SHIFT: [u32; LANE_WORDS_MAX + 1] = shift_table();

    /// x^(64q - 33) mod P for q in 1..=LANE_WORDS_MAX (index 0 unused),
    /// each from the one before (a call to `x_power` per entry would
    /// repeat the work).
    const fn shift_table() -> [u32; LANE_WORDS_MAX + 1] {
        let mut table = [0u32; LANE_WORDS_MAX + 1];
        // x^31: bit 0 in the reflected order.
        let mut power = 1u32;
        let mut words = 1;
        while words <= LANE_WORDS_MAX {
            table[words] = power;
            let mut bit = 0;
            while bit < 64 {
                power = times_x(power);
                bit += 1;
            }
            words += 1;
        }
        table
    }

    /// Whether the CPU has what [`append`] needs (cached by the standard library).
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("sse4.2")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }

    /// [`super::crc32c_append`] with three parallel lanes.
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    pub(super) fn append(crc: u32, bytes: &[u8]) -> u32 {
        let mut state = u64::from(!crc);
        let mut rest = bytes;
        loop {
            let lane_words = (rest.len() / 24).min(LANE_WORDS_MAX);
            if lane_words < LANE_WORDS_MIN {
                break;
            }
            let (block, tail) = rest.split_at(lane_words * 24);
            state = three_lanes(state, block, lane_words);
            rest = tail;
        }
        finish(state, rest)
    }

    /// Runs the raw state `state` serially over `rest` and returns the CRC.
    #[target_feature(enable = "sse4.2")]
    pub(super) fn finish(mut state: u64, rest: &[u8]) -> u32 {
        let words = rest.chunks_exact(8);
        let remainder = words.remainder();
        for word in words {
            state = _mm_crc32_u64(state, load_word(word));
        }
        let mut state = state as u32;
        for byte in remainder {
            state = _mm_crc32_u8(state, *byte);
        }
        !state
    }

    /// Runs `state` over `block` (three lanes of `lane_words` words each).
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    fn three_lanes(state: u64, block: &[u8], lane_words: usize) -> u64 {
        let lane_bytes = lane_words * 8;
        let (first, others) = block.split_at(lane_bytes);
        let (second, third) = others.split_at(lane_bytes);
        let (mut state_first, mut state_second, mut state_third) = (state, 0u64, 0u64);
        let lanes = first
            .chunks_exact(8)
            .zip(second.chunks_exact(8))
            .zip(third.chunks_exact(8));
        for ((word_first, word_second), word_third) in lanes {
            state_first = _mm_crc32_u64(state_first, load_word(word_first));
            state_second = _mm_crc32_u64(state_second, load_word(word_second));
            state_third = _mm_crc32_u64(state_third, load_word(word_third));
        }
        let shift = SHIFT[lane_words];
        let joined = advance(state_first, shift) ^ state_second;
        advance(joined, shift) ^ state_third
    }

    /// Advances a raw (uninverted) CRC state over the zero bytes that `shift`
    /// stands for: the reflected product of state and shift carries a factor
    /// x, and `crc32` of a word multiplies by x^32, so x^33 cancels the -33.
    #[target_feature(enable = "sse4.2,pclmulqdq")]
    fn advance(state: u64, shift: u32) -> u64 {
        let product = _mm_clmulepi64_si128(
            _mm_cvtsi64_si128(state as i64),
            _mm_cvtsi32_si128(shift as i32),
            0,
        );
        _mm_crc32_u64(0, _mm_cvtsi128_si64(product) as u64)
    }

    /// The little-endian word in an 8-byte chunk.
    #[inline(always)]
    fn load_word(chunk: &[u8]) -> u64 {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        u64::from_le_bytes(word)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn shift_table_starts_at_x_to_the_31() {
            assert_eq!(SHIFT[1], 1);
            // x^95 mod P computed bit by bit, independently of the table loop.
            let mut power = 0x8000_0000u32;
            for _ in 0..95 {
                power = times_x(power);
            }
            assert_eq!(SHIFT[2], power);
        }

        #[test]
        fn every_block_length_matches_the_crate() {
            if !available() {
                // This CPU never takes the path under test.
                eprintln!("not run: the CPU lacks SSE 4.2 and PCLMULQDQ");
                return;
            }
            let mut rng = fastrand::Rng::with_seed(7);
            let bytes: Vec<u8> = (0..3 * 24 * LANE_WORDS_MAX + 100)
                .map(|_| rng.u8(..))
                .collect();
            for length in 0..bytes.len() {
                let slice = &bytes[..length];
                let initial = rng.u32(..);
                // SAFETY: `available` confirmed SSE 4.2 and PCLMULQDQ.
                let fast = unsafe { append(initial, slice) };
                assert_eq!(
                    fast,
                    ::crc32c::crc32c_append(initial, slice),
                    "length {length}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_vectors() {
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        // RFC 3720 (iSCSI) appendix B.4.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
        let descending: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&descending), 0x113F_DB5C);
        // Long enough for the parallel path: 1 KiB of zeros, then split.
        let zeros = [0u8; 1024];
        let whole = crc32c(&zeros);
        assert_eq!(whole, ::crc32c::crc32c(&zeros));
        assert_eq!(crc32c_append(crc32c(&zeros[..300]), &zeros[300..]), whole);
    }

    proptest! {
        #[test]
        fn equals_the_crc32c_crate(
            length in 0usize..=70_000,
            start in 0usize..16,
            initial in any::<u32>(),
            seed in any::<u64>(),
        ) {
            let mut rng = fastrand::Rng::with_seed(seed);
            let buffer: Vec<u8> = (0..start + length).map(|_| rng.u8(..)).collect();
            let bytes = &buffer[start..];
            prop_assert_eq!(crc32c_append(initial, bytes), ::crc32c::crc32c_append(initial, bytes));
            prop_assert_eq!(crc32c(bytes), ::crc32c::crc32c(bytes));
        }
    }
}
