//! The table of APIs and versions Strom serves: the one source for
//! ApiVersions.
//!
//! [`SUPPORTED_APIS`] is what the broker advertises in its ApiVersions
//! response and what [`Request`](crate::messages::Request) and
//! [`Response`](crate::messages::Response) decode. The broker must never
//! advertise a version it does not fully handle, so every bound is a plain
//! constant here, reviewed on its own, rather than derived from whatever the
//! `kafka-protocol` crate happens to know. A test checks that each range lies
//! within `kafka-protocol`'s valid versions for the message (so the generated
//! decoders are never called at a version they do not implement).
//!
//! The minimum versions are the Kafka 4 baseline (KIP-896 removed the older
//! ones); the maximum versions are the newest that `kafka-protocol` 0.18
//! implements for both the request and the response (its
//! `ApiKey::valid_versions` claims one more version than its request codecs
//! implement for OffsetCommit, OffsetFetch and InitProducerId; the codecs
//! win). Later issues lower or raise them deliberately.

use crate::error_code::ErrorCode;
use crate::kafka::messages::api_versions_response::ApiVersion;
use crate::kafka::messages::{ApiKey, ApiVersionsResponse};

/// One API Strom serves, with its supported version range (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedApi {
    /// The API key.
    pub api_key: ApiKey,
    /// Kafka's name for the API.
    pub name: &'static str,
    /// The lowest version served.
    pub min_version: i16,
    /// The highest version served.
    pub max_version: i16,
}

const fn api(
    api_key: ApiKey,
    name: &'static str,
    min_version: i16,
    max_version: i16,
) -> SupportedApi {
    SupportedApi {
        api_key,
        name,
        min_version,
        max_version,
    }
}

