//! What a probe is configured to do, read from the pod spec with the API's defaults.
//!
//! Owns `ProbeType`, the defaulted timings and thresholds (`ProbeSettings`), and which
//! containers of a pod get probe workers (regular containers and sidecars, as the kubelet's
//! `AddPod`). Must not decide anything about results: that is `worker`.

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use serde::{Deserialize, Serialize};

use crate::core::pod_status::spec::{containers, init_containers, is_sidecar};
use crate::core::probe_results::{ContainerProbes, ProbeOutcome};

/// `periodSeconds` when unset or 0 (API default).
pub const DEFAULT_PERIOD_S: i32 = 10;
/// `timeoutSeconds` when unset or 0 (API default).
pub const DEFAULT_TIMEOUT_S: i32 = 1;
/// `successThreshold` when unset or 0 (API default).
pub const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
/// `failureThreshold` when unset or 0 (API default).
pub const DEFAULT_FAILURE_THRESHOLD: i32 = 3;

/// Which probe (kubelet `probeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeType {
    /// `livenessProbe`: a failure kills the container.
    Liveness,
    /// `readinessProbe`: decides `ready`.
    Readiness,
    /// `startupProbe`: gates the other two; a failure kills the container.
    Startup,
}

impl ProbeType {
    /// Every probe type, in the kubelet's order.
    pub const ALL: [ProbeType; 3] = [
        ProbeType::Liveness,
        ProbeType::Readiness,
        ProbeType::Startup,
    ];

    /// The kubelet's `probeType.String()`: `Liveness`, `Readiness`, `Startup` (Events and
    /// the `probe_type` metric label).
    pub fn label(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The lower-case name used in ledger records and timer keys.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeType::Liveness => "liveness",
            ProbeType::Readiness => "readiness",
            ProbeType::Startup => "startup",
        }
    }

    /// PR-01: the result a worker sets when it first sees a container instance.
    pub fn initial_value(self) -> ProbeOutcome {
        match self {
            ProbeType::Liveness => ProbeOutcome::Success,
            ProbeType::Readiness => ProbeOutcome::Failure,
            ProbeType::Startup => ProbeOutcome::Unknown,
        }
    }

    /// The container's probe of this type, if configured.
    pub fn of(self, c: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => c.liveness_probe.as_ref(),
            ProbeType::Readiness => c.readiness_probe.as_ref(),
            ProbeType::Startup => c.startup_probe.as_ref(),
        }
    }
}

impl std::fmt::Display for ProbeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A probe's timings and thresholds with the API defaults applied (0 or unset means the
/// default, as `SetDefaults_Probe` leaves it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSettings {
    /// `initialDelaySeconds` (0).
    pub initial_delay_s: i32,
    /// `periodSeconds` (10).
    pub period_s: i32,
    /// `timeoutSeconds` (1).
    pub timeout_s: i32,
    /// `successThreshold` (1; always 1 for liveness and startup).
    pub success_threshold: i32,
    /// `failureThreshold` (3).
    pub failure_threshold: i32,
}

impl ProbeSettings {
    /// The defaulted settings of `p` for a probe of type `probe`.
    pub fn of(probe: ProbeType, p: &Probe) -> ProbeSettings {
        let positive = |v: Option<i32>, default: i32| v.filter(|v| *v > 0).unwrap_or(default);
        let success = match probe {
            // validation requires 1; anything else would never let the result settle
            ProbeType::Liveness | ProbeType::Startup => 1,
            ProbeType::Readiness => positive(p.success_threshold, DEFAULT_SUCCESS_THRESHOLD),
        };
        ProbeSettings {
            initial_delay_s: p.initial_delay_seconds.unwrap_or(0).max(0),
            period_s: positive(p.period_seconds, DEFAULT_PERIOD_S),
            timeout_s: positive(p.timeout_seconds, DEFAULT_TIMEOUT_S),
            success_threshold: success,
            failure_threshold: positive(p.failure_threshold, DEFAULT_FAILURE_THRESHOLD),
        }
    }

    /// The period in milliseconds.
    pub fn period_ms(&self) -> u64 {
        self.period_s.max(1) as u64 * 1000
    }
}

/// The containers of `pod` that can have probe workers: regular containers, then sidecars
/// (init containers with `restartPolicy: Always`). Plain init containers have no probes.
pub fn probed_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    containers(pod)
        .iter()
        .chain(init_containers(pod).iter().filter(|c| is_sidecar(c)))
}

/// The spec of container `name` among the probed containers.
pub fn probed_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    probed_containers(pod).find(|c| c.name == name)
}

/// The initial values of the probes a container has (what an instance its workers have not
/// seen yet counts as, PR-01).
pub fn initial_values(c: &Container) -> ContainerProbes {
    let initial = |t: ProbeType| t.of(c).map(|_| t.initial_value());
    ContainerProbes {
        liveness: initial(ProbeType::Liveness),
        readiness: initial(ProbeType::Readiness),
        startup: initial(ProbeType::Startup),
    }
}
