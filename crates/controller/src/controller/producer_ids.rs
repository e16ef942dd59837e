//! AllocateProducerIds: blocks of producer ids handed to brokers through
//! the metadata log, so that two brokers never give an idempotent producer
//! the same id (Kafka's ProducerIdControlManager).

use super::brokers::broker_at_epoch;
use super::{Controller, ControllerResult, Pending};
use crate::error::{ApplyError, ControllerError};
use crate::image::{BrokerId, MetadataImage};
use crate::records::{MetadataRecord, ProducerIdsRecord, Record};

/// Ids handed out per request (Kafka's block size).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1_000;

/// AllocateProducerIds: a registered broker asks for a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllocateProducerIdsRequest {
    /// The broker.
    pub broker_id: BrokerId,
    /// Its current broker epoch.
    pub broker_epoch: i64,
}

/// A block of producer ids: `first_producer_id` and the `size - 1` after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerIdBlock {
    /// The first id of the block.
    pub first_producer_id: i64,
    /// How many ids the block holds.
    pub size: i32,
}

impl Controller {
    /// Hands the next block of producer ids to a registered broker at its
    /// current epoch.
    pub fn allocate_producer_ids(
        &mut self,
        image: &MetadataImage,
        request: &AllocateProducerIdsRequest,
    ) -> Result<ControllerResult<Result<ProducerIdBlock, ControllerError>>, ApplyError> {
        let mut pending = Pending::new(image);
        let broker_id = request.broker_id;
        if let Err(error) = broker_at_epoch(image, broker_id, request.broker_epoch) {
            return Ok(pending.finish(Err(error), false));
        }
        let first_producer_id = image.next_producer_id();
        let Some(next_producer_id) =
            first_producer_id.checked_add(i64::from(PRODUCER_ID_BLOCK_SIZE))
        else {
            let error = ControllerError::ProducerIdsExhausted {
                next_producer_id: first_producer_id,
            };
            return Ok(pending.finish(Err(error), false));
        };
        pending.push(vec![MetadataRecord::new(Record::ProducerIds(
            ProducerIdsRecord {
                broker_id,
                broker_epoch: request.broker_epoch,
                next_producer_id,
            },
        ))])?;
        let block = ProducerIdBlock {
            first_producer_id,
            size: PRODUCER_ID_BLOCK_SIZE,
        };
        Ok(pending.finish(Ok(block), false))
    }
}
