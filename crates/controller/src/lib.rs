//! Cluster metadata for Strom: the controller.
//!
//! This crate owns the cluster's metadata and every decision about it:
//!
//! - [`records`]: the metadata log's record types, `prost` messages written
//!   by hand (schema in `proto/metadata.proto`, documentation only): broker
//!   registration, fencing and unfencing, topics with UUID ids, partitions
//!   with replicas, ISR, leader, leader epoch, partition epoch and the
//!   adding and removing replicas of a reassignment, partition changes,
//!   configs, topic removal, producer id blocks.
//! - [`image`]: the immutable [`MetadataImage`] those records build, shared
//!   as `Arc<MetadataImage>` and advanced copy-on-write.
//! - [`partition_state`] and [`replica_state`]: Kafka's partition and
//!   replica state machines as enums with checked transitions.
//! - [`election`]: the four leader election policies (offline partition,
//!   reassignment, preferred replica, controlled shutdown) as pure functions.
//! - [`assignment`] and [`rack_assignment`]: replica assignment for new
//!   topics and partitions, as Kafka does it without and with racks, and
//!   validation of requested assignments.
//! - [`config`]: validation of CreateTopics and AlterConfigs values against
//!   the one table of topic-level configs (names, ranges, defaults, broker
//!   synonyms), which lives in `strom_protocol::topic_config` and is
//!   re-exported here, and the resolution of effective values.
//! - [`log`]: the durable metadata log (CRC-framed, `fsync`ed batches) and
//!   its snapshots, with recovery.
//! - [`controller`]: the sans-IO [`Controller`] that turns commands
//!   (create/delete topics, create partitions, alter configs, register
//!   broker, heartbeat, elect leaders, AlterPartition, partition
//!   reassignments, session expiry and automatic leader rebalancing) into
//!   records and per-item results.
//! - [`runtime`]: the [`ControllerClient`] trait brokers call, the
//!   [`CommandRunner`] trait behind it, and [`LocalController`], the
//!   embedded single-node implementation that appends to the log and
//!   publishes each new image on a `watch` channel.
//! - [`producer_ids`]: a broker's producer ids for InitProducerId, from a
//!   counter file on a single node or in blocks the controller grants in a
//!   cluster.
//! - [`quorum`]: the metadata log replicated by Raft (openraft 0.9) among
//!   1, 3 or 5 controller voters: the Raft log and snapshots on disk, the
//!   transport trait and its TCP and in-process implementations, and
//!   [`QuorumController`](quorum::QuorumController), another
//!   [`CommandRunner`].
//!
//! It does **not** own partition data (`strom-storage`, `strom-replication`),
//! the network, or Kafka error codes: every per-item error is a typed
//! [`ControllerError`](error::ControllerError) whose docs name the Kafka
//! code the broker should answer with.
//!
//! # Example: the embedded controller
//!
//! ```
//! use std::sync::Arc;
//!
//! use strom_controller::controller::{
//!     BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest, NewTopic,
//! };
//! use strom_clock::{SeededRandom, SystemClock};
//! use strom_controller::image::Endpoint;
//! use strom_controller::{ControllerClient, LocalController, LocalControllerConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let directory = tempfile::tempdir()?;
//! # let metadata_dir = directory.path().join("__cluster_metadata");
//! let controller = LocalController::start(
//!     LocalControllerConfig::new(metadata_dir),
//!     Arc::new(SystemClock),
//!     Arc::new(SeededRandom::from_entropy()),
//! )
//! .await?;
//! let mut images = controller.subscribe();
//!
//! // The broker registers (fenced), then its first heartbeat unfences it.
//! let registration = controller
//!     .register_broker(BrokerRegistrationRequest {
//!         broker_id: 1,
//!         incarnation_id: uuid::Uuid::new_v4(),
//!         endpoints: vec![Endpoint {
//!             name: "PLAINTEXT".into(),
//!             host: "127.0.0.1".into(),
//!             port: 9092,
//!             security_protocol: "PLAINTEXT".into(),
//!         }],
//!         rack: None,
//!     })
//!     .await??;
//! controller
//!     .broker_heartbeat(BrokerHeartbeatRequest {
//!         broker_id: 1,
//!         broker_epoch: registration.broker_epoch,
//!         want_fence: false,
//!         want_shutdown: false,
//!     })
//!     .await??;
//!
//! let outcomes = controller
//!     .create_topics(CreateTopicsRequest {
//!         topics: vec![NewTopic {
//!             name: "orders".into(),
//!             partitions: Some(3),
//!             ..NewTopic::default()
//!         }],
//!         validate_only: false,
//!     })
//!     .await?;
//! let created = outcomes[0].result.clone()?;
//!
//! // Every committed change arrives as a new image.
//! let image = images.borrow_and_update().clone();
//! let topic = image.topic_by_name("orders").expect("created");
//! assert_eq!(topic.id, created.topic_id);
//! assert_eq!(topic.partitions[0].leader, Some(1));
//! # Ok(())
//! # }
//! ```
//!
//! # Design decisions
//!
//! - **Metadata is a log.** Every decision is a record appended to the
//!   metadata log; the image is a fold of the log. Brokers learn metadata
//!   only from images built from it, so the embedded controller and the
//!   openraft quorum look the same to a broker.
//! - **Sans-IO core, thin runtime.** [`Controller`] takes an image, a
//!   command, the time (`now_ms`) and an injected random source, and returns
//!   records; it never touches a file or a clock, so its tests are
//!   deterministic. [`LocalController`] adds the log, the lock and the
//!   `watch` channel, and reads `now_ms` from the injected
//!   [`strom_clock::Clock`]'s monotonic reading (broker sessions survive a
//!   step of the wall clock). The random source is the broker's one
//!   [`strom_clock::Random`]; openraft's election timeouts are the one
//!   draw it does not take from there (see `docs/testing.md`).
//! - **Fail-stop durability.** A command's records are one CRC-framed batch,
//!   `fsync`ed before the image advances; a torn last batch is dropped at
//!   recovery, and any other damage stops start-up instead of serving
//!   metadata with a hole in it.

pub mod assignment;
pub mod config;
pub mod controller;
pub mod election;
pub mod error;
pub mod image;
pub mod log;
pub mod partition_state;
pub mod producer_ids;
pub mod quorum;
pub mod quota_image;
pub mod quota_records;
pub mod rack_assignment;
pub mod records;
pub mod replica_state;
pub mod runtime;
pub mod security_image;
pub mod security_records;
pub mod topic_name;
pub mod transition;

pub use controller::{Controller, ControllerConfig};
pub use image::MetadataImage;
pub use runtime::{CommandRunner, ControllerClient, LocalController, LocalControllerConfig};
