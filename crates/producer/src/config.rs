//! Producer configuration with Kafka's property names.

use std::time::Duration;

use strom_client::config::{parse_duration_ms, parse_number};
use strom_client::{ClientConfig, ConfigError};
use strom_config::value::boolean;
use strom_config::{invalid, ValueProblem};
use strom_protocol::records::Compression;

use crate::error::ProducerCreateError;

/// `acks`: how many replicas must have the record before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `0`: no response at all.
    None,
    /// `1`: the leader wrote it.
    Leader,
    /// `all` / `-1`: every in-sync replica has it.
    All,
}

impl Acks {
    /// The wire value.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Producer settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    /// Connection and metadata settings.
    pub client: ClientConfig,
    /// `acks`.
    pub acks: Acks,
    /// `batch.size` in bytes.
    pub batch_size: usize,
    /// `linger.ms`.
    pub linger: Duration,
    /// `buffer.memory` in bytes.
    pub buffer_memory: usize,
    /// `max.block.ms`: how long `send` waits for buffer space.
    pub max_block: Duration,
    /// `compression.type`.
    pub compression: Compression,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight_requests_per_connection: usize,
    /// `delivery.timeout.ms`: the time limit for a record, retries included.
    pub delivery_timeout: Duration,
    /// `max.request.size` in bytes.
    pub max_request_size: usize,
    /// `enable.idempotence`; `None` means the default (on when the broker
    /// supports InitProducerId and `acks=all`).
    pub enable_idempotence: Option<bool>,
    /// `transactional.id`: makes the producer transactional (KIP-98). It
    /// implies idempotence and needs `acks=all`; `enable.idempotence=false`
    /// or another `acks` is refused when the producer is created.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the transaction coordinator lets
    /// a transaction stay open before it aborts it.
    pub transaction_timeout: Duration,
}

impl ProducerConfig {
    /// Java's defaults with the given bootstrap servers.
    pub fn new<S: Into<String>>(bootstrap_servers: impl IntoIterator<Item = S>) -> Self {
        let mut client = ClientConfig::new(bootstrap_servers);
        // The Java producer always lets the broker create a missing topic.
        client.allow_auto_topic_creation = true;
        ProducerConfig {
            client,
            acks: Acks::All,
            batch_size: 16_384,
            linger: Duration::from_millis(5),
            buffer_memory: 32 * 1024 * 1024,
            max_block: Duration::from_millis(60_000),
            compression: Compression::None,
            max_in_flight_requests_per_connection: 5,
            delivery_timeout: Duration::from_millis(120_000),
            max_request_size: 1024 * 1024,
            enable_idempotence: None,
            transactional_id: None,
            transaction_timeout: Duration::from_millis(60_000),
        }
    }

    /// Parses Kafka property pairs; returns the config and unknown keys.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut config = ProducerConfig::new(Vec::<String>::new());
        let mut unknown = Vec::new();
        for (key, value) in properties {
            if !config.set(key, value)? {
                unknown.push(key.to_owned());
            }
        }
        config.client.validate()?;
        Ok((config, unknown))
    }

    /// Sets one property; `Ok(false)` for a name neither the producer nor the
    /// client owns.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "acks" => self.acks = parse_acks(key, value)?,
            "batch.size" => self.batch_size = parse_number(key, value, "a number of bytes")?,
            "linger.ms" => self.linger = parse_duration_ms(key, value)?,
            "buffer.memory" => self.buffer_memory = parse_number(key, value, "a number of bytes")?,
            "max.block.ms" => self.max_block = parse_duration_ms(key, value)?,
            "compression.type" => self.compression = parse_compression(key, value)?,
            "max.in.flight.requests.per.connection" => {
                self.max_in_flight_requests_per_connection =
                    parse_number::<usize>(key, value, "a positive number")?.max(1)
            }
            "delivery.timeout.ms" => self.delivery_timeout = parse_duration_ms(key, value)?,
            "max.request.size" => {
                self.max_request_size = parse_number(key, value, "a number of bytes")?
            }
            "enable.idempotence" => self.enable_idempotence = Some(boolean(key, value)?),
            "transactional.id" => self.transactional_id = Some(parse_transactional_id(key, value)?),
            "transaction.timeout.ms" => self.transaction_timeout = parse_duration_ms(key, value)?,
            _ => return self.client.set(key, value),
        }
        Ok(true)
    }
}

impl ProducerConfig {
    /// Whether the producer will use idempotence, when the broker's support
    /// is `broker_supports_idempotence`: always with a `transactional.id`,
    /// else as `enable.idempotence` says (by default when `acks=all`).
    pub fn idempotence_enabled(&self, broker_supports_idempotence: bool) -> bool {
        match (self.transactional_id.is_some(), self.enable_idempotence) {
            (true, _) | (false, Some(true)) => true,
            (false, Some(false)) => false,
            (false, None) => self.acks == Acks::All && broker_supports_idempotence,
        }
    }

