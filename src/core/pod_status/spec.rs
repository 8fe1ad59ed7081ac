//! Read-only views of the pod spec and of API container statuses that status generation needs.
//!
//! Owns the restart policy, the sidecar test (`restartPolicy: Always` on an init container),
//! host networking, readiness gates, and the small questions asked of an API
//! `ContainerStatus` (running? terminated with which code?). Must not decide anything: the
//! rules live in `phase`, `conditions`, `containers` and `readiness`.

use k8s_openapi::api::core::v1::{
    Container, ContainerStateTerminated, ContainerStatus as ApiContainerStatus, Pod,
};

/// A pod's (or a sidecar's) restart policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPolicy {
    /// `Always` (the API default).
    Always,
    /// `OnFailure`: restart only after a non-zero exit.
    OnFailure,
    /// `Never`.
    Never,
}

/// The pod's `spec.restartPolicy`; unset or unrecognised reads as `Always` (the API default).
pub fn restart_policy(pod: &Pod) -> RestartPolicy {
    match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
        Some("Never") => RestartPolicy::Never,
        Some("OnFailure") => RestartPolicy::OnFailure,
        _ => RestartPolicy::Always,
    }
}

/// `IsRestartableInitContainer`: an init container with `restartPolicy: Always` (a sidecar).
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The init containers in spec order.
pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[])
}

/// The regular containers in spec order.
pub fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| s.containers.as_slice())
}

/// True if the pod has at least one init container (regular or sidecar).
pub fn has_init_containers(pod: &Pod) -> bool {
    !init_containers(pod).is_empty()
}

/// `spec.hostNetwork`.
pub fn is_host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// The condition types named by `spec.readinessGates`, in spec order.
pub fn readiness_gates(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or(&[])
        .iter()
        .map(|g| g.condition_type.as_str())
}

/// `podutil.GetContainerStatus`: the first status with this name.
pub fn find_status<'s>(
    statuses: &'s [ApiContainerStatus],
    name: &str,
) -> Option<&'s ApiContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// `State.Running != nil`.
pub fn is_running(cs: &ApiContainerStatus) -> bool {
    cs.state.as_ref().is_some_and(|s| s.running.is_some())
}

/// `State.Waiting != nil`.
pub fn is_waiting(cs: &ApiContainerStatus) -> bool {
    cs.state.as_ref().is_some_and(|s| s.waiting.is_some())
}

/// `State.Terminated`.
pub fn terminated(cs: &ApiContainerStatus) -> Option<&ContainerStateTerminated> {
    cs.state.as_ref().and_then(|s| s.terminated.as_ref())
}

/// `LastTerminationState.Terminated`.
pub fn last_terminated(cs: &ApiContainerStatus) -> Option<&ContainerStateTerminated> {
    cs.last_state.as_ref().and_then(|s| s.terminated.as_ref())
}

/// `Started != nil && *Started`.
pub fn is_started(cs: &ApiContainerStatus) -> bool {
    cs.started == Some(true)
}
