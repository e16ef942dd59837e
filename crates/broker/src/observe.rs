//! The broker as `strom-observability` sees it: [`BrokerView`] over the
//! [`BrokerContext`] (with the console's logins checked against the SCRAM
//! credentials of the metadata image and its views filtered by the
//! authorizer), the network counters the collector reads, and the
//! metrics listener's address and security settings from the
//! configuration.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use strom_controller::image::{ConfigResource, PartitionImage, TopicImage};
use strom_controller::quorum::{QuorumStatus, ReplicaStatus};
use strom_controller::MetadataImage;
use strom_coordinator::GroupState;
use strom_observability::http::auth::HttpSecurity;
use strom_observability::http::auth::{AUTHENTICATE_METRICS_KEY, AUTHENTICATION_KEY};
use strom_observability::http::{BoxFuture, HttpIo, HttpTls, LISTENER_KEY};
use strom_observability::topics::TopicCounts;
use strom_observability::view::{
    BrokerState, ClusterState, CommittedOffset, ConfigEntryState, EndpointState, GroupDescription,
    GroupListing, GroupMember, HostedPartition, IsrChanges, LogState, NetworkCounts,
    PartitionState, QuorumReplica, QuorumState, Registration, TopicState, TransactionSummary,
    Viewer,
};
use strom_observability::BrokerView;
use strom_observability::HttpSecurityError;
use strom_replication::Partition;
use strom_security::authorizer::Action;
use strom_security::Principal;
use strom_storage::TopicPartition;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::config::BrokerConfig;
use crate::error::{ConfigError, ValueProblem};
use crate::handlers::authorization::authorize_principal;
use crate::handlers::BrokerContext;
use crate::security::ImageCredentials;
use crate::start_error::StartError;
use strom_network::metrics::NETWORK;

/// The metrics listener's address from `strom.metrics.listener` (see
/// [`strom_observability::http::listener_address`]): `None` when unset or
/// empty.
pub fn listener_address(config: &BrokerConfig) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(text) = config.properties().get(LISTENER_KEY) else {
        return Ok(None);
    };
    strom_observability::http::listener_address(text).map_err(|error| ConfigError::Invalid {
        key: LISTENER_KEY.to_owned(),
        value: error.value,
        problem: ValueProblem::HttpListener,
    })
}

/// The HTTP listener's security settings from `strom.http.authentication`
/// and `strom.http.authenticate.metrics` (see
/// [`strom_observability::http::auth`]).
pub fn http_security(config: &BrokerConfig) -> Result<HttpSecurity, ConfigError> {
    let properties = config.properties();
    let value = |key: &str| properties.get(key).map(String::as_str);
    HttpSecurity::parse(value(AUTHENTICATION_KEY), value(AUTHENTICATE_METRICS_KEY)).map_err(
        |error| match error {
            HttpSecurityError::Authentication { value } => ConfigError::Invalid {
                key: AUTHENTICATION_KEY.to_owned(),
                value,
                problem: ValueProblem::expected("none or basic"),
            },
            HttpSecurityError::AuthenticateMetrics { value } => ConfigError::Invalid {
                key: AUTHENTICATE_METRICS_KEY.to_owned(),
                value,
                problem: ValueProblem::NotABoolean,
            },
        },
    )
}

/// TLS for the HTTP listener when `strom.metrics.listener` is `https://`:
/// the keystore of `listener.name.http.ssl.*`, else of the broker-wide
/// `ssl.*` keys (PEM, as for the Kafka listeners).
pub fn http_tls(config: &BrokerConfig) -> Result<Option<Arc<dyn HttpTls>>, StartError> {
    let properties = config.properties();
    let uses_tls = properties
        .get(LISTENER_KEY)
        .is_some_and(|text| strom_observability::http::listener_uses_tls(text));
    if !uses_tls {
        return Ok(None);
    }
    let settings = strom_security::config::http_tls_settings(properties)?;
    let server = strom_security::tls::server_config(&settings).map_err(|source| {
        strom_security::SecurityError::Tls {
            listener: format!("{LISTENER_KEY} (https)"),
            source,
        }
    })?;
    Ok(Some(Arc::new(HttpTlsAcceptor(TlsAcceptor::from(server)))))
}

/// The HTTP listener's TLS over rustls.
struct HttpTlsAcceptor(TlsAcceptor);

