//! Kafka's primitive encodings, big-endian, in their classic (non-flexible)
//! and flexible (compact, tagged-field) forms, for the record schemas.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::RecordError;

/// Writes primitives into a growing buffer.
pub(crate) struct Writer {
    buffer: BytesMut,
    flexible: bool,
}

impl Writer {
    pub(crate) fn new(flexible: bool) -> Writer {
        Writer {
            buffer: BytesMut::new(),
            flexible,
        }
    }

    pub(crate) fn finish(self) -> Bytes {
        self.buffer.freeze()
    }

    pub(crate) fn int8(&mut self, value: i8) {
        self.buffer.put_i8(value);
    }

    pub(crate) fn int16(&mut self, value: i16) {
        self.buffer.put_i16(value);
    }

    pub(crate) fn uuid(&mut self, value: uuid::Uuid) {
        self.buffer.put_slice(value.as_bytes());
    }

    pub(crate) fn int32(&mut self, value: i32) {
        self.buffer.put_i32(value);
    }

    pub(crate) fn int64(&mut self, value: i64) {
        self.buffer.put_i64(value);
    }

    fn unsigned_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buffer.put_u8((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.buffer.put_u8(value as u8);
    }

    /// Writes a length: i16 for classic strings, unsigned varint plus one for
    /// compact ones.
    fn string_length(&mut self, length: usize) {
        if self.flexible {
            self.unsigned_varint(length as u64 + 1);
        } else {
            let length = i16::try_from(length).unwrap_or(i16::MAX);
            self.int16(length);
        }
    }

    /// Writes a string. A classic string longer than `i16::MAX` bytes (which
    /// no Kafka request can carry) is cut at the last character boundary
    /// that fits, so the record stays decodable.
    pub(crate) fn string(&mut self, value: &str) {
        let mut length = value.len();
        if !self.flexible && length > i16::MAX as usize {
            length = i16::MAX as usize;
            while !value.is_char_boundary(length) {
                length -= 1;
            }
        }
        let text = value.get(..length).unwrap_or_default();
        self.string_length(text.len());
        self.buffer.put_slice(text.as_bytes());
    }

    pub(crate) fn nullable_string(&mut self, value: Option<&str>) {
        match value {
            Some(value) => self.string(value),
            None if self.flexible => self.unsigned_varint(0),
            None => self.int16(-1),
        }
    }

    pub(crate) fn bytes(&mut self, value: &[u8]) {
        if self.flexible {
            self.unsigned_varint(value.len() as u64 + 1);
        } else {
            self.int32(i32::try_from(value.len()).unwrap_or(i32::MAX));
        }
        self.buffer.put_slice(value);
    }

    pub(crate) fn array_length(&mut self, length: usize) {
        if self.flexible {
            self.unsigned_varint(length as u64 + 1);
        } else {
            self.int32(i32::try_from(length).unwrap_or(i32::MAX));
        }
    }

    /// The (empty) tagged-field section that ends a flexible struct.
    pub(crate) fn tagged_fields(&mut self) {
        if self.flexible {
            self.unsigned_varint(0);
        }
    }
}

/// Reads primitives from a slice, never past its end.
pub(crate) struct Reader<'a> {
    input: &'a [u8],
    flexible: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(input: &'a [u8], flexible: bool) -> Reader<'a> {
        Reader { input, flexible }
    }

    pub(crate) fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }

    pub(crate) fn finish(self) -> Result<(), RecordError> {
        if self.input.is_empty() {
            Ok(())
        } else {
            Err(RecordError::TrailingBytes {
                remaining: self.input.len(),
            })
        }
    }

