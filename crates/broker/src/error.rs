//! Errors of the broker crate.

/// A configuration problem: the message names the key or the file and line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value that does not parse or is out of range.
    #[error("invalid value `{value}` for configuration `{key}`: {problem}")]
    Invalid {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: ValueProblem,
    },
    /// A `\uXXXX` escape in a properties file that is not four hex digits
    /// naming a character.
    #[error("{source_name}:{line}: invalid unicode escape \\u{escape}")]
    UnicodeEscape {
        /// The file (or other source) of the text.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// The up to four characters after `\u`.
        escape: String,
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

/// What is wrong with a configuration value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueProblem {
    /// A broker synonym of a topic configuration whose value does not fit
    /// the topic key's type or range (after conversion to its unit).
    #[error(transparent)]
    TopicConfig(strom_protocol::topic_config::ConfigValueError),
    /// Not an integer.
    #[error("expected an integer")]
    NotAnInteger,
    /// An integer outside the key's range.
    #[error("must be between {min} and {max}")]
    OutOfRange {
        /// Smallest valid value.
        min: i64,
        /// Largest valid value.
        max: i64,
    },
    /// Not `true` or `false`.
    #[error("expected true or false")]
    NotABoolean,
    /// A listener not of the form `NAME://host:port`.
    #[error("expected NAME://host:port")]
    ListenerSyntax,
    /// A listener port that is not a number from 0 to 65535.
    #[error("the port must be a number from 0 to 65535")]
    ListenerPort,
    /// A listener name with characters other than letters, digits and `_`.
    #[error("a listener name is letters, digits and underscores")]
    ListenerName,
    /// A listener host that is not an IP address, `localhost` or empty.
    #[error("the host must be an IP address, localhost, or empty")]
    ListenerHost,
    /// Two listeners with the same name.
    #[error("each listener name may appear once")]
    DuplicateListener,
    /// An HTTP listener not of the form `http://IP:PORT`.
    #[error("expected http://HOST:PORT with an IP address")]
    HttpListener,
    /// A log format other than `text` or `json`.
    #[error("expected text or json")]
    LogFormat,
    /// A security setting's value that does not fit (TLS, SASL and
    /// authorizer settings say why in words).
    #[error("{reason}")]
    Security {
        /// Why.
        reason: String,
    },
    /// A cluster-mode setting that does not fit the others (roles, voters,
    /// controller listener), said in words.
    #[error("{reason}")]
    Cluster {
        /// Why.
        reason: String,
    },
    /// No listener at all.
    #[error("at least one listener is required")]
    NoListener,
    /// No log directory at all.
    #[error("at least one directory is required")]
    NoDirectory,
    /// The value exceeds another key's value that bounds it.
    #[error("must not exceed {other}")]
    Exceeds {
        /// The bounding key.
        other: &'static str,
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
