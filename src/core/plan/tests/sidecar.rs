//! RT-30…RT-33: sidecars (restartable init containers).

use super::*;
use crate::core::runtime_status::ContainerState::{Created, Unknown};
use ContainerKind::Init;
use ProbeOutcome::{Failure, Success};

fn keep_first(fx: &mut Fx, n: usize) {
    fx.rt.containers.truncate(n);
}

#[test]
fn rt_30_initialized_by_sidecars_starts_all_regular_containers() {
    let want = PodActions {
        containers_to_start: vec![0, 1, 2],
        ..no_action()
    };
    assert_eq!(with_sidecars().actions(), want);
}

#[test]
fn rt_30_no_statuses_starts_the_first_sidecar() {
    let mut fx = with_sidecars();
    fx.rt.containers.clear();
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_30_a_running_sidecar_without_startup_probe_starts_the_next() {
    let mut fx = with_sidecars().policy("Always");
    keep_first(&mut fx, 1);
    let want = PodActions {
        init_containers_to_start: vec![1],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_30_created_sidecar_is_started_and_the_next_waits() {
    let mut fx = with_sidecars().policy("Always");
    fx.state("initid3", Created);
    let a = fx.actions();
    assert_eq!(a.init_containers_to_start, vec![2]);
    assert!(a.containers_to_start.is_empty());
}

#[test]
fn rt_30_startup_probe_not_run_or_unknown_waits() {
    for startup in [None, Some(ProbeOutcome::Unknown)] {
        let mut fx = with_sidecars().policy("Always");
        fx.set_probes("initid2", Some(Success), startup);
        keep_first(&mut fx, 2);
        assert_eq!(fx.actions(), no_action(), "startup {startup:?}");
    }
}

#[test]
fn rt_30_startup_success_starts_the_next() {
    let mut fx = with_sidecars().policy("Always");
    keep_first(&mut fx, 2);
    let want = PodActions {
        init_containers_to_start: vec![2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_30_liveness_does_not_gate_the_next_init_container() {
    for liveness in [None, Some(ProbeOutcome::Unknown), Some(Success)] {
        let mut fx = with_sidecars().policy("Always");
        fx.set_probes("initid2", liveness, Some(Success));
        keep_first(&mut fx, 2);
        let want = PodActions {
            init_containers_to_start: vec![2],
            ..no_action()
        };
        assert_eq!(fx.actions(), want, "liveness {liveness:?}");
    }
}

#[test]
fn rt_31_sidecar_liveness_failure_restarts_it_and_regulars_start_as_usual() {
    let mut fx = with_sidecars().policy("Always");
    fx.set_probes("initid3", Some(Failure), Some(Success));
    let want = PodActions {
        init_containers_to_start: vec![2],
        containers_to_start: vec![0, 1, 2],
        containers_to_kill: kills(&[(
            "initid3",
            "restartable-init-3",
            Init,
            KillReason::LivenessFailed,
            "Init container restartable-init-3 failed liveness probe",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_31_sidecar_startup_failure_restarts_only_the_sidecar() {
    let mut fx = with_sidecars().policy("Always");
    fx.set_probes("initid3", Some(Success), Some(Failure));
    let want = PodActions {
        init_containers_to_start: vec![2],
        containers_to_kill: kills(&[(
            "initid3",
            "restartable-init-3",
            Init,
            KillReason::StartupFailed,
            "Init container restartable-init-3 failed startup probe",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_31_sidecar_spec_change_kills_and_restarts_it() {
    let mut fx = with_sidecars().policy("Always");
    fx.regulars(ContainerState::Running, 0);
    fx.spec_mut().init_containers.as_mut().unwrap()[0].image = Some("bar-image:2".into());
    let want = PodActions {
        init_containers_to_start: vec![0],
        containers_to_kill: kills(&[(
            "initid1",
            "restartable-init-1",
            Init,
            KillReason::SpecChanged,
            "Init container restartable-init-1 definition changed",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_32_exited_sidecar_and_exited_later_sidecar_both_restart() {
    let mut fx = with_sidecars().policy("Always");
    fx.exited("initid1", 0).exited("initid3", 0);
    let want = PodActions {
        init_containers_to_start: vec![0, 2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_32_exited_sidecar_restarts_while_regular_containers_continue() {
    let mut fx = with_sidecars().policy("Always");
    fx.exited("initid1", 0);
    let want = PodActions {
        init_containers_to_start: vec![0],
        containers_to_start: vec![0, 1, 2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);

    fx.regulars(ContainerState::Running, 0);
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_32_gc_d_sidecar_status_after_initialization_restarts_it() {
    // Upstream: "some of the init container statuses are missing but the last init
    // container is running, restart restartable init and regular containers".
    let mut fx = with_sidecars().policy("Always");
    fx.rt.containers.drain(..2);
    let want = PodActions {
        init_containers_to_start: vec![0, 1],
        containers_to_start: vec![0, 1, 2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_33_sidecar_is_restarted_under_never() {
    let mut fx = with_sidecars().policy("Never");
    fx.exited("initid3", 137);
    let want = PodActions {
        init_containers_to_start: vec![2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_33_unknown_sidecar_is_killed_and_restarted_under_never() {
    let mut fx = with_sidecars().policy("Never");
    fx.state("initid3", Unknown);
    let want = PodActions {
        init_containers_to_start: vec![2],
        containers_to_kill: kills(&[(
            "initid3",
            "restartable-init-3",
            Init,
            KillReason::UnknownState,
            "Init container is in \"unknown\" state, try killing it before restart",
        )]),
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_33_sidecar_restarts_under_never_while_regulars_run() {
    let mut fx = with_sidecars().policy("Never");
    fx.exited("initid3", 137);
    fx.regulars(ContainerState::Running, 0);
    let want = PodActions {
        init_containers_to_start: vec![2],
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_33_all_regulars_succeeded_under_never_kills_the_pod() {
    let mut fx = with_sidecars().policy("Never");
    fx.regulars(ContainerState::Exited, 0);
    let want = PodActions {
        kill_pod: true,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_33_dead_sandbox_under_never_only_kills() {
    let mut fx = with_sidecars().policy("Never");
    fx.sandbox_not_ready(0).exited("initid3", 137);
    let want = PodActions {
        kill_pod: true,
        create_sandbox: false,
        attempt: 1,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_33_dead_sandbox_under_on_failure_or_always_starts_over() {
    for policy in ["OnFailure", "Always"] {
        let mut fx = with_sidecars().policy(policy);
        fx.sandbox_not_ready(0).exited("initid3", 137);
        let want = PodActions {
            init_containers_to_start: vec![0],
            ..recreate(1)
        };
        assert_eq!(fx.actions(), want, "{policy}");
    }
    // Never with no container ever created retries the sandbox too.
    let mut fx = with_sidecars().policy("Never");
    fx.sandbox_not_ready(0);
    fx.rt.containers.clear();
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);
}
