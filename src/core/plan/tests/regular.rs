//! RT-01…RT-06, RT-10…RT-13, RT-17…RT-19: regular containers in a healthy sandbox.

use super::*;
use crate::core::runtime_status::ContainerState::{Created, Unknown};
use ContainerKind::Regular;

#[test]
fn rt_01_everything_good_means_no_action() {
    assert_eq!(base().actions(), no_action());
    assert_eq!(base().policy("Never").actions(), no_action());
}

#[test]
fn rt_02_new_pod_creates_sandbox_and_starts_all_containers() {
    let mut fx = base();
    fx.rt.sandboxes.clear();
    fx.rt.containers.clear();
    let want = PodActions {
        kill_pod: true,
        create_sandbox: true,
        sandbox_id: String::new(),
        attempt: 0,
        containers_to_start: vec![0, 1, 2],
        ..PodActions::default()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_03_always_restarts_succeeded_and_failed_containers() {
    let mut fx = base().policy("Always");
    fx.exited("id1", 0).exited("id2", 111);
    let want = PodActions {
        containers_to_start: vec![0, 1],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_03_unset_restart_policy_behaves_as_always() {
    let mut fx = base();
    fx.exited("id1", 0).exited("id2", 111);
    assert_eq!(fx.actions().containers_to_start, vec![0, 1]);
}

#[test]
fn rt_03_a_deleted_pod_restarts_nothing() {
    let mut fx = base().policy("Always");
    fx.exited("id1", 0).exited("id2", 111);
    fx.pod.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:05:00Z".parse().unwrap(),
        ));
    // foo3 still runs: kept, nothing started.
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_04_on_failure_restarts_only_the_failed_container() {
    let mut fx = base().policy("OnFailure");
    fx.exited("id1", 0).exited("id2", 111);
    let want = PodActions {
        containers_to_start: vec![1],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_05_on_failure_always_restarts_a_created_container() {
    let mut fx = base().policy("OnFailure");
    fx.exited("id1", 0).state("id2", Created);
    let want = PodActions {
        containers_to_start: vec![1],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_06_never_restarts_nothing_while_one_still_runs() {
    let mut fx = base().policy("Never");
    fx.exited("id1", 0).exited("id2", 111);
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_10_spec_change_kills_and_restarts_the_container() {
    let mut fx = base().policy("Always");
    fx.st("id2").hash = "432423432".into();
    let want = PodActions {
        containers_to_start: vec![1],
        containers_to_kill: kills(&[(
            "id2",
            "foo2",
            Regular,
            KillReason::SpecChanged,
            "Container foo2 definition changed, will be restarted",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_10_spec_change_restarts_regardless_of_restart_policy() {
    let mut fx = base().policy("Never");
    fx.spec_mut().containers[1].image = Some("busybox:2".into());
    let a = fx.actions();
    assert_eq!(a.containers_to_start, vec![1]);
    assert_eq!(
        a.containers_to_kill["id2"].message,
        "Container foo2 definition changed, will be restarted"
    );
    assert!(!a.kill_pod);
}

#[test]
fn rt_10_an_empty_recorded_hash_counts_as_unchanged() {
    let mut fx = base();
    fx.st("id2").hash = String::new();
    fx.spec_mut().containers[1].image = Some("busybox:2".into());
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_11_liveness_failure_kills_and_restarts() {
    let mut fx = base().policy("Always");
    fx.set_probes("id2", Some(ProbeOutcome::Failure), None);
    let want = PodActions {
        containers_to_start: vec![1],
        containers_to_kill: kills(&[(
            "id2",
            "foo2",
            Regular,
            KillReason::LivenessFailed,
            "Container foo2 failed liveness probe, will be restarted",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_11_liveness_success_or_unknown_keeps_the_container() {
    for outcome in [ProbeOutcome::Success, ProbeOutcome::Unknown] {
        let mut fx = base();
        fx.set_probes("id2", Some(outcome), Some(outcome));
        assert_eq!(fx.actions(), no_action(), "{outcome:?}");
    }
}

#[test]
fn rt_12_startup_failure_kills_and_restarts() {
    let mut fx = base().policy("Always");
    fx.set_probes(
        "id2",
        Some(ProbeOutcome::Success),
        Some(ProbeOutcome::Failure),
    );
    let want = PodActions {
        containers_to_start: vec![1],
        containers_to_kill: kills(&[(
            "id2",
            "foo2",
            Regular,
            KillReason::StartupFailed,
            "Container foo2 failed startup probe, will be restarted",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_13_liveness_failure_under_never_kills_without_restart() {
    let mut fx = base().policy("Never");
    fx.set_probes("id2", Some(ProbeOutcome::Failure), None);
    let want = PodActions {
        containers_to_kill: kills(&[(
            "id2",
            "foo2",
            Regular,
            KillReason::LivenessFailed,
            "Container foo2 failed liveness probe",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_13_kill_pod_when_the_only_running_container_is_killed_without_restart() {
    let mut fx = base().policy("Never");
    fx.exited("id1", 0).exited("id3", 1);
    fx.set_probes("id2", Some(ProbeOutcome::Failure), None);
    let a = fx.actions();
    assert!(a.kill_pod);
    assert!(!a.create_sandbox);
    assert!(a.containers_to_start.is_empty());
    assert_eq!(
        a.containers_to_kill["id2"].message,
        "Container foo2 failed liveness probe"
    );
}

#[test]
fn rt_17_unknown_container_is_killed_then_restarted_even_under_never() {
    let mut fx = base().policy("Never");
    fx.state("id2", Unknown);
    let want = PodActions {
        containers_to_start: vec![1],
        containers_to_kill: kills(&[(
            "id2",
            "foo2",
            Regular,
            KillReason::UnknownState,
            "Container is in \"unknown\" state, try killing it before restart",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_18_created_container_is_started_without_a_kill_even_under_never() {
    let mut fx = base().policy("Never");
    fx.state("id2", Created);
    let want = PodActions {
        containers_to_start: vec![1],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_19_all_dead_and_nothing_to_start_kills_the_pod() {
    let mut fx = base().policy("Never");
    fx.exited("id1", 0).exited("id2", 1).exited("id3", 0);
    let want = PodActions {
        kill_pod: true,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_19_on_failure_all_succeeded_kills_the_pod() {
    let mut fx = base().policy("OnFailure");
    fx.exited("id1", 0).exited("id2", 0).exited("id3", 0);
    assert!(fx.actions().kill_pod);
    // One failure is restarted instead.
    fx.exited("id3", 2);
    let a = fx.actions();
    assert!(!a.kill_pod);
    assert_eq!(a.containers_to_start, vec![2]);
}

#[test]
fn rt_19_sidecars_are_not_restarted_when_the_pod_is_killed() {
    let mut fx = with_sidecars().policy("Never");
    fx.exited("initid1", 1);
    fx.regulars(ContainerState::Exited, 0);
    let want = PodActions {
        kill_pod: true,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
    // Under Always the same statuses restart the sidecar and every regular container.
    let a = fx.policy("Always").actions();
    assert_eq!(a.init_containers_to_start, vec![0]);
    assert_eq!(a.containers_to_start, vec![0, 1, 2]);
    assert!(!a.kill_pod);
}

#[test]
fn plan_uses_the_newest_instance_of_each_container() {
    // An old exited instance of foo2 behind the running one does not matter.
    let mut fx = base().policy("Never");
    let mut old = fx.rt.containers[1].clone();
    old.id = "old2".into();
    old.state = ContainerState::Exited;
    old.exit_code = 1;
    fx.rt.containers.push(old);
    assert_eq!(fx.actions(), no_action());
    // A newer exited instance in front of the running one does.
    let mut newer = fx.rt.containers[1].clone();
    newer.id = "new2".into();
    newer.state = ContainerState::Exited;
    newer.exit_code = 1;
    fx.rt.containers.insert(0, newer);
    fx.spec_mut().restart_policy = Some("Always".into());
    assert_eq!(fx.actions().containers_to_start, vec![1]);
}

#[test]
fn plan_starts_ephemeral_containers_once_and_never_restarts_them() {
    use k8s_openapi::api::core::v1::EphemeralContainer;
    let mut fx = base();
    fx.spec_mut().ephemeral_containers = Some(vec![EphemeralContainer {
        name: "debug".into(),
        image: Some("busybox".into()),
        ..EphemeralContainer::default()
    }]);
    let a = fx.actions();
    assert_eq!(a.ephemeral_containers_to_start, vec![0]);
    assert!(!a.kill_pod);
    let mut dbg = status(
        "debug1",
        &container("debug", "busybox"),
        ContainerState::Exited,
    );
    dbg.exit_code = 1;
    fx.rt.containers.push(dbg);
    assert_eq!(fx.actions(), no_action());
}
