//! Fencing a broker that died, on evidence, long before its session
//! expires.
//!
//! A broker process that dies leaves evidence: the kernel closes its
//! connections, so the active controller sees the connection that carried
//! the broker's heartbeats close, and the broker's listener refuses new
//! connections. When the heartbeat connection of an unfenced broker closes,
//! the active controller probes the broker's registered listener a few
//! times; if every attempt is refused and no heartbeat of the broker
//! arrived meanwhile, it fences the broker at once
//! ([`Controller::fence_unreachable`](crate::controller::Controller::fence_unreachable)),
//! which elects new leaders for its partitions.
//!
//! Anything else waits for `broker.session.timeout.ms`, as in Kafka: a
//! connection that closes and comes back (the broker reconnects and
//! heartbeats), a slow or paused broker (its listener still accepts), a
//! network partition or a host that is gone (connection attempts time out
//! rather than being refused). A refused connection is the one answer only
//! a live host whose broker process is gone gives.
//!
//! A controller that becomes active after the previous one died has seen
//! no connection close: after [`ACTIVATION_GRACE`] it probes every
//! unfenced broker it has not heard from since it became active.

use std::sync::Weak;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::image::MetadataImage;
use crate::runtime::CommandRunner;

/// The controller node the checks run on (the quorum node implements it;
/// a trait, so that this module does not reach up into the node's).
pub trait ActiveController: CommandRunner + 'static {
    /// Whether this node is the active controller.
    fn is_active(&self) -> bool;

    /// Whether it fences brokers on evidence at all
    /// (`strom.controller.fence.unreachable.brokers`).
    fn fences_unreachable_brokers(&self) -> bool;
}

/// Connection attempts made to a suspected broker; all must be refused.
const PROBE_ATTEMPTS: u32 = 3;
/// The pause before the first attempt and between attempts.
const PROBE_SPACING: Duration = Duration::from_millis(50);
/// How long one attempt may take: longer means no answer, not a refusal.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
/// How long a newly active controller waits before it probes the brokers
/// it has not heard from. Short: the probe, not the wait, tells a live
/// broker (its listener accepts) from a dead one; the wait only spares
/// probes of brokers whose heartbeat was already on its way.
pub const ACTIVATION_GRACE: Duration = Duration::from_millis(300);

/// What connecting to an address found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    /// Something accepted the connection: the broker may be alive.
    Accepted,
    /// The host refused: nothing listens there.
    Refused,
    /// No answer in time, or another error: unknown.
    Unknown,
}

/// One connection attempt to `address`.
pub async fn probe(address: &str) -> ProbeResult {
    match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(_)) => ProbeResult::Accepted,
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
            ProbeResult::Refused
        }
        Ok(Err(_)) | Err(_) => ProbeResult::Unknown,
    }
}

/// Whether every one of `PROBE_ATTEMPTS` attempts to `address` is
/// refused.
pub async fn refuses_connections(address: &str) -> bool {
    for _ in 0..PROBE_ATTEMPTS {
        tokio::time::sleep(PROBE_SPACING).await;
        if probe(address).await != ProbeResult::Refused {
            return false;
        }
    }
    true
}

/// The address of a broker's first registered listener at `broker_epoch`,
/// if it is registered and unfenced at that epoch.
fn listener_address(image: &MetadataImage, broker_id: i32, broker_epoch: i64) -> Option<String> {
    let broker = image.broker(broker_id)?;
    if broker.fenced || broker.epoch != broker_epoch {
        return None;
    }
    let endpoint = broker.endpoints.first()?;
    Some(format!("{}:{}", endpoint.host, endpoint.port))
}

/// Checks, in the background, whether broker `broker_id` (at
/// `broker_epoch`) is gone since `since_ms` (the controller clock), and
/// fences it if so.
pub fn check_broker<C: ActiveController>(
    node: Weak<C>,
    broker_id: i32,
    broker_epoch: i64,
    since_ms: u64,
) {
    tokio::spawn(async move {
        let Some(address) = node
            .upgrade()
            .filter(|node| node.is_active() && node.fences_unreachable_brokers())
            .and_then(|node| listener_address(&node.current_image(), broker_id, broker_epoch))
        else {
            return;
        };
        if !refuses_connections(&address).await {
            return;
        }
        let Some(node) = node.upgrade() else { return };
        let fenced = node
            .run(move |controller, image, _now_ms| {
                controller.fence_unreachable(image, broker_id, broker_epoch, since_ms)
            })
            .await;
        match fenced {
            Ok(true) => {
                tracing::warn!(broker_id, %address, "fenced a broker whose process is gone")
            }
            Ok(false) => {}
            Err(error) => tracing::debug!(broker_id, %error, "could not fence a gone broker"),
        }
    });
}

/// After this node became active at `since_ms`: waits
/// [`ACTIVATION_GRACE`], then checks every unfenced broker not heard from
/// since.
pub fn check_silent_brokers<C: ActiveController>(node: Weak<C>, since_ms: u64) {
    tokio::spawn(async move {
        tokio::time::sleep(ACTIVATION_GRACE).await;
        let Some(strong) = node
            .upgrade()
            .filter(|node| node.is_active() && node.fences_unreachable_brokers())
        else {
            return;
        };
        let silent = strong
            .run(move |controller, image, _now_ms| controller.silent_brokers(image, since_ms))
            .await;
        let Ok(silent) = silent else { return };
        for (broker_id, broker_epoch) in silent {
            check_broker(node.clone(), broker_id, broker_epoch, since_ms);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_is_refused_and_a_listening_one_accepted() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let open = listener.local_addr().expect("address").to_string();
        assert_eq!(probe(&open).await, ProbeResult::Accepted);
        assert!(!refuses_connections(&open).await);
        drop(listener);
        assert_eq!(probe(&open).await, ProbeResult::Refused);
        assert!(refuses_connections(&open).await);
    }
}
