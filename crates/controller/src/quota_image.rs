//! The client-quota part of the metadata image: every quota set by
//! AlterClientQuotas, as a [`QuotaTable`] brokers enforce.

use std::sync::Arc;

use strom_quotas::{QuotaEntity, QuotaKey, QuotaTable};

use crate::error::ApplyError;
use crate::quota_records::ClientQuotaRecord;
use crate::records::{MetadataRecord, Record};

/// Client quotas, as the metadata log left them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientQuotaImage {
    table: Arc<QuotaTable>,
}

// Values are finite: a record with a value that is not is refused when
// applied, so the table's `PartialEq` is an equivalence.
impl Eq for ClientQuotaImage {}

impl ClientQuotaImage {
    /// The configured quotas.
    pub fn table(&self) -> &Arc<QuotaTable> {
        &self.table
    }

    /// The value of `key` of `entity`.
    pub fn get(&self, entity: &QuotaEntity, key: QuotaKey) -> Option<f64> {
        self.table.get(entity)?.get(&key).copied()
    }

    pub(crate) fn apply(&mut self, record: &ClientQuotaRecord) -> Result<(), ApplyError> {
        let invalid = |source| ApplyError::InvalidQuotaRecord { source };
        let entity = QuotaEntity::from_parts(
            record
                .entity
                .iter()
                .map(|part| (part.entity_type.as_str(), part.entity_name.as_deref())),
        )
        .map_err(invalid)?;
        let key = QuotaKey::from_name(&record.key).map_err(invalid)?;
        let table = Arc::make_mut(&mut self.table);
        if record.remove {
            table.remove(&entity, key);
        } else {
            let value = key.check_value(record.value).map_err(invalid)?;
            table.set(entity, key, value);
        }
        Ok(())
    }

    /// The records that rebuild this part of an image.
    pub(crate) fn snapshot_records(&self) -> impl Iterator<Item = MetadataRecord> + '_ {
        self.table.entities().flat_map(|(entity, quotas)| {
            quotas.iter().map(|(key, value)| {
                MetadataRecord::new(Record::ClientQuota(ClientQuotaRecord::new(
                    entity,
                    *key,
                    Some(*value),
                )))
            })
        })
    }
}
