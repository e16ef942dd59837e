//! Producer ids for InitProducerId, from a counter that survives restarts.
//!
//! Ids are reserved in blocks: before handing out the first id of a block,
//! the end of the block is written to `producer-ids` in the first log
//! directory (write to a temporary file, `fsync`, rename, `fsync` the
//! directory). After a restart allocation resumes at the recorded end, so an
//! id is never issued twice; at most one block of ids is skipped per crash.
//! The write happens under the counter's lock, inside the `blocking` runner
//! the caller passes to [`ProducerIdManager::allocate`] (the broker moves
//! the requesting worker's other tasks elsewhere during the `fsync`, one
//! per thousand ids).
//! A single node needs no more. In a cluster the blocks come from the
//! controller quorum instead (AllocateProducerIds, recorded in the metadata
//! log as Kafka's `ProducerIdsRecord`), so two brokers never hand out the
//! same id: see [`ProducerIdManager::from_quorum`].

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::controller::AllocateProducerIdsRequest;
use crate::error::ProducerIdError;
use crate::ControllerClient;

/// The counter's file name inside the first log directory.
pub const FILE_NAME: &str = "producer-ids";

/// Ids reserved per write of the counter file.
pub const BLOCK_SIZE: i64 = 1000;

/// The ids reserved on disk and not yet handed out: `next..end`.
#[derive(Debug)]
struct Block {
    next: i64,
    end: i64,
}

/// Allocates producer ids; see the module docs.
pub struct ProducerIdManager {
    path: PathBuf,
    block: Mutex<Block>,
    quorum: Option<QuorumIds>,
}

impl std::fmt::Debug for ProducerIdManager {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ProducerIdManager")
            .field("path", &self.path)
            .field("quorum", &self.quorum.is_some())
            .finish_non_exhaustive()
    }
}

/// Blocks of ids from the controller quorum.
struct QuorumIds {
    controller: Arc<dyn ControllerClient>,
    broker_id: i32,
    broker_epoch: i64,
    block: tokio::sync::Mutex<Block>,
}

impl QuorumIds {
    async fn allocate(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.block.lock().await;
        if block.next >= block.end {
            let request = AllocateProducerIdsRequest {
                broker_id: self.broker_id,
                broker_epoch: self.broker_epoch,
            };
            let granted = self
                .controller
                .allocate_producer_ids(request)
                .await
                .map_err(|source| ProducerIdError::Controller { source })?
                .map_err(|source| ProducerIdError::Refused { source })?;
            block.next = granted.first_producer_id;
            block.end = granted
                .first_producer_id
                .saturating_add(i64::from(granted.size.max(0)));
            if block.next >= block.end {
                return Err(ProducerIdError::Exhausted);
            }
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

impl ProducerIdManager {
    /// Loads the counter from `dir` (a missing file means no id was ever
    /// issued).
    pub fn open(dir: &Path) -> Result<ProducerIdManager, ProducerIdError> {
        let path = dir.join(FILE_NAME);
        let start = match fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|value| *value >= 0)
                .ok_or_else(|| ProducerIdError::Corrupt {
                    path: path.clone(),
                    content: text.chars().take(64).collect(),
                })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(ProducerIdError::Io { path, source }),
        };
        Ok(ProducerIdManager {
            path,
            block: Mutex::new(Block {
                next: start,
                end: start,
            }),
            quorum: None,
        })
    }

    /// Ids in blocks from the controller quorum, for broker `broker_id`
    /// registered at `broker_epoch` (the controller refuses another
    /// epoch's request).
    pub fn from_quorum(
        controller: Arc<dyn ControllerClient>,
        broker_id: i32,
        broker_epoch: i64,
    ) -> ProducerIdManager {
        ProducerIdManager {
            path: PathBuf::new(),
            block: Mutex::new(Block { next: 0, end: 0 }),
            quorum: Some(QuorumIds {
                controller,
                broker_id,
                broker_epoch,
                block: tokio::sync::Mutex::new(Block { next: 0, end: 0 }),
            }),
        }
    }

    /// A fresh producer id: from the counter file (written once per
    /// block), or from a block the controller quorum granted. The counter
    /// file's work runs inside `blocking`, which the caller chooses for
    /// the thread it runs on (it may simply call the work it is given).
    pub async fn allocate<B>(&self, blocking: B) -> Result<i64, ProducerIdError>
    where
        B: FnOnce(&dyn Fn() -> Result<i64, ProducerIdError>) -> Result<i64, ProducerIdError>,
    {
        match &self.quorum {
            Some(quorum) => quorum.allocate().await,
            None => blocking(&|| self.allocate_here()),
        }
    }

    fn allocate_here(&self) -> Result<i64, ProducerIdError> {
        // Two counters, `end` raised only after the file says so: a panic
        // while the lock was held leaves them consistent, so they are reused.
        let mut block = self
            .block
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if block.next >= block.end {
            let end = block
                .end
                .checked_add(BLOCK_SIZE)
                .ok_or(ProducerIdError::Exhausted)?;
            self.persist(end)?;
            block.end = end;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }

    /// Whether `producer_id` may have been issued by this counter (it is
    /// below the next id to hand out; in a cluster, below the quorum's).
    pub fn was_issued(&self, producer_id: i64) -> bool {
        if let Some(quorum) = &self.quorum {
            return (0..quorum.controller.image().next_producer_id()).contains(&producer_id);
        }
        // Plain counters (see `allocate_here`): safe to reuse after a panic.
        let block = self
            .block
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (0..block.next).contains(&producer_id)
    }

    fn persist(&self, end: i64) -> Result<(), ProducerIdError> {
        let io = |source| ProducerIdError::Io {
            path: self.path.clone(),
            source,
        };
        let temporary = self.path.with_extension("tmp");
        let mut file = fs::File::create(&temporary).map_err(io)?;
        file.write_all(format!("{end}\n").as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        fs::rename(&temporary, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            fs::File::open(dir)
                .and_then(|dir| dir.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("strom-producer-ids-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = temp_dir("restart");
        let manager = ProducerIdManager::open(&dir).unwrap();
        let first: Vec<i64> = (0..3).map(|_| manager.allocate_here().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        assert!(manager.was_issued(2));
        assert!(!manager.was_issued(3));
        drop(manager);
        let reopened = ProducerIdManager::open(&dir).unwrap();
        let next = reopened.allocate_here().unwrap();
        assert_eq!(next, BLOCK_SIZE, "resumes after the reserved block");
        assert!(reopened.was_issued(2));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_block_is_written_when_one_runs_out() {
        let dir = temp_dir("blocks");
        let manager = ProducerIdManager::open(&dir).unwrap();
        for expected in 0..=BLOCK_SIZE {
            assert_eq!(manager.allocate_here().unwrap(), expected);
        }
        let recorded = fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert_eq!(recorded.trim(), (2 * BLOCK_SIZE).to_string());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_counter_is_an_error() {
        let dir = temp_dir("corrupt");
        fs::write(dir.join(FILE_NAME), "twelve").unwrap();
        assert!(matches!(
            ProducerIdManager::open(&dir),
            Err(ProducerIdError::Corrupt { .. })
        ));
        fs::write(dir.join(FILE_NAME), "-5").unwrap();
        assert!(ProducerIdManager::open(&dir).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
