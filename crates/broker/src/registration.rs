//! A broker's registration with the controller: the BrokerRegistration
//! request (sent again while the quorum cannot take it), catching up with
//! the metadata log in a cluster, the first heartbeat that unfences the
//! broker, the heartbeats after it and the last one at shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use strom_controller::controller::{
    BrokerHeartbeatRequest, BrokerRegistrationReply, BrokerRegistrationRequest,
};
use strom_controller::error::{ControllerError, RuntimeError};
use strom_controller::image::Endpoint;
use strom_controller::runtime::ControllerClient;
use tracing::{info, warn};

use crate::cluster_node::QuorumMember;
use crate::config::BrokerConfig;
use crate::start_error::{RegistrationStep, StartError};

/// Registers with the controller (in a cluster, then catches up with the
/// metadata log as `quorum`) and sends the first heartbeat, which unfences
/// the broker; returns the broker epoch.
pub(crate) async fn register(
    config: &BrokerConfig,
    controller: &dyn ControllerClient,
    quorum: Option<&QuorumMember>,
    bound: &[SocketAddr],
    incarnation_id: uuid::Uuid,
) -> Result<i64, StartError> {
    let request = BrokerRegistrationRequest {
        broker_id: config.node_id,
        incarnation_id,
        endpoints: advertised_endpoints(config, bound),
        rack: config.rack.clone(),
    };
    let registration = register_until_answered(config, controller, request).await?;
    info!(
        broker_epoch = registration.broker_epoch,
        "registered with the controller"
    );
    if let (Some(member), Some(cluster)) = (quorum, &config.cluster) {
        member
            .catch_up(config, cluster, registration.broker_epoch)
            .await?;
    }
    let heartbeat = BrokerHeartbeatRequest {
        broker_id: config.node_id,
        broker_epoch: registration.broker_epoch,
        want_fence: false,
        want_shutdown: false,
    };
    let step = RegistrationStep::FirstHeartbeat;
    controller
        .broker_heartbeat(heartbeat)
        .await
        .map_err(|source| StartError::ControllerFailed { step, source })?
        .map_err(|source| StartError::ControllerRefused { step, source })?;
    Ok(registration.broker_epoch)
}

/// How long a broker waits between registration attempts.
const REGISTRATION_RETRY: Duration = Duration::from_millis(500);

/// Sends the registration until the controller answers it for good.
///
/// In a cluster, a quorum that cannot take the registration yet (a node
/// started before a majority of the voters, or during an election: Kafka's
/// REQUEST_TIMED_OUT and NOT_CONTROLLER) is waited for, as Kafka's brokers
/// do, instead of stopping the process. A broker restarted right after a
/// crash finds its previous incarnation still registered until that one's
/// session expires; it tries again for a session timeout and two heartbeat
/// intervals from that first refusal. A live broker with the same id keeps
/// its session, so the refusal stands and the process stops.
async fn register_until_answered(
    config: &BrokerConfig,
    controller: &dyn ControllerClient,
    request: BrokerRegistrationRequest,
) -> Result<BrokerRegistrationReply, StartError> {
    let step = RegistrationStep::Registration;
    let patience = config.cluster.as_ref().map_or(Duration::ZERO, |cluster| {
        cluster.session_timeout + 2 * cluster.heartbeat_interval
    });
    // The patience bounds a wait between real sleeps, so it is measured on
    // the host's monotonic clock, not on the broker's injected one.
    let mut first_refusal: Option<std::time::Instant> = None;
    loop {
        let answer = match controller.register_broker(request.clone()).await {
            Ok(answer) => answer,
            Err(source) if config.cluster.is_some() && quorum_not_ready(&source) => {
                info!(error = %source, "the metadata quorum cannot take the registration yet; trying again");
                tokio::time::sleep(REGISTRATION_RETRY).await;
                continue;
            }
            Err(source) => return Err(StartError::ControllerFailed { step, source }),
        };
        match answer {
            Err(ControllerError::DuplicateBrokerRegistration { .. })
                if first_refusal
                    .get_or_insert_with(std::time::Instant::now)
                    .elapsed()
                    < patience =>
            {
                info!("another incarnation of this broker is still registered; waiting for its session to expire");
                tokio::time::sleep(REGISTRATION_RETRY).await;
            }
            answer => {
                return answer.map_err(|source| StartError::ControllerRefused { step, source })
            }
        }
    }
}

/// Failures that mean "the quorum cannot commit right now", not "no".
fn quorum_not_ready(error: &RuntimeError) -> bool {
    matches!(
        error,
        RuntimeError::QuorumTimeout { .. }
            | RuntimeError::NoMajority
            | RuntimeError::NotController { .. }
            | RuntimeError::Stale
    )
}

/// The advertised listeners as registration endpoints: an advertised port
/// of 0 means "the port we were given", an empty host 127.0.0.1.
fn advertised_endpoints(config: &BrokerConfig, bound: &[SocketAddr]) -> Vec<Endpoint> {
    config
        .advertised_listeners
        .iter()
        .map(|listener| {
            let port = match (
                listener.port,
                config
                    .listeners
                    .iter()
                    .position(|l| l.name == listener.name),
            ) {
                (0, Some(index)) => bound.get(index).map_or(0, SocketAddr::port),
                (port, _) => port,
            };
            let host = strom_config::host::reachable_host(&listener.host).to_owned();
            Endpoint {
                name: listener.name.clone(),
                host,
                port,
                security_protocol: crate::security::protocol_name(config, &listener.name),
            }
        })
        .collect()
}

/// Heartbeats every `every` until aborted; a refused or failed heartbeat
/// is logged and the next one is sent on time.
pub(crate) async fn heartbeat_loop(
    controller: Arc<dyn ControllerClient>,
    broker_id: i32,
    broker_epoch: i64,
    every: Duration,
) {
    let mut interval = tokio::time::interval(every);
    loop {
        interval.tick().await;
        let request = BrokerHeartbeatRequest {
            broker_id,
            broker_epoch,
            want_fence: false,
            want_shutdown: false,
        };
        match controller.broker_heartbeat(request).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => warn!(%error, "heartbeat refused"),
            Err(error) => warn!(%error, "heartbeat failed"),
        }
    }
}

/// Tells a single node's embedded controller that the broker is going away
/// (in a cluster, controlled shutdown does this first).
pub(crate) async fn announce_shutdown(
    controller: &dyn ControllerClient,
    broker_id: i32,
    broker_epoch: i64,
) {
    let request = BrokerHeartbeatRequest {
        broker_id,
        broker_epoch,
        want_fence: false,
        want_shutdown: true,
    };
    if let Err(error) = controller.broker_heartbeat(request).await {
        warn!(%error, "controlled shutdown heartbeat failed");
    }
}
