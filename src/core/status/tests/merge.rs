//! `mergePodStatus` (SM-21 … SM-24), after upstream's TestMergePodStatus.

use k8s_openapi::api::core::v1::{PodCondition, PodResourceClaimStatus, PodStatus};

use crate::core::pod_status::conditions::{
    CONTAINERS_READY, DISRUPTION_TARGET, FALSE, POD_COMPLETED, POD_FAILED, POD_SCHEDULED, READY,
    TRUE,
};
use crate::core::pod_status::tests::fixtures::{cond, condition};
use crate::core::pod_status::time_to_api;
use crate::core::record::Time;
use crate::core::status::merge_pod_status;

fn at(secs: i64) -> Time {
    Time::from_unix_secs(secs)
}

fn with_reason(type_: &str, status: &str, reason: &str, since: i64) -> PodCondition {
    PodCondition {
        reason: Some(reason.into()),
        last_transition_time: Some(time_to_api(at(since))),
        ..cond(type_, status)
    }
}

fn ready_running() -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        reason: Some("Unknown".into()),
        message: Some("Message".into()),
        conditions: Some(vec![
            with_reason(READY, TRUE, "", 10),
            with_reason(CONTAINERS_READY, TRUE, "", 10),
            with_reason(POD_SCHEDULED, TRUE, "", 1),
        ]),
        ..PodStatus::default()
    }
}

fn evicted(mut s: PodStatus) -> PodStatus {
    s.phase = Some("Failed".into());
    s.reason = Some("Evicted".into());
    s.message = Some("Was Evicted".into());
    s
}

fn find<'s>(s: &'s PodStatus, type_: &str) -> Option<&'s PodCondition> {
    s.conditions.iter().flatten().find(|c| c.type_ == type_)
}

fn count(s: &PodStatus, type_: &str) -> usize {
    s.conditions
        .iter()
        .flatten()
        .filter(|c| c.type_ == type_)
        .count()
}

/// `s` with `extra` appended to its conditions.
fn plus(mut s: PodStatus, extra: PodCondition) -> PodStatus {
    s.conditions.get_or_insert_with(Vec::new).push(extra);
    s
}

/// `(status, reason)` of the condition `type_`.
fn status_reason<'s>(s: &'s PodStatus, type_: &str) -> (&'s str, Option<&'s str>) {
    let c = condition(s, type_);
    (c.status.as_str(), c.reason.as_deref())
}

#[test]
fn sm_21_a_condition_the_kubelet_does_not_own_keeps_the_api_value() {
    const FEATURE: &str = "example.com/feature";
    let mut old = plus(ready_running(), cond(FEATURE, TRUE));
    old.resource_claim_statuses = Some(vec![PodResourceClaimStatus {
        name: "claim".into(),
        resource_claim_name: Some("from-api".into()),
    }]);
    let mut new = plus(ready_running(), cond(FEATURE, FALSE));
    new.conditions.as_mut().unwrap()[0] = with_reason(READY, FALSE, "ContainersNotReady", 20);
    let merged = merge_pod_status(&old, &new, true, at(30));
    let why = "the node may not change another writer's condition";
    assert_eq!(condition(&merged, FEATURE).status, TRUE, "{why}");
    let ready = &condition(&merged, READY).status;
    assert_eq!(ready, FALSE, "Ready is the node's");
    let why = "resource claim statuses always come from the API";
    assert_eq!(
        merged.resource_claim_statuses, old.resource_claim_statuses,
        "{why}"
    );
    assert_eq!(count(&merged, FEATURE), 1);
}

#[test]
fn sm_22_no_terminal_phase_while_containers_may_run() {
    let old = ready_running();
    let new = evicted(ready_running());
    let merged = merge_pod_status(&old, &new, true, at(30));
    assert_eq!(merged.phase.as_deref(), Some("Running"));
    assert_eq!(merged.reason.as_deref(), Some("Unknown"));
    assert_eq!(merged.message.as_deref(), Some("Message"));
    for t in [READY, CONTAINERS_READY] {
        assert_eq!(condition(&merged, t), condition(&old, t), "{t}");
    }

    let merged = merge_pod_status(&old, &new, false, at(30));
    assert_eq!(merged.phase.as_deref(), Some("Failed"));
    assert_eq!(merged.reason.as_deref(), Some("Evicted"));
    assert_eq!(merged.message.as_deref(), Some("Was Evicted"));
    let (want, since) = ((FALSE, Some(POD_FAILED)), Some(time_to_api(at(30))));
    for t in [READY, CONTAINERS_READY] {
        assert_eq!(status_reason(&merged, t), want, "{t}");
        assert_eq!(condition(&merged, t).last_transition_time, since, "{t}");
    }
}

#[test]
fn sm_23_disruption_target_only_once_really_terminal() {
    let by_kubelet = with_reason(DISRUPTION_TARGET, TRUE, "TerminationByKubelet", 5);
    let by_api = with_reason(DISRUPTION_TARGET, TRUE, "EvictedByEvictionAPI", 3);

    // moving to a terminal phase with nothing running: added, transition time refreshed
    let old = ready_running();
    let new = plus(evicted(ready_running()), by_kubelet.clone());
    let merged = merge_pod_status(&old, &new, false, at(40));
    let dt = find(&merged, DISRUPTION_TARGET).expect("added");
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(dt.last_transition_time, Some(time_to_api(at(40))));

    // containers may still run: not added, and the phase stays Running
    let merged = merge_pod_status(&old, &new, true, at(40));
    assert!(find(&merged, DISRUPTION_TARGET).is_none());
    assert_eq!(merged.phase.as_deref(), Some("Running"));

    // an existing one from the eviction API with the phase staying Running: kept as is
    let old_with = plus(ready_running(), by_api.clone());
    let new_running = plus(ready_running(), by_kubelet);
    let merged = merge_pod_status(&old_with, &new_running, false, at(40));
    assert_eq!(find(&merged, DISRUPTION_TARGET), Some(&by_api));
    assert_eq!(count(&merged, DISRUPTION_TARGET), 1);

    // terminal with nothing running: the kubelet's replaces the eviction API's
    let merged = merge_pod_status(&old_with, &new, false, at(40));
    assert_eq!(count(&merged, DISRUPTION_TARGET), 1);
    let dt = find(&merged, DISRUPTION_TARGET).unwrap();
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
}

#[test]
fn sm_24_a_terminal_phase_forces_readiness_false() {
    let phase = |p: &str| PodStatus {
        phase: Some(p.into()),
        ..ready_running()
    };
    let merged = merge_pod_status(&ready_running(), &phase("Succeeded"), false, at(50));
    for t in [READY, CONTAINERS_READY] {
        assert_eq!(
            status_reason(&merged, t),
            (FALSE, Some(POD_COMPLETED)),
            "{t}"
        );
    }

    // already terminal in the API and Ready still True in the new status (kubernetes/kubernetes#108594)
    let merged = merge_pod_status(&phase("Failed"), &phase("Failed"), false, at(50));
    assert_eq!(status_reason(&merged, READY), (FALSE, Some(POD_FAILED)));

    // a non-terminal phase leaves readiness alone
    let merged = merge_pod_status(&ready_running(), &ready_running(), false, at(50));
    assert_eq!(condition(&merged, READY).status, TRUE);
}