    fn take(&mut self, count: usize, field: &'static str) -> Result<&'a [u8], RecordError> {
        if count > self.input.len() {
            return Err(RecordError::Truncated { field });
        }
        let (head, tail) = self.input.split_at(count);
        self.input = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], RecordError> {
        let bytes = self.take(N, field)?;
        let mut array = [0_u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    pub(crate) fn int8(&mut self, field: &'static str) -> Result<i8, RecordError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn uuid(&mut self, field: &'static str) -> Result<uuid::Uuid, RecordError> {
        Ok(uuid::Uuid::from_bytes(self.array(field)?))
    }

    pub(crate) fn int16(&mut self, field: &'static str) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn int32(&mut self, field: &'static str) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn int64(&mut self, field: &'static str) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    fn unsigned_varint(&mut self, field: &'static str) -> Result<u64, RecordError> {
        let mut value = 0_u64;
        for shift in (0..35).step_by(7) {
            let [byte] = self.array::<1>(field)?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::InvalidLength {
            field,
            length: i64::MAX,
        })
    }

    /// A length prefix: `None` for null. Lengths beyond the remaining input
    /// are rejected before anything is allocated.
    fn length(&mut self, field: &'static str, wide: bool) -> Result<Option<usize>, RecordError> {
        let length: i64 = if self.flexible {
            i64::try_from(self.unsigned_varint(field)?).unwrap_or(i64::MAX) - 1
        } else if wide {
            i64::from(self.int32(field)?)
        } else {
            i64::from(self.int16(field)?)
        };
        if length == -1 {
            return Ok(None);
        }
        match usize::try_from(length) {
            Ok(length) if length <= self.input.len() => Ok(Some(length)),
            _ => Err(RecordError::InvalidLength { field, length }),
        }
    }

    pub(crate) fn nullable_string(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, RecordError> {
        let Some(length) = self.length(field, false)? else {
            return Ok(None);
        };
        let bytes = self.take(length, field)?;
        let text = std::str::from_utf8(bytes).map_err(|_| RecordError::InvalidUtf8 { field })?;
        Ok(Some(text.to_owned()))
    }

    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, RecordError> {
        self.nullable_string(field)?
            .ok_or(RecordError::InvalidLength { field, length: -1 })
    }

    pub(crate) fn bytes(&mut self, field: &'static str) -> Result<Bytes, RecordError> {
        let length = self
            .length(field, true)?
            .ok_or(RecordError::InvalidLength { field, length: -1 })?;
        Ok(Bytes::copy_from_slice(self.take(length, field)?))
    }

    /// An array count, capped by the remaining bytes (every element takes at
    /// least one byte), so callers may pre-allocate it.
    pub(crate) fn array_length(&mut self, field: &'static str) -> Result<usize, RecordError> {
        self.length(field, true)?
            .ok_or(RecordError::InvalidLength { field, length: -1 })
    }

    /// Skips a flexible struct's tagged fields.
    pub(crate) fn tagged_fields(&mut self) -> Result<(), RecordError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.unsigned_varint("tagged fields")?;
        for _ in 0..count {
            self.unsigned_varint("tag")?;
            let size = self.unsigned_varint("tag size")?;
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            self.take(size, "tagged field")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_classic_strings_are_cut_on_a_character_boundary() {
        let text = "é".repeat(20_000);
        let mut writer = Writer::new(false);
        writer.string(&text);
        let encoded = writer.finish();
        let mut reader = Reader::new(&encoded, false);
        let decoded = reader.string("text").expect("still decodable");
        assert_eq!(decoded.len(), 32_766);
        assert!(text.starts_with(&decoded));
        assert!(reader.finish().is_ok());
    }

    #[test]
    fn varints_round_trip_and_overlong_ones_are_refused() {
        let mut writer = Writer::new(true);
        writer.bytes(&[7; 300]);
        let encoded = writer.finish();
        assert_eq!(&encoded[..2], &[0xad, 0x02], "301 as an unsigned varint");
        let mut reader = Reader::new(&encoded, true);
        assert_eq!(reader.bytes("bytes").map(|b| b.len()), Ok(300));
        let overlong = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let mut reader = Reader::new(&overlong, true);
        assert!(reader.bytes("bytes").is_err());
    }
}
