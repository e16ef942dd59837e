//! A bounded cache on local disk of fixed-size chunks of remote segments,
//! so that consecutive fetches of a remote range (and the batch headers a
//! read walks) cost one remote GET per chunk.
//!
//! The cache is disposable: it is emptied when opened, files are written
//! without fsync, and a chunk file that cannot be read is a miss.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use uuid::Uuid;

use crate::error::{IoContext, IoError};

/// Chunks of remote segments on local disk, least recently used evicted
/// first once `max_bytes` is exceeded.
#[derive(Debug)]
pub struct ChunkCache {
    dir: PathBuf,
    chunk_bytes: u64,
    max_bytes: u64,
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    /// `(segment, chunk number)` to `(size, last use)`.
    entries: HashMap<(Uuid, u64), (u64, u64)>,
    total_bytes: u64,
    uses: u64,
}

impl ChunkCache {
    /// A cache in `dir` (emptied now) of chunks of `chunk_bytes`, holding
    /// at most `max_bytes` (at least one chunk).
    pub fn open(dir: &Path, chunk_bytes: u64, max_bytes: u64) -> Result<ChunkCache, IoError> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).at(dir)?;
        }
        std::fs::create_dir_all(dir).at(dir)?;
        Ok(ChunkCache {
            dir: dir.to_owned(),
            chunk_bytes: chunk_bytes.max(1),
            max_bytes: max_bytes.max(chunk_bytes),
            state: Mutex::new(CacheState::default()),
        })
    }

    /// The size of one chunk.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }

    /// Bytes held now.
    pub fn size_bytes(&self) -> u64 {
        self.lock().total_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn path(&self, segment: Uuid, chunk: u64) -> PathBuf {
        self.dir.join(format!("{segment}-{chunk}"))
    }

    /// The cached chunk, if any.
    pub fn get(&self, segment: Uuid, chunk: u64) -> Option<Bytes> {
        {
            let mut state = self.lock();
            state.uses += 1;
            let uses = state.uses;
            let entry = state.entries.get_mut(&(segment, chunk))?;
            entry.1 = uses;
        }
        match std::fs::read(self.path(segment, chunk)) {
            Ok(bytes) => Some(Bytes::from(bytes)),
            Err(_) => {
                self.forget(segment, chunk);
                None
            }
        }
    }

    /// Whether the chunk is cached.
    pub fn contains(&self, segment: Uuid, chunk: u64) -> bool {
        self.lock().entries.contains_key(&(segment, chunk))
    }

    /// Caches a chunk, evicting the least recently used ones beyond the bound.
    pub fn insert(&self, segment: Uuid, chunk: u64, bytes: &Bytes) {
        if std::fs::write(self.path(segment, chunk), bytes).is_err() {
            return;
        }
        let evicted = {
            let mut state = self.lock();
            state.uses += 1;
            let uses = state.uses;
            let size = bytes.len() as u64;
            if let Some((old, _)) = state.entries.insert((segment, chunk), (size, uses)) {
                state.total_bytes -= old;
            }
            state.total_bytes += size;
            let mut evicted = Vec::new();
            while state.total_bytes > self.max_bytes {
                let Some((&oldest, &(size, _))) =
                    state.entries.iter().min_by_key(|(_, (_, used))| *used)
                else {
                    break;
                };
                state.entries.remove(&oldest);
                state.total_bytes -= size;
                evicted.push(oldest);
            }
            evicted
        };
        for (segment, chunk) in evicted {
            std::fs::remove_file(self.path(segment, chunk)).ok();
        }
    }

    /// Drops every chunk of a segment (deleted remotely).
    pub fn remove_segment(&self, segment: Uuid) {
        let chunks: Vec<u64> = {
            let mut state = self.lock();
            let chunks: Vec<(u64, u64)> = state
                .entries
                .iter()
                .filter(|((id, _), _)| *id == segment)
                .map(|((_, chunk), (size, _))| (*chunk, *size))
                .collect();
            for (chunk, size) in &chunks {
                state.entries.remove(&(segment, *chunk));
                state.total_bytes -= size;
            }
            chunks.into_iter().map(|(chunk, _)| chunk).collect()
        };
        for chunk in chunks {
            std::fs::remove_file(self.path(segment, chunk)).ok();
        }
    }

    fn forget(&self, segment: Uuid, chunk: u64) {
        let mut state = self.lock();
        if let Some((size, _)) = state.entries.remove(&(segment, chunk)) {
            state.total_bytes -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_chunk() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = ChunkCache::open(&dir.path().join("cache"), 4, 8).expect("cache");
        let id = Uuid::new_v4();
        cache.insert(id, 0, &Bytes::from_static(b"aaaa"));
        cache.insert(id, 1, &Bytes::from_static(b"bbbb"));
        assert_eq!(cache.get(id, 0).as_deref(), Some(&b"aaaa"[..]));
        cache.insert(id, 2, &Bytes::from_static(b"cccc"));
        assert!(cache.contains(id, 0) && !cache.contains(id, 1) && cache.contains(id, 2));
        assert_eq!(cache.size_bytes(), 8);
        cache.remove_segment(id);
        assert_eq!(cache.size_bytes(), 0);
        assert!(cache.get(id, 0).is_none());
    }
}
