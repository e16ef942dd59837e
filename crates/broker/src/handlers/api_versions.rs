//! ApiVersions: the versions this broker serves, from the one table.

use strom_network::{Reply, RequestContext};
use strom_protocol::api::api_versions_response_keys;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{ApiVersionsRequest, ApiVersionsResponse};
use strom_protocol::messages::Response;

use super::HANDLED_APIS;

/// Answers with every handled API's version range.
pub fn handle(_context: &RequestContext, _request: ApiVersionsRequest) -> Reply {
    Reply::Response(Response::ApiVersions(response(ErrorCode::None)))
}

/// The ApiVersions response body with `error`.
pub fn response(error: ErrorCode) -> ApiVersionsResponse {
    let api_keys = api_versions_response_keys()
        .into_iter()
        .filter(|key| {
            HANDLED_APIS
                .iter()
                .any(|handled| *handled as i16 == key.api_key)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error.code())
        .with_api_keys(api_keys)
}