    /// Checks the settings that only make sense together, as the Java
    /// producer does when it is created: idempotence needs `acks=all`, and
    /// a `transactional.id` needs idempotence (and so `acks=all`).
    pub fn validate(&self) -> Result<(), ProducerCreateError> {
        if let Some(transactional_id) = &self.transactional_id {
            if self.enable_idempotence == Some(false) {
                return Err(ProducerCreateError::TransactionsNeedIdempotence {
                    transactional_id: transactional_id.clone(),
                });
            }
            if self.acks != Acks::All {
                return Err(ProducerCreateError::TransactionsNeedAcksAll {
                    transactional_id: transactional_id.clone(),
                });
            }
        }
        if self.enable_idempotence == Some(true) && self.acks != Acks::All {
            return Err(ProducerCreateError::IdempotenceNeedsAcksAll);
        }
        Ok(())
    }
}

/// A `transactional.id` must not be empty (the coordinator refuses it).
fn parse_transactional_id(key: &str, value: &str) -> Result<String, ConfigError> {
    if value.is_empty() {
        return Err(invalid(key, value, ValueProblem::expected("a non-empty id")).into());
    }
    Ok(value.to_owned())
}

fn parse_acks(key: &str, value: &str) -> Result<Acks, ConfigError> {
    match value.trim() {
        "0" => Ok(Acks::None),
        "1" => Ok(Acks::Leader),
        "all" | "-1" => Ok(Acks::All),
        _ => Err(invalid(key, value, ValueProblem::expected("0, 1, all or -1")).into()),
    }
}

/// Parses `compression.type`.
pub fn parse_compression(key: &str, value: &str) -> Result<Compression, ConfigError> {
    Compression::ALL
        .into_iter()
        .find(|codec| codec.name() == value.trim())
        .ok_or_else(|| {
            let expected = "none, gzip, snappy, lz4 or zstd";
            invalid(key, value, ValueProblem::expected(expected)).into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_and_client_properties_parse() {
        let (config, unknown) = ProducerConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("acks", "1"),
            ("linger.ms", "20"),
            ("compression.type", "lz4"),
            ("enable.idempotence", "false"),
            ("group.id", "x"),
        ])
        .unwrap();
        assert_eq!(config.acks, Acks::Leader);
        assert_eq!(config.linger, Duration::from_millis(20));
        assert_eq!(config.compression, Compression::Lz4);
        assert_eq!(config.enable_idempotence, Some(false));
        assert_eq!(config.client.bootstrap_servers, ["127.0.0.1:9092"]);
        assert_eq!(unknown, ["group.id"]);
        assert!(ProducerConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("acks", "2")
        ])
        .is_err());
    }

    #[test]
    fn transactional_properties_parse_with_java_defaults() {
        let config = ProducerConfig::new(["127.0.0.1:9092"]);
        assert_eq!(config.transactional_id, None);
        assert_eq!(config.transaction_timeout, Duration::from_millis(60_000));
        let (config, unknown) = ProducerConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("transactional.id", "orders-writer"),
            ("transaction.timeout.ms", "15000"),
        ])
        .unwrap();
        assert!(unknown.is_empty());
        assert_eq!(config.transactional_id.as_deref(), Some("orders-writer"));
        assert_eq!(config.transaction_timeout, Duration::from_millis(15_000));
        assert!(config.validate().is_ok());
        // A transactional id implies idempotence even where the broker's
        // support was not checked.
        assert!(config.idempotence_enabled(false));
        let mut config = config;
        assert!(config.set("transactional.id", "").is_err());
        assert!(config.set("transaction.timeout.ms", "soon").is_err());
    }

    #[test]
    fn a_transactional_id_refuses_idempotence_off_and_acks_other_than_all() {
        let mut config = ProducerConfig::new(["127.0.0.1:9092"]);
        config.transactional_id = Some("t".to_owned());
        config.enable_idempotence = Some(false);
        assert!(matches!(
            config.validate(),
            Err(ProducerCreateError::TransactionsNeedIdempotence { transactional_id })
                if transactional_id == "t"
        ));
        config.enable_idempotence = None;
        config.acks = Acks::Leader;
        assert!(matches!(
            config.validate(),
            Err(ProducerCreateError::TransactionsNeedAcksAll { .. })
        ));
        config.transactional_id = None;
        config.enable_idempotence = Some(true);
        assert!(matches!(
            config.validate(),
            Err(ProducerCreateError::IdempotenceNeedsAcksAll)
        ));
        config.enable_idempotence = None;
        assert!(config.validate().is_ok());
        assert!(!config.idempotence_enabled(true), "acks=1 turns it off");
    }
}