/// Every API Strom serves, ordered by API key.
pub const SUPPORTED_APIS: &[SupportedApi] = &[
    api(ApiKey::Produce, "Produce", 3, 13),
    api(ApiKey::Fetch, "Fetch", 4, 18),
    api(ApiKey::ListOffsets, "ListOffsets", 1, 10),
    api(ApiKey::Metadata, "Metadata", 0, 13),
    // kafka-protocol 0.18 lists v10 in `ApiKey::valid_versions` but its
    // generated request codec stops at v9 (no topic ids): capped at 9.
    api(ApiKey::OffsetCommit, "OffsetCommit", 2, 9),
    // Same as OffsetCommit: the generated request codec stops at v9.
    api(ApiKey::OffsetFetch, "OffsetFetch", 1, 9),
    api(ApiKey::FindCoordinator, "FindCoordinator", 0, 6),
    api(ApiKey::JoinGroup, "JoinGroup", 0, 9),
    api(ApiKey::Heartbeat, "Heartbeat", 0, 4),
    api(ApiKey::LeaveGroup, "LeaveGroup", 0, 5),
    api(ApiKey::SyncGroup, "SyncGroup", 0, 5),
    api(ApiKey::DescribeGroups, "DescribeGroups", 0, 6),
    api(ApiKey::ListGroups, "ListGroups", 0, 5),
    api(ApiKey::SaslHandshake, "SaslHandshake", 0, 1),
    api(ApiKey::ApiVersions, "ApiVersions", 0, 4),
    api(ApiKey::CreateTopics, "CreateTopics", 2, 7),
    api(ApiKey::DeleteTopics, "DeleteTopics", 1, 6),
    api(ApiKey::DeleteRecords, "DeleteRecords", 0, 2),
    // The generated request codec stops at v5 (the response knows v6).
    api(ApiKey::InitProducerId, "InitProducerId", 0, 5),
    api(ApiKey::OffsetForLeaderEpoch, "OffsetForLeaderEpoch", 2, 4),
    // v4+ is the brokers' verification (KIP-890 part 1), v5 would add
    // TRANSACTION_ABORTABLE for clients of transaction version 2.
    api(ApiKey::AddPartitionsToTxn, "AddPartitionsToTxn", 0, 4),
    api(ApiKey::AddOffsetsToTxn, "AddOffsetsToTxn", 0, 3),
    api(ApiKey::EndTxn, "EndTxn", 0, 3),
    api(ApiKey::WriteTxnMarkers, "WriteTxnMarkers", 1, 1),
    api(ApiKey::TxnOffsetCommit, "TxnOffsetCommit", 0, 3),
    // The generated codecs start at v1 (v0 lacks the pattern type).
    api(ApiKey::DescribeAcls, "DescribeAcls", 1, 3),
    api(ApiKey::CreateAcls, "CreateAcls", 1, 3),
    api(ApiKey::DeleteAcls, "DeleteAcls", 1, 3),
    api(ApiKey::DescribeConfigs, "DescribeConfigs", 1, 4),
    api(ApiKey::AlterConfigs, "AlterConfigs", 0, 2),
    api(ApiKey::SaslAuthenticate, "SaslAuthenticate", 0, 2),
    api(ApiKey::CreatePartitions, "CreatePartitions", 0, 3),
    api(ApiKey::DeleteGroups, "DeleteGroups", 0, 2),
    api(ApiKey::ElectLeaders, "ElectLeaders", 0, 2),
    api(
        ApiKey::IncrementalAlterConfigs,
        "IncrementalAlterConfigs",
        0,
        1,
    ),
    // v1 (KIP-860: refusing a change of replication factor) is not served.
    api(
        ApiKey::AlterPartitionReassignments,
        "AlterPartitionReassignments",
        0,
        0,
    ),
    api(
        ApiKey::ListPartitionReassignments,
        "ListPartitionReassignments",
        0,
        0,
    ),
    api(ApiKey::OffsetDelete, "OffsetDelete", 0, 0),
    // KIP-546: client quotas (Kafka 4 serves v0 and v1).
    api(ApiKey::DescribeClientQuotas, "DescribeClientQuotas", 0, 1),
    api(ApiKey::AlterClientQuotas, "AlterClientQuotas", 0, 1),
    api(
        ApiKey::DescribeUserScramCredentials,
        "DescribeUserScramCredentials",
        0,
        0,
    ),
    api(
        ApiKey::AlterUserScramCredentials,
        "AlterUserScramCredentials",
        0,
        0,
    ),
    // Kafka 3.3 to 3.8 clients send v1 (KIP-836 timestamps), 3.9 and later
    // v2 (KIP-853 directory ids and controller endpoints).
    api(ApiKey::DescribeQuorum, "DescribeQuorum", 0, 2),
    api(ApiKey::DescribeCluster, "DescribeCluster", 0, 2),
    api(ApiKey::DescribeProducers, "DescribeProducers", 0, 0),
    api(ApiKey::DescribeTransactions, "DescribeTransactions", 0, 0),
    api(ApiKey::ListTransactions, "ListTransactions", 0, 1),
    // KIP-848: v1 (client-generated member ids, regex field) is what
    // kafka-protocol 0.18 knows.
    api(
        ApiKey::ConsumerGroupHeartbeat,
        "ConsumerGroupHeartbeat",
        0,
        1,
    ),
    api(ApiKey::ConsumerGroupDescribe, "ConsumerGroupDescribe", 0, 1),
];

/// The table entry for an API key read off the wire, if Strom serves it.
pub fn supported_api(api_key: i16) -> Option<&'static SupportedApi> {
    SUPPORTED_APIS
        .iter()
        .find(|api| api.api_key as i16 == api_key)
}

/// Kafka's name for a served API key, or `"unserved API"` for any other.
pub fn api_name(api_key: i16) -> &'static str {
    supported_api(api_key).map_or("unserved API", |api| api.name)
}

/// The first served version of `api` that uses flexible encoding (compact
/// strings and arrays, tagged fields, request header v2), if any.
pub fn first_flexible_version(api: &SupportedApi) -> Option<i16> {
    (api.min_version..=api.max_version)
        .find(|&version| api.api_key.request_header_version(version) >= 2)
}

/// The `api_keys` array of an ApiVersions response, built from
/// [`SUPPORTED_APIS`].
pub fn api_versions_response_keys() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.api_key as i16)
                .with_min_version(api.min_version)
                .with_max_version(api.max_version)
        })
        .collect()
}

