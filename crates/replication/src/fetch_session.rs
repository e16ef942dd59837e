//! Incremental fetch sessions (KIP-227): the broker remembers what a
//! fetcher asks for, so that later requests carry only what changed and
//! responses only the partitions that have something new.
//!
//! The cache is sans-IO: it takes the request's session fields, partitions
//! and the current time, and returns what to read and, after the read, which
//! partitions to answer with. The Fetch handler does the reading.
//!
//! The rules, as in Kafka's `FetchManager`:
//!
//! | session id | epoch | meaning |
//! |---|---|---|
//! | any | -1 (final) | close the session, if any; answer in full without a session |
//! | any | 0 (initial) | close the session, if any; answer in full and create a new one |
//! | id | > 0 | incremental: `id` must exist (else `FETCH_SESSION_ID_NOT_FOUND`) and expect this epoch (else `INVALID_FETCH_SESSION_EPOCH`) |
//!
//! An incremental request adds or updates the partitions it names, removes
//! its forgotten topics, and reads every partition of the session. Its
//! response leaves out partitions with no records, no error and the same
//! high watermark, last stable offset and log start offset as last sent.
//! Partitions that returned records move to the back of the session's order,
//! so that `max_bytes` rotates over them.
//!
//! The cache holds `max.incremental.fetch.session.cache.slots` sessions.
//! When it is full, a new session evicts the least recently used session idle
//! for more than [`EVICTION_IDLE_MS`]; failing that, the session that ranks
//! lowest by (privileged, partition count), if the new one ranks higher. A
//! follower's session is privileged. Otherwise the new fetch is answered in
//! full without a session.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use strom_protocol::kafka::messages::fetch_request::FetchPartition;
use strom_protocol::kafka::messages::TopicName;
use uuid::Uuid;

use crate::error::FetchSessionError;

/// The epoch that closes a session (or asks for none).
pub const FINAL_EPOCH: i32 = -1;
/// The epoch of a full request that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The session id meaning "no session".
pub const NO_SESSION_ID: i32 = 0;
/// A session unused for this long may be evicted by any new one
/// (Kafka's `min.incremental.fetch.session.eviction.ms`, fixed).
pub const EVICTION_IDLE_MS: i64 = 120_000;

/// A partition of a session: topic (name and, for Fetch v13+, id) and index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    /// The topic id (nil before Fetch v13).
    pub topic_id: Uuid,
    /// The topic name (as requested, or resolved from the id).
    pub topic: TopicName,
    /// The partition index.
    pub partition: i32,
}

/// One partition to fetch: where it is and what the fetcher asked.
#[derive(Debug, Clone)]
pub struct SessionPartition {
    /// Which partition.
    pub key: PartitionKey,
    /// The request's fields for it (offset, byte limit, leader epoch).
    pub request: FetchPartition,
}

/// What a response says about a partition, compared with what the session
/// last sent to decide whether an incremental response must carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStatus {
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// Whether records are returned.
    pub has_records: bool,
    /// Whether the partition has an error.
    pub has_error: bool,
}

/// How a Fetch request relates to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionContext {
    /// A full fetch that neither has nor opens a session.
    Sessionless,
    /// A full fetch that opens a session when answered.
    Full {
        /// Whether the fetcher is a follower (a privileged session).
        privileged: bool,
    },
    /// An incremental fetch in session `id`.
    Incremental {
        /// The session.
        id: i32,
    },
}

/// A request resolved against the cache: how to answer and what to read.
#[derive(Debug)]
pub struct SessionFetch {
    /// The request's relation to a session.
    pub context: SessionContext,
    /// Every partition to read, in order.
    pub partitions: Vec<SessionPartition>,
}

#[derive(Debug, Clone)]
struct CachedPartition {
    order: u64,
    request: FetchPartition,
    last_sent: Option<(i64, i64, i64)>,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    privileged: bool,
    last_used_ms: i64,
    next_order: u64,
    partitions: HashMap<PartitionKey, CachedPartition>,
    order: BTreeMap<u64, PartitionKey>,
}

