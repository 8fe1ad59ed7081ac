//! Timers the core has asked the shell to fire.
//!
//! Owns the table of armed timers, each with a generation so a stale firing (one that was
//! re-armed or cancelled since) is recognised without comparing clocks. Must not sleep or
//! read a clock: it emits `Command::SetTimer` and folds `TimerFired` records.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::command::Command;
use super::uid::Uid;
use crate::core::record::Time;

/// What a timer is for. One armed timer per key: arming a key again replaces it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "timer", rename_all = "snake_case")]
pub enum TimerKey {
    /// The kubelet work queue entry of a pod worker (`workQueue.Enqueue(uid, delay)`): when it
    /// fires, the pod is synced again (`HandlePodSyncs`).
    PodWork {
        /// The pod.
        uid: Uid,
    },
    /// The housekeeping tick (`HandlePodCleanups`).
    Housekeeping,
    /// The status manager's periodic full sync (`syncBatch(true)`, every 10 s).
    StatusSync,
    /// Node status update (`nodeStatusUpdateFrequency`, 10 s).
    NodeStatusUpdate,
    /// Node lease renewal (every 10 s, a quarter of the 40 s lease).
    LeaseRenew,
    /// Retry node registration.
    NodeRegister,
    /// A container's CrashLoopBackOff (or image pull backoff) expires: sync the pod then,
    /// rather than at the next resync (ledgerlet restarts at exactly the backoff).
    BackoffExpiry {
        /// The pod.
        uid: Uid,
    },
    /// The deadline of a `killPodNow` caller waiting for a kill (`ExceededGracePeriod`).
    KillDeadline {
        /// The pod being killed.
        uid: Uid,
        /// The seq of the `UpdatePod` record that asked for the kill.
        request: u64,
    },
    /// A probe worker's tick (the kubelet worker's ticker, every `periodSeconds`).
    Probe {
        /// The pod.
        uid: Uid,
        /// The container's name.
        container: String,
        /// Which probe.
        probe: super::probes::ProbeType,
    },
    /// A pod's `activeDeadlineSeconds` passes (AD-02): sync it then, as the kubelet's sync
    /// loop does for a pod its deadline handler says to sync.
    ActiveDeadline {
        /// The pod.
        uid: Uid,
    },
    /// The non-critical group's budget of a graceful node shutdown ends: the critical pods
    /// are killed then, if they were not already (`core::node_shutdown`).
    NodeShutdownGroup,
    /// Look whether a finished pod's content is gone, and remove it again if not (RT-44).
    PodContentRemoval {
        /// The pod.
        uid: Uid,
    },
}

/// An armed timer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedTimer {
    /// What the timer is for.
    #[serde(flatten)]
    pub key: TimerKey,
    /// Matches the `generation` of the `TimerFired` record that fires it.
    pub generation: u64,
    /// When it is due.
    pub due: Time,
}

/// What the table keeps of an armed timer besides its key (the key is the map's). Kept
/// small: arming and firing insert into and remove from B-tree nodes, moving their entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Armed {
    generation: u64,
    due: Time,
}

impl Armed {
    fn with_key(self, key: &TimerKey) -> ArmedTimer {
        ArmedTimer {
            key: key.clone(),
            generation: self.generation,
            due: self.due,
        }
    }
}

/// The armed timers, keyed by purpose.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timers {
    next_generation: u64,
    #[serde(with = "armed_as_list")]
    armed: BTreeMap<TimerKey, Armed>,
}

impl Timers {
    /// Arms (or re-arms) `key` to fire at `due` and emits the `SetTimer` command.
    pub fn set(&mut self, key: TimerKey, due: Time, out: &mut Vec<Command>) {
        self.next_generation += 1;
        let generation = self.next_generation;
        let armed = Armed { generation, due };
        // re-arming (the common case) updates the entry in place, keeping its key
        let timer = match self.armed.entry(key) {
            Entry::Occupied(mut e) => {
                *e.get_mut() = armed;
                armed.with_key(e.key())
            }
            Entry::Vacant(e) => {
                let t = armed.with_key(e.key());
                e.insert(armed);
                t
            }
        };
        out.push(Command::SetTimer(timer));
    }

    /// Folds a firing: true if `key` was armed with this `generation` (the timer is then
    /// disarmed), false for a stale or unknown firing, which must be ignored.
    pub fn fire(&mut self, key: &TimerKey, generation: u64) -> bool {
        // one search, not a lookup and then a removal (a key clone is a reference count)
        match self.armed.entry(key.clone()) {
            Entry::Occupied(e) if e.get().generation == generation => {
                e.remove();
                true
            }
            _ => false,
        }
    }

    /// Forgets `key` without firing it (its later `TimerFired` is then stale).
    pub fn disarm(&mut self, key: &TimerKey) {
        self.armed.remove(key);
    }

    /// The armed timer for `key`, if any.
    pub fn get(&self, key: &TimerKey) -> Option<ArmedTimer> {
        self.armed.get(key).map(|a| a.with_key(key))
    }

    /// True if `key` is armed.
    pub fn is_armed(&self, key: &TimerKey) -> bool {
        self.armed.contains_key(key)
    }

    /// All armed timers in key order (the shell re-arms these after a restart).
    pub fn armed(&self) -> impl Iterator<Item = ArmedTimer> + '_ {
        self.armed.iter().map(|(k, a)| a.with_key(k))
    }

    /// How many timers are armed.
    pub fn len(&self) -> usize {
        self.armed.len()
    }

    /// True if no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.armed.is_empty()
    }
}

mod armed_as_list {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<TimerKey, Armed>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter().map(|(k, a)| a.with_key(k)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<TimerKey, Armed>, D::Error> {
        let v = Vec::<ArmedTimer>::deserialize(d)?;
        Ok(v.into_iter()
            .map(|t| {
                let armed = Armed {
                    generation: t.generation,
                    due: t.due,
                };
                (t.key, armed)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rearmed_timer_ignores_its_stale_firing() {
        let mut t = Timers::default();
        let mut out = vec![];
        let key = TimerKey::PodWork { uid: Uid::new("a") };
        t.set(key.clone(), Time::from_unix_secs(10), &mut out);
        t.set(key.clone(), Time::from_unix_secs(20), &mut out);
        let gens: Vec<u64> = out
            .iter()
            .map(|c| match c {
                Command::SetTimer(a) => a.generation,
                _ => unreachable!(),
            })
            .collect();
        assert!(!t.fire(&key, gens[0]), "stale generation must not fire");
        assert!(t.fire(&key, gens[1]));
        assert!(!t.fire(&key, gens[1]), "a timer fires once");
    }

    #[test]
    fn timers_round_trip_through_json() {
        let mut t = Timers::default();
        let mut out = vec![];
        t.set(TimerKey::Housekeeping, Time::from_unix_secs(1), &mut out);
        t.set(
            TimerKey::KillDeadline {
                uid: Uid::new("x"),
                request: 7,
            },
            Time::from_unix_secs(2),
            &mut out,
        );
        let json = serde_json::to_string(&t).unwrap();
        let back: Timers = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }
}
