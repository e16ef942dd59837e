//! Cluster metadata for Strom: the controller.
//!
//! This crate owns the cluster's metadata and the decisions about it:
//!
//! - [`records`]: the metadata log's record types (`prost` messages written
//!   by hand), one per kind of change: broker registration and fencing,
//!   topics with UUID ids, partitions with replicas, ISR, leader and epochs,
//!   partition changes, configs, topic removal.
//! - [`image`]: the immutable [`MetadataImage`](image::MetadataImage) those
//!   records build, shared cheaply (`Arc` + copy-on-write maps).
//!
//! It does not own partition data (that is `strom-storage` and
//! `strom-replication`), the network, or Kafka error codes: commands return
//! typed errors and the broker maps them to codes.
//!
//! # Design decisions
//!
//! - **Metadata is a log.** Every decision is a record; the image is a fold
//!   of the log. A broker learns metadata only from images built from it.
//! - **Sans-IO core.** The controller's logic takes an image and a command
//!   and returns records plus per-item results; a thin async layer appends
//!   the records to the durable log and publishes the new image.
pub mod assignment;
pub mod config;
pub mod controller;
pub mod election;
pub mod environment;
pub mod error;
pub mod image;
pub mod log;
pub mod partition_state;
pub mod records;
pub mod replica_state;
pub mod runtime;
pub mod topic_name;