impl Session {
    fn new(privileged: bool, now_ms: i64) -> Session {
        Session {
            next_epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            last_used_ms: now_ms,
            next_order: 0,
            partitions: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn upsert(&mut self, key: PartitionKey, request: FetchPartition) {
        if let Some(cached) = self.partitions.get_mut(&key) {
            cached.request = request;
            return;
        }
        let order = self.next_order;
        self.next_order += 1;
        self.order.insert(order, key.clone());
        self.partitions.insert(
            key,
            CachedPartition {
                order,
                request,
                last_sent: None,
            },
        );
    }

    fn remove(&mut self, key: &PartitionKey) {
        if let Some(cached) = self.partitions.remove(key) {
            self.order.remove(&cached.order);
        }
    }

    fn move_to_back(&mut self, key: &PartitionKey) {
        let order = self.next_order;
        if let Some(cached) = self.partitions.get_mut(key) {
            self.order.remove(&cached.order);
            cached.order = order;
            self.order.insert(order, key.clone());
            self.next_order += 1;
        }
    }

    fn partitions_in_order(&self) -> Vec<SessionPartition> {
        self.order
            .values()
            .filter_map(|key| {
                self.partitions.get(key).map(|cached| SessionPartition {
                    key: key.clone(),
                    request: cached.request.clone(),
                })
            })
            .collect()
    }

    /// The eviction rank: a session ranking lower may be evicted for one
    /// ranking higher.
    fn rank(&self) -> (bool, usize) {
        (self.privileged, self.partitions.len())
    }
}

/// The epoch after `epoch` (wrapping past `i32::MAX` to 1).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        return INITIAL_EPOCH;
    }
    epoch.checked_add(1).unwrap_or(1)
}

struct CacheState {
    sessions: HashMap<i32, Session>,
    id_state: u64,
}

/// The broker's fetch sessions.
pub struct FetchSessionCache {
    slots: usize,
    state: Mutex<CacheState>,
}

impl std::fmt::Debug for FetchSessionCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FetchSessionCache")
            .field("slots", &self.slots)
            .field("sessions", &self.len())
            .finish()
    }
}

impl FetchSessionCache {
    /// A cache of at most `slots` sessions; `id_seed` seeds session ids
    /// (tests pass a fixed one).
    pub fn new(slots: usize, id_seed: u64) -> FetchSessionCache {
        FetchSessionCache {
            slots,
            state: Mutex::new(CacheState {
                sessions: HashMap::new(),
                id_state: id_seed | 1,
            }),
        }
    }

