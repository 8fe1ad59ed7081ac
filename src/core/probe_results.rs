//! What the prober has concluded about each container, as the status generator and the
//! runtime plan read it.
//!
//! Owns the read-only view (`ProbeResults`): per container ID, the cached result of each
//! configured probe. A container with no entry has no probe workers, so nothing gates it.
//! Must not run probes: the prober (issue 6) folds `ProbeResult` records into this.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

/// Probe results by container ID.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeResults {
    by_container: BTreeMap<String, ContainerProbes>,
}

impl ProbeResults {
    /// The results for a container (all `None` if it has no probe workers).
    pub fn get(&self, container_id: &str) -> ContainerProbes {
        self.by_container
            .get(container_id)
            .copied()
            .unwrap_or_default()
    }

    /// Sets the results for a container.
    pub fn set(&mut self, container_id: &str, probes: ContainerProbes) {
        self.by_container.insert(container_id.to_string(), probes);
    }

    /// Forgets a container.
    pub fn remove(&mut self, container_id: &str) {
        self.by_container.remove(container_id);
    }
}
