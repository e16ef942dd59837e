//! Strom's broker benchmarks.
//!
//! This crate owns two load generators and nothing the broker itself needs:
//!
//! * `strom-load` (this library plus `src/bin/strom-load.rs`) speaks the Kafka
//!   protocol through `strom-protocol` alone. It builds one Produce frame up
//!   front (one record batch per partition) and resends it, rewriting only
//!   the correlation id, with a configurable number of requests in flight, so
//!   that the client costs almost nothing and the figure is the broker's own
//!   ceiling. A `fetch` mode reads a topic back from offset 0. Two `group`
//!   modes measure the group coordinator over the wire: `rebalance` (N raw
//!   members, one connection each, join a new group per round; the time from
//!   the last JoinGroup sent to every SyncGroup answered) and `commit`
//!   (pipelined OffsetCommit of a simple group, read back with OffsetFetch).
//! * `strom-rdkafka-bench` (`benches/strom-rdkafka-bench.rs`, a `harness =
//!   false` bench target so that `rdkafka` stays a dev-dependency) drives
//!   librdkafka against a Strom broker and against librdkafka's in-memory mock
//!   cluster in the same run: the figures users will see.
//!
//! Design decisions: one connection per run (a single-node broker serves one
//! connection's requests in order, so in-flight depth is the lever, not
//! connection count); latencies are per request, measured from just before
//! the write to the decoded response; rates count whole requests only.

pub mod admin;
pub mod commit;
pub mod connection;
pub mod error;
pub mod fetch;
pub mod group;
pub mod produce;
pub mod stats;

pub use error::LoadError;
