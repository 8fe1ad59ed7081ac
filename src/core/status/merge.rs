//! `mergePodStatus` (SM-21 … SM-24): the status the node writes, given what the API server has.
//!
//! Owns condition ownership (kubelet-owned conditions from the node, everything else from the
//! API server; `DisruptionTarget` only once the pod is really terminal), the rule that no
//! terminal phase is written while a container may still run, and readiness forced False on a
//! terminal phase. Must not read a clock: "now" (for the transition times it refreshes) is an
//! argument, the syncer's time of the merge.

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

use super::super::pod_status::conditions::{
    is_kubelet_owned, CONTAINERS_READY, DISRUPTION_TARGET, FALSE, POD_COMPLETED, POD_FAILED, READY,
    TRUE,
};
use super::super::pod_status::phase::{is_terminal, FAILED, SUCCEEDED};
use super::equality::is_shared_with_kubelet;
use super::store::k8s_time;
use crate::core::record::Time;

fn phase_is_terminal(s: &PodStatus) -> bool {
    s.phase.as_deref().is_some_and(is_terminal)
}

fn find<'a>(conditions: &'a [PodCondition], t: &str) -> Option<&'a PodCondition> {
    conditions.iter().find(|c| c.type_ == t)
}

/// `updateLastTransitionTime` for one condition type: a new condition, or one whose status
/// changed, transitions `now`; otherwise it keeps the old time.
pub fn update_last_transition_time(
    new: &mut PodStatus,
    old: &PodStatus,
    condition_type: &str,
    now: Time,
) {
    let Some(c) = new
        .conditions
        .iter_mut()
        .flatten()
        .find(|c| c.type_ == condition_type)
    else {
        return;
    };
    let old_condition = old
        .conditions
        .as_deref()
        .and_then(|o| find(o, condition_type));
    c.last_transition_time = match old_condition {
        Some(o) if o.status == c.status => o.last_transition_time.clone(),
        _ => Some(k8s_time(now)),
    };
}

/// `podutil.UpdatePodCondition`: replaces (keeping the transition time if the status did not
/// change) or appends `condition`.
fn update_pod_condition(status: &mut PodStatus, mut condition: PodCondition, now: Time) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        None => {
            condition.last_transition_time = Some(k8s_time(now));
            conditions.push(condition);
        }
        Some(existing) => {
            condition.last_transition_time = if existing.status == condition.status {
                existing.last_transition_time.clone()
            } else {
                Some(k8s_time(now))
            };
            *existing = condition;
        }
    }
}

/// `generateContainersReadyConditionForTerminalPhase` / `generatePodReadyConditionForTerminalPhase`.
fn not_ready_for_terminal_phase(condition_type: &str, phase: &str) -> PodCondition {
    let reason = match phase {
        FAILED => Some(POD_FAILED.to_string()),
        SUCCEEDED => Some(POD_COMPLETED.to_string()),
        _ => None,
    };
    PodCondition {
        type_: condition_type.into(),
        status: FALSE.into(),
        reason,
        ..PodCondition::default()
    }
}

/// `mergePodStatus(old, new, couldHaveRunningContainers)`.
pub fn merge_pod_status(
    old: &PodStatus,
    new: &PodStatus,
    could_have_running_containers: bool,
    now: Time,
) -> PodStatus {
    let mut new = new.clone();
    let old_conditions = old.conditions.as_deref().unwrap_or(&[]);
    let new_conditions = new.conditions.take().unwrap_or_default();
    let mut conditions: Vec<PodCondition> = old_conditions
        .iter()
        .filter(|c| !is_kubelet_owned(&c.type_))
        .cloned()
        .collect();
    let to_terminal = !phase_is_terminal(old) && phase_is_terminal(&new);
    let mut shared = Vec::new();
    for c in new_conditions {
        if is_kubelet_owned(&c.type_) {
            conditions.push(c);
        } else if is_shared_with_kubelet(&c.type_)
            && c.type_ == DISRUPTION_TARGET
            && to_terminal
            && !could_have_running_containers
        {
            shared.push(c);
        }
    }
    for mut c in shared {
        // the transition time set when the node recorded it is stale: the condition was held
        // back until every container stopped
        c.last_transition_time = match find(old_conditions, &c.type_) {
            Some(o) if o.status == c.status => o.last_transition_time.clone(),
            _ => Some(k8s_time(now)),
        };
        match conditions.iter_mut().find(|x| x.type_ == c.type_) {
            Some(existing) => *existing = c,
            None => conditions.push(c),
        }
    }
    new.conditions = Some(conditions);
    new.resource_claim_statuses = old.resource_claim_statuses.clone();

    if to_terminal && could_have_running_containers {
        new.phase = old.phase.clone();
        new.reason = old.reason.clone();
        new.message = old.message.clone();
    }

    if let Some(phase) = new.phase.clone().filter(|p| is_terminal(p)) {
        let conditions = new.conditions.as_deref().unwrap_or(&[]);
        let is_true = |t: &str| find(conditions, t).is_some_and(|c| c.status == TRUE);
        if is_true(READY) || is_true(CONTAINERS_READY) {
            update_pod_condition(
                &mut new,
                not_ready_for_terminal_phase(CONTAINERS_READY, &phase),
                now,
            );
            update_pod_condition(&mut new, not_ready_for_terminal_phase(READY, &phase), now);
        }
    }
    new
}
