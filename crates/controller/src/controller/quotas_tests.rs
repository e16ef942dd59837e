use super::*;
use crate::controller::ControllerConfig;
use strom_clock::SeededRandom;
use strom_quotas::EntityName;

fn controller() -> Controller {
    Controller::new(
        ControllerConfig::default(),
        std::sync::Arc::new(SeededRandom::new(1)),
    )
}

fn apply(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
    let base = image.next_offset();
    image
        .clone()
        .into_applied(
            records
                .iter()
                .enumerate()
                .map(|(index, record)| (base + index as u64, record)),
        )
        .expect("applies")
}

fn alteration(
    entity: &[(&str, Option<&str>)],
    ops: &[(&str, Option<f64>)],
) -> ClientQuotaAlteration {
    ClientQuotaAlteration {
        entity: entity
            .iter()
            .map(|(entity_type, name)| ((*entity_type).to_owned(), name.map(str::to_owned)))
            .collect(),
        ops: ops
            .iter()
            .map(|(key, value)| QuotaOp {
                key: (*key).to_owned(),
                value: *value,
            })
            .collect(),
    }
}

fn request(
    alterations: Vec<ClientQuotaAlteration>,
    validate_only: bool,
) -> AlterClientQuotasRequest {
    AlterClientQuotasRequest {
        alterations,
        validate_only,
    }
}

#[test]
fn quotas_are_set_changed_removed_and_survive_a_snapshot() {
    let mut controller = controller();
    let image = MetadataImage::empty();
    let user = QuotaEntity::user(EntityName::Named("alice".into()));
    let default_client = QuotaEntity::client(EntityName::Default);
    let result = controller
        .alter_client_quotas(
            &image,
            &request(
                vec![
                    alteration(
                        &[("user", Some("alice"))],
                        &[
                            ("producer_byte_rate", Some(1024.0)),
                            ("request_percentage", Some(50.0)),
                        ],
                    ),
                    alteration(
                        &[("client-id", None)],
                        &[("consumer_byte_rate", Some(2048.0))],
                    ),
                ],
                false,
            ),
        )
        .expect("planned");
    assert_eq!(result.response, vec![Ok(()), Ok(())]);
    assert_eq!(result.records.len(), 3);
    let image = apply(&image, &result.records);
    let quotas = image.client_quotas();
    assert_eq!(quotas.get(&user, QuotaKey::ProducerByteRate), Some(1024.0));
    assert_eq!(
        quotas.get(&default_client, QuotaKey::ConsumerByteRate),
        Some(2048.0)
    );
    let rebuilt = MetadataImage::from_snapshot_records(9, image.to_snapshot_records().iter())
        .expect("rebuilt");
    assert_eq!(rebuilt.client_quotas(), image.client_quotas());

    // The same value writes nothing; a removal of an unset key neither.
    let result = controller
        .alter_client_quotas(
            &image,
            &request(
                vec![alteration(
                    &[("user", Some("alice"))],
                    &[
                        ("producer_byte_rate", Some(1024.0)),
                        ("request_percentage", None),
                        ("consumer_byte_rate", None),
                    ],
                )],
                false,
            ),
        )
        .expect("planned");
    assert_eq!(result.records.len(), 1);
    let image = apply(&image, &result.records);
    assert_eq!(
        image
            .client_quotas()
            .get(&user, QuotaKey::RequestPercentage),
        None
    );
    assert_eq!(
        image.client_quotas().get(&user, QuotaKey::ProducerByteRate),
        Some(1024.0)
    );
}

#[test]
fn validate_only_writes_nothing_but_reports_the_outcome() {
    let mut controller = controller();
    let result = controller
        .alter_client_quotas(
            &MetadataImage::empty(),
            &request(
                vec![
                    alteration(&[("user", Some("a"))], &[("producer_byte_rate", Some(1.0))]),
                    alteration(
                        &[("user", Some("b"))],
                        &[("producer_byte_rate", Some(-1.0))],
                    ),
                ],
                true,
            ),
        )
        .expect("planned");
    assert!(result.records.is_empty());
    assert_eq!(result.response[0], Ok(()));
    assert!(matches!(
        result.response[1],
        Err(QuotaError::NotPositive { .. })
    ));
}

#[test]
fn an_entity_with_a_bad_part_changes_nothing_and_the_others_apply() {
    let mut controller = controller();
    let bad = [
        alteration(
            &[("user", Some("a"))],
            &[
                ("producer_byte_rate", Some(10.0)),
                ("consumer_byte_rate", Some(1.5)),
            ],
        ),
        alteration(&[("user", Some("a"))], &[("no_such_key", Some(1.0))]),
        alteration(
            &[("group", Some("g"))],
            &[("producer_byte_rate", Some(1.0))],
        ),
        alteration(&[], &[("producer_byte_rate", Some(1.0))]),
        alteration(
            &[("client-id", Some("c"))],
            &[
                ("producer_byte_rate", Some(1.0)),
                ("producer_byte_rate", Some(2.0)),
            ],
        ),
        alteration(
            &[("ip", Some("127.0.0.1"))],
            &[("connection_creation_rate", Some(1.0))],
        ),
    ];
    let good = alteration(
        &[("client-id", Some("ok"))],
        &[("producer_byte_rate", Some(5.0))],
    );
    let mut alterations = bad.to_vec();
    alterations.push(good);
    let result = controller
        .alter_client_quotas(&MetadataImage::empty(), &request(alterations, false))
        .expect("planned");
    assert!(matches!(
        result.response[0],
        Err(QuotaError::NotInteger { .. })
    ));
    // The second names the same entity as the first.
    assert!(matches!(
        result.response[1],
        Err(QuotaError::DuplicateEntity { .. })
    ));
    assert!(matches!(
        result.response[2],
        Err(QuotaError::UnknownEntityType { .. })
    ));
    assert!(matches!(result.response[3], Err(QuotaError::EmptyEntity)));
    assert!(matches!(
        result.response[4],
        Err(QuotaError::DuplicateKey { .. })
    ));
    assert!(matches!(
        result.response[5],
        Err(QuotaError::UnsupportedEntityType { .. })
    ));
    assert_eq!(result.response[6], Ok(()));
    assert_eq!(result.records.len(), 1);
}

#[test]
fn a_record_with_an_invalid_value_is_refused_when_applied() {
    let entity = QuotaEntity::client(EntityName::Default);
    let mut record = ClientQuotaRecord::new(&entity, QuotaKey::ProducerByteRate, Some(1.0));
    record.value = f64::NAN;
    let image = MetadataImage::empty();
    let error = image
        .clone()
        .into_applied([(0, &MetadataRecord::new(Record::ClientQuota(record)))])
        .expect_err("refused");
    assert!(matches!(error, ApplyError::InvalidQuotaRecord { .. }));
}
