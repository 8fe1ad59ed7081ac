//! The prober (kubelet `pkg/kubelet/prober`): liveness, readiness and startup probe workers
//! as pure state, and the consequences of their results.
//!
//! Owns the workers (`Probers`: one per pod, container and probe type), their scheduling
//! (one `TimerKey::Probe` timer each, the first run jittered from the record's seq when the
//! agent started less than a period ago, PR-14), the `RunProbe` commands, the fold of
//! `ProbeFinished` (thresholds, on hold, Events) and of `ProbeResult` (the cached result in
//! `ProbeResults`, `SetContainerReadiness`, `SetContainerStartup`, and the pod sync that
//! makes the runtime plan kill a container whose liveness or startup probe failed).
//! Must not run probes, wait or read a clock: the shell runs each probe as a task and
//! reports `ProbeFinished`; a result changes only when a `ProbeResult` record is folded.

mod manager;
pub mod records;
pub mod spec;
pub mod worker;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use records::{
    ProbeCommand, ProbeFinished, ProbeResult, ResultReason, RunResult, MAX_RECORDED_OUTPUT_BYTES,
};
pub use spec::{ProbeSettings, ProbeType};
pub use worker::{ProbeWorker, WorkerPhase};

use super::timers::TimerKey;
use super::uid::Uid;
use crate::core::record::Time;

/// Identifies a worker: pod, container name, probe type (kubelet `probeKey`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkerKey {
    /// The pod.
    pub uid: Uid,
    /// The container's name.
    pub container: String,
    /// Which probe.
    pub probe: ProbeType,
}

impl WorkerKey {
    /// The worker's timer.
    pub fn timer(&self) -> TimerKey {
        TimerKey::Probe {
            uid: self.uid.clone(),
            container: self.container.clone(),
            probe: self.probe,
        }
    }

    /// The jitter key (PR-14).
    fn jitter_key(&self) -> String {
        format!("{}/{}/{}", self.uid, self.container, self.probe.as_str())
    }
}

/// Every probe worker on the node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Probers {
    /// When the agent last started (its `ConfigApplied`): workers created less than one
    /// period after it jitter their first run (PR-14).
    #[serde(default)]
    pub started_at: Time,
    #[serde(default, with = "workers_as_list")]
    workers: BTreeMap<WorkerKey, ProbeWorker>,
}

impl Probers {
    /// The worker for `key`, if any.
    pub fn get(&self, key: &WorkerKey) -> Option<&ProbeWorker> {
        self.workers.get(key)
    }

    /// Every worker, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&WorkerKey, &ProbeWorker)> {
        self.workers.iter()
    }

    /// The workers of one pod, in key order.
    pub fn of_pod<'a>(
        &'a self,
        uid: &'a Uid,
    ) -> impl Iterator<Item = (&'a WorkerKey, &'a ProbeWorker)> + 'a {
        // keys sort by pod first: one range walk, not a scan of every worker
        let first = WorkerKey {
            uid: uid.clone(),
            container: String::new(),
            probe: ProbeType::Liveness,
        };
        self.workers
            .range(first..)
            .take_while(move |(k, _)| &k.uid == uid)
    }

    #[cfg(test)]
    pub(crate) fn workers_mut(&mut self) -> &mut BTreeMap<WorkerKey, ProbeWorker> {
        &mut self.workers
    }

    /// How many workers exist.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// True if there are no workers.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }
}

mod workers_as_list {
    use super::*;
    use serde::{Deserializer, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Entry {
        #[serde(flatten)]
        key: WorkerKey,
        worker: ProbeWorker,
    }

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<WorkerKey, ProbeWorker>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter().map(|(k, w)| Entry {
            key: k.clone(),
            worker: w.clone(),
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<WorkerKey, ProbeWorker>, D::Error> {
        let v = Vec::<Entry>::deserialize(d)?;
        Ok(v.into_iter().map(|e| (e.key, e.worker)).collect())
    }
}
