//! The faults the simulation injects: crashes, power losses, cut links,
//! clock jumps and controller failovers.

use std::sync::Arc;

use strom_clock::SeededRandom;
use strom_controller::controller::Controller;

use super::consumers::GroupHost;
use super::transactions::TxnHost;
use super::{Message, Node, Simulation, BROKERS, PARTITIONS, SESSION_TIMEOUT_MS, TOPIC};

impl Simulation {
    pub(crate) fn inject_fault(&mut self) {
        if let Some((victim, lost)) = self.power_lost {
            // After a power loss, no other fault until the victim is back
            // under a new registration (out of every ISR): see `power_loss`.
            let back = self
                .image
                .broker(victim)
                .is_some_and(|broker| broker.incarnation_id != lost && !broker.fenced);
            if back {
                self.power_lost = None;
            } else {
                if !self.brokers[&victim].alive && self.rng.chance(20) {
                    self.restart(victim);
                }
                return;
            }
        }
        let roll = self.rng.below(1_000);
        let down: Vec<i32> = BROKERS
            .into_iter()
            .filter(|id| !self.brokers[id].alive)
            .collect();
        if roll < 3 && down.is_empty() {
            let victim = BROKERS[self.rng.below(3) as usize];
            self.kill(victim);
        } else if roll < 4 && down.is_empty() {
            let victim = BROKERS[self.rng.below(3) as usize];
            self.power_loss(victim);
        } else if roll < 25 && !down.is_empty() {
            let id = down[0];
            self.restart(id);
        } else if roll < 30 && self.cut.len() < 2 {
            let nodes = [
                Node::Controller,
                Node::Broker(1),
                Node::Broker(2),
                Node::Broker(3),
            ];
            let a = nodes[self.rng.below(4) as usize];
            let b = nodes[self.rng.below(4) as usize];
            if a != b {
                self.cut.insert((a.min(b), a.max(b)));
                self.note(format!("fault: link {a:?} - {b:?} cut"));
            }
        } else if roll < 45 && !self.cut.is_empty() {
            self.cut.clear();
            self.note("fault: links healed".to_owned());
        } else if roll < 47 {
            let jump = 200 + self.rng.below(1_500) as i64;
            self.advance(jump);
            self.note(format!("fault: the clock jumps {jump} ms"));
        } else if roll < 49 && self.controller_down_until.is_none() {
            self.controller_crash();
        }
    }

    /// The active controller dies: what it had not yet sent is lost, and no
    /// controller answers until another voter is elected (the election
    /// itself is the quorum simulation's subject; here it is a pause).
    fn controller_crash(&mut self) {
        let election_ms = 150 + self.rng.below(600) as i64;
        self.controller_down_until = Some(self.now_ms + election_ms);
        self.network.retain(|envelope| {
            envelope.from != Node::Controller && envelope.to != Node::Controller
        });
        self.note(format!(
            "fault: the active controller crashed; another is elected in {election_ms} ms"
        ));
    }

    /// A new active controller: the controller core afresh over the
    /// committed image (what a voter replays from the metadata log), with
    /// no liveness observations of its own yet; the brokers catch up with
    /// the image from it.
    pub(crate) fn controller_takes_over(&mut self) {
        let config = self.controller.config().clone();
        let seed = self.rng.next();
        self.controller = Controller::new(config, Arc::new(SeededRandom::new(seed)));
        self.controller.reset_liveness();
        self.controller_down_until = None;
        self.controller_failovers += 1;
        self.next_tick_ms = self.now_ms;
        for id in BROKERS {
            self.send(
                Node::Controller,
                Node::Broker(id),
                Message::Image(Arc::clone(&self.image)),
            );
        }
        self.note("controller: a new active controller took over".to_owned());
    }

    /// The process dies (kill -9): what it wrote stays in the page cache.
    fn kill(&mut self, id: i32) {
        self.stop(id);
        self.note(format!("fault: broker {id} killed"));
    }

    /// The machine loses power: every byte not fsynced is lost (and the
    /// file system may leave garbage after the last synced byte). Nothing
    /// is fsynced on the produce path by default (Kafka relies on
    /// replication, not fsync), so the victim comes back with little or
    /// nothing. The promise holds while one in-sync replica keeps the
    /// records: a power loss is injected only when every partition has
    /// another ISR member that is up, registered and unfenced, with at
    /// least half its broker session left at the controller, and no other
    /// fault follows until the victim is back out of every ISR
    /// (re-registered). A power loss of the last ISR member loses records,
    /// in Strom as in Kafka before KIP-966; so does one whose only other
    /// ISR member is fenced right after it (a session about to lapse after
    /// an earlier cut): the fence takes that member out of the ISR and
    /// leaves the victim the whole of it (seeds 20779 and 21402 before the
    /// session condition).
    fn power_loss(&mut self, id: i32) {
        let Some(topic) = self.image.topic_by_name(TOPIC) else {
            return;
        };
        let now_ms = self.now_ms as u64;
        // Another ISR member that is up, registered, unfenced and not about
        // to be fenced (a controller that has not heard from it since it
        // became active gives it a whole session).
        let keeper = |member: &i32| {
            *member != id
                && self.brokers[member].alive
                && self.brokers[member].registered().is_some()
                && self.image.broker(*member).is_some_and(|broker| {
                    broker.incarnation_id == self.brokers[member].incarnation && !broker.fenced
                })
                && self
                    .controller
                    .last_heartbeat_ms(*member)
                    .is_none_or(|last| now_ms.saturating_sub(last) <= SESSION_TIMEOUT_MS as u64 / 2)
        };
        let kept = (0..PARTITIONS).all(|index| {
            topic
                .partition(index)
                .is_some_and(|state| state.isr.iter().any(keeper))
        });
        if !kept || !self.cut.is_empty() {
            return;
        }
        let garbage = self.rng.below(64);
        self.stop(id);
        self.brokers[&id]
            .backend
            .crash(garbage)
            .expect("the crash cuts the files");
        self.power_lost = Some((id, self.brokers[&id].incarnation));
        self.note(format!(
            "fault: broker {id} lost power: unsynced bytes gone (+{garbage} garbage)"
        ));
    }

    fn stop(&mut self, id: i32) {
        let broker = self.brokers.get_mut(&id).expect("broker");
        broker.alive = false;
        broker.partitions.clear();
        broker.fetchers.clear();
        broker.fetching.clear();
        broker.waits.clear();
        broker.group = GroupHost::new(broker.incarnation.as_u128() as u64);
        broker.txn = TxnHost::new();
        broker.image = None;
        self.network.retain(|envelope| {
            envelope.to != Node::Broker(id) && envelope.from != Node::Broker(id)
        });
    }

    pub(crate) fn restart(&mut self, id: i32) {
        let dir = self.brokers[&id].dir.clone();
        let broker = self.start_broker(id, dir);
        self.brokers.insert(id, broker);
        self.note(format!("fault: broker {id} restarted"));
    }
}
