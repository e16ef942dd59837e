//! Kafka's primitive types, big-endian, for the `__transaction_state`
//! schemas: the classic encoding (int16 string lengths, int32 array counts)
//! and the flexible one (unsigned varint lengths plus one, tagged fields).
//!
//! Every length read is checked against the bytes left before anything is
//! allocated, so an allocation never exceeds the input's size.

use crate::error::{DecodeError, EncodeError};

/// The most bytes an unsigned varint of a `u32` takes.
const UNSIGNED_VARINT_MAX_BYTES: usize = 5;

/// Reads primitives from a byte slice.
pub(crate) struct Reader<'a> {
    input: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `input`.
    pub(crate) fn new(input: &'a [u8]) -> Self {
        Self { input }
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        match self.input.len() {
            0 => Ok(()),
            remaining => Err(DecodeError::TrailingBytes { remaining }),
        }
    }

    /// Takes the next `count` bytes.
    pub(crate) fn take(
        &mut self,
        count: usize,
        field: &'static str,
    ) -> Result<&'a [u8], DecodeError> {
        if count > self.input.len() {
            return Err(DecodeError::Truncated {
                field,
                needed: count,
                remaining: self.input.len(),
            });
        }
        let (taken, rest) = self.input.split_at(count);
        self.input = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N, field)?;
        let mut array = [0; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    /// An int8.
    pub(crate) fn i8(&mut self, field: &'static str) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }

    /// An int16.
    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    /// An int32.
    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    /// An int64.
    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    /// An unsigned varint of at most 32 bits.
    pub(crate) fn unsigned_varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let mut value: u64 = 0;
        for index in 0..UNSIGNED_VARINT_MAX_BYTES {
            let [byte] = self.array::<1>(field)?;
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return u32::try_from(value).map_err(|_| DecodeError::MalformedVarint { field });
            }
        }
        Err(DecodeError::MalformedVarint { field })
    }

    /// A count of elements of at least `min_element_bytes` each, checked
    /// against the bytes left: `None` for null (a count of -1).
    fn checked_count(
        &self,
        count: i64,
        min_element_bytes: usize,
        field: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        if count == -1 {
            return Ok(None);
        }
        let length = u64::try_from(count).map_err(|_| DecodeError::InvalidLength {
            field,
            length: count,
        })?;
        let needed = length.saturating_mul(min_element_bytes.max(1) as u64);
        if needed > self.input.len() as u64 {
            return Err(DecodeError::LengthOverInput {
                field,
                length,
                remaining: self.input.len(),
            });
        }
        // The count fits in the input's length, which is a usize.
        Ok(Some(length as usize))
    }

    /// An array count: int32 in the classic encoding, unsigned varint of
    /// count plus one in the flexible one; `None` for null.
    pub(crate) fn array_count(
        &mut self,
        flexible: bool,
        min_element_bytes: usize,
        field: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let count = if flexible {
            i64::from(self.unsigned_varint(field)?) - 1
        } else {
            i64::from(self.i32(field)?)
        };
        self.checked_count(count, min_element_bytes, field)
    }

    /// A non-null string: int16 length in the classic encoding, unsigned
    /// varint of length plus one in the flexible one.
    pub(crate) fn string(
        &mut self,
        flexible: bool,
        field: &'static str,
    ) -> Result<String, DecodeError> {
        let length = if flexible {
            i64::from(self.unsigned_varint(field)?) - 1
        } else {
            i64::from(self.i16(field)?)
        };
        if length < 0 {
            return Err(DecodeError::InvalidLength { field, length });
        }
        let length = self.checked_count(length, 1, field)?.unwrap_or_default();
        let bytes = self.take(length, field)?;
        let text = std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8 { field })?;
        Ok(text.to_owned())
    }
}

/// Writes primitives to a byte vector.
#[derive(Default)]
pub(crate) struct Writer {
    output: Vec<u8>,
}

