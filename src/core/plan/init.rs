//! Init container and sidecar sequencing (kubelet `computeInitContainerActions`,
//! SidecarContainers variant, and `hasAnyRegularContainerCreated`).
//!
//! Owns which init containers start next, which sidecars are killed and restarted, and
//! whether the pod counts as initialized. Must not plan regular containers: that is
//! `compute`, which only runs once this says the pod is initialized.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::hash::spec_changed;
use super::policy::{
    find_status, init_containers, is_init_container_failed, is_restartable_init_container,
    restart_on_failure,
};
use super::types::{ContainerKind, ContainerToKill, KillReason, PodActions};
use crate::core::probe_results::{ProbeOutcome, ProbeResults};
use crate::core::runtime_status::{ContainerState, ContainerStatus, RuntimePodStatus};

/// `hasAnyRegularContainerCreated`: a regular container has a Created, Running or Exited
/// instance, so initialization completed at some point (used when the sandbox is
/// recreated).
pub(crate) fn has_any_regular_container_created(spec: &PodSpec, rt: &RuntimePodStatus) -> bool {
    spec.containers.iter().any(|c| {
        matches!(
            find_status(rt, &c.name).map(|s| s.state),
            Some(ContainerState::Created | ContainerState::Running | ContainerState::Exited)
        )
    })
}

/// `computeInitContainerActions`: fills `init_containers_to_start` and the sidecar kills of
/// `a` (or sets `kill_pod` when a regular init container failed under `Never`), and
/// returns true if the pod has been initialized.
///
/// The init containers are walked from the last to the first, because completed ones may
/// have been garbage collected: the last one with a status tells how far initialization
/// got (RT-28). A Running or Created regular container proves initialization; an Exited
/// one does not (after a node reboot everything is exited, RT-29).
pub(crate) fn compute_init_container_actions(
    spec: &PodSpec,
    rt: &RuntimePodStatus,
    probes: &ProbeResults,
    a: &mut PodActions,
) -> bool {
    let inits = init_containers(spec);
    if inits.is_empty() {
        return true;
    }
    let mut walk = Walk {
        last: inits.len() - 1,
        initialized: spec.containers.iter().any(|c| {
            matches!(
                find_status(rt, &c.name).map(|s| s.state),
                Some(ContainerState::Created | ContainerState::Running)
            )
        }),
        previously_initialized: false,
        restart_on_failure: restart_on_failure(spec),
        starts: Vec::new(),
        probes,
        actions: a,
    };
    walk.previously_initialized = walk.initialized;

    for (i, c) in inits.iter().enumerate().rev() {
        let sidecar = is_restartable_init_container(c);
        let Some(s) = find_status(rt, &c.name) else {
            // Its status is gone (garbage collected): only a sidecar must be brought back.
            if walk.previously_initialized && sidecar {
                walk.starts.push(i);
            }
            continue;
        };
        if walk.previously_initialized && !sidecar {
            // After initialization only sidecars are kept running.
            continue;
        }
        let step = if sidecar {
            walk.sidecar(i, c, s)
        } else {
            walk.init(i, c, s)
        };
        if step == Step::KillPod {
            walk.actions.kill_pod = true;
            walk.actions.init_containers_to_start.clear();
            return false;
        }
        walk.previously_initialized = true;
    }
    if !walk.previously_initialized {
        // Nothing started yet: start the first one.
        walk.starts.push(0);
    }
    let Walk {
        mut starts,
        initialized,
        ..
    } = walk;
    starts.reverse();
    a.init_containers_to_start = starts;
    initialized
}

#[derive(Debug, PartialEq, Eq)]
enum Step {
    Next,
    KillPod,
}

struct Walk<'a> {
    last: usize,
    initialized: bool,
    previously_initialized: bool,
    restart_on_failure: bool,
    /// Indices to start, collected from the last init container backwards.
    starts: Vec<usize>,
    probes: &'a ProbeResults,
    actions: &'a mut PodActions,
}

impl Walk<'_> {
    fn kill(&mut self, s: &ContainerStatus, c: &Container, reason: KillReason, message: String) {
        self.actions.containers_to_kill.insert(
            s.id.clone(),
            ContainerToKill {
                name: c.name.clone(),
                kind: ContainerKind::Init,
                reason,
                message,
            },
        );
    }

    fn kill_unknown(&mut self, s: &ContainerStatus, c: &Container) {
        self.kill(
            s,
            c,
            KillReason::UnknownState,
            "Init container is in \"unknown\" state, try killing it before restart".to_string(),
        );
    }

    /// One regular (run-to-completion) init container that has a status.
    fn init(&mut self, i: usize, c: &Container, s: &ContainerStatus) -> Step {
        match s.state {
            // A Created init container was probably not started by the runtime: start it.
            ContainerState::Created => self.starts.push(i),
            // Still running: wait for it.
            ContainerState::Running => {}
            ContainerState::Exited if is_init_container_failed(s) => {
                if !self.restart_on_failure {
                    return Step::KillPod;
                }
                self.starts.push(i);
            }
            ContainerState::Exited => self.completed(i),
            ContainerState::Unknown => {
                if !self.restart_on_failure {
                    return Step::KillPod;
                }
                self.kill_unknown(s, c);
                self.starts.push(i);
            }
        }
        Step::Next
    }

    /// Init container `i` is done (exited 0, or a started sidecar): either the pod is
    /// initialized or the next one starts.
    fn completed(&mut self, i: usize) {
        if i == self.last {
            self.initialized = true;
        } else if !self.previously_initialized {
            self.starts.push(i + 1);
        }
    }

    /// One sidecar that has a status: it is restarted whenever it is not running, whatever
    /// the pod's restart policy (RT-33).
    fn sidecar(&mut self, i: usize, c: &Container, s: &ContainerStatus) -> Step {
        match s.state {
            ContainerState::Created | ContainerState::Exited => self.starts.push(i),
            ContainerState::Unknown => {
                self.kill_unknown(s, c);
                self.starts.push(i);
            }
            ContainerState::Running => self.running_sidecar(i, c, s),
        }
        Step::Next
    }

    fn running_sidecar(&mut self, i: usize, c: &Container, s: &ContainerStatus) {
        let results = self.probes.get(&s.id);
        if c.startup_probe.is_some() {
            match results.startup {
                Some(ProbeOutcome::Success) => {}
                Some(ProbeOutcome::Failure) => {
                    let msg = format!("Init container {} failed startup probe", c.name);
                    self.kill(s, c, KillReason::StartupFailed, msg);
                    self.starts.push(i);
                    return;
                }
                // Not run yet, or no verdict: the next init container waits (RT-30).
                Some(ProbeOutcome::Unknown) | None => return,
            }
        }
        self.completed(i);
        if spec_changed(c, &s.hash) {
            let msg = format!("Init container {} definition changed", c.name);
            self.kill(s, c, KillReason::SpecChanged, msg);
            self.starts.push(i);
            return;
        }
        // The liveness probe does not gate the next init container; only a failure counts.
        if c.liveness_probe.is_some() && results.liveness == Some(ProbeOutcome::Failure) {
            let msg = format!("Init container {} failed liveness probe", c.name);
            self.kill(s, c, KillReason::LivenessFailed, msg);
            self.starts.push(i);
        }
    }
}
