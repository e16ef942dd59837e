//! Client quotas over a real socket: AlterClientQuotas and
//! DescribeClientQuotas through the metadata log (kept across a restart),
//! bad input refused whole, and throttling of Produce and Fetch.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use strom_protocol::kafka::messages::describe_client_quotas_request::ComponentData;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common::{config, Client};

fn entry(
    entity: &[(&'static str, Option<&'static str>)],
    ops: &[(&'static str, Option<f64>)],
) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(entity_type, name)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_static_str(entity_type))
                        .with_entity_name(name.map(StrBytes::from_static_str))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(key, value)| {
                    OpData::default()
                        .with_key(StrBytes::from_static_str(key))
                        .with_value(value.unwrap_or(0.0))
                        .with_remove(value.is_none())
                })
                .collect(),
        )
}

/// Sends AlterClientQuotas; the error code of each entry.
pub async fn alter(client: &mut Client, entries: Vec<EntryData>, validate_only: bool) -> Vec<i16> {
    let request = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    let Response::AlterClientQuotas(response) =
        client.send(Request::AlterClientQuotas(request), 1).await
    else {
        panic!("not AlterClientQuotas");
    };
    response
        .entries
        .iter()
        .map(|entry| entry.error_code)
        .collect()
}

/// Every quota (entity parts, key, value) of the entities with a user part.
async fn describe_users(client: &mut Client) -> Vec<(Vec<(String, Option<String>)>, String, f64)> {
    let request =
        DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
            .with_entity_type(StrBytes::from_static_str("user"))
            .with_match_type(2)
            .with_match(None)]);
    let Response::DescribeClientQuotas(response) =
        client.send(Request::DescribeClientQuotas(request), 1).await
    else {
        panic!("not DescribeClientQuotas");
    };
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    let mut quotas = Vec::new();
    for entry in response.entries.unwrap_or_default() {
        let entity: Vec<_> = entry
            .entity
            .iter()
            .map(|part| {
                (
                    part.entity_type.to_string(),
                    part.entity_name.as_ref().map(|name| name.to_string()),
                )
            })
            .collect();
        for value in entry.values {
            quotas.push((entity.clone(), value.key.to_string(), value.value));
        }
    }
    quotas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_are_altered_described_refused_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quota-admin").await;
    let invalid = ErrorCode::InvalidRequest.code();

    // validate_only checks and writes nothing.
    let codes = alter(
        &mut client,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", Some(1024.0))],
        )],
        true,
    )
    .await;
    assert_eq!(codes, vec![0]);
    assert!(describe_users(&mut client).await.is_empty());

    let codes = alter(
        &mut client,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            // A bad value: the whole entity is refused, its good key too.
            entry(
                &[("user", Some("bob"))],
                &[
                    ("consumer_byte_rate", Some(10.0)),
                    ("producer_byte_rate", Some(-5.0)),
                ],
            ),
            entry(
                &[("user", Some("carol"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(&[("user", Some("dave"))], &[("no_such_quota", Some(1.0))]),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(&[], &[("producer_byte_rate", Some(1.0))]),
        ],
        false,
    )
    .await;
    assert_eq!(codes, vec![0, invalid, invalid, invalid, invalid, invalid]);
    let expected = vec![(
        vec![("user".to_owned(), Some("alice".to_owned()))],
        "producer_byte_rate".to_owned(),
        1024.0,
    )];
    assert_eq!(describe_users(&mut client).await, expected);

    broker.shutdown().await;
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quota-admin").await;
    assert_eq!(describe_users(&mut client).await, expected);

    // Removal.
    let codes = alter(
        &mut client,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None)],
        )],
        false,
    )
    .await;
    assert_eq!(codes, vec![0]);
    assert!(describe_users(&mut client).await.is_empty());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_describe_filter_is_an_invalid_request() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quota-admin").await;
    let request =
        DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
            .with_entity_type(StrBytes::from_static_str("user"))
            .with_match_type(0)
            .with_match(None)]);
    let Response::DescribeClientQuotas(response) =
        client.send(Request::DescribeClientQuotas(request), 1).await
    else {
        panic!("not DescribeClientQuotas");
    };
    assert_eq!(response.error_code, ErrorCode::InvalidRequest.code());
    assert!(response.entries.is_none());
    broker.shutdown().await;
}
