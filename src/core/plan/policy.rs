//! Restart-policy questions about one container (kubelet `ShouldContainerBeRestarted`,
//! `shouldRestartOnFailure`, `containerSucceeded`, `isInitContainerFailed`,
//! `IsRestartableInitContainer`) and the spec lookups the plan shares.
//!
//! Owns the answers for a single container. Must not look at more than one container's
//! status at a time: sequencing across containers is `init` and `compute`.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use crate::core::runtime_status::{ContainerState, ContainerStatus, RuntimePodStatus};

/// The pod's restart policy (`spec.restartPolicy`; unset means the API default `Always`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

/// The spec of a pod without one: `PodSpec::default()` as a constant (an immutable value,
/// not state; `tests` checks it equals the default).
static EMPTY_SPEC: PodSpec = PodSpec {
    active_deadline_seconds: None,
    affinity: None,
    automount_service_account_token: None,
    containers: Vec::new(),
    dns_config: None,
    dns_policy: None,
    enable_service_links: None,
    ephemeral_containers: None,
    eviction_responders: None,
    host_aliases: None,
    host_ipc: None,
    host_network: None,
    host_pid: None,
    host_users: None,
    hostname: None,
    hostname_override: None,
    image_pull_secrets: None,
    init_containers: None,
    node_name: None,
    node_selector: None,
    os: None,
    overhead: None,
    preemption_policy: None,
    priority: None,
    priority_class_name: None,
    readiness_gates: None,
    resource_claims: None,
    resources: None,
    restart_policy: None,
    runtime_class_name: None,
    scheduler_name: None,
    scheduling_gates: None,
    scheduling_group: None,
    security_context: None,
    service_account: None,
    service_account_name: None,
    set_hostname_as_fqdn: None,
    share_process_namespace: None,
    subdomain: None,
    termination_grace_period_seconds: None,
    tolerations: None,
    topology_spread_constraints: None,
    volumes: None,
};

/// The spec of a pod, or an empty one.
pub(crate) fn spec(pod: &Pod) -> &PodSpec {
    pod.spec.as_ref().unwrap_or(&EMPTY_SPEC)
}

/// `spec.initContainers` (empty if unset).
pub(crate) fn init_containers(spec: &PodSpec) -> &[Container] {
    spec.init_containers.as_deref().unwrap_or(&[])
}

/// The pod's restart policy; anything but `Never` and `OnFailure` behaves as `Always`,
/// as in the kubelet.
pub(crate) fn restart_policy(spec: &PodSpec) -> RestartPolicy {
    match spec.restart_policy.as_deref() {
        Some("Never") => RestartPolicy::Never,
        Some("OnFailure") => RestartPolicy::OnFailure,
        _ => RestartPolicy::Always,
    }
}

/// `shouldRestartOnFailure`: the policy is not `Never`.
pub(crate) fn restart_on_failure(spec: &PodSpec) -> bool {
    restart_policy(spec) != RestartPolicy::Never
}

/// `podutil.IsRestartableInitContainer`: an init container with `restartPolicy: Always`
/// (a sidecar).
pub fn is_restartable_init_container(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// `PodStatus.FindContainerStatusByName`: the newest instance with that name.
pub(crate) fn find_status<'a>(rt: &'a RuntimePodStatus, name: &str) -> Option<&'a ContainerStatus> {
    rt.containers.iter().find(|c| c.name == name)
}

/// `containerSucceeded`: the newest instance is not running and exited 0 (a `Created`
/// instance counts too, as upstream).
pub(crate) fn container_succeeded(c: &Container, rt: &RuntimePodStatus) -> bool {
    match find_status(rt, &c.name) {
        None => false,
        Some(s) if s.state == ContainerState::Running => false,
        Some(s) => s.exit_code == 0,
    }
}

/// `isInitContainerFailed`: OOM-killed, exited non-zero, or unknown.
pub(crate) fn is_init_container_failed(s: &ContainerStatus) -> bool {
    s.reason == "OOMKilled"
        || (s.state == ContainerState::Exited && s.exit_code != 0)
        || s.state == ContainerState::Unknown
}

/// `ShouldContainerBeRestarted` for a regular container: never for a pod being deleted;
/// always if it never ran (or its instances were garbage collected) or is `Created` or
/// `Unknown`; never while running; otherwise by the pod's restart policy and exit code.
pub fn should_container_be_restarted(c: &Container, pod: &Pod, rt: &RuntimePodStatus) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(s) = find_status(rt, &c.name) else {
        return true;
    };
    match s.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited => match restart_policy(spec(pod)) {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => s.exit_code != 0,
            RestartPolicy::Always => true,
        },
    }
}

#[cfg(test)]
mod empty_spec_tests {
    use super::*;

    #[test]
    fn a_pod_without_a_spec_reads_as_the_default_spec() {
        assert_eq!(EMPTY_SPEC, PodSpec::default());
        assert_eq!(spec(&Pod::default()), &PodSpec::default());
    }
}
