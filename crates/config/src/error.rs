//! Errors of configuration values and files, and the one way a bad value
//! becomes an error ([`invalid`]).

use std::path::PathBuf;

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
        path: PathBuf,
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
    /// Not one of the values the key takes, which are named in words
    /// (`0, 1, all or -1`, `a non-negative number of milliseconds`).
    #[error("expected {expected}")]
    Expected {
        /// The values the key takes.
        expected: &'static str,
    },
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
    /// An HTTP listener not of the form `http://IP:PORT` or `https://IP:PORT`.
    #[error("expected http://HOST:PORT or https://HOST:PORT with an IP address")]
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

impl ValueProblem {
    /// Not one of the values the key takes, which `expected` names.
    pub fn expected(expected: &'static str) -> ValueProblem {
        ValueProblem::Expected { expected }
    }

    /// A security setting that does not fit, said in words.
    pub fn security(reason: impl Into<String>) -> ValueProblem {
        ValueProblem::Security {
            reason: reason.into(),
        }
    }

    /// A cluster-mode setting that does not fit, said in words.
    pub fn cluster(reason: impl Into<String>) -> ValueProblem {
        ValueProblem::Cluster {
            reason: reason.into(),
        }
    }
}

/// A value of a key that cannot be used: what [`invalid`] builds, and what
/// every configuration error type of Strom turns into its own "invalid
/// value" case with `From` (this crate's [`ConfigError::Invalid`], the
/// clients' `ConfigError::InvalidValue`), so `?` converts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidValue {
    /// The key.
    pub key: String,
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub problem: ValueProblem,
}

/// The error for `value` of `key`, with what is wrong with it.
pub fn invalid(key: &str, value: &str, problem: ValueProblem) -> InvalidValue {
    InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        problem,
    }
}

impl From<InvalidValue> for ConfigError {
    fn from(invalid: InvalidValue) -> ConfigError {
        ConfigError::Invalid {
            key: invalid.key,
            value: invalid.value,
            problem: invalid.problem,
        }
    }
}

/// Why the log directories' identity (`meta.properties`) could not be
/// established.
#[derive(Debug, thiserror::Error)]
pub enum MetaPropertiesError {
    /// Reading or writing the file failed.
    #[error("cannot access {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file does not parse as a properties file.
    #[error("{path} is not a properties file")]
    Unparsable {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: ConfigError,
    },
    /// The file lacks a key.
    #[error("{path} has no {key}")]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key (`cluster.id` or `node.id`).
        key: &'static str,
    },
    /// The node id is not a number.
    #[error("{path} has node.id `{value}`, which is not a number")]
    InvalidNodeId {
        /// The file.
        path: PathBuf,
        /// The value in the file.
        value: String,
    },
    /// Two directories, or a directory and the configuration, disagree.
    #[error("{path} belongs to {what} {found}, but this broker has {expected}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// `cluster.id` or `node.id`.
        what: &'static str,
        /// The value in the file.
        found: String,
        /// The expected value.
        expected: String,
    },
}

/// An error and its sources on one line, `error: cause: cause`, as the
/// programs print a fatal error and the logs name a failure.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_value_names_key_value_and_problem() {
        let error = ConfigError::from(invalid(
            "num.partitions",
            "many",
            ValueProblem::NotAnInteger,
        ));
        assert_eq!(
            error.to_string(),
            "invalid value `many` for configuration `num.partitions`: expected an integer"
        );
    }

    #[test]
    fn the_chain_lists_every_source() {
        let error = MetaPropertiesError::Io {
            path: PathBuf::from("/data/meta.properties"),
            source: std::io::Error::other("disk on fire"),
        };
        assert_eq!(
            error_chain(&error),
            "cannot access /data/meta.properties: disk on fire"
        );
    }
}
