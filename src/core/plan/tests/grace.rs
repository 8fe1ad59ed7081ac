//! RT-39 kill grace periods, RT-41 orphan kills and RT-42 sidecar termination order.

use super::*;
use crate::core::plan::{
    kill_grace_base_s, kill_grace_period_s, killing_event_message, stop_timeout_s,
    termination_prerequisites,
};

fn probe_tgps(s: i64) -> Option<Probe> {
    Some(Probe {
        termination_grace_period_seconds: Some(s),
        ..Probe::default()
    })
}

fn graced(tgps: Option<i64>, deletion: Option<i64>) -> (Pod, Container) {
    let mut fx = base();
    fx.spec_mut().termination_grace_period_seconds = tgps;
    fx.pod.metadata.deletion_grace_period_seconds = deletion;
    let c = Container {
        liveness_probe: probe_tgps(7),
        startup_probe: probe_tgps(9),
        ..container("foo1", "busybox")
    };
    (fx.pod, c)
}

#[test]
fn rt_39_grace_period_table() {
    use KillReason::*;
    // (spec TGPS, deletion grace, reason, override, probe TGPS on the container, base, timeout)
    for (tgps, deletion, reason, ovr, with_probe, base_s, timeout_s) in [
        // The pod's TGPS.
        (Some(30), None, SpecChanged, None, true, 30, 30),
        (Some(30), None, PodKilled, None, true, 30, 30),
        (Some(30), None, UnknownState, None, true, 30, 30),
        // A probe kill uses that probe's TGPS.
        (Some(30), None, LivenessFailed, None, true, 7, 7),
        (Some(30), None, StartupFailed, None, true, 9, 9),
        // … if the probe has one.
        (Some(30), None, LivenessFailed, None, false, 30, 30),
        // The deletion grace beats everything, probe TGPS included.
        (Some(30), Some(12), LivenessFailed, None, true, 12, 12),
        (Some(30), Some(12), SpecChanged, None, true, 12, 12),
        // The override replaces the base.
        (Some(30), Some(12), LivenessFailed, Some(5), true, 5, 5),
        // Nothing set: 2, and the probe TGPS is ignored without a pod TGPS.
        (None, None, SpecChanged, None, true, 2, 2),
        (None, None, LivenessFailed, None, true, 2, 2),
        // Clamped to a minimum of 2 for StopContainer.
        (Some(0), None, PodKilled, None, true, 0, 2),
        (Some(30), Some(0), PodKilled, None, true, 0, 2),
        (Some(30), None, PodKilled, Some(1), true, 1, 2),
        (Some(30), None, PodKilled, Some(0), true, 0, 2),
    ] {
        let (pod, mut c) = graced(tgps, deletion);
        if !with_probe {
            (c.liveness_probe, c.startup_probe) = (None, None);
        }
        let case = format!("{tgps:?} {deletion:?} {reason:?} {ovr:?} probe={with_probe}");
        let base = kill_grace_base_s(&pod, Some(&c), &reason, ovr);
        let timeout = kill_grace_period_s(&pod, Some(&c), &reason, ovr);
        assert_eq!((base, timeout), (base_s, timeout_s), "{case}");
    }
}

#[test]
fn rt_39_prestop_accounting_is_clamped_to_two_seconds() {
    // 30s grace, a preStop that took 29s → 1s left → StopContainer gets 2s.
    assert_eq!(stop_timeout_s(30 - 29), 2);
    assert_eq!(stop_timeout_s(30 - 31), 2);
    assert_eq!(stop_timeout_s(30 - 10), 20);
}

#[test]
fn rt_39_killing_event_message() {
    let probe_failed = "Container foo2 failed liveness probe, will be restarted";
    assert_eq!(killing_event_message("foo2", probe_failed), probe_failed);
    assert_eq!(killing_event_message("foo2", ""), "Stopping container foo2");
}

#[test]
fn rt_41_orphan_kill_uses_the_restored_pod_without_a_container_spec() {
    // After a kubelet restart the pod is rebuilt from labels: TGPS and deletion grace only.
    use KillReason::*;
    for (tgps, deletion, reason, want) in [
        (Some(45), None, LivenessFailed, 45),
        (Some(45), Some(3), LivenessFailed, 3),
        (None, None, PodKilled, 2),
    ] {
        let (pod, _) = graced(tgps, deletion);
        let got = kill_grace_period_s(&pod, None, &reason, None);
        assert_eq!(got, want, "{tgps:?} {deletion:?} {reason:?}");
    }
}

#[test]
fn rt_42_sidecars_stop_after_regulars_in_reverse_order() {
    let fx = with_sidecars();
    let regulars = ["foo1", "foo2", "foo3"];
    let sidecars = [
        "restartable-init-1",
        "restartable-init-2",
        "restartable-init-3",
    ];
    let order = termination_prerequisites(&fx.pod, &[regulars, sidecars].concat());
    // every sidecar waits for the regular containers and for the sidecar after it
    assert_eq!(order.len(), 3, "{order:?}");
    for (i, sidecar) in sidecars.iter().enumerate() {
        let want: Vec<&str> = regulars
            .into_iter()
            .chain(sidecars.get(i + 1).copied())
            .collect();
        assert_eq!(order[*sidecar], want, "{sidecar}");
    }
}

#[test]
fn rt_42_only_running_containers_are_waited_for() {
    let fx = with_sidecars();
    let running = ["foo2", "restartable-init-1", "restartable-init-3"];
    let order = termination_prerequisites(&fx.pod, &running);
    // init-1 waits for foo2 and for init-2, which is not running: so not for init-3 either
    // (as upstream, the wait is not transitive).
    assert_eq!(order["restartable-init-1"], ["foo2"]);
    assert_eq!(order["restartable-init-3"], ["foo2"]);
    assert!(!order.contains_key("restartable-init-2"));
    assert!(!order.contains_key("foo2"));
    // With no regular container running, the last sidecar stops at once.
    let order = termination_prerequisites(&fx.pod, &["restartable-init-2", "restartable-init-3"]);
    assert!(!order.contains_key("restartable-init-3"));
    assert_eq!(order["restartable-init-2"], ["restartable-init-3"]);
}

#[test]
fn rt_42_pods_without_sidecars_are_killed_all_at_once() {
    let fx = with_init();
    assert!(termination_prerequisites(&fx.pod, &["foo1", "init1"]).is_empty());
    assert!(termination_prerequisites(&base().pod, &["foo1", "foo2"]).is_empty());
}
