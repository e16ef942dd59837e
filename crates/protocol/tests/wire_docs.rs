//! `docs/protocol.md`'s table of supported APIs agrees with the code.

use std::path::PathBuf;

use strom_protocol::api::{first_flexible_version, SUPPORTED_APIS};
use strom_protocol::header::{request_header_version, response_header_version};

/// The header versions an API uses across its served range, as the docs
/// write them ("v1, v2", "v0 always", ...).
fn header_versions(versions: impl Iterator<Item = i16>) -> String {
    let mut seen: Vec<i16> = versions.collect();
    seen.sort_unstable();
    seen.dedup();
    seen.iter()
        .map(|version| format!("v{version}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn docs_table_matches_supported_apis() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md");
    let docs = std::fs::read_to_string(&path).expect("docs/protocol.md");
    // Only the table of the "Supported APIs" section.
    let section = docs
        .split("\n## ")
        .find(|section| section.starts_with("Supported APIs"))
        .expect("a Supported APIs section");
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| API"))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect();
    assert_eq!(
        rows.len(),
        SUPPORTED_APIS.len(),
        "one row per supported API"
    );
    for (row, api) in rows.iter().zip(SUPPORTED_APIS) {
        let versions = api.min_version..=api.max_version;
        let flexible =
            first_flexible_version(api).map_or("-".to_owned(), |version| version.to_string());
        let request_headers = header_versions(
            versions
                .clone()
                .map(|v| request_header_version(api.api_key, v)),
        );
        let mut response_headers =
            header_versions(versions.map(|v| response_header_version(api.api_key, v)));
        if api.name == "ApiVersions" {
            response_headers.push_str(" always");
        }
        let expected = vec![
            api.name.to_owned(),
            (api.api_key as i16).to_string(),
            api.min_version.to_string(),
            api.max_version.to_string(),
            flexible,
            request_headers,
            response_headers,
        ];
        assert_eq!(row, &expected);
    }
}
