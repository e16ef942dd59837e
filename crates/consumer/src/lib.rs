//! The Strom consumer: a pure-Rust async Kafka consumer with Kafka's poll
//! model, usable against Strom and any Kafka-compatible broker.
//!
//! `strom-consumer` owns everything between "give me records" and the
//! client core: the [`fetcher`] (positions, one Fetch in flight per leader
//! with the next poll's records prefetched, decoding of every codec, CRC
//! checks, `auto.offset.reset`, read_committed filtering), incremental
//! [`fetch_session`]s (KIP-227), group membership ([`coordinator`] and
//! [`membership`]: FindCoordinator, JoinGroup, SyncGroup, a heartbeat task
//! independent of `poll`, `max.poll.interval.ms`, static membership), the
//! partition assignors in [`assignor`] with the Java client's wire format,
//! [`offsets`] (ListOffsets, OffsetFetch, OffsetCommit) and the
//! [`Consumer`] API. It does not own connections, metadata or version
//! negotiation (that is `strom-client`) nor the broker side of groups
//! (`strom-coordinator`), and it carries no benchmark or command-line code
//! (the consumer-perf-test equivalent is `strom perf consume` in
//! `strom-tools`).
//!
//! ```no_run
//! # async fn example() -> Result<(), strom_consumer::ConsumerError> {
//! use std::time::Duration;
//! use strom_consumer::{Consumer, ConsumerConfig};
//!
//! let mut config = ConsumerConfig::new(["127.0.0.1:9092"]);
//! config.group_id = Some("readers".to_owned());
//! let mut consumer = Consumer::new(config).await?;
//! consumer.subscribe(["events"])?;
//! for record in consumer.poll(Duration::from_secs(1)).await? {
//!     println!("{}-{}@{}", record.topic, record.partition, record.offset);
//! }
//! consumer.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Design decisions a newcomer must know:
//!
//! * **Sans-IO cores.** [`fetcher::Fetcher`], [`fetch_session::FetchSession`],
//!   [`membership::HeartbeatTimer`], [`membership::MemberState`] and the
//!   assignors take inputs and return decisions; the async [`Consumer`] and
//!   [`coordinator::GroupCoordinator`] perform the I/O. Tests drive the
//!   cores with hand-built responses and made-up instants.
//! * **Kafka's wire contract for groups.** Subscriptions and assignments use
//!   the `ConsumerProtocol` encodings (versions 0-3) and the Java protocol
//!   names (`range`, `roundrobin`, `cooperative-sticky`), so Strom consumers
//!   can share a group with librdkafka or Java consumers.
//! * **Versions.** Every API is sent at the highest version both sides
//!   support, negotiated per broker connection (Fetch v13+ with topic ids,
//!   flexible group APIs, batched OffsetFetch v8+). [`ApiVersionCaps`]
//!   (`strom.api.version.caps`) lowers them for brokers that advertise
//!   versions they cannot parse, such as librdkafka's mock cluster.
//!   Fetch sessions are used when the broker offers them; a broker that
//!   answers session id 0 gets full fetches.
//! * **Joins are driven by `poll`**, as in Java: `poll` starts a join when
//!   one is needed and applies it when it has finished; the JoinGroup and
//!   SyncGroup round runs in a task of its own, so `poll(timeout)` returns
//!   within its timeout during a rebalance. A cooperative member keeps
//!   reading the partitions it owns meanwhile (KIP-429; an eager member has
//!   revoked them all before it joins); commits are refused with
//!   [`ConsumerError::RebalanceInProgress`] until the rebalance has
//!   finished, as in Kafka's consumer, and what moves to another member is
//!   committed through [`RebalanceListener::on_partitions_revoked`] (or by
//!   auto-commit) first. Group requests use a connection of their own to
//!   the coordinator, so a JoinGroup parked on the broker does not hold up
//!   the fetches. The heartbeat task only flags a needed rejoin, and leaves
//!   the group when the application stops polling for
//!   `max.poll.interval.ms`.

pub mod assignor;
pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod error;
pub mod fetch_session;
pub mod fetcher;
pub mod membership;
pub mod offsets;
pub mod record;
pub mod topic_ids;
pub mod versions;

pub use config::{AssignmentStrategy, ConsumerConfig, IsolationLevel, OffsetReset};
pub use consumer::{Consumer, RebalanceListener};
pub use error::ConsumerError;
pub use record::{ConsumerRecord, OffsetAndMetadata, RecordHeader, TimestampType, TopicPartition};
pub use versions::ApiVersionCaps;
