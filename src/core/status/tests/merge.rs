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

#[test]
fn sm_21_a_condition_the_kubelet_does_not_own_keeps_the_api_value() {
    let mut old = ready_running();
    old.conditions
        .as_mut()
        .unwrap()
        .push(cond("example.com/feature", TRUE));
    old.resource_claim_statuses = Some(vec![PodResourceClaimStatus {
        name: "claim".into(),
        resource_claim_name: Some("from-api".into()),
    }]);
    let mut new = ready_running();
    new.conditions
        .as_mut()
        .unwrap()
        .push(cond("example.com/feature", FALSE));
    new.conditions.as_mut().unwrap()[0] = with_reason(READY, FALSE, "ContainersNotReady", 20);
    let merged = merge_pod_status(&old, &new, true, at(30));
    assert_eq!(
        condition(&merged, "example.com/feature").status,
        TRUE,
        "the node may not change another writer's condition"
    );
    assert_eq!(
        condition(&merged, READY).status,
        FALSE,
        "Ready is the node's"
    );
    assert_eq!(
        merged.resource_claim_statuses, old.resource_claim_statuses,
        "resource claim statuses always come from the API"
    );
    assert_eq!(
        merged
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.type_ == "example.com/feature")
            .count(),
        1
    );
}

#[test]
fn sm_22_no_terminal_phase_while_containers_may_run() {
    let old = ready_running();
    let new = evicted(ready_running());

    let merged = merge_pod_status(&old, &new, true, at(30));
    assert_eq!(merged.phase.as_deref(), Some("Running"));
    assert_eq!(merged.reason.as_deref(), Some("Unknown"));
    assert_eq!(merged.message.as_deref(), Some("Message"));
    assert_eq!(condition(&merged, READY), condition(&old, READY));
    assert_eq!(
        condition(&merged, CONTAINERS_READY),
        condition(&old, CONTAINERS_READY)
    );

    let merged = merge_pod_status(&old, &new, false, at(30));
    assert_eq!(merged.phase.as_deref(), Some("Failed"));
    assert_eq!(merged.reason.as_deref(), Some("Evicted"));
    assert_eq!(merged.message.as_deref(), Some("Was Evicted"));
    for t in [READY, CONTAINERS_READY] {
        let c = condition(&merged, t);
        assert_eq!(c.status, FALSE, "{t}");
        assert_eq!(c.reason.as_deref(), Some(POD_FAILED), "{t}");
        assert_eq!(c.last_transition_time, Some(time_to_api(at(30))), "{t}");
    }
}

#[test]
fn sm_23_disruption_target_only_once_really_terminal() {
    let by_kubelet = with_reason(DISRUPTION_TARGET, TRUE, "TerminationByKubelet", 5);
    let by_api = with_reason(DISRUPTION_TARGET, TRUE, "EvictedByEvictionAPI", 3);

    // moving to a terminal phase with nothing running: added, transition time refreshed
    let old = ready_running();
    let mut new = evicted(ready_running());
    new.conditions.as_mut().unwrap().push(by_kubelet.clone());
    let merged = merge_pod_status(&old, &new, false, at(40));
    let dt = find(&merged, DISRUPTION_TARGET).expect("added");
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(dt.last_transition_time, Some(time_to_api(at(40))));

    // containers may still run: not added, and the phase stays Running
    let merged = merge_pod_status(&old, &new, true, at(40));
    assert!(find(&merged, DISRUPTION_TARGET).is_none());
    assert_eq!(merged.phase.as_deref(), Some("Running"));

    // an existing one from the eviction API with the phase staying Running: kept as is
    let mut old_with = ready_running();
    old_with.conditions.as_mut().unwrap().push(by_api.clone());
    let mut new_running = ready_running();
    new_running
        .conditions
        .as_mut()
        .unwrap()
        .push(by_kubelet.clone());
    let merged = merge_pod_status(&old_with, &new_running, false, at(40));
    assert_eq!(find(&merged, DISRUPTION_TARGET), Some(&by_api));
    assert_eq!(
        merged
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.type_ == DISRUPTION_TARGET)
            .count(),
        1
    );

    // terminal with nothing running: the kubelet's replaces the eviction API's
    let merged = merge_pod_status(&old_with, &new, false, at(40));
    let dts: Vec<_> = merged
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.type_ == DISRUPTION_TARGET)
        .collect();
    assert_eq!(dts.len(), 1);
    assert_eq!(dts[0].reason.as_deref(), Some("TerminationByKubelet"));
}

#[test]
fn sm_24_a_terminal_phase_forces_readiness_false() {
    let old = ready_running();
    let mut new = ready_running();
    new.phase = Some("Succeeded".into());
    let merged = merge_pod_status(&old, &new, false, at(50));
    for t in [READY, CONTAINERS_READY] {
        let c = condition(&merged, t);
        assert_eq!(c.status, FALSE, "{t}");
        assert_eq!(c.reason.as_deref(), Some(POD_COMPLETED), "{t}");
    }

    // already terminal in the API and Ready still True in the new status (kubernetes/kubernetes#108594)
    let mut old_failed = ready_running();
    old_failed.phase = Some("Failed".into());
    let mut new_failed = ready_running();
    new_failed.phase = Some("Failed".into());
    let merged = merge_pod_status(&old_failed, &new_failed, false, at(50));
    assert_eq!(condition(&merged, READY).status, FALSE);
    assert_eq!(
        condition(&merged, READY).reason.as_deref(),
        Some(POD_FAILED)
    );

    // a non-terminal phase leaves readiness alone
    let merged = merge_pod_status(&old, &ready_running(), false, at(50));
    assert_eq!(condition(&merged, READY).status, TRUE);
}
