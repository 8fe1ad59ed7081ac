//! `TerminatePod`'s defaulting (SM-25 … SM-28): at the end of a pod's life, a container whose
//! final state the runtime could not report is recorded as failed, never as successful, and
//! the phase becomes terminal.
//!
//! Owns `hasPodInitialized`, `initializedContainers` and the defaulting of a status. Must not
//! record anything: `StatusStore::terminate_pod` applies the result.

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod, PodStatus};

use super::super::pod;
use super::super::pod_status::containers::{unknown_termination, MSG_LOST_WHEN_TERMINATED};
use super::super::pod_status::phase::{FAILED, SUCCEEDED};
use super::super::pod_status::spec;

fn is_waiting(s: &ContainerStatus) -> bool {
    // an absent state is Go's zero ContainerState, whose Waiting is nil
    s.state.as_ref().is_some_and(|st| st.waiting.is_some())
}

fn is_terminated(s: &ContainerStatus) -> bool {
    s.state.as_ref().is_some_and(|st| st.terminated.is_some())
}

fn last_terminated_exit(s: &ContainerStatus) -> Option<i32> {
    s.last_state
        .as_ref()
        .and_then(|st| st.terminated.as_ref())
        .map(|t| t.exit_code)
}

fn terminated_exit(s: &ContainerStatus) -> Option<i32> {
    s.state
        .as_ref()
        .and_then(|st| st.terminated.as_ref())
        .map(|t| t.exit_code)
}

/// `hasPodInitialized` (SM-28) on the container statuses in `status`: no init containers; or
/// a regular container that ever left Waiting; or a last init container that completed (exit
/// 0, now or last time), or — a sidecar — runs and has started.
pub fn has_pod_initialized(p: &Pod, status: &PodStatus) -> bool {
    let inits = spec::init_containers(p);
    if inits.is_empty() {
        return true;
    }
    let evidence = status
        .container_statuses
        .iter()
        .flatten()
        .any(|s| last_terminated_exit(s).is_some() || !is_waiting(s));
    if evidence {
        return true;
    }
    let statuses = status.init_container_statuses.as_deref().unwrap_or(&[]);
    let Some(last) = statuses.last() else {
        return false;
    };
    let Some(c) = inits
        .get(statuses.len() - 1)
        .filter(|c| c.name == last.name)
    else {
        // spec/status mismatch: upstream logs a programmer error and says "not initialized"
        return false;
    };
    if spec::is_sidecar(c) {
        let running = last.state.as_ref().is_some_and(|st| st.running.is_some());
        running && last.started == Some(true)
    } else {
        last_terminated_exit(last) == Some(0) || terminated_exit(last) == Some(0)
    }
}

/// `initializedContainers`: the statuses up to the last one that is not Waiting or has a
/// previous termination (those have tried to start); at least the first one.
pub fn initialized_containers(statuses: &[ContainerStatus]) -> usize {
    for i in (0..statuses.len()).rev() {
        let s = &statuses[i];
        if !is_waiting(s) || last_terminated_exit(s).is_some() {
            return i + 1;
        }
    }
    statuses.len().min(1)
}

fn default_to_unknown(s: &mut ContainerStatus) {
    if is_terminated(s) {
        return;
    }
    s.state = Some(ContainerState {
        terminated: Some(unknown_termination(MSG_LOST_WHEN_TERMINATED)),
        ..ContainerState::default()
    });
}

/// The status `TerminatePod` records, from `base` (the cached status, else the pod's):
/// once the pod has initialized every regular container that is not terminated becomes
/// `Terminated{ContainerStatusUnknown, 137}`; so does every init container that tried to
/// start; a non-static pod's phase becomes terminal (Failed unless already Succeeded or
/// Failed). `initialized` is the caller's `hasPodInitialized`.
pub fn terminated_status(p: &Pod, base: &PodStatus, initialized: bool) -> PodStatus {
    let mut status = base.clone();
    if initialized {
        for s in status.container_statuses.iter_mut().flatten() {
            default_to_unknown(s);
        }
    }
    if let Some(inits) = status.init_container_statuses.as_mut() {
        let n = initialized_containers(inits);
        for s in inits.iter_mut().take(n) {
            default_to_unknown(s);
        }
    }
    // TODO(#116484) upstream: static pods keep their phase
    if !pod::is_static(p) {
        match status.phase.as_deref() {
            Some(SUCCEEDED) | Some(FAILED) => {}
            _ => status.phase = Some(FAILED.into()),
        }
    }
    status
}
