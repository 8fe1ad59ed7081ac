//! `started` and `ready` of each container status from the probe results (PR-15, the prober
//! manager's `UpdatePodStatus`).
//!
//! Owns the rule: Started = Running && (startup Success, or no startup probe); Ready = Started
//! && Running && (readiness Success, or no readiness probe); a regular init container is Ready
//! once it Terminated with exit 0; sidecars follow the regular rule. Must not run probes or
//! trigger them: results are looked up by pod, container name and runtime ID in
//! `ProbeResults` (an instance a worker has not seen yet counts as its initial value), and a
//! container with neither results nor workers has no probes.

use k8s_openapi::api::core::v1::{ContainerStatus as ApiContainerStatus, Pod};

use super::containers::runtime_id;
use super::spec::{self, is_running, terminated};
use crate::core::probe_results::{ContainerProbes, ProbeOutcome, ProbeResults};
use crate::core::uid::Uid;

fn probes_of(uid: &Uid, cs: &ApiContainerStatus, results: &ProbeResults) -> ContainerProbes {
    cs.container_id
        .as_deref()
        .map(|id| results.for_container(uid, &cs.name, runtime_id(id)))
        .unwrap_or_default()
}

/// `isContainerStarted`: Running, and the startup probe (if any) succeeded.
pub fn is_container_started(cs: &ApiContainerStatus, probes: ContainerProbes) -> bool {
    is_running(cs) && probes.startup.is_none_or(|o| o == ProbeOutcome::Success)
}

/// Ready for a regular container or a sidecar: started, running, and the readiness probe (if
/// any) succeeded.
pub fn is_container_ready(cs: &ApiContainerStatus, probes: ContainerProbes) -> bool {
    is_container_started(cs, probes) && probes.readiness.is_none_or(|o| o == ProbeOutcome::Success)
}

/// Sets `started` on every regular and init status and `ready` per PR-15. Ephemeral
/// container statuses are left alone (no probes, never ready), as upstream.
pub fn apply_probe_results(
    pod: &Pod,
    regular: &mut [ApiContainerStatus],
    init: &mut [ApiContainerStatus],
    results: &ProbeResults,
) {
    let uid = crate::core::pod::uid(pod);
    for cs in regular.iter_mut() {
        let probes = probes_of(&uid, cs, results);
        cs.started = Some(is_container_started(cs, probes));
        cs.ready = is_container_ready(cs, probes);
    }
    let specs = spec::init_containers(pod);
    for cs in init.iter_mut() {
        let probes = probes_of(&uid, cs, results);
        cs.started = Some(is_container_started(cs, probes));
        let sidecar = specs
            .iter()
            .find(|c| c.name == cs.name)
            .is_some_and(spec::is_sidecar);
        cs.ready = if sidecar {
            is_container_ready(cs, probes)
        } else {
            terminated(cs).is_some_and(|t| t.exit_code == 0)
        };
    }
}
