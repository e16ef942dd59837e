//! Producer configuration with Kafka's property names.

use std::time::Duration;

use strom_client::config::{parse_duration_ms, parse_number};
use strom_client::{ClientConfig, ConfigError};
use strom_config::value::boolean;
use strom_config::{invalid, ValueProblem};
use strom_protocol::records::Compression;

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
            _ => return self.client.set(key, value),
        }
        Ok(true)
    }
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
}
