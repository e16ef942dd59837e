//! Kafka's zigzag varint (int32, at most 5 bytes) and varlong (int64, at most
//! 10 bytes) encodings, as in `org.apache.kafka.common.utils.ByteUtils`.
//!
//! Decoding follows Kafka exactly: bits beyond the type's width in the last
//! permitted byte are dropped, and a continuation bit on that byte is an error.

use super::RecordError;

/// Longest varint encoding.
pub const VARINT_MAX_BYTES: usize = 5;
/// Longest varlong encoding.
pub const VARLONG_MAX_BYTES: usize = 10;

/// Reads a zigzag varint; returns the value and the bytes it took.
#[inline]
pub fn read_varint(buf: &[u8]) -> Result<(i32, usize), RecordError> {
    let (raw, size) = read_unsigned(buf, VARINT_MAX_BYTES)?;
    let raw = raw as u32;
    Ok((((raw >> 1) as i32) ^ -((raw & 1) as i32), size))
}

/// Reads a zigzag varlong; returns the value and the bytes it took.
#[inline]
pub fn read_varlong(buf: &[u8]) -> Result<(i64, usize), RecordError> {
    let (raw, size) = read_unsigned(buf, VARLONG_MAX_BYTES)?;
    Ok((((raw >> 1) as i64) ^ -((raw & 1) as i64), size))
}

#[inline]
fn read_unsigned(buf: &[u8], max_bytes: usize) -> Result<(u64, usize), RecordError> {
    // Most varints in a record (attributes aside: deltas, small lengths,
    // header counts) fit one byte.
    if let Some(&byte) = buf.first() {
        if byte & 0x80 == 0 {
            return Ok((u64::from(byte), 1));
        }
    }
    read_unsigned_long(buf, max_bytes)
}

fn read_unsigned_long(buf: &[u8], max_bytes: usize) -> Result<(u64, usize), RecordError> {
    let mut value = 0u64;
    for index in 0..max_bytes {
        let Some(&byte) = buf.get(index) else {
            return Err(RecordError::RecordTruncated {
                needed: index + 1,
                available: buf.len(),
            });
        };
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Ok((value, index + 1));
        }
    }
    Err(RecordError::VarintTooLong { max_bytes })
}

/// Appends a zigzag varint.
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends a zigzag varlong.
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Bytes [`write_varint`] writes for `value`.
pub fn varint_size(value: i32) -> usize {
    unsigned_size(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Bytes [`write_varlong`] writes for `value`.
pub fn varlong_size(value: i64) -> usize {
    unsigned_size(((value << 1) ^ (value >> 63)) as u64)
}

fn unsigned_size(value: u64) -> usize {
    let bits = 64 - value.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // Zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, 63 -> 126, -65 -> 129.
        let cases: [(i32, &[u8]); 7] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (63, &[0x7e]),
            (-65, &[0x81, 0x01]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (value, encoded) in cases {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out, encoded, "encoding {value}");
            assert_eq!(read_varint(encoded).ok(), Some((value, encoded.len())));
            assert_eq!(varint_size(value), encoded.len());
        }
    }

    #[test]
    fn overlong_and_truncated_encodings_fail() {
        assert!(matches!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
            Err(RecordError::VarintTooLong { max_bytes: 5 })
        ));
        assert!(matches!(
            read_varlong(&[0xff; 11]),
            Err(RecordError::VarintTooLong { max_bytes: 10 })
        ));
        assert!(matches!(
            read_varint(&[0x80, 0x80]),
            Err(RecordError::RecordTruncated {
                needed: 3,
                available: 2
            })
        ));
        assert!(read_varint(&[]).is_err());
    }

    proptest! {
        #[test]
        fn varint_round_trip(value in any::<i32>()) {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            prop_assert_eq!(out.len(), varint_size(value));
            prop_assert_eq!(read_varint(&out).ok(), Some((value, out.len())));
        }

        #[test]
        fn varlong_round_trip(value in any::<i64>()) {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            prop_assert_eq!(out.len(), varlong_size(value));
            prop_assert_eq!(read_varlong(&out).ok(), Some((value, out.len())));
        }
    }
}
