//! RT-01…RT-06, RT-10…RT-13, RT-17…RT-19: regular containers in a healthy sandbox.

use super::*;
use crate::core::runtime_status::ContainerState::{Created, Exited, Unknown};
use ContainerKind::Regular;
use KillReason::*;
use ProbeOutcome::Failure;

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
        sandbox_id: String::new(),
        containers_to_start: vec![0, 1, 2],
        ..recreate(0)
    };
    assert_eq!(fx.actions(), want);
}

/// foo1 exited 0 and foo2 exited 111 under this restart policy.
fn one_ok_one_failed(policy: &str) -> Fx {
    base().policy(policy).exited("id1", 0).exited("id2", 111)
}

#[test]
fn rt_03_always_restarts_succeeded_and_failed_containers() {
    assert_eq!(one_ok_one_failed("Always").actions(), starts(&[], &[0, 1]));
}

#[test]
fn rt_03_unset_restart_policy_behaves_as_always() {
    let fx = base().exited("id1", 0).exited("id2", 111);
    assert_eq!(fx.actions().containers_to_start, vec![0, 1]);
}

#[test]
fn rt_03_a_deleted_pod_restarts_nothing() {
    let mut fx = one_ok_one_failed("Always");
    let at = "2026-01-01T00:05:00Z".parse().unwrap();
    fx.pod.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
    // foo3 still runs: kept, nothing started.
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_04_on_failure_restarts_only_the_failed_container() {
    assert_eq!(one_ok_one_failed("OnFailure").actions(), starts(&[], &[1]));
}

#[test]
fn rt_05_on_failure_always_restarts_a_created_container() {
    let fx = base()
        .policy("OnFailure")
        .exited("id1", 0)
        .state("id2", Created);
    assert_eq!(fx.actions(), starts(&[], &[1]));
}

#[test]
fn rt_06_never_restarts_nothing_while_one_still_runs() {
    assert_eq!(one_ok_one_failed("Never").actions(), no_action());
}

#[test]
fn rt_10_spec_change_kills_and_restarts_the_container() {
    let mut fx = base().policy("Always");
    fx.st("id2").hash = "432423432".into();
    let want = killing(
        starts(&[], &[1]),
        ("id2", "foo2", Regular, SpecChanged),
        "Container foo2 definition changed, will be restarted",
    );
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
    let fx = base().policy("Always").probed("id2", Some(Failure), None);
    let want = killing(
        starts(&[], &[1]),
        ("id2", "foo2", Regular, LivenessFailed),
        "Container foo2 failed liveness probe, will be restarted",
    );
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_11_liveness_success_or_unknown_keeps_the_container() {
    for outcome in [ProbeOutcome::Success, ProbeOutcome::Unknown] {
        let fx = base().probed("id2", Some(outcome), Some(outcome));
        assert_eq!(fx.actions(), no_action(), "{outcome:?}");
    }
}

#[test]
fn rt_12_startup_failure_kills_and_restarts() {
    let fx = base()
        .policy("Always")
        .probed("id2", Some(ProbeOutcome::Success), Some(Failure));
    let want = killing(
        starts(&[], &[1]),
        ("id2", "foo2", Regular, StartupFailed),
        "Container foo2 failed startup probe, will be restarted",
    );
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_13_liveness_failure_under_never_kills_without_restart() {
    let fx = base().policy("Never").probed("id2", Some(Failure), None);
    let want = killing(
        no_action(),
        ("id2", "foo2", Regular, LivenessFailed),
        "Container foo2 failed liveness probe",
    );
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_13_kill_pod_when_the_only_running_container_is_killed_without_restart() {
    let fx = base().policy("Never").exited("id1", 0).exited("id3", 1);
    let a = fx.probed("id2", Some(Failure), None).actions();
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
    let want = killing(
        starts(&[], &[1]),
        ("id2", "foo2", Regular, UnknownState),
        "Container is in \"unknown\" state, try killing it before restart",
    );
    assert_eq!(base().policy("Never").state("id2", Unknown).actions(), want);
}

#[test]
fn rt_18_created_container_is_started_without_a_kill_even_under_never() {
    let fx = base().policy("Never").state("id2", Created);
    assert_eq!(fx.actions(), starts(&[], &[1]));
}

#[test]
fn rt_19_all_dead_and_nothing_to_start_kills_the_pod() {
    let fx = base().policy("Never").exited("id1", 0).exited("id2", 1);
    assert_eq!(fx.exited("id3", 0).actions(), kill_pod(0));
}

#[test]
fn rt_19_on_failure_all_succeeded_kills_the_pod() {
    let fx = base().policy("OnFailure").exited("id1", 0).exited("id2", 0);
    let fx = fx.exited("id3", 0);
    assert!(fx.actions().kill_pod);
    // One failure is restarted instead.
    let a = fx.exited("id3", 2).actions();
    assert!(!a.kill_pod);
    assert_eq!(a.containers_to_start, vec![2]);
}

#[test]
fn rt_19_sidecars_are_not_restarted_when_the_pod_is_killed() {
    let fx = with_sidecars()
        .policy("Never")
        .exited("initid1", 1)
        .with_regulars(Exited);
    assert_eq!(fx.actions(), kill_pod(0));
    // Under Always the same statuses restart the sidecar and every regular container.
    let a = fx.policy("Always").actions();
    assert_eq!(a.init_containers_to_start, vec![0]);
    assert_eq!(a.containers_to_start, vec![0, 1, 2]);
    assert!(!a.kill_pod);
}

#[test]
fn plan_uses_the_newest_instance_of_each_container() {
    let instance = |fx: &Fx, id: &str| ContainerStatus {
        id: id.into(),
        state: Exited,
        exit_code: 1,
        ..fx.rt.containers[1].clone()
    };
    // An old exited instance of foo2 behind the running one does not matter.
    let mut fx = base().policy("Never");
    fx.rt.containers.push(instance(&fx, "old2"));
    assert_eq!(fx.actions(), no_action());
    // A newer exited instance in front of the running one does.
    fx.rt.containers.insert(0, instance(&fx, "new2"));
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
    let debug = container("debug", "busybox");
    fx.rt.containers.push(ContainerStatus {
        exit_code: 1,
        ..status("debug1", &debug, Exited)
    });
    assert_eq!(fx.actions(), no_action());
}
