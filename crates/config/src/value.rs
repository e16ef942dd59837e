//! Scalar values every Strom configuration shares the spelling of.
//!
//! Booleans are read one way everywhere: `true` or `false` in any case,
//! around whitespace, which is Kafka's `ConfigDef` rule for its BOOLEAN
//! type. The parser itself is [`parse_boolean`] of `strom-protocol`'s
//! topic configurations (the protocol crate validates topic configs and
//! cannot depend on this crate); [`boolean`] names the key in its error.

pub use strom_protocol::topic_config::parse_boolean;

use crate::error::{invalid, InvalidValue, ValueProblem};

/// `value` of `key` as a boolean (see the module docs).
pub fn boolean(key: &str, value: &str) -> Result<bool, InvalidValue> {
    parse_boolean(value).map_err(|_| invalid(key, value, ValueProblem::NotABoolean))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_kafkas_spellings_in_any_case() {
        for (text, expected) in [
            ("true", true),
            ("false", false),
            (" TRUE ", true),
            ("False", false),
        ] {
            assert_eq!(boolean("check.crcs", text), Ok(expected), "{text:?}");
        }
        for text in ["", "yes", "1", "on", "t"] {
            let error = boolean("check.crcs", text).unwrap_err();
            assert_eq!(error.problem, ValueProblem::NotABoolean);
            assert_eq!(
                (error.key.as_str(), error.value.as_str()),
                ("check.crcs", text)
            );
        }
    }
}
