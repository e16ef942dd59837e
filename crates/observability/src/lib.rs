//! What operators see of a running Strom broker: Prometheus metrics under
//! the names Kafka's JMX metrics have when a JMX exporter turns them into
//! Prometheus metrics (`kafka_server_brokertopicmetrics_messagesin_total{topic="orders"}`
//! for `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders`),
//! health probes, and a read-only web console. The list of metrics, with
//! their meanings, is in docs/operations.md.
//!
//! This crate owns the counters and histograms kept on the request path
//! ([`histogram`], per-API [`requests`], per-topic [`topics`], the
//! broker-wide [`BrokerMetrics`] and [`LOG_FLUSH_TIME`], the error codes a
//! response carries in [`error_codes`]), the collector that encodes them
//! with the gauges computed at scrape time ([`collect`], [`lag`],
//! [`exposition`]), and the optional HTTP listener `strom.metrics.listener`
//! ([`http`]: `/metrics`, `/health/live`, `/health/ready`, the console
//! page and its JSON API).
//!
//! It deliberately does not know the broker. Everything it reads of one
//! (metadata, partitions and their logs, groups and their offsets, the
//! controller quorum, registration) comes through the [`view::BrokerView`]
//! trait, which the broker implements over its own state, as plain values
//! defined in [`view`]. It does not own the network counters either: they
//! are counted by the network server, and read through a
//! [`collect::NetworkSource`] function. Nor does it time requests around
//! the network server's reply types; the broker does, and hands each
//! response to [`BrokerMetrics::count_response`].
//!
//! Two decisions a newcomer must know:
//! - **Counting is atomics, reading is at scrape time.** Counters and
//!   histograms on the request path are relaxed atomic adds on handles
//!   resolved ahead of time (a produced batch costs two adds on its topic's
//!   [`topics::TopicMetrics`], with no lock and no allocation). Gauges
//!   (partitions, the controller, storage, groups and consumer lag) are
//!   computed from the [`view::BrokerView`] only when Prometheus scrapes.
//!   With no listener configured nothing is counted.
//! - **The listener never disturbs the Kafka listeners.** It is hyper's
//!   HTTP/1 server with tight limits on header size, header read time,
//!   connection lifetime and concurrent connections, off unless
//!   `strom.metrics.listener` names an address, and it holds the broker
//!   only weakly so that shutdown is never held up by a scrape.
//!
//! `prometheus-client` writes the exposition; Strom only hands it values.
//! The crate has no feature flags.

pub mod collect;
pub mod error;
pub mod error_codes;
pub mod exposition;
#[cfg(test)]
mod fake_broker;
pub mod histogram;
pub mod http;
pub mod lag;
pub mod metrics;
mod quotas;
pub mod requests;
pub mod topics;
pub mod view;

pub use error::{BindError, HttpSecurityError, ListenerAddressError};
pub use http::Observability;
pub use metrics::{BrokerMetrics, LOG_FLUSH_TIME};
pub use view::{BrokerView, Viewer};
