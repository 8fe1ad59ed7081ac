//! The pod-level plan (kubelet `computePodActions`, SidecarContainers variant).
//!
//! Owns the order of the decisions: sandbox first, then ephemeral containers, init
//! containers, and the regular containers with their kill reasons. Must not plan in-place
//! resizes (not supported: a resource change is a spec change, RT-10).

use k8s_openapi::api::core::v1::Pod;

use super::hash::spec_changed;
use super::init::{compute_init_container_actions, has_any_regular_container_created};
use super::policy::{
    container_succeeded, find_status, init_containers, restart_on_failure, restart_policy,
    should_container_be_restarted, spec, RestartPolicy,
};
use super::sandbox::pod_sandbox_changed;
use super::types::{ContainerKind, ContainerToKill, KillReason, PodActions};
use crate::core::probe_results::{ProbeOutcome, ProbeResults};
use crate::core::runtime_status::{ContainerState, RuntimePodStatus};

/// `computePodActions`: what to do to bring the runtime's view of `pod` in line with its
/// spec, given the prober's current results.
pub fn compute_pod_actions(
    pod: &Pod,
    runtime: &RuntimePodStatus,
    probes: &ProbeResults,
) -> PodActions {
    let spec = spec(pod);
    let (create_sandbox, attempt, sandbox_id) = pod_sandbox_changed(pod, runtime);
    let mut a = PodActions {
        kill_pod: create_sandbox,
        create_sandbox,
        sandbox_id,
        attempt,
        ..PodActions::default()
    };

    // A new sandbox means everything is killed and started again from the first init
    // container (RT-02, RT-07, RT-23).
    if create_sandbox {
        if !restart_on_failure(spec) && attempt != 0 && !runtime.containers.is_empty() {
            // RestartPolicy Never with containers that already ran: do not bring the pod
            // back, only kill it (RT-14, RT-26). With no containers at all it never ran,
            // so the sandbox is retried (RT-16).
            a.create_sandbox = false;
            return a;
        }
        let on_failure = restart_policy(spec) == RestartPolicy::OnFailure;
        let to_start: Vec<usize> = spec
            .containers
            .iter()
            .enumerate()
            .filter(|(_, c)| !(on_failure && container_succeeded(c, runtime)))
            .map(|(i, _)| i)
            .collect();
        if to_start.is_empty() && has_any_regular_container_created(spec, runtime) {
            // Initialized before and nothing left to run: just kill (RT-15).
            a.create_sandbox = false;
            return a;
        }
        if !init_containers(spec).is_empty() {
            a.init_containers_to_start = vec![0];
            return a;
        }
        a.containers_to_start = to_start;
        return a;
    }

    // Ephemeral containers may start before initialization completes; never restarted.
    for (i, e) in spec.ephemeral_containers.iter().flatten().enumerate() {
        if find_status(runtime, &e.name).is_none() {
            a.ephemeral_containers_to_start.push(i);
        }
    }

    let initialized = compute_init_container_actions(spec, runtime, probes, &mut a);
    if a.kill_pod || !initialized {
        return a;
    }

    // Containers that are running and stay running.
    let mut keep = 0usize;
    for (idx, c) in spec.containers.iter().enumerate() {
        let status = find_status(runtime, &c.name);
        let Some(s) = status.filter(|s| s.state == ContainerState::Running) else {
            if should_container_be_restarted(c, pod, runtime) {
                a.containers_to_start.push(idx);
                if let Some(s) = status.filter(|s| s.state == ContainerState::Unknown) {
                    // It may still be running: kill it before starting another (RT-17).
                    a.containers_to_kill.insert(
                        s.id.clone(),
                        ContainerToKill {
                            name: s.name.clone(),
                            kind: ContainerKind::Regular,
                            reason: KillReason::UnknownState,
                            message:
                                "Container is in \"unknown\" state, try killing it before restart"
                                    .to_string(),
                        },
                    );
                }
            }
            continue;
        };

        let results = probes.get(&s.id);
        let mut restart = restart_on_failure(spec);
        let (reason, message) = if spec_changed(c, &s.hash) {
            // A new spec is applied whatever the restart policy (RT-10).
            restart = true;
            (
                KillReason::SpecChanged,
                format!("Container {} definition changed", c.name),
            )
        } else if results.liveness == Some(ProbeOutcome::Failure) {
            (
                KillReason::LivenessFailed,
                format!("Container {} failed liveness probe", c.name),
            )
        } else if results.startup == Some(ProbeOutcome::Failure) {
            (
                KillReason::StartupFailed,
                format!("Container {} failed startup probe", c.name),
            )
        } else {
            keep += 1;
            continue;
        };
        let message = if restart {
            a.containers_to_start.push(idx);
            format!("{message}, will be restarted")
        } else {
            message
        };
        a.containers_to_kill.insert(
            s.id.clone(),
            ContainerToKill {
                name: s.name.clone(),
                kind: ContainerKind::Regular,
                reason,
                message,
            },
        );
    }

    // Nothing left running and nothing to start: stop the pod, and do not restart the
    // sidecars, which must not keep it alive (RT-13, RT-19, RT-33).
    if keep == 0 && a.containers_to_start.is_empty() {
        a.kill_pod = true;
        a.init_containers_to_start.clear();
    }
    a
}
