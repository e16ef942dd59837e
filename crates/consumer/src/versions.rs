//! Which version of each API the consumer sends to a broker.
//!
//! The version is negotiated per connection by `strom-client`: the highest
//! version both this client (kafka-protocol's codecs, as listed in
//! `strom_protocol::api::SUPPORTED_APIS`) and the broker's ApiVersions
//! answer support. [`ApiVersionCaps`] lowers that for brokers known to
//! advertise versions they cannot parse; it is empty by default.
//!
//! The known case is librdkafka's mock cluster (librdkafka 2.12): it
//! advertises JoinGroup v6 and SyncGroup v4 (flexible) but reads their
//! protocol and assignment arrays with a 4-byte count instead of the
//! compact varint count, and it advertises LeaveGroup v4 but reads the
//! v0-v2 `member_id` field instead of the v3+ `members` array. librdkafka's
//! own client never sends those versions, so only other clients notice.
//! [`ApiVersionCaps::librdkafka_mock`] caps exactly those three APIs; set
//! it with `strom.api.version.caps=librdkafka-mock` or list caps as
//! `JoinGroup=5,SyncGroup=3`.

use std::collections::BTreeMap;

use strom_client::{ClientError, ConfigError, Connection};
use strom_config::{invalid, InvalidValue, ValueProblem};
use strom_protocol::kafka::messages::ApiKey;

/// The property that sets [`ApiVersionCaps`].
pub const API_VERSION_CAPS_PROPERTY: &str = "strom.api.version.caps";

/// The APIs whose version can be capped, with their Kafka names.
const CAPPABLE_APIS: &[(ApiKey, &str)] = &[
    (ApiKey::Fetch, "Fetch"),
    (ApiKey::OffsetCommit, "OffsetCommit"),
    (ApiKey::OffsetFetch, "OffsetFetch"),
    (ApiKey::JoinGroup, "JoinGroup"),
    (ApiKey::Heartbeat, "Heartbeat"),
    (ApiKey::LeaveGroup, "LeaveGroup"),
    (ApiKey::SyncGroup, "SyncGroup"),
];

/// Upper bounds on negotiated API versions, by API key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersionCaps {
    caps: BTreeMap<i16, i16>,
}

impl ApiVersionCaps {
    /// No caps: every API at the highest version both sides support.
    pub fn none() -> ApiVersionCaps {
        ApiVersionCaps::default()
    }

    /// The caps librdkafka's mock cluster needs (see the module doc).
    pub fn librdkafka_mock() -> ApiVersionCaps {
        ApiVersionCaps::none()
            .with_cap(ApiKey::JoinGroup, 5)
            .with_cap(ApiKey::SyncGroup, 3)
            .with_cap(ApiKey::LeaveGroup, 2)
    }

    /// These caps plus `api_key` capped at `max_version`.
    pub fn with_cap(mut self, api_key: ApiKey, max_version: i16) -> ApiVersionCaps {
        self.caps.insert(api_key as i16, max_version);
        self
    }

    /// The cap of `api_key`, if any.
    pub fn cap(&self, api_key: ApiKey) -> Option<i16> {
        self.caps.get(&(api_key as i16)).copied()
    }

    /// Whether no API is capped.
    pub fn is_empty(&self) -> bool {
        self.caps.is_empty()
    }

    /// Applies the cap of `api_key` to a negotiated version.
    pub fn apply(&self, api_key: ApiKey, negotiated: i16) -> i16 {
        self.cap(api_key)
            .map_or(negotiated, |cap| negotiated.min(cap))
    }

    /// The version to send `api_key` at on `connection`: negotiated, then
    /// capped. A cap below the broker's minimum is the broker's minimum
    /// (the request would be rejected either way).
    pub fn version(&self, connection: &Connection, api_key: ApiKey) -> Result<i16, ClientError> {
        let negotiated = connection.api_version(api_key)?;
        let capped = self.apply(api_key, negotiated);
        let broker_min = connection
            .broker_versions()
            .range(api_key)
            .map_or(0, |(min, _)| min);
        Ok(capped.max(broker_min))
    }

    /// Parses `librdkafka-mock`, `none`, or `Name=version` pairs separated
    /// by commas. The names are Kafka's API names of Fetch, OffsetCommit,
    /// OffsetFetch, JoinGroup, Heartbeat, LeaveGroup and SyncGroup (any case),
    /// e.g. `JoinGroup=5`.
    pub fn parse(value: &str) -> Result<ApiVersionCaps, ConfigError> {
        let value = value.trim();
        match value {
            "" | "none" => return Ok(ApiVersionCaps::none()),
            "librdkafka-mock" => return Ok(ApiVersionCaps::librdkafka_mock()),
            _ => {}
        }
        let mut caps = ApiVersionCaps::none();
        for pair in value.split(',') {
            let (name, version) = pair.split_once('=').ok_or_else(|| invalid_caps(value))?;
            let api_key = CAPPABLE_APIS
                .iter()
                .find(|(_, known)| known.eq_ignore_ascii_case(name.trim()))
                .map(|(key, _)| *key)
                .ok_or_else(|| invalid_caps(value))?;
            let version: i16 = version.trim().parse().map_err(|_| invalid_caps(value))?;
            if version < 0 {
                return Err(invalid_caps(value).into());
            }
            caps = caps.with_cap(api_key, version);
        }
        Ok(caps)
    }
}

/// The error for a `strom.api.version.caps` value that is none of its forms.
fn invalid_caps(value: &str) -> InvalidValue {
    let expected = "none, librdkafka-mock, or ApiName=version pairs separated by commas";
    invalid(
        API_VERSION_CAPS_PROPERTY,
        value,
        ValueProblem::expected(expected),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_caps_keep_the_negotiated_version() {
        let caps = ApiVersionCaps::none();
        assert!(caps.is_empty());
        assert_eq!(caps.apply(ApiKey::JoinGroup, 9), 9);
    }

    #[test]
    fn mock_caps_lower_only_the_broken_apis() {
        let caps = ApiVersionCaps::librdkafka_mock();
        assert_eq!(caps.apply(ApiKey::JoinGroup, 6), 5);
        assert_eq!(caps.apply(ApiKey::SyncGroup, 4), 3);
        assert_eq!(caps.apply(ApiKey::LeaveGroup, 4), 2);
        assert_eq!(caps.apply(ApiKey::Heartbeat, 4), 4);
        assert_eq!(caps.apply(ApiKey::Fetch, 16), 16);
        assert_eq!(caps.apply(ApiKey::JoinGroup, 3), 3, "a cap never raises");
    }

    #[test]
    fn parses_presets_and_pairs() {
        assert_eq!(ApiVersionCaps::parse("none"), Ok(ApiVersionCaps::none()));
        assert_eq!(
            ApiVersionCaps::parse("librdkafka-mock"),
            Ok(ApiVersionCaps::librdkafka_mock())
        );
        let caps = ApiVersionCaps::parse("JoinGroup=5, fetch=12").expect("valid caps");
        assert_eq!(caps.cap(ApiKey::JoinGroup), Some(5));
        assert_eq!(caps.cap(ApiKey::Fetch), Some(12));
        assert_eq!(caps.cap(ApiKey::SyncGroup), None);
    }

    #[test]
    fn rejects_bad_caps() {
        for bad in [
            "JoinGroup",
            "Produce=3",
            "JoinGroup=x",
            "JoinGroup=-1",
            "=5",
        ] {
            assert!(
                ApiVersionCaps::parse(bad).is_err(),
                "{bad} must be rejected"
            );
        }
    }
}