impl Writer {
    /// The bytes written.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.output
    }

    /// An int8.
    pub(crate) fn i8(&mut self, value: i8) {
        self.output.extend_from_slice(&value.to_be_bytes());
    }

    /// An int16.
    pub(crate) fn i16(&mut self, value: i16) {
        self.output.extend_from_slice(&value.to_be_bytes());
    }

    /// An int32.
    pub(crate) fn i32(&mut self, value: i32) {
        self.output.extend_from_slice(&value.to_be_bytes());
    }

    /// An int64.
    pub(crate) fn i64(&mut self, value: i64) {
        self.output.extend_from_slice(&value.to_be_bytes());
    }

    /// An unsigned varint.
    pub(crate) fn unsigned_varint(&mut self, mut value: u32) {
        while value >= 0x80 {
            self.output.push((value & 0x7f) as u8 | 0x80);
            value >>= 7;
        }
        self.output.push(value as u8);
    }

    /// An array count, `None` for null.
    pub(crate) fn array_count(
        &mut self,
        flexible: bool,
        count: Option<usize>,
        field: &'static str,
    ) -> Result<(), EncodeError> {
        let limit = if flexible {
            u32::MAX as usize - 1
        } else {
            i32::MAX as usize
        };
        match count {
            Some(count) if count > limit => {
                return Err(EncodeError::ArrayTooLong {
                    field,
                    count,
                    limit,
                })
            }
            // The count is within the limit checked above.
            Some(count) if flexible => self.unsigned_varint(count as u32 + 1),
            Some(count) => self.i32(count as i32),
            None if flexible => self.unsigned_varint(0),
            None => self.i32(-1),
        }
        Ok(())
    }

    /// A non-null string.
    pub(crate) fn string(
        &mut self,
        flexible: bool,
        text: &str,
        field: &'static str,
    ) -> Result<(), EncodeError> {
        let length = text.len();
        let limit = if flexible {
            u32::MAX as usize - 1
        } else {
            i16::MAX as usize
        };
        if length > limit {
            return Err(EncodeError::StringTooLong {
                field,
                length,
                limit,
            });
        }
        // The length is within the limit checked above.
        if flexible {
            self.unsigned_varint(length as u32 + 1);
        } else {
            self.i16(length as i16);
        }
        self.output.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Reader, Writer};
    use crate::error::DecodeError;

    #[test]
    fn unsigned_varints_round_trip_at_their_boundaries() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u32::MAX] {
            let mut writer = Writer::default();
            writer.unsigned_varint(value);
            let bytes = writer.into_bytes();
            let mut reader = Reader::new(&bytes);
            assert_eq!(reader.unsigned_varint("value"), Ok(value));
            assert_eq!(reader.finish(), Ok(()));
        }
    }

    #[test]
    fn an_overlong_or_oversized_varint_is_refused() {
        let six_bytes = [0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(
            Reader::new(&six_bytes).unsigned_varint("value"),
            Err(DecodeError::MalformedVarint { field: "value" })
        );
        let over_u32 = [0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(
            Reader::new(&over_u32).unsigned_varint("value"),
            Err(DecodeError::MalformedVarint { field: "value" })
        );
    }

    #[test]
    fn a_count_is_checked_against_the_input_before_allocating() {
        let huge = i32::MAX.to_be_bytes();
        assert_eq!(
            Reader::new(&huge).array_count(false, 4, "items"),
            Err(DecodeError::LengthOverInput {
                field: "items",
                length: i32::MAX as u64,
                remaining: 0
            })
        );
        let negative = (-2_i32).to_be_bytes();
        assert_eq!(
            Reader::new(&negative).array_count(false, 4, "items"),
            Err(DecodeError::InvalidLength {
                field: "items",
                length: -2
            })
        );
        assert_eq!(
            Reader::new(&(-1_i32).to_be_bytes()).array_count(false, 4, "items"),
            Ok(None)
        );
        assert_eq!(Reader::new(&[0]).array_count(true, 4, "items"), Ok(None));
    }

    #[test]
    fn strings_are_never_null_and_must_be_utf8() {
        let null = (-1_i16).to_be_bytes();
        assert_eq!(
            Reader::new(&null).string(false, "name"),
            Err(DecodeError::InvalidLength {
                field: "name",
                length: -1
            })
        );
        assert_eq!(
            Reader::new(&[0]).string(true, "name"),
            Err(DecodeError::InvalidLength {
                field: "name",
                length: -1
            })
        );
        assert_eq!(
            Reader::new(&[0, 1, 0xff]).string(false, "name"),
            Err(DecodeError::InvalidUtf8 { field: "name" })
        );
    }
}
