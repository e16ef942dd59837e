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
