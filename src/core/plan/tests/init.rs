//! RT-20…RT-29: run-to-completion init containers.

use super::*;
use crate::core::runtime_status::ContainerState::{Created, Running, Unknown};
use ContainerKind::Init;

#[test]
fn rt_20_initialization_complete_starts_all_containers() {
    let want = PodActions {
        containers_to_start: vec![0, 1, 2],
        ..no_action()
    };
    assert_eq!(with_init().actions(), want);
}

#[test]
fn rt_21_no_init_statuses_starts_the_first_init_container() {
    let mut fx = with_init();
    fx.rt.containers.clear();
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_21_init_containers_run_in_order() {
    // init1 done, init2 and init3 never ran: start init2.
    let mut fx = with_init();
    fx.rt.containers.retain(|c| c.name == "init1");
    assert_eq!(fx.actions().init_containers_to_start, vec![1]);
    // init1 and init2 done: start init3.
    let mut fx = with_init();
    fx.rt.containers.retain(|c| c.name != "init3");
    assert_eq!(fx.actions().init_containers_to_start, vec![2]);
    assert!(fx.actions().containers_to_start.is_empty());
}

#[test]
fn rt_22_running_init_container_means_wait() {
    let mut fx = with_init().policy("Always");
    fx.state("initid3", Running);
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_23_dead_sandbox_starts_over_from_the_first_init_container() {
    let mut fx = with_init().policy("Always");
    fx.sandbox_not_ready(0);
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_24_failed_init_container_is_restarted_unless_never() {
    for policy in ["Always", "OnFailure"] {
        let mut fx = with_init().policy(policy);
        fx.exited("initid3", 137);
        let want = PodActions {
            init_containers_to_start: vec![2],
            ..no_action()
        };
        assert_eq!(fx.actions(), want, "{policy}");
    }
    let mut fx = with_init().policy("Never");
    fx.exited("initid3", 137);
    let want = PodActions {
        kill_pod: true,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
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
    for policy in ["Always", "OnFailure"] {
        let mut fx = with_init().policy(policy);
        fx.state("initid3", Unknown);
        let want = PodActions {
            init_containers_to_start: vec![2],
            containers_to_kill: kills(&[(
                "initid3",
                "init3",
                Init,
                KillReason::UnknownState,
                "Init container is in \"unknown\" state, try killing it before restart",
            )]),
            ..no_action()
        };
        assert_eq!(fx.actions(), want, "{policy}");
    }
    let mut fx = with_init().policy("Never");
    fx.state("initid3", Unknown);
    let want = PodActions {
        kill_pod: true,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_26_never_with_dead_sandbox_after_init_only_kills() {
    let mut fx = with_init().policy("Never");
    fx.sandbox_not_ready(0);
    let want = PodActions {
        kill_pod: true,
        create_sandbox: false,
        attempt: 1,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_27_dead_sandbox_without_statuses_or_with_failed_init_gets_a_new_sandbox() {
    let mut fx = with_init().policy("Never");
    fx.sandbox_not_ready(0);
    fx.rt.containers.clear();
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);

    let mut fx = with_init().policy("OnFailure");
    fx.sandbox_not_ready(0).exited("initid3", 137);
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_28_missing_earlier_init_statuses_do_not_rerun_them() {
    let mut fx = with_init().policy("Always");
    fx.state("initid3", Running);
    fx.rt.containers.retain(|c| c.name == "init3");
    assert_eq!(fx.actions(), no_action());

    fx.state("initid3", Created);
    let want = PodActions {
        init_containers_to_start: vec![2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_29_running_or_created_regular_container_means_initialized() {
    for state in [Running, Created] {
        let mut fx = with_init();
        // Every init status is gone (garbage collected); foo1 exists.
        fx.rt.containers.clear();
        fx.rt
            .containers
            .push(status("id1", &container("foo1", "busybox"), state));
        let a = fx.actions();
        assert!(a.init_containers_to_start.is_empty(), "{state:?}");
        let expected_start = if state == Created {
            vec![0, 1, 2]
        } else {
            vec![1, 2]
        };
        assert_eq!(a.containers_to_start, expected_start, "{state:?}");
    }
}

#[test]
fn rt_29_exited_regular_container_does_not_prove_initialization() {
    let mut fx = with_init().policy("Always");
    fx.rt.containers.clear();
    let mut s = status("id1", &container("foo1", "busybox"), ContainerState::Exited);
    s.exit_code = 0;
    fx.rt.containers.push(s);
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}
