//! `checkContainerStateTransition` (SM-18): a terminated container may not become
//! non-terminated unless its restart policy lets it restart.
//!
//! Owns the rule and its error messages. Must not change either status: a violation means
//! the update is dropped by the caller.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use super::super::pod_status::spec::{self, RestartPolicy};

fn terminated_exit_code(s: &ContainerStatus) -> Option<i32> {
    s.state
        .as_ref()
        .and_then(|st| st.terminated.as_ref())
        .map(|t| t.exit_code)
}

fn is_terminated(s: &ContainerStatus) -> bool {
    terminated_exit_code(s).is_some()
}

/// Why a status update was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IllegalTransition(pub String);

/// True if `old` (terminated with `exit_code`) may not leave the terminated state.
fn must_stay_terminated(policy: RestartPolicy, exit_code: i32) -> bool {
    !(exit_code != 0 && policy == RestartPolicy::OnFailure)
}

/// `checkContainerStateTransition(old, new, spec)`.
pub fn check_container_state_transition(
    old: &PodStatus,
    new: &PodStatus,
    pod: &Pod,
) -> Result<(), IllegalTransition> {
    let policy = spec::restart_policy(pod);
    if policy == RestartPolicy::Always {
        return Ok(());
    }
    let new_regular = new.container_statuses.as_deref().unwrap_or(&[]);
    for o in old.container_statuses.iter().flatten() {
        let Some(code) = terminated_exit_code(o) else {
            continue;
        };
        if !must_stay_terminated(policy, code) {
            continue;
        }
        if new_regular
            .iter()
            .any(|n| n.name == o.name && !is_terminated(n))
        {
            return Err(IllegalTransition(format!(
                "terminated container {} attempted illegal transition to non-terminated state",
                o.name
            )));
        }
    }
    let spec_inits = spec::init_containers(pod);
    let new_inits = new.init_container_statuses.as_deref().unwrap_or(&[]);
    for (i, o) in old.init_container_statuses.iter().flatten().enumerate() {
        // `GetContainerByIndex`: the spec entry at the status's index must have its name
        let Some(c) = spec_inits.get(i).filter(|c| c.name == o.name) else {
            return Err(IllegalTransition(format!(
                "found mismatch between pod spec and status, container: {}",
                o.name
            )));
        };
        if spec::is_sidecar(c) {
            continue;
        }
        let Some(code) = terminated_exit_code(o) else {
            continue;
        };
        if !must_stay_terminated(policy, code) {
            continue;
        }
        if new_inits
            .iter()
            .any(|n| n.name == o.name && !is_terminated(n))
        {
            return Err(IllegalTransition(format!(
                "terminated init container {} attempted illegal transition to non-terminated state",
                o.name
            )));
        }
    }
    Ok(())
}