/// An ApiVersions response listing [`SUPPORTED_APIS`] with `error_code`.
///
/// With [`ErrorCode::UnsupportedVersion`] and encoded at version 0, this is
/// Kafka's answer to an ApiVersions request of a version newer than the
/// broker knows (the client then retries with a listed version).
pub fn api_versions_response(error_code: ErrorCode) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code.code())
        .with_api_keys(api_versions_response_keys())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_lies_within_kafka_protocol_versions() {
        for api in SUPPORTED_APIS {
            let valid = api.api_key.valid_versions();
            assert!(api.min_version <= api.max_version, "{}", api.name);
            assert!(
                api.min_version >= valid.min,
                "{} min below {}",
                api.name,
                valid
            );
            assert!(
                api.max_version <= valid.max,
                "{} max above {}",
                api.name,
                valid
            );
        }
    }

    #[test]
    fn names_match_api_keys_and_keys_are_sorted_and_unique() {
        for api in SUPPORTED_APIS {
            assert_eq!(format!("{:?}", api.api_key), api.name);
        }
        let keys: Vec<i16> = SUPPORTED_APIS
            .iter()
            .map(|api| api.api_key as i16)
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "{keys:?}");
    }

    #[test]
    fn covers_the_apis_strom_needs() {
        let needed = [
            ApiKey::ApiVersions,
            ApiKey::Metadata,
            ApiKey::Produce,
            ApiKey::Fetch,
            ApiKey::ListOffsets,
            ApiKey::CreateTopics,
            ApiKey::DeleteTopics,
            ApiKey::CreatePartitions,
            ApiKey::DescribeConfigs,
            ApiKey::AlterConfigs,
            ApiKey::IncrementalAlterConfigs,
            ApiKey::DescribeCluster,
            ApiKey::DeleteRecords,
            ApiKey::OffsetForLeaderEpoch,
            ApiKey::InitProducerId,
            ApiKey::FindCoordinator,
            ApiKey::JoinGroup,
            ApiKey::SyncGroup,
            ApiKey::Heartbeat,
            ApiKey::LeaveGroup,
            ApiKey::OffsetCommit,
            ApiKey::OffsetFetch,
            ApiKey::ListGroups,
            ApiKey::DescribeGroups,
            ApiKey::DeleteGroups,
            ApiKey::OffsetDelete,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
            ApiKey::DescribeAcls,
            ApiKey::CreateAcls,
            ApiKey::DeleteAcls,
            ApiKey::DescribeUserScramCredentials,
            ApiKey::AlterUserScramCredentials,
            ApiKey::DescribeClientQuotas,
            ApiKey::AlterClientQuotas,
            ApiKey::DescribeQuorum,
            ApiKey::ElectLeaders,
            ApiKey::AlterPartitionReassignments,
            ApiKey::ListPartitionReassignments,
            ApiKey::AddPartitionsToTxn,
            ApiKey::AddOffsetsToTxn,
            ApiKey::EndTxn,
            ApiKey::WriteTxnMarkers,
            ApiKey::TxnOffsetCommit,
            ApiKey::DescribeProducers,
            ApiKey::DescribeTransactions,
            ApiKey::ListTransactions,
            ApiKey::ConsumerGroupHeartbeat,
            ApiKey::ConsumerGroupDescribe,
        ];
        for api_key in needed {
            assert!(
                supported_api(api_key as i16).is_some(),
                "{api_key:?} missing"
            );
        }
        assert_eq!(SUPPORTED_APIS.len(), needed.len());
    }

    #[test]
    fn api_versions_keys_mirror_the_table() {
        let keys = api_versions_response_keys();
        assert_eq!(keys.len(), SUPPORTED_APIS.len());
        for (key, api) in keys.iter().zip(SUPPORTED_APIS) {
            assert_eq!(key.api_key, api.api_key as i16);
            assert_eq!(
                (key.min_version, key.max_version),
                (api.min_version, api.max_version)
            );
        }
    }

    #[test]
    fn api_versions_response_carries_the_error_and_the_table() {
        let response = api_versions_response(ErrorCode::UnsupportedVersion);
        assert_eq!(response.error_code, 35);
        assert_eq!(response.api_keys, api_versions_response_keys());
    }

    #[test]
    fn flexible_thresholds() {
        let flexible =
            |api_key: ApiKey| supported_api(api_key as i16).and_then(first_flexible_version);
        assert_eq!(flexible(ApiKey::Produce), Some(9));
        assert_eq!(flexible(ApiKey::Metadata), Some(9));
        assert_eq!(flexible(ApiKey::ApiVersions), Some(3));
        assert_eq!(flexible(ApiKey::OffsetDelete), None);
    }
}