    /// The cache. A panic while it was locked may have left a session
    /// half-updated, and a wrong session would make a consumer skip or
    /// repeat partitions: the sessions are dropped (logged at error level),
    /// and their consumers get FETCH_SESSION_ID_NOT_FOUND and start new
    /// ones, as after an eviction. The id generator is kept.
    fn state(&self) -> MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(|poisoned| {
            let mut state = poisoned.into_inner();
            tracing::error!(
                sessions = state.sessions.len(),
                "a thread panicked holding the fetch session cache; every session is dropped"
            );
            state.sessions.clear();
            self.state.clear_poison();
            state
        })
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.state().sessions.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves a request: closes, checks or updates its session, and
    /// returns what to read. `requested` are the request's partitions,
    /// `forgotten` its forgotten ones.
    pub fn begin(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<SessionPartition>,
        forgotten: &[PartitionKey],
        privileged: bool,
        now_ms: i64,
    ) -> Result<SessionFetch, FetchSessionError> {
        let mut state = self.state();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            if session_id != NO_SESSION_ID {
                state.sessions.remove(&session_id);
            }
            let context = if epoch == FINAL_EPOCH || self.slots == 0 {
                SessionContext::Sessionless
            } else {
                SessionContext::Full { privileged }
            };
            return Ok(SessionFetch {
                context,
                partitions: requested,
            });
        }
        let session = state
            .sessions
            .get_mut(&session_id)
            .ok_or(FetchSessionError::IdNotFound { session_id })?;
        if session.next_epoch != epoch {
            return Err(FetchSessionError::InvalidEpoch {
                session_id,
                expected: session.next_epoch,
                received: epoch,
            });
        }
        session.next_epoch = next_epoch(epoch);
        session.last_used_ms = now_ms;
        for key in forgotten {
            session.remove(key);
        }
        for partition in requested {
            session.upsert(partition.key, partition.request);
        }
        Ok(SessionFetch {
            context: SessionContext::Incremental { id: session_id },
            partitions: session.partitions_in_order(),
        })
    }

    /// After the read: for a full fetch, opens the session (returns its id,
    /// or [`NO_SESSION_ID`] when none could be made room for) and keeps
    /// every partition; for an incremental one, returns which partitions the
    /// response must carry (one flag per entry of `statuses`, in order).
    pub fn finish(
        &self,
        context: SessionContext,
        partitions: &[SessionPartition],
        statuses: &[PartitionStatus],
        now_ms: i64,
    ) -> (i32, Vec<bool>) {
        let everything = vec![true; statuses.len()];
        match context {
            SessionContext::Sessionless => (NO_SESSION_ID, everything),
            SessionContext::Full { privileged } => {
                let id = self.open(privileged, partitions, statuses, now_ms);
                (id, everything)
            }
            SessionContext::Incremental { id } => {
                let mut state = self.state();
                let Some(session) = state.sessions.get_mut(&id) else {
                    // Evicted while the fetch waited: answer in full.
                    return (id, everything);
                };
                let include = partitions
                    .iter()
                    .zip(statuses)
                    .map(|(partition, status)| record_sent(session, &partition.key, status))
                    .collect();
                (id, include)
            }
        }
    }

    fn open(
        &self,
        privileged: bool,
        partitions: &[SessionPartition],
        statuses: &[PartitionStatus],
        now_ms: i64,
    ) -> i32 {
        if partitions.is_empty() {
            return NO_SESSION_ID;
        }
        let mut state = self.state();
        if state.sessions.len() >= self.slots
            && !try_evict(&mut state.sessions, (privileged, partitions.len()), now_ms)
        {
            return NO_SESSION_ID;
        }
        let mut session = Session::new(privileged, now_ms);
        for (partition, status) in partitions.iter().zip(statuses) {
            session.upsert(partition.key.clone(), partition.request.clone());
            record_sent(&mut session, &partition.key, status);
        }
        let id = new_session_id(&mut state);
        state.sessions.insert(id, session);
        id
    }
}

/// Updates what the session last sent for `key`; whether the response must
/// carry the partition.
fn record_sent(session: &mut Session, key: &PartitionKey, status: &PartitionStatus) -> bool {
    let sent = (
        status.high_watermark,
        status.last_stable_offset,
        status.log_start_offset,
    );
    let Some(cached) = session.partitions.get_mut(key) else {
        return true;
    };
    let changed = cached.last_sent != Some(sent);
    cached.last_sent = Some(sent);
    if status.has_records {
        session.move_to_back(key);
    }
    changed || status.has_records || status.has_error
}

/// Makes room for a session of `rank`: evicts the least recently used idle
/// session, else the lowest-ranking one if it ranks below `rank`.
fn try_evict(sessions: &mut HashMap<i32, Session>, rank: (bool, usize), now_ms: i64) -> bool {
    let idle = sessions
        .iter()
        .filter(|(_, session)| now_ms - session.last_used_ms > EVICTION_IDLE_MS)
        .min_by_key(|(id, session)| (session.last_used_ms, **id))
        .map(|(id, _)| *id);
    let victim = idle.or_else(|| {
        sessions
            .iter()
            .min_by_key(|(id, session)| (session.rank(), session.last_used_ms, **id))
            .filter(|(_, session)| session.rank() < rank)
            .map(|(id, _)| *id)
    });
    victim.is_some_and(|id| sessions.remove(&id).is_some())
}

/// A fresh positive session id not in use (xorshift over the seed).
fn new_session_id(state: &mut CacheState) -> i32 {
    loop {
        let mut x = state.id_state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.id_state = x;
        let id = (x >> 33) as i32;
        if id > 0 && !state.sessions.contains_key(&id) {
            return id;
        }
    }
}

#[cfg(test)]
#[path = "fetch_session_tests.rs"]
mod tests;
