//! What the prober has concluded about each container, as the status generator and the
//! runtime plan read it.
//!
//! Owns the read-only view (`ProbeResults`): per container ID, the cached result of each
//! configured probe, and which containers have probe workers (by pod and name) with their
//! initial values, so that an instance its workers have not seen yet already counts as
//! not ready / not started (PR-01, the kubelet's "a worker exists" check). A container with
//! neither has no probe workers, so nothing gates it. Must not run probes: `core::probes`
//! folds `ProbeResult` records into this.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::probes::ProbeType;
use super::uid::Uid;

/// A probe's cached result (kubelet `proberesults.Result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeOutcome {
    /// The probe succeeded.
    Success,
    /// The probe failed (after its failure threshold).
    Failure,
    /// No conclusion yet (startup probes start here).
    Unknown,
}

/// The results of one container's probes; `None` means that probe is not configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerProbes {
    /// Liveness (initially `Success` once configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<ProbeOutcome>,
    /// Readiness (initially `Failure` once configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ProbeOutcome>,
    /// Startup (initially `Unknown` once configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<ProbeOutcome>,
}

impl ContainerProbes {
    /// The result of one probe type.
    pub fn get(&self, probe: ProbeType) -> Option<ProbeOutcome> {
        match probe {
            ProbeType::Liveness => self.liveness,
            ProbeType::Readiness => self.readiness,
            ProbeType::Startup => self.startup,
        }
    }

    fn slot(&mut self, probe: ProbeType) -> &mut Option<ProbeOutcome> {
        match probe {
            ProbeType::Liveness => &mut self.liveness,
            ProbeType::Readiness => &mut self.readiness,
            ProbeType::Startup => &mut self.startup,
        }
    }

    fn is_empty(&self) -> bool {
        self.liveness.is_none() && self.readiness.is_none() && self.startup.is_none()
    }
}

/// Probe results by container ID.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeResults {
    by_container: BTreeMap<String, ContainerProbes>,
    /// Containers with probe workers, by pod and container name: the initial value of each
    /// probe type that has a worker.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    workers: BTreeMap<Uid, BTreeMap<String, ContainerProbes>>,
    /// Increases on every change (a cheap "did anything change?" for the status memo).
    #[serde(default, skip_serializing_if = "is_zero")]
    generation: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ProbeResults {
    /// The results for a container (all `None` if it has no probe workers).
    pub fn get(&self, container_id: &str) -> ContainerProbes {
        self.by_container
            .get(container_id)
            .copied()
            .unwrap_or_default()
    }

    /// Increases on every change of any result or worker.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Sets the results for a container.
    pub fn set(&mut self, container_id: &str, probes: ContainerProbes) {
        if self.by_container.get(container_id) != Some(&probes) {
            self.generation += 1;
            self.by_container.insert(container_id.to_string(), probes);
        }
    }

    /// Forgets a container.
    pub fn remove(&mut self, container_id: &str) {
        if self.by_container.remove(container_id).is_some() {
            self.generation += 1;
        }
    }

    /// Sets one probe's result for a container (`resultsManager.Set`).
    pub fn set_one(&mut self, container_id: &str, probe: ProbeType, outcome: ProbeOutcome) {
        let slot = self
            .by_container
            .entry(container_id.to_string())
            .or_default()
            .slot(probe);
        if *slot != Some(outcome) {
            *slot = Some(outcome);
            self.generation += 1;
        }
    }

    /// Forgets one probe's result for a container (`resultsManager.Remove`).
    pub fn remove_one(&mut self, container_id: &str, probe: ProbeType) {
        if let Some(c) = self.by_container.get_mut(container_id) {
            if c.slot(probe).take().is_some() {
                self.generation += 1;
            }
            if c.is_empty() {
                self.by_container.remove(container_id);
            }
        }
    }

    /// Records which probe workers container `name` of pod `uid` has, as their initial
    /// values (all `None`: it has none).
    pub fn set_workers(&mut self, uid: &Uid, name: &str, initial: ContainerProbes) {
        if initial.is_empty() {
            if let Some(m) = self.workers.get_mut(uid) {
                if m.remove(name).is_some() {
                    self.generation += 1;
                }
                if m.is_empty() {
                    self.workers.remove(uid);
                }
            }
        } else {
            let m = self.workers.entry(uid.clone()).or_default();
            if m.get(name) != Some(&initial) {
                m.insert(name.to_string(), initial);
                self.generation += 1;
            }
        }
    }

    /// The results that decide `started` and `ready` for container `name` of pod `uid`
    /// running as `container_id`: the cached result of each probe, or, for a probe whose
    /// worker has not recorded anything for this instance yet, its initial value.
    pub fn for_container(&self, uid: &Uid, name: &str, container_id: &str) -> ContainerProbes {
        let cached = self.get(container_id);
        let initial = self
            .workers
            .get(uid)
            .and_then(|m| m.get(name))
            .copied()
            .unwrap_or_default();
        ContainerProbes {
            liveness: cached.liveness.or(initial.liveness),
            readiness: cached.readiness.or(initial.readiness),
            startup: cached.startup.or(initial.startup),
        }
    }
}
