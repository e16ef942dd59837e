//! Typed reads of a property map: the one way a key's text becomes a number,
//! a duration or a boolean, with the key named in the error.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{invalid, ConfigError, ValueProblem};
use crate::value;

/// A table of keys with their default values (empty: no default).
pub type Defaults = [(&'static str, &'static str)];

/// Typed reads of a properties map, with the defaults of the given tables
/// for keys not set.
///
/// Values are trimmed. A key that is set to an empty value is read as the
/// empty value (so a number or a boolean is then an error), except by the
/// reads that say otherwise ([`Lookup::value`], [`Lookup::boolean_or`],
/// [`Lookup::for_listener`]).
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    map: &'a BTreeMap<String, String>,
    defaults: &'a [&'static Defaults],
}

impl<'a> Lookup<'a> {
    /// Reads of `map` with no defaults.
    pub fn new(map: &'a BTreeMap<String, String>) -> Lookup<'a> {
        Lookup { map, defaults: &[] }
    }

    /// Reads of `map` where a key not set takes its value in the first of
    /// `defaults` that lists it.
    pub fn with_defaults(
        map: &'a BTreeMap<String, String>,
        defaults: &'a [&'static Defaults],
    ) -> Lookup<'a> {
        Lookup { map, defaults }
    }

    /// The map read.
    pub fn map(&self) -> &'a BTreeMap<String, String> {
        self.map
    }

    /// Whether `key` is set (to any value, empty included).
    pub fn is_set(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// `key`'s default: empty when no table lists it.
    pub fn default_of(&self, key: &str) -> &'static str {
        self.defaults
            .iter()
            .flat_map(|table| table.iter())
            .find(|(known, _)| *known == key)
            .map(|(_, default)| *default)
            .unwrap_or("")
    }

    /// The value as set, trimmed; empty when `key` is not set (defaults
    /// are not consulted).
    pub fn value(&self, key: &str) -> &'a str {
        self.map.get(key).map_or("", |value| value.trim())
    }

    /// The value, trimmed, or the default when `key` is not set.
    pub fn string(&self, key: &str) -> String {
        self.map
            .get(key)
            .map(|value| value.trim().to_owned())
            .unwrap_or_else(|| self.default_of(key).to_owned())
    }

    /// An integer in `min..=max`.
    pub fn int(&self, key: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
        let text = self.string(key);
        let value: i64 = text
            .parse()
            .map_err(|_| invalid(key, &text, ValueProblem::NotAnInteger))?;
        if value < min || value > max {
            return Err(invalid(key, &text, ValueProblem::OutOfRange { min, max }).into());
        }
        Ok(value)
    }

    /// A Kafka int in `min..=i32::MAX`.
    pub fn int32(&self, key: &str, min: i32) -> Result<i32, ConfigError> {
        Ok(self.int(key, min.into(), i32::MAX.into())? as i32)
    }

    /// A Kafka short in `min..=i16::MAX`.
    pub fn int16(&self, key: &str, min: i16) -> Result<i16, ConfigError> {
        Ok(self.int(key, min.into(), i16::MAX.into())? as i16)
    }

    /// A non-negative integer in `min..=max` (`min` at least 0).
    pub fn unsigned(&self, key: &str, min: i64, max: i64) -> Result<u64, ConfigError> {
        debug_assert!(min >= 0);
        Ok(self.int(key, min, max)? as u64)
    }

    /// A count or size that Kafka keeps as an int, in `min..=i32::MAX`.
    pub fn count(&self, key: &str, min: i32) -> Result<usize, ConfigError> {
        debug_assert!(min >= 0);
        Ok(self.int32(key, min)? as usize)
    }

    /// A byte count where `-1` means "no limit".
    pub fn bytes_or_unlimited(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        Ok(match self.int(key, -1, i64::MAX)? {
            -1 => None,
            bytes => Some(bytes as u64),
        })
    }

    /// A non-negative number of milliseconds.
    pub fn millis(&self, key: &str) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.unsigned(key, 0, i64::MAX)?))
    }

    /// A boolean (see [`value::boolean`]).
    pub fn boolean(&self, key: &str) -> Result<bool, ConfigError> {
        Ok(value::boolean(key, &self.string(key))?)
    }

    /// A boolean that is `default` when `key` is not set or set empty
    /// (the authorizer switches read this way).
    pub fn boolean_or(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.value(key) {
            "" => Ok(default),
            text => Ok(value::boolean(key, text)?),
        }
    }

    /// A listener's setting: `listener.name.<name>.<key>` (the name in
    /// lower case), else `<key>`, with the key it came from. Empty values
    /// count as not set; defaults are not consulted.
    pub fn for_listener(&self, listener: &str, key: &str) -> Option<(String, String)> {
        let scoped = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        [scoped, key.to_owned()].into_iter().find_map(|name| {
            self.map
                .get(&name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
                .map(|value| (name, value))
        })
    }

    /// A listener's comma-separated list (as [`Lookup::for_listener`]),
    /// `default` when neither key is set, with the key it came from
    /// (`key` itself for the default).
    pub fn list_for_listener(
        &self,
        listener: &str,
        key: &str,
        default: &str,
    ) -> (String, Vec<String>) {
        let (name, text) = self
            .for_listener(listener, key)
            .unwrap_or_else(|| (key.to_owned(), default.to_owned()));
        let items = text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect();
        (name, items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &Defaults = &[("num.partitions", "1"), ("log.cleaner.enable", "true")];
    const OTHER: &Defaults = &[
        ("num.partitions", "9"),
        ("broker.session.timeout.ms", "9000"),
    ];

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_fill_keys_not_set_first_table_first() {
        let map = map(&[("group.max.size", " 7 ")]);
        let lookup = Lookup::with_defaults(&map, &[TABLE, OTHER]);
        assert_eq!(lookup.int32("num.partitions", 1).expect("valid"), 1);
        assert_eq!(
            lookup.millis("broker.session.timeout.ms").expect("valid"),
            Duration::from_secs(9)
        );
        assert!(lookup.boolean("log.cleaner.enable").expect("valid"));
        assert_eq!(lookup.count("group.max.size", 1).expect("valid"), 7);
        assert_eq!(lookup.value("num.partitions"), "");
        assert_eq!(lookup.string("unknown.key"), "");
        assert!(lookup.is_set("group.max.size") && !lookup.is_set("num.partitions"));
    }

    #[test]
    fn bad_numbers_name_the_key_and_the_range() {
        let map = map(&[("a", "many"), ("b", "0"), ("c", "-2"), ("d", "")]);
        let lookup = Lookup::new(&map);
        let problem = |result: Result<i64, ConfigError>| match result {
            Err(ConfigError::Invalid { problem, .. }) => problem,
            other => panic!("not invalid: {other:?}"),
        };
        assert_eq!(problem(lookup.int("a", 0, 5)), ValueProblem::NotAnInteger);
        assert_eq!(
            problem(lookup.int("b", 1, 5)),
            ValueProblem::OutOfRange { min: 1, max: 5 }
        );
        assert!(lookup.bytes_or_unlimited("c").is_err());
        assert!(lookup.int("d", 0, 5).is_err(), "set empty is not a number");
    }

    #[test]
    fn unlimited_bytes_and_booleans_with_a_default() {
        let map = map(&[
            ("bytes", "-1"),
            ("flag", " "),
            ("on", "TRUE"),
            ("off", "no"),
        ]);
        let lookup = Lookup::new(&map);
        assert_eq!(lookup.bytes_or_unlimited("bytes").expect("valid"), None);
        assert!(!lookup
            .boolean_or("flag", false)
            .expect("empty is the default"));
        assert!(lookup
            .boolean_or("unset", true)
            .expect("unset is the default"));
        assert!(lookup.boolean_or("on", false).expect("valid"));
        assert!(lookup.boolean_or("off", false).is_err());
        assert!(
            lookup.boolean("flag").is_err(),
            "set empty is not a boolean"
        );
    }

    #[test]
    fn listener_settings_prefer_the_listener_scoped_key() {
        let map = map(&[
            ("listener.name.internal.ssl.client.auth", "required"),
            ("ssl.client.auth", "none"),
            ("listener.name.external.sasl.enabled.mechanisms", " "),
            ("sasl.enabled.mechanisms", "PLAIN, SCRAM-SHA-256"),
        ]);
        let lookup = Lookup::new(&map);
        assert_eq!(
            lookup.for_listener("INTERNAL", "ssl.client.auth"),
            Some((
                "listener.name.internal.ssl.client.auth".to_owned(),
                "required".to_owned()
            ))
        );
        assert_eq!(
            lookup.for_listener("EXTERNAL", "ssl.client.auth"),
            Some(("ssl.client.auth".to_owned(), "none".to_owned()))
        );
        assert_eq!(
            lookup.list_for_listener("EXTERNAL", "sasl.enabled.mechanisms", "X"),
            (
                "sasl.enabled.mechanisms".to_owned(),
                vec!["PLAIN".to_owned(), "SCRAM-SHA-256".to_owned()]
            )
        );
        assert_eq!(
            lookup.list_for_listener("EXTERNAL", "ssl.cipher.suites", ""),
            ("ssl.cipher.suites".to_owned(), Vec::<String>::new())
        );
    }
}
