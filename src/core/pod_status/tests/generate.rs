//! GS-08…GS-11 and GS-16: the phase as generated, its stickiness, reason carry-over and
//! eviction, and the upstream worked examples.

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

use super::fixtures::*;
use crate::core::pod_status::conditions::{
    CONTAINERS_READY, DISRUPTION_TARGET, INITIALIZED, POD_READY_TO_START_CONTAINERS, READY,
};
use crate::core::pod_status::time_to_api;
use crate::core::record::time::Time;

fn running_ab() -> crate::core::runtime_status::RuntimePodStatus {
    runtime(
        vec![rt_running("A", "a1", 10), rt_running("B", "b1", 10)],
        vec![ready_sandbox("10.0.0.1")],
    )
}

fn status(phase: &str, reason: &str, message: &str) -> PodStatus {
    PodStatus {
        phase: Some(phase.into()),
        reason: (!reason.is_empty()).then(|| reason.into()),
        message: (!message.is_empty()).then(|| message.into()),
        ..PodStatus::default()
    }
}

#[test]
fn gs_08_status_manager_terminal_phase_is_sticky() {
    let mut f = Fixture::new(simple_pod(&["A", "B"]), running_ab());
    assert_eq!(f.generate().phase.as_deref(), Some("Running"));
    f.cached = Some(status("Failed", "Evicted", "The node was low on memory."));
    let s = f.generate();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    assert_eq!(s.message.as_deref(), Some("The node was low on memory."));
}

#[test]
fn gs_08_api_terminal_phase_is_sticky() {
    let p = with_api_status(simple_pod(&["A", "B"]), status("Succeeded", "", ""));
    let s = Fixture::new(p, running_ab()).generate();
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
}

#[test]
fn gs_08_api_terminal_phase_forces_back_an_illegal_transition() {
    // Never + one failure computes Failed; the API already says Succeeded.
    let p = pod("Never", vec![], vec![container("A")]);
    let p = with_api_status(p, status("Succeeded", "", ""));
    let rt = runtime(vec![rt_exited("A", "a1", 10, 1)], vec![]);
    let mut f = Fixture::new(p, rt);
    f.cached = Some(status("Running", "", ""));
    assert_eq!(f.generate().phase.as_deref(), Some("Succeeded"));
}

#[test]
fn gs_09_reason_and_message_carry_over_while_the_phase_is_unchanged() {
    let mut f = Fixture::new(simple_pod(&["A", "B"]), running_ab());
    f.cached = Some(status("Running", "R1", "M1"));
    let s = f.generate();
    assert_eq!(reason_message(&s), (Some("R1"), Some("M1")));

    // Empty in the cached status: fall back to the API status.
    f.pod = with_api_status(simple_pod(&["A", "B"]), status("Running", "R2", "M2"));
    f.cached = Some(status("Running", "", ""));
    let s = f.generate();
    assert_eq!(reason_message(&s), (Some("R2"), Some("M2")));
}

#[test]
fn gs_09_reason_and_message_reset_when_the_phase_changes() {
    let mut f = Fixture::new(simple_pod(&["A", "B"]), running_ab());
    f.cached = Some(status("Pending", "R1", "M1"));
    let s = f.generate();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!((s.reason, s.message), (None, None));
}

#[test]
fn gs_10_running_can_revert_to_pending() {
    let p = with_api_status(
        simple_pod(&["A", "B"]),
        PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![running("A"), running("B")]),
            ..PodStatus::default()
        },
    );
    let mut f = Fixture::new(p, runtime(vec![], vec![]));
    f.cached = Some(PodStatus {
        phase: Some("Running".into()),
        container_statuses: Some(vec![waiting("A"), waiting("B")]),
        ..PodStatus::default()
    });
    let s = f.generate();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    for name in ["A", "B"] {
        assert_eq!(
            waiting_reason_of(find(&s.container_statuses, name)),
            Some("ContainerCreating")
        );
    }
}

const DEADLINE: (&str, &str) = (
    "DeadlineExceeded",
    "Pod was active on the node longer than the specified deadline",
);

#[test]
fn gs_11_eviction_forces_failed_with_its_reason_and_message() {
    let mut f = Fixture::new(simple_pod(&["A", "B"]), running_ab());
    f.cached = Some(status("Running", "R1", "M1"));
    f.evict = Some((DEADLINE.0.into(), DEADLINE.1.into()));
    let s = f.generate();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(reason_message(&s), (Some(DEADLINE.0), Some(DEADLINE.1)));
    assert_eq!(condition(&s, READY).status, "False");
    assert_eq!(condition(&s, READY).reason.as_deref(), Some("PodFailed"));
}

