//! Errors of the broker crate.

/// A configuration problem: the message names the key or the file and line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value that does not parse or is out of range.
    #[error("invalid value `{value}` for configuration `{key}`: {reason}")]
    Invalid {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A syntax error in a properties file.
    #[error("{source_name}:{line}: {reason}")]
    Syntax {
        /// The file (or other source) of the text.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The configuration file could not be read.
    #[error("cannot read configuration file {path}")]
    Read {
        /// The path.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `--set key=value` override without `=`.
    #[error("override `{text}` is not of the form key=value")]
    Override {
        /// The text given.
        text: String,
    },
}

/// Why a producer id could not be allocated or the counter not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    /// Reading or writing the counter file failed.
    #[error("cannot access the producer id counter {path}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The counter file does not hold a non-negative integer.
    #[error("the producer id counter {path} is corrupt: `{content}`")]
    Corrupt {
        /// The file.
        path: std::path::PathBuf,
        /// What it holds (at most the first 64 characters).
        content: String,
    },
    /// Every producer id has been handed out.
    #[error("producer ids are exhausted")]
    Exhausted,
}

/// A Fetch request that does not fit the fetch session it names (KIP-227).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchSessionError {
    /// No session with this id (never created, closed or evicted).
    #[error("fetch session {session_id} not found")]
    IdNotFound {
        /// The session id of the request.
        session_id: i32,
    },
    /// The session expects another epoch (a request was lost or repeated).
    #[error("fetch session {session_id} expects epoch {expected}, got {received}")]
    InvalidEpoch {
        /// The session id of the request.
        session_id: i32,
        /// The epoch the session expects next.
        expected: i32,
        /// The epoch of the request.
        received: i32,
    },
}