impl HttpTls for HttpTlsAcceptor {
    fn accept(&self, stream: TcpStream) -> BoxFuture<std::io::Result<Box<dyn HttpIo>>> {
        let acceptor = self.0.clone();
        Box::pin(async move {
            let secured = acceptor.accept(stream).await?;
            Ok(Box::new(secured) as Box<dyn HttpIo>)
        })
    }
}

/// The process's network counters, for the collector.
pub fn network_counts() -> NetworkCounts {
    NETWORK.counts()
}

fn topic_state(broker: &BrokerContext, image: &MetadataImage, topic: &TopicImage) -> TopicState {
    TopicState {
        name: topic.name.clone(),
        id: topic.id.to_string(),
        min_insync_replicas: broker.replicas.min_insync_replicas(image, &topic.name),
        partitions: topic.partitions.iter().map(partition_state).collect(),
    }
}

fn partition_state(partition: &PartitionImage) -> PartitionState {
    PartitionState {
        replicas: partition.replicas.clone(),
        isr: partition.isr.clone(),
        leader: partition.leader,
        leader_epoch: partition.leader_epoch,
        adding_replicas: partition.adding_replicas.clone(),
        reassigning: partition.is_reassigning(),
    }
}

fn quorum_replica(replica: &ReplicaStatus) -> QuorumReplica {
    QuorumReplica {
        node_id: replica.node_id,
        log_end_offset: replica.log_end_offset,
    }
}

fn quorum_state(status: QuorumStatus) -> QuorumState {
    QuorumState {
        node_id: status.node_id,
        is_active: status.is_active,
        leader: status.leader,
        epoch: status.epoch,
        high_watermark: status.high_watermark,
        voters: status.voters.iter().map(quorum_replica).collect(),
        observers: status.observers.iter().map(quorum_replica).collect(),
    }
}

/// The figures of a partition's log; `None` while it is offline.
fn log_state(partition: &Partition) -> Option<LogState> {
    partition
        .with_log(|log| LogState {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            high_watermark: log.high_watermark(),
            last_stable_offset: log.last_stable_offset(),
            open_transactions: log
                .producer_states()
                .iter()
                .filter(|producer| producer.current_txn_first_offset.is_some())
                .count(),
            size_bytes: log.size_bytes(),
            segments: log.segment_count(),
            log_dir: log.dir().parent().map(|p| p.display().to_string()),
        })
        .ok()
}

fn topic_partition(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic.to_owned(), partition)
}

impl BrokerView for BrokerContext {
    fn node_id(&self) -> i32 {
        self.config.node_id
    }

    fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    fn registration(&self) -> Registration {
        match self.controller.image().broker(self.config.node_id) {
            None => Registration::Unregistered,
            Some(registered) if registered.fenced => Registration::Fenced,
            Some(_) => Registration::Unfenced,
        }
    }

    fn cluster(&self) -> ClusterState {
        let image = self.controller.image();
        let brokers = image
            .brokers()
            .map(|b| BrokerState {
                broker_id: b.broker_id,
                epoch: b.epoch,
                endpoints: b
                    .endpoints
                    .iter()
                    .map(|e| EndpointState {
                        name: e.name.clone(),
                        host: e.host.clone(),
                        port: e.port,
                    })
                    .collect(),
                rack: b.rack.clone(),
                fenced: b.fenced,
            })
            .collect();
        ClusterState {
            brokers,
            topic_count: image.topic_count(),
            partition_count: image.topics().map(|t| t.partitions.len()).sum(),
            metadata_end_offset: image.next_offset(),
        }
    }

    fn quorum(&self) -> Option<QuorumState> {
        self.controller.local_quorum_status().map(quorum_state)
    }

    fn topics(&self) -> Vec<TopicState> {
        let image = self.controller.image();
        image
            .topics()
            .map(|topic| topic_state(self, &image, topic))
            .collect()
    }

    fn topic(&self, name: &str) -> Option<TopicState> {
        let image = self.controller.image();
        let topic = image.topic_by_name(name)?;
        Some(topic_state(self, &image, topic))
    }

    fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.controller
            .image()
            .configs(&ConfigResource::Topic(name.to_owned()))
            .clone()
    }

    fn topic_config_entries(&self, name: &str) -> Vec<ConfigEntryState> {
        crate::handlers::describe_configs::topic_config_entries(self, name)
    }

    fn topic_counts(&self) -> Vec<(String, TopicCounts)> {
        self.replicas.topic_metrics().snapshot()
    }

    fn isr_changes(&self) -> IsrChanges {
        let (shrinks, expands) = self.replicas.isr_changes();
        IsrChanges { shrinks, expands }
    }

    fn remote_storage(&self) -> Option<strom_observability::view::RemoteStorageCounts> {
        let manager = self.replicas.remote_log_manager()?;
        Some(crate::tiered::counts(&self.replicas, manager))
    }

    fn hosted_partitions(&self) -> Vec<HostedPartition> {
        self.replicas
            .hosted()
            .iter()
            .map(|replica| HostedPartition {
                topic: replica.topic_partition.topic.clone(),
                partition: replica.topic_partition.partition,
                follower_lags: replica.follower_lags(),
                log: log_state(replica),
            })
            .collect()
    }

    fn led_partition_log(&self, topic: &str, partition: i32) -> Option<LogState> {
        let replica = self.replicas.get(&topic_partition(topic, partition))?;
        log_state(&replica)
    }

    fn read_records(
        &self,
        topic: &str,
        partition: i32,
        from: i64,
        max_bytes: u64,
    ) -> Option<Bytes> {
        let replica = self.replicas.get(&topic_partition(topic, partition))?;
        let read = replica.read(from, max_bytes, true).ok()?;
        Some(read.records.unwrap_or_default())
    }

    fn offset_for_timestamp(&self, topic: &str, partition: i32, timestamp_ms: i64) -> Option<i64> {
        let replica = self.replicas.get(&topic_partition(topic, partition))?;
        replica
            .with_log(|log| {
                let high_watermark = log.high_watermark();
                log.offset_for_timestamp(timestamp_ms)
                    .map(|found| found.offset)
                    .filter(|offset| *offset < high_watermark)
            })
            .ok()
            .flatten()
    }

    fn group_states(&self) -> Vec<&'static str> {
        GroupState::ALL
            .iter()
            .map(|state| state.kafka_name())
            .collect()
    }

    fn groups(&self) -> Vec<GroupListing> {
        self.groups
            .coordinator
            .list_groups(&[])
            .unwrap_or_default()
            .into_iter()
            .map(|(group, protocol_type, state)| GroupListing {
                group,
                protocol_type,
                state: state.kafka_name(),
            })
            .collect()
    }

    fn describe_group(&self, group: &str) -> Option<GroupDescription> {
        let description = self
            .groups
            .coordinator
            .describe_groups(&[group.to_owned()])
            .pop()?
            .ok()?;
        Some(GroupDescription {
            state: description.state.kafka_name(),
            protocol_type: description.protocol_type,
            protocol_name: description.protocol_name,
            members: description
                .members
                .into_iter()
                .map(|member| GroupMember {
                    member_id: member.member_id,
                    group_instance_id: member.group_instance_id,
                    client_id: member.client_id,
                    client_host: member.client_host,
                    assignment: member.assignment,
                })
                .collect(),
        })
    }

    fn committed_offsets(&self, group: &str) -> Vec<CommittedOffset> {
        let Ok(offsets) = self.groups.coordinator.fetch_offsets(group, None, false) else {
            return Vec::new();
        };
        offsets
            .into_iter()
            .map(|offset| CommittedOffset {
                topic: offset.topic,
                partition: offset.partition,
                offset: offset.offset,
            })
            .collect()
    }

    fn client_quotas(&self) -> Vec<strom_observability::view::ClientQuotaState> {
        self.quotas
            .usage()
            .into_iter()
            .map(|usage| strom_observability::view::ClientQuotaState {
                key: usage.key.name(),
                user: usage.usage.user.unwrap_or_default(),
                client_id: usage.usage.client_id.unwrap_or_default(),
                limit: usage.bound,
                usage: usage.rate,
                throttle_time_ms_total: usage.throttle_time_ms_total,
                throttled_total: usage.throttled_total,
            })
            .collect()
    }

    fn transactions(&self) -> Vec<TransactionSummary> {
        self.transactions
            .coordinator
            .list()
            .unwrap_or_default()
            .into_iter()
            .map(|listing| TransactionSummary {
                transactional_id: listing.transactional_id,
                producer_id: listing.producer_id,
                state: listing.state.name(),
                start_timestamp_ms: listing.start_timestamp_ms,
            })
            .collect()
    }

    fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.replicas
            .get(&topic_partition(topic, partition))
            .and_then(|replica| replica.with_log(|log| log.high_watermark()).ok())
    }

    fn now_ms(&self) -> i64 {
        self.replicas.now_ms()
    }

    fn authenticate(&self, user: &str, password: &str) -> bool {
        let image = self.controller.image();
        strom_security::sasl::verify_password(&ImageCredentials(&image), user, password)
    }

    fn authorize(&self, viewer: &Viewer, operation: i8, resource_type: i8, name: &str) -> bool {
        let action = Action {
            operation,
            resource_type,
            name,
        };
        let principal = Principal::user(viewer.user.clone());
        authorize_principal(self, &principal, &viewer.host.to_string(), action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(value: &str) -> Result<Option<SocketAddr>, ConfigError> {
        let map = BTreeMap::from([(LISTENER_KEY.to_owned(), value.to_owned())]);
        let (config, warnings) = BrokerConfig::from_map(&map).expect("valid");
        assert!(warnings.is_empty(), "{LISTENER_KEY} is a known key");
        listener_address(&config)
    }

    #[test]
    fn the_listener_is_read_from_the_configuration() {
        assert_eq!(
            listener_address(&BrokerConfig::defaults()).expect("ok"),
            None
        );
        assert_eq!(address("").expect("ok"), None);
        assert_eq!(
            address("http://127.0.0.1:9644").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 9644)))
        );
        assert_eq!(
            address("https://127.0.0.1:1").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 1)))
        );
        assert!(matches!(
            address("ftp://127.0.0.1:1"),
            Err(ConfigError::Invalid {
                problem: ValueProblem::HttpListener,
                ..
            })
        ));
        let error = address("http://metrics:1").expect_err("a host name");
        assert_eq!(
            error.to_string(),
            "invalid value `http://metrics:1` for configuration `strom.metrics.listener`: expected http://HOST:PORT or https://HOST:PORT with an IP address"
        );
    }

    #[test]
    fn an_https_listener_needs_a_keystore() {
        let config = |pairs: &[(&str, &str)]| {
            let map: BTreeMap<String, String> = pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect();
            BrokerConfig::from_map(&map).expect("valid").0
        };
        let plain = config(&[(LISTENER_KEY, "http://127.0.0.1:0")]);
        assert!(http_tls(&plain).expect("no TLS").is_none());
        let missing = config(&[(LISTENER_KEY, "https://127.0.0.1:0")]);
        let error = http_tls(&missing).err().expect("no keystore");
        assert!(error.to_string().contains("ssl.keystore"), "{error}");
        let unreadable = config(&[
            (LISTENER_KEY, "https://127.0.0.1:0"),
            (
                "listener.name.http.ssl.keystore.location",
                "/nonexistent/keystore.pem",
            ),
        ]);
        assert!(http_tls(&unreadable).is_err());
    }

    fn security(pairs: &[(&str, &str)]) -> Result<HttpSecurity, ConfigError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let (config, warnings) = BrokerConfig::from_map(&map).expect("valid");
        assert!(warnings.is_empty(), "the HTTP security keys are known");
        http_security(&config)
    }

    #[test]
    fn the_listener_security_is_read_from_the_configuration() {
        assert_eq!(
            http_security(&BrokerConfig::defaults()).expect("ok"),
            HttpSecurity::default()
        );
        let basic = security(&[
            (AUTHENTICATION_KEY, "basic"),
            (AUTHENTICATE_METRICS_KEY, "true"),
        ])
        .expect("ok");
        assert!(basic.protects("/api/topics") && basic.protects("/metrics"));
        let error = security(&[(AUTHENTICATION_KEY, "digest")]).expect_err("unknown");
        assert_eq!(
            error.to_string(),
            "invalid value `digest` for configuration `strom.http.authentication`: expected none or basic"
        );
        let error = security(&[(AUTHENTICATE_METRICS_KEY, "yes")]).expect_err("not a boolean");
        assert!(matches!(
            error,
            ConfigError::Invalid {
                problem: ValueProblem::NotABoolean,
                ..
            }
        ));
    }

    #[test]
    fn the_old_error_text_is_kept() {
        let error = address("http://metrics:1").expect_err("a host name");
        assert_eq!(
            error.to_string(),
            "invalid value `http://metrics:1` for configuration `strom.metrics.listener`: expected http://HOST:PORT or https://HOST:PORT with an IP address"
        );
    }
}
