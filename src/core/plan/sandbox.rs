//! Whether the pod needs a new sandbox (kubelet `PodSandboxChanged`).
//!
//! Owns the sandbox verdict and the attempt number, for the runtime plan and for the status's
//! PodReadyToStartContainers condition alike. Must not look at containers: what a new
//! sandbox means for them is decided in `compute`.

use k8s_openapi::api::core::v1::Pod;

use super::policy::spec;
use crate::core::runtime_status::{RuntimePodStatus, SandboxState};

/// `PodSandboxChanged`: `(changed, attempt, sandbox_id)`.
///
/// The newest sandbox is the latest created ([`RuntimePodStatus::newest_sandbox`]).
///
/// * No sandbox → `(true, 0, "")` (a new pod).
/// * More than one ready sandbox, or the newest not ready → recreate with the highest
///   attempt seen + 1, keeping the newest sandbox's ID (so the shell emits
///   `SandboxChanged`).
/// * The newest sandbox's network namespace mode differs from `spec.hostNetwork` →
///   recreate with attempt + 1 and an empty ID (no `SandboxChanged` event).
/// * A non-host-network pod whose newest sandbox reports a network status with an empty IP →
///   recreate, keeping the ID (no network status at all is left alone).
/// * Otherwise `(false, highest attempt, newest ID)`.
pub fn pod_sandbox_changed(pod: &Pod, runtime: &RuntimePodStatus) -> (bool, u32, String) {
    let Some(newest) = runtime.newest_sandbox() else {
        return (true, 0, String::new());
    };
    let max_attempt = runtime
        .sandboxes
        .iter()
        .map(|s| s.attempt)
        .max()
        .unwrap_or(0);
    let next = max_attempt.saturating_add(1);
    let ready = runtime
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::SandboxReady)
        .count();
    if ready > 1 || newest.state != SandboxState::SandboxReady {
        return (true, next, newest.id.clone());
    }
    let host_network = spec(pod).host_network == Some(true);
    if newest.host_network != host_network {
        return (true, next, String::new());
    }
    if !host_network && newest.has_empty_network_ip() {
        return (true, next, newest.id.clone());
    }
    (false, max_attempt, newest.id.clone())
}
