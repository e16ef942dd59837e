//! The Strom consumer: a pure-Rust async Kafka consumer with Kafka's poll
//! model.
//!
//! `strom-consumer` owns everything between "give me records" and the
//! client core: the [fetcher](fetcher) (positions, one Fetch in flight per
//! leader with the next poll's records prefetched, decoding, CRC checks,
//! offset resets, [incremental fetch sessions](fetch_session)), group
//! membership ([coordinator]: FindCoordinator, JoinGroup, SyncGroup, a
//! heartbeat task independent of `poll`, commits), the
//! [partition assignors](assignor) with the Java client's wire format, and
//! the [`Consumer`] API. It does not own connections, metadata or version
//! negotiation (that is `strom-client`) nor the broker side of groups.
//!
//! Design decisions a newcomer must know:
//!
//! * **Sans-IO cores.** [`fetcher::Fetcher`], [`fetch_session::FetchSession`],
//!   [`membership::HeartbeatTimer`] and the assignors take inputs and return
//!   decisions; the async [`Consumer`] performs the I/O. Tests drive the
//!   cores with hand-built responses and an injected clock.
//! * **Kafka's wire contract for groups.** Subscriptions and assignments use
//!   the `ConsumerProtocol` encodings (versions 0-3) and the Java protocol
//!   names (`range`, `roundrobin`, `cooperative-sticky`), so Strom consumers
//!   can share a group with librdkafka or Java consumers.
//! * Fetch is sent at v12 at most (topics by name); sessions are used when
//!   the broker offers them and full fetches otherwise.

pub mod assignor;
pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod error;
pub mod fetch_session;
pub mod fetcher;
pub mod membership;
pub mod offsets;
pub mod perf;
pub mod record;

pub use config::{AssignmentStrategy, ConsumerConfig, IsolationLevel, OffsetReset};
pub use consumer::{Consumer, RebalanceListener};
pub use error::ConsumerError;
pub use record::{ConsumerRecord, OffsetAndMetadata, RecordHeader, TimestampType, TopicPartition};
