//! The API status of a pod, generated from its spec, the runtime's view, the probe results and
//! the last start failures (kubelet `generateAPIPodStatus`, `convertToAPIContainerStatuses`,
//! `getPhase` and the pod conditions; BEHAVIOUR §C and §D, PR-15).
//!
//! Owns the pure function from `StatusInputs` to a `PodStatus`. Must not do I/O, read a
//! clock (`now` is an input), hold state, or decide what happens to the pod: the status
//! manager (`core::status`) decides what reaches the API (merging, version bumps, SM-04
//! transition times), the runtime plan decides what runs.
//!
//! Transition times: every kubelet-generated condition (PodReadyToStartContainers,
//! Initialized, Ready, ContainersReady, PodScheduled) carries `lastTransitionTime = now`;
//! copied conditions keep theirs. Keeping the old time of an unchanged condition is the status
//! manager's step, as in the kubelet.

pub(crate) mod api_time;
pub mod conditions;
pub mod containers;
mod generate;
pub mod network;
pub mod phase;
pub mod qos;
pub mod quantity;
pub mod readiness;
pub mod spec;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus as ApiContainerStatus, Pod, PodStatus};

use super::probe_results::ProbeResults;
use super::reason_cache::StartFailure;
use super::runtime_status::RuntimePodStatus;
use crate::core::record::time::Time;

pub use api_time::{from_api as time_from_api, to_api as time_to_api};
pub use containers::{container_id, convert_container_status, should_container_be_restarted};
pub use network::pod_sandbox_changed;
pub use qos::pod_qos_class;

/// Everything `generate_api_pod_status` reads.
#[derive(Clone, Copy, Debug)]
pub struct StatusInputs<'a> {
    /// The pod: its spec, and as `pod.status` the API (pod manager) status.
    pub pod: &'a Pod,
    /// The runtime's view: containers and sandboxes, newest first.
    pub runtime: &'a RuntimePodStatus,
    /// The status manager's cached status for the pod, if any.
    pub cached: Option<&'a PodStatus>,
    /// Probe results by runtime container ID (the `<id>` of `<runtime>://<id>`); a container
    /// with no entry has no probe workers.
    pub probes: &'a ProbeResults,
    /// The reason cache for this pod: last failed start by container name.
    pub start_failures: Option<&'a BTreeMap<String, StartFailure>>,
    /// SyncTerminatingPod / SyncTerminatedPod pass true: nothing will restart.
    pub pod_is_terminal: bool,
    /// The pod is a static pod (never made terminal by `pod_is_terminal` alone, PH-09).
    pub is_static: bool,
    /// The time of the record being folded.
    pub now: Time,
    /// The runtime's name, the scheme of container IDs (`containerd` → `containerd://<id>`).
    pub runtime_name: &'a str,
    /// The node's IP, if known: `hostIP`/`hostIPs`, the pod IP family preference, and the pod
    /// IP of a host-network pod. `None` keeps the old status's host IPs.
    pub host_ip: Option<&'a str>,
    /// A pod sync handler asked for eviction (e.g. activeDeadlineSeconds): `(reason,
    /// message)`, forcing phase Failed (GS-11).
    pub evict: Option<(&'a str, &'a str)>,
}

/// `generateAPIPodStatus`: phase, reason and message, conditions, container / init /
/// ephemeral statuses, pod and host IPs, start time and QoS class.
///
/// Container statuses are sorted by name (regular and ephemeral) or in spec order (init).
/// Conditions come in this order: the API's non-kubelet conditions, DisruptionTarget (from the
/// cached status, else the API's), PodReadyToStartContainers, Initialized, Ready,
/// ContainersReady, PodScheduled.
pub fn generate_api_pod_status(inputs: &StatusInputs) -> PodStatus {
    generate::generate(inputs)
}

/// `getPhase`; see [`phase::get_phase`].
pub fn get_phase(
    pod: &Pod,
    all_statuses: &[ApiContainerStatus],
    init_statuses: &[ApiContainerStatus],
    pod_is_terminal: bool,
    is_static: bool,
) -> String {
    phase::get_phase(pod, all_statuses, init_statuses, pod_is_terminal, is_static)
}
