//! The compression codec of a batch, as attribute bits 0-2 name it.
//!
//! Kept apart from the attribute parsing (which can fail with a
//! [`RecordError`](super::RecordError)) so that errors can name a codec.

/// Compression codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Uncompressed (0).
    #[default]
    None,
    /// gzip (1).
    Gzip,
    /// Snappy (2): xerial framing as the Java client writes, raw blocks accepted.
    Snappy,
    /// LZ4 frame format (3).
    Lz4,
    /// Zstandard (4).
    Zstd,
}

impl Compression {
    /// Every codec, in attribute-code order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec number stored in attribute bits 0-2.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's name for the codec (`compression.type` values).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}
