//! Batch attributes: compression codec, timestamp type and flags.

use super::compression_type::Compression;
use super::RecordError;

impl TryFrom<u8> for Compression {
    type Error = RecordError;

    fn try_from(code: u8) -> Result<Self, Self::Error> {
        match code {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            _ => Err(RecordError::UnknownCompression { code }),
        }
    }
}

impl TryFrom<i16> for Compression {
    type Error = RecordError;

    /// Reads the codec from a full attributes value (bits 0-2).
    fn try_from(attributes: i16) -> Result<Self, Self::Error> {
        Compression::try_from((attributes & BatchAttributes::COMPRESSION_MASK) as u8)
    }
}

/// Timestamp type of a batch (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Timestamps set by the producer.
    #[default]
    CreateTime,
    /// The broker's append time, stored as the batch's max timestamp.
    LogAppendTime,
}

/// The attributes field of a v2 batch header, with a known codec.
///
/// Only values whose compression bits name a known codec can be constructed,
/// so [`compression`](Self::compression) cannot fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BatchAttributes(i16);

impl BatchAttributes {
    /// Bits 0-2: the compression codec.
    pub const COMPRESSION_MASK: i16 = 0x07;
    /// Bit 3: set for LogAppendTime.
    pub const TIMESTAMP_TYPE_BIT: i16 = 0x08;
    /// Bit 4: the batch belongs to a transaction.
    pub const TRANSACTIONAL_BIT: i16 = 0x10;
    /// Bit 5: the batch holds control records (transaction markers).
    pub const CONTROL_BIT: i16 = 0x20;
    /// Bit 6: the base timestamp is the delete horizon (KIP-534).
    pub const DELETE_HORIZON_BIT: i16 = 0x40;

    /// Attributes with the given codec and every flag clear.
    pub fn new(compression: Compression) -> BatchAttributes {
        BatchAttributes(i16::from(compression.code()))
    }

    /// Validates raw attribute bits (the codec must be known).
    pub fn from_bits(bits: i16) -> Result<BatchAttributes, RecordError> {
        Compression::try_from(bits)?;
        Ok(BatchAttributes(bits))
    }

    /// The raw value as stored in the header.
    pub fn bits(self) -> i16 {
        self.0
    }

    /// The compression codec.
    pub fn compression(self) -> Compression {
        match Compression::try_from(self.0) {
            Ok(compression) => compression,
            // Construction validated the codec bits.
            Err(_) => unreachable!("BatchAttributes holds a known codec"),
        }
    }

    /// The timestamp type.
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL_BIT != 0
    }

    /// Whether the batch holds control records.
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL_BIT != 0
    }

    /// Whether the base timestamp holds the delete horizon.
    pub fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON_BIT != 0
    }

    /// The same attributes with another codec.
    pub fn with_compression(self, compression: Compression) -> BatchAttributes {
        BatchAttributes((self.0 & !Self::COMPRESSION_MASK) | i16::from(compression.code()))
    }

    /// The same attributes with another timestamp type.
    pub fn with_timestamp_type(self, timestamp_type: TimestampType) -> BatchAttributes {
        self.with_bit(
            Self::TIMESTAMP_TYPE_BIT,
            timestamp_type == TimestampType::LogAppendTime,
        )
    }

    /// The same attributes with the transactional flag set or cleared.
    pub fn with_transactional(self, transactional: bool) -> BatchAttributes {
        self.with_bit(Self::TRANSACTIONAL_BIT, transactional)
    }

    /// The same attributes with the control flag set or cleared.
    pub fn with_control(self, control: bool) -> BatchAttributes {
        self.with_bit(Self::CONTROL_BIT, control)
    }

    /// The same attributes with the delete-horizon flag set or cleared.
    pub fn with_delete_horizon(self, delete_horizon: bool) -> BatchAttributes {
        self.with_bit(Self::DELETE_HORIZON_BIT, delete_horizon)
    }

    fn with_bit(self, bit: i16, set: bool) -> BatchAttributes {
        if set {
            BatchAttributes(self.0 | bit)
        } else {
            BatchAttributes(self.0 & !bit)
        }
    }
}

impl TryFrom<i16> for BatchAttributes {
    type Error = RecordError;

    fn try_from(bits: i16) -> Result<Self, Self::Error> {
        BatchAttributes::from_bits(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_fail() {
        for compression in Compression::ALL {
            assert_eq!(
                Compression::try_from(compression.code()).ok(),
                Some(compression)
            );
            assert_eq!(BatchAttributes::new(compression).compression(), compression);
        }
        for code in 5u8..=7 {
            assert!(matches!(
                Compression::try_from(code),
                Err(RecordError::UnknownCompression { code: found }) if found == code
            ));
        }
    }

    #[test]
    fn flags_are_independent_bits() {
        let attributes = BatchAttributes::new(Compression::Lz4)
            .with_timestamp_type(TimestampType::LogAppendTime)
            .with_transactional(true)
            .with_control(true)
            .with_delete_horizon(true);
        assert_eq!(attributes.bits(), 0x7b);
        assert_eq!(attributes.compression(), Compression::Lz4);
        assert_eq!(attributes.timestamp_type(), TimestampType::LogAppendTime);
        assert!(attributes.is_transactional() && attributes.is_control());
        assert!(attributes.has_delete_horizon());
        let cleared = attributes
            .with_timestamp_type(TimestampType::CreateTime)
            .with_transactional(false)
            .with_control(false)
            .with_delete_horizon(false);
        assert_eq!(cleared, BatchAttributes::new(Compression::Lz4));
        assert!(BatchAttributes::from_bits(0x0d).is_err());
    }
}
