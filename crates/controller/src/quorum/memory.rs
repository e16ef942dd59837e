//! An in-process network for quorum tests and simulations: every node's
//! [`QuorumTransport`] delivers the encoded requests to the target's
//! [`QuorumController::handle_raft_request`], with faults drawn from one
//! seed: requests and replies dropped, delayed (and so reordered) and
//! duplicated, links cut in one or both directions, nodes isolated.
//!
//! A dropped request or reply looks to the sender as it would on a real
//! network: no answer until the timeout. Only addresses inside the process
//! are involved.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;

use crate::quorum::network::{QuorumTransport, TransportError};
use crate::quorum::node::QuorumController;
use crate::quorum::types::NodeId;

/// Fault rates of a [`MemoryNetwork`], each a probability in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// A request is lost before it reaches the target.
    pub drop_request: f64,
    /// The reply is lost after the target handled the request.
    pub drop_reply: f64,
    /// The request is delivered a second time (the copy's reply is lost).
    pub duplicate: f64,
    /// Most delay added to a delivery, in milliseconds (uniform from 0).
    pub max_delay_ms: u64,
}

impl Faults {
    /// No faults.
    pub const NONE: Faults = Faults {
        drop_request: 0.0,
        drop_reply: 0.0,
        duplicate: 0.0,
        max_delay_ms: 0,
    };
}

#[derive(Debug)]
struct NetworkState {
    nodes: BTreeMap<NodeId, Weak<QuorumController>>,
    /// Directed links that deliver nothing: (from, to).
    cut: BTreeSet<(NodeId, NodeId)>,
    faults: Faults,
    random: u64,
    delivered: u64,
    dropped: u64,
}

impl NetworkState {
    /// xorshift64*: a small deterministic generator from the seed.
    fn next_u64(&mut self) -> u64 {
        let mut x = self.random;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn chance(&mut self, probability: f64) -> bool {
        probability > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < probability
    }

    fn delay(&mut self) -> Duration {
        match self.faults.max_delay_ms {
            0 => Duration::ZERO,
            max => Duration::from_millis(self.next_u64() % (max + 1)),
        }
    }
}

/// The shared in-process network. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MemoryNetwork {
    state: Arc<Mutex<NetworkState>>,
}

/// Counts of what the network did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetworkCounts {
    /// Requests delivered to a node.
    pub delivered: u64,
    /// Requests or replies dropped by a fault or a cut link.
    pub dropped: u64,
}

impl MemoryNetwork {
    /// A network without faults whose later faults draw from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(NetworkState {
                nodes: BTreeMap::new(),
                cut: BTreeSet::new(),
                faults: Faults::NONE,
                // xorshift must not start at zero.
                random: seed ^ 0x9E37_79B9_7F4A_7C15,
                delivered: 0,
                dropped: 0,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NetworkState> {
        // Test infrastructure: the state is plain data, valid after any panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The transport node `from` sends with.
    pub fn transport(&self, from: NodeId) -> Arc<dyn QuorumTransport> {
        Arc::new(MemoryTransport {
            from,
            network: self.clone(),
        })
    }

    /// Makes `node` reachable under its id (replacing a stopped one).
    pub fn attach(&self, node: &Arc<QuorumController>) {
        self.lock()
            .nodes
            .insert(node.node_id(), Arc::downgrade(node));
    }

    /// Makes node `node_id` unreachable, as if its process died.
    pub fn detach(&self, node_id: NodeId) {
        self.lock().nodes.remove(&node_id);
    }

    /// Sets the fault rates.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// Cuts the link between `a` and `b` in both directions.
    pub fn cut(&self, a: NodeId, b: NodeId) {
        let mut state = self.lock();
        state.cut.insert((a, b));
        state.cut.insert((b, a));
    }

    /// Cuts every link of `node`.
    pub fn isolate(&self, node: NodeId, all: &[NodeId]) {
        for other in all.iter().filter(|other| **other != node) {
            self.cut(node, *other);
        }
    }

    /// Restores every link (faults stay as set).
    pub fn heal(&self) {
        self.lock().cut.clear();
    }

    /// What the network has done so far.
    pub fn counts(&self) -> NetworkCounts {
        let state = self.lock();
        NetworkCounts {
            delivered: state.delivered,
            dropped: state.dropped,
        }
    }

    /// Decides one delivery: the target (if reachable and not dropped), the
    /// delay, whether the reply is lost and whether a copy is sent.
    fn plan(&self, from: NodeId, to: NodeId) -> Delivery {
        let mut state = self.lock();
        let target = state.nodes.get(&to).and_then(Weak::upgrade);
        let linked = !state.cut.contains(&(from, to));
        let faults = state.faults;
        let lost = state.chance(faults.drop_request);
        let delay = state.delay();
        let reply_lost = state.chance(faults.drop_reply);
        let duplicate = state.chance(faults.duplicate);
        let target = target.filter(|_| linked && !lost);
        if target.is_some() {
            state.delivered += 1;
        } else {
            state.dropped += 1;
        }
        if reply_lost {
            state.dropped += 1;
        }
        Delivery {
            target,
            delay,
            reply_lost,
            duplicate,
        }
    }
}

struct Delivery {
    target: Option<Arc<QuorumController>>,
    delay: Duration,
    reply_lost: bool,
    duplicate: bool,
}

struct MemoryTransport {
    from: NodeId,
    network: MemoryNetwork,
}

#[async_trait]
impl QuorumTransport for MemoryTransport {
    async fn call(
        &self,
        target: NodeId,
        _address: &str,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let delivery = self.network.plan(self.from, target);
        let exchange = async {
            tokio::time::sleep(delivery.delay).await;
            let Some(node) = delivery.target else {
                // Lost: the sender hears nothing until its timeout.
                std::future::pending::<()>().await;
                return None;
            };
            if delivery.duplicate {
                let copy = Arc::clone(&node);
                let request = request.clone();
                tokio::spawn(async move {
                    let _ = copy.handle_raft_request(&request).await;
                });
            }
            let reply = node.handle_raft_request(&request).await.ok()?;
            if delivery.reply_lost {
                std::future::pending::<()>().await;
            }
            Some(reply)
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) | Err(_) => Err(TransportError::Timeout { target, timeout_ms }),
        }
    }
}
