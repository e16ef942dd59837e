//! Producer ids for InitProducerId, from a counter that survives restarts.
//!
//! Ids are reserved in blocks: before handing out the first id of a block,
//! the end of the block is written to `producer-ids` in the first log
//! directory (write to a temporary file, `fsync`, rename, `fsync` the
//! directory). After a restart allocation resumes at the recorded end, so an
//! id is never issued twice; at most one block of ids is skipped per crash.
//! The write happens under the counter's lock, through
//! [`crate::blocking::blocking`] so that the requesting worker's other tasks
//! move elsewhere during the `fsync` (one per thousand ids).
//! A single node needs no more: a replicated controller would record the
//! blocks in its metadata log instead (Kafka's `ProducerIdsRecord`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::ProducerIdError;

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
#[derive(Debug)]
pub struct ProducerIdManager {
    path: PathBuf,
    block: Mutex<Block>,
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
        })
    }

    /// A fresh producer id. Writes the counter file once per block.
    pub fn allocate(&self) -> Result<i64, ProducerIdError> {
        crate::blocking::blocking(|| self.allocate_here())
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
    /// below the next id to hand out).
    pub fn was_issued(&self, producer_id: i64) -> bool {
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
        let first: Vec<i64> = (0..3).map(|_| manager.allocate().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        assert!(manager.was_issued(2));
        assert!(!manager.was_issued(3));
        drop(manager);
        let reopened = ProducerIdManager::open(&dir).unwrap();
        let next = reopened.allocate().unwrap();
        assert_eq!(next, BLOCK_SIZE, "resumes after the reserved block");
        assert!(reopened.was_issued(2));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_block_is_written_when_one_runs_out() {
        let dir = temp_dir("blocks");
        let manager = ProducerIdManager::open(&dir).unwrap();
        for expected in 0..=BLOCK_SIZE {
            assert_eq!(manager.allocate().unwrap(), expected);
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