#[test]
fn gs_11_eviction_cannot_move_an_api_terminal_phase() {
    let p = with_api_status(simple_pod(&["A", "B"]), status("Succeeded", "", ""));
    let mut f = Fixture::new(p, running_ab());
    f.evict = Some((DEADLINE.0.into(), DEADLINE.1.into()));
    assert_eq!(f.generate().phase.as_deref(), Some("Succeeded"));
}

fn assert_cond(s: &PodStatus, type_: &str, status: &str, reason: Option<&str>) {
    let c = condition(s, type_);
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        (status, reason),
        "{type_}"
    );
}

#[test]
fn gs_16_deleted_terminal_pod_keeps_disruption_target_and_fails() {
    let disruption = PodCondition {
        last_transition_time: Some(time_to_api(Time::from_unix_secs(1_000))),
        ..cond(DISRUPTION_TARGET, "True")
    };
    let p = with_api_status(
        deleted(simple_pod(&["A", "B"])),
        PodStatus {
            container_statuses: Some(vec![running("A"), running("B")]),
            conditions: Some(vec![disruption.clone()]),
            ..PodStatus::default()
        },
    );
    let mut f = Fixture::new(p, runtime(vec![], vec![ready_sandbox("10.0.0.10")]));
    f.terminal = true;
    let s = f.generate();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(
        condition_types(&s),
        [
            DISRUPTION_TARGET,
            POD_READY_TO_START_CONTAINERS,
            INITIALIZED,
            READY,
            CONTAINERS_READY,
            "PodScheduled"
        ]
    );
    assert_eq!(condition(&s, DISRUPTION_TARGET), &disruption);
    assert_cond(&s, INITIALIZED, "True", None);
    assert_cond(&s, READY, "False", Some("PodFailed"));
    assert_cond(&s, CONTAINERS_READY, "False", Some("PodFailed"));
    assert_cond(&s, POD_READY_TO_START_CONTAINERS, "True", None);
    assert_cond(&s, "PodScheduled", "True", None);
    for name in ["A", "B"] {
        let c = find(&s.container_statuses, name);
        assert_eq!(waiting_reason_of(c), Some("ContainerCreating"));
        assert_eq!(term(&c.last_state).map(|t| t.exit_code), Some(137));
        assert_eq!(c.restart_count, 0, "deleted: no restart counted");
    }
    assert_eq!(s.pod_ip.as_deref(), Some("10.0.0.10"));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
}

#[test]
fn gs_16_api_succeeded_with_an_empty_runtime_stays_succeeded() {
    let p = with_api_status(
        simple_pod(&["A", "B"]),
        PodStatus {
            phase: Some("Succeeded".into()),
            container_statuses: Some(vec![running("A"), running("B")]),
            ..PodStatus::default()
        },
    );
    let s = Fixture::new(p, runtime(vec![], vec![])).generate();
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_cond(&s, INITIALIZED, "True", Some("PodCompleted"));
    assert_cond(&s, READY, "False", Some("PodCompleted"));
    assert_cond(&s, CONTAINERS_READY, "False", Some("PodCompleted"));
    assert_cond(&s, POD_READY_TO_START_CONTAINERS, "False", None);
}

#[test]
fn gs_16_previous_succeeded_with_restart_always_keeps_reason_and_message() {
    let p = with_api_status(simple_pod(&["A", "B"]), status("Running", "", ""));
    let mut f = Fixture::new(p, running_ab());
    f.cached = Some(status("Succeeded", "Test", "test"));
    let s = f.generate();
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(reason_message(&s), (Some("Test"), Some("test")));
    assert_cond(&s, READY, "False", Some("PodCompleted"));
}

#[test]
fn invariant_8_ready_is_never_true_with_a_terminal_phase() {
    // Containers are running and would be ready; the phase is terminal by stickiness.
    for terminal in ["Succeeded", "Failed"] {
        let mut f = Fixture::new(simple_pod(&["A", "B"]), running_ab());
        assert_eq!(condition(&f.generate(), READY).status, "True");
        f.cached = Some(status(terminal, "", ""));
        let s = f.generate();
        assert_eq!(s.phase.as_deref(), Some(terminal));
        assert_eq!(condition(&s, READY).status, "False", "{terminal}");
        assert_eq!(
            condition(&s, CONTAINERS_READY).status,
            "False",
            "{terminal}"
        );
    }
}
