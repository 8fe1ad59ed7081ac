//! RT-30…RT-33: sidecars (restartable init containers).

use super::*;
use crate::core::runtime_status::ContainerState::{Created, Exited, Running, Unknown};
use ContainerKind::Init;
use KillReason::*;
use ProbeOutcome::{Failure, Success};

fn always() -> Fx {
    with_sidecars().policy("Always")
}

fn never() -> Fx {
    with_sidecars().policy("Never")
}

#[test]
fn rt_30_initialized_by_sidecars_starts_all_regular_containers() {
    assert_eq!(with_sidecars().actions(), starts(&[], &[0, 1, 2]));
}

#[test]
fn rt_30_no_statuses_starts_the_first_sidecar() {
    assert_eq!(with_sidecars().keep(0).actions(), starts(&[0], &[]));
}

#[test]
fn rt_30_a_running_sidecar_without_startup_probe_starts_the_next() {
    assert_eq!(always().keep(1).actions(), starts(&[1], &[]));
}

#[test]
fn rt_30_created_sidecar_is_started_and_the_next_waits() {
    let a = always().state("initid3", Created).actions();
    assert_eq!(a.init_containers_to_start, vec![2]);
    assert!(a.containers_to_start.is_empty());
}

#[test]
fn rt_30_startup_probe_not_run_or_unknown_waits() {
    for startup in [None, Some(ProbeOutcome::Unknown)] {
        let fx = always().probed("initid2", Some(Success), startup).keep(2);
        assert_eq!(fx.actions(), no_action(), "startup {startup:?}");
    }
}

#[test]
fn rt_30_startup_success_starts_the_next() {
    assert_eq!(always().keep(2).actions(), starts(&[2], &[]));
}

#[test]
fn rt_30_liveness_does_not_gate_the_next_init_container() {
    for liveness in [None, Some(ProbeOutcome::Unknown), Some(Success)] {
        let fx = always().probed("initid2", liveness, Some(Success)).keep(2);
        assert_eq!(fx.actions(), starts(&[2], &[]), "liveness {liveness:?}");
    }
}

#[test]
fn rt_31_sidecar_liveness_failure_restarts_it_and_regulars_start_as_usual() {
    let want = killing(
        starts(&[2], &[0, 1, 2]),
        ("initid3", "restartable-init-3", Init, LivenessFailed),
        "Init container restartable-init-3 failed liveness probe",
    );
    let fx = always().probed("initid3", Some(Failure), Some(Success));
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_31_sidecar_startup_failure_restarts_only_the_sidecar() {
    let want = killing(
        starts(&[2], &[]),
        ("initid3", "restartable-init-3", Init, StartupFailed),
        "Init container restartable-init-3 failed startup probe",
    );
    let fx = always().probed("initid3", Some(Success), Some(Failure));
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_31_sidecar_spec_change_kills_and_restarts_it() {
    let mut fx = always().with_regulars(Running);
    fx.spec_mut().init_containers.as_mut().unwrap()[0].image = Some("bar-image:2".into());
    let want = killing(
        starts(&[0], &[]),
        ("initid1", "restartable-init-1", Init, SpecChanged),
        "Init container restartable-init-1 definition changed",
    );
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_32_exited_sidecar_and_exited_later_sidecar_both_restart() {
    let fx = always().exited("initid1", 0).exited("initid3", 0);
    assert_eq!(fx.actions(), starts(&[0, 2], &[]));
}

#[test]
fn rt_32_exited_sidecar_restarts_while_regular_containers_continue() {
    let fx = always().exited("initid1", 0);
    assert_eq!(fx.actions(), starts(&[0], &[0, 1, 2]));
    assert_eq!(fx.with_regulars(Running).actions(), starts(&[0], &[]));
}

#[test]
fn rt_32_gc_d_sidecar_status_after_initialization_restarts_it() {
    // Upstream: "some of the init container statuses are missing but the last init
    // container is running, restart restartable init and regular containers".
    let mut fx = always();
    fx.rt.containers.drain(..2);
    assert_eq!(fx.actions(), starts(&[0, 1], &[0, 1, 2]));
}

#[test]
fn rt_33_sidecar_is_restarted_under_never() {
    assert_eq!(never().exited("initid3", 137).actions(), starts(&[2], &[]));
}

#[test]
fn rt_33_unknown_sidecar_is_killed_and_restarted_under_never() {
    let want = killing(
        starts(&[2], &[]),
        ("initid3", "restartable-init-3", Init, UnknownState),
        "Init container is in \"unknown\" state, try killing it before restart",
    );
    assert_eq!(never().state("initid3", Unknown).actions(), want);
}

#[test]
fn rt_33_sidecar_restarts_under_never_while_regulars_run() {
    let fx = never().exited("initid3", 137).with_regulars(Running);
    assert_eq!(fx.actions(), starts(&[2], &[]));
}

#[test]
fn rt_33_all_regulars_succeeded_under_never_kills_the_pod() {
    assert_eq!(never().with_regulars(Exited).actions(), kill_pod(0));
}

#[test]
fn rt_33_dead_sandbox_under_never_only_kills() {
    let fx = never().sandbox_not_ready(0).exited("initid3", 137);
    assert_eq!(fx.actions(), kill_pod(1));
}

#[test]
fn rt_33_dead_sandbox_under_on_failure_or_always_starts_over() {
    let want = PodActions {
        init_containers_to_start: vec![0],
        ..recreate(1)
    };
    for policy in ["OnFailure", "Always"] {
        let fx = with_sidecars().policy(policy);
        let fx = fx.sandbox_not_ready(0).exited("initid3", 137);
        assert_eq!(fx.actions(), want, "{policy}");
    }
    // Never with no container ever created retries the sandbox too.
    assert_eq!(never().sandbox_not_ready(0).keep(0).actions(), want);
}
