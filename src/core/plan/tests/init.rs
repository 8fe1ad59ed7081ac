//! RT-20…RT-29: run-to-completion init containers.

use super::*;
use crate::core::runtime_status::ContainerState::{Created, Exited, Running, Unknown};
use ContainerKind::Init;

#[test]
fn rt_20_initialization_complete_starts_all_containers() {
    assert_eq!(with_init().actions(), starts(&[], &[0, 1, 2]));
}

#[test]
fn rt_21_no_init_statuses_starts_the_first_init_container() {
    assert_eq!(with_init().keep(0).actions(), starts(&[0], &[]));
}

#[test]
fn rt_21_init_containers_run_in_order() {
    // init1 done, init2 and init3 never ran: start init2.
    assert_eq!(
        with_init().keep(1).actions().init_containers_to_start,
        vec![1]
    );
    // init1 and init2 done: start init3.
    let fx = with_init().keep(2);
    assert_eq!(fx.actions().init_containers_to_start, vec![2]);
    assert!(fx.actions().containers_to_start.is_empty());
}

#[test]
fn rt_22_running_init_container_means_wait() {
    let fx = with_init().policy("Always").state("initid3", Running);
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_23_dead_sandbox_starts_over_from_the_first_init_container() {
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..recreate(1)
    };
    assert_eq!(
        with_init().policy("Always").sandbox_not_ready(0).actions(),
        want
    );
}

#[test]
fn rt_24_failed_init_container_is_restarted_unless_never() {
    for (policy, want) in [
        ("Always", starts(&[2], &[])),
        ("OnFailure", starts(&[2], &[])),
        ("Never", kill_pod(0)),
    ] {
        let fx = with_init().policy(policy).exited("initid3", 137);
        assert_eq!(fx.actions(), want, "{policy}");
    }
}

#[test]
fn rt_24_oom_killed_init_container_counts_as_failed_even_with_exit_0() {
    let mut fx = with_init().policy("Always");
    fx.st("initid3").reason = "OOMKilled".into();
    assert_eq!(fx.actions().init_containers_to_start, vec![2]);
    assert!(fx.actions().containers_to_start.is_empty());
}

#[test]
fn rt_25_unknown_init_container_is_killed_and_restarted_unless_never() {
    let restart = killing(
        starts(&[2], &[]),
        ("initid3", "init3", Init, KillReason::UnknownState),
        "Init container is in \"unknown\" state, try killing it before restart",
    );
    for (policy, want) in [
        ("Always", restart.clone()),
        ("OnFailure", restart),
        ("Never", kill_pod(0)),
    ] {
        let fx = with_init().policy(policy).state("initid3", Unknown);
        assert_eq!(fx.actions(), want, "{policy}");
    }
}

#[test]
fn rt_26_never_with_dead_sandbox_after_init_only_kills() {
    assert_eq!(
        with_init().policy("Never").sandbox_not_ready(0).actions(),
        kill_pod(1)
    );
}

#[test]
fn rt_27_dead_sandbox_without_statuses_or_with_failed_init_gets_a_new_sandbox() {
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..recreate(1)
    };
    let fx = with_init().policy("Never").sandbox_not_ready(0).keep(0);
    assert_eq!(fx.actions(), want);
    let fx = with_init().policy("OnFailure").sandbox_not_ready(0);
    assert_eq!(fx.exited("initid3", 137).actions(), want);
}

#[test]
fn rt_28_missing_earlier_init_statuses_do_not_rerun_them() {
    let mut fx = with_init().policy("Always").state("initid3", Running);
    fx.rt.containers.retain(|c| c.name == "init3");
    assert_eq!(fx.actions(), no_action());
    assert_eq!(fx.state("initid3", Created).actions(), starts(&[2], &[]));
}

/// `with_init()` whose init statuses are all gone (garbage collected) but foo1 exists.
fn only_foo1(state: ContainerState) -> Fx {
    let mut fx = with_init().keep(0);
    let foo1 = status("id1", &container("foo1", "busybox"), state);
    fx.rt.containers.push(foo1);
    fx
}

#[test]
fn rt_29_running_or_created_regular_container_means_initialized() {
    for (state, expected_start) in [(Running, vec![1, 2]), (Created, vec![0, 1, 2])] {
        let a = only_foo1(state).actions();
        assert!(a.init_containers_to_start.is_empty(), "{state:?}");
        assert_eq!(a.containers_to_start, expected_start, "{state:?}");
    }
}

#[test]
fn rt_29_exited_regular_container_does_not_prove_initialization() {
    let fx = only_foo1(Exited).policy("Always");
    assert_eq!(fx.actions(), starts(&[0], &[]));
}
