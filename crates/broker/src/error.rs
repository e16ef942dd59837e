//! Errors of the broker crate.

pub use strom_config::{ConfigError, ValueProblem};

/// A `strom-broker` command line that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// An option that needs a value is last.
    #[error("{option} needs a value")]
    MissingValue {
        /// The option.
        option: &'static str,
    },
    /// An argument that is not an option of `strom-broker`.
    #[error("unexpected argument `{argument}`")]
    Unexpected {
        /// The argument.
        argument: String,
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
    /// The controller quorum could not be asked for a block of ids.
    #[error("no block of producer ids from the controller")]
    Controller {
        /// Why.
        #[source]
        source: strom_controller::error::RuntimeError,
    },
    /// The controller refused this broker a block of ids (for example
    /// after the broker was fenced and re-registered).
    #[error("the controller refused a block of producer ids")]
    Refused {
        /// Why.
        #[source]
        source: strom_controller::error::ControllerError,
    },
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
