//! AlterClientQuotas (KIP-546): each entity's changes are checked whole
//! (entity, keys, values) and become one `ClientQuotaRecord` per changed
//! key; an entity with any bad part changes nothing, the others apply.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use strom_quotas::{QuotaEntity, QuotaError, QuotaKey};

use super::{Controller, ControllerResult, Pending};
use crate::error::ApplyError;
use crate::image::MetadataImage;
use crate::quota_records::ClientQuotaRecord;
use crate::records::{MetadataRecord, Record};

/// One key of an alteration: set to `value`, or removed when `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaOp {
    /// The quota key, e.g. `producer_byte_rate`.
    pub key: String,
    /// The new value; `None` removes the key.
    pub value: Option<f64>,
}

/// The changes of one entity, as the request names it: (type, name) parts
/// where a `None` name is `<default>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientQuotaAlteration {
    /// The entity's parts.
    pub entity: Vec<(String, Option<String>)>,
    /// The changes.
    pub ops: Vec<QuotaOp>,
}

/// AlterClientQuotas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlterClientQuotasRequest {
    /// The alterations, one per entity.
    pub alterations: Vec<ClientQuotaAlteration>,
    /// Check only; write nothing.
    pub validate_only: bool,
}

/// The changes of one checked entity: each key with its new value
/// (`None`: removed).
type CheckedChanges = (QuotaEntity, Vec<(QuotaKey, Option<f64>)>);

/// The checked changes of one entity.
fn check_alteration(
    alteration: &ClientQuotaAlteration,
    seen: &mut BTreeSet<QuotaEntity>,
) -> Result<CheckedChanges, QuotaError> {
    let entity = QuotaEntity::from_parts(
        alteration
            .entity
            .iter()
            .map(|(entity_type, name)| (entity_type.as_str(), name.as_deref())),
    )?;
    if !seen.insert(entity.clone()) {
        return Err(QuotaError::DuplicateEntity {
            entity: entity.to_string(),
        });
    }
    let mut keys = BTreeSet::new();
    let mut changes = Vec::with_capacity(alteration.ops.len());
    for op in &alteration.ops {
        let key = QuotaKey::from_name(&op.key)?;
        if !keys.insert(key) {
            return Err(QuotaError::DuplicateKey {
                key: op.key.clone(),
            });
        }
        let value = op.value.map(|value| key.check_value(value)).transpose()?;
        changes.push((key, value));
    }
    Ok((entity, changes))
}

impl Controller {
    /// Plans AlterClientQuotas: one result per alteration, in order. A key
    /// set to its current value, or removed while unset, writes nothing.
    pub fn alter_client_quotas(
        &mut self,
        image: &MetadataImage,
        request: &AlterClientQuotasRequest,
    ) -> Result<ControllerResult<Vec<Result<(), QuotaError>>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut seen = BTreeSet::new();
        let mut results = Vec::with_capacity(request.alterations.len());
        for alteration in &request.alterations {
            let (entity, changes) = match check_alteration(alteration, &mut seen) {
                Ok(checked) => checked,
                Err(error) => {
                    results.push(Err(error));
                    continue;
                }
            };
            let quotas = pending.image.client_quotas();
            let records: Vec<MetadataRecord> = changes
                .into_iter()
                .filter(|(key, value)| quotas.get(&entity, *key) != *value)
                .map(|(key, value)| {
                    MetadataRecord::new(Record::ClientQuota(ClientQuotaRecord::new(
                        &entity, key, value,
                    )))
                })
                .collect();
            if !records.is_empty() {
                pending.push(records)?;
            }
            results.push(Ok(()));
        }
        Ok(pending.finish(results, request.validate_only))
    }
}

#[cfg(test)]
#[path = "quotas_tests.rs"]
mod tests;
