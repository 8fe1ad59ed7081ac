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

/// (spec TGPS, deletion grace, reason, override, probe TGPS on the container, base, timeout)
type GraceCase = (
    Option<i64>,
    Option<i64>,
    KillReason,
    Option<i64>,
    bool,
    i64,
    i64,
);

#[test]
fn rt_39_grace_period_table() {
    use KillReason::*;
    let cases: &[GraceCase] = &[
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
    ];
    for &(tgps, deletion, reason, ovr, with_probe, base_s, timeout_s) in cases {
        let (pod, mut c) = graced(tgps, deletion);
        if !with_probe {
            c.liveness_probe = None;
            c.startup_probe = None;
        }
        let case = format!("{tgps:?} {deletion:?} {reason:?} {ovr:?} probe={with_probe}");
        assert_eq!(
            kill_grace_base_s(&pod, Some(&c), &reason, ovr),
            base_s,
            "{case}"
        );
        assert_eq!(
            kill_grace_period_s(&pod, Some(&c), &reason, ovr),
            timeout_s,
            "{case}"
        );
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
    assert_eq!(
        killing_event_message(
            "foo2",
            "Container foo2 failed liveness probe, will be restarted"
        ),
        "Container foo2 failed liveness probe, will be restarted"
    );
    assert_eq!(killing_event_message("foo2", ""), "Stopping container foo2");
}

#[test]
fn rt_41_orphan_kill_uses_the_restored_pod_without_a_container_spec() {
    // After a kubelet restart the pod is rebuilt from labels: TGPS and deletion grace only.
    let (pod, _) = graced(Some(45), None);
    let r = KillReason::LivenessFailed;
    assert_eq!(kill_grace_period_s(&pod, None, &r, None), 45);
    let (pod, _) = graced(Some(45), Some(3));
    assert_eq!(kill_grace_period_s(&pod, None, &r, None), 3);
    let (pod, _) = graced(None, None);
    assert_eq!(
        kill_grace_period_s(&pod, None, &KillReason::PodKilled, None),
        2
    );
}

#[test]
fn rt_42_sidecars_stop_after_regulars_in_reverse_order() {
    let fx = with_sidecars();
    let all = [
        "foo1",
        "foo2",
        "foo3",
        "restartable-init-1",
        "restartable-init-2",
        "restartable-init-3",
    ];
    let order = termination_prerequisites(&fx.pod, &all);
    let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let want: BTreeMap<String, Vec<String>> = [
        (
            "restartable-init-1".to_string(),
            v(&["foo1", "foo2", "foo3", "restartable-init-2"]),
        ),
        (
            "restartable-init-2".to_string(),
            v(&["foo1", "foo2", "foo3", "restartable-init-3"]),
        ),
        (
            "restartable-init-3".to_string(),
            v(&["foo1", "foo2", "foo3"]),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(order, want);
}

#[test]
fn rt_42_only_running_containers_are_waited_for() {
    let fx = with_sidecars();
    let order = termination_prerequisites(
        &fx.pod,
        &["foo2", "restartable-init-1", "restartable-init-3"],
    );
    // init-1 waits for foo2 and for init-2, which is not running: so not for init-3 either
    // (as upstream, the wait is not transitive).
    assert_eq!(order["restartable-init-1"], vec!["foo2".to_string()]);
    assert_eq!(order["restartable-init-3"], vec!["foo2".to_string()]);
    assert!(!order.contains_key("restartable-init-2"));
    assert!(!order.contains_key("foo2"));
    // With no regular container running, the last sidecar stops at once.
    let order = termination_prerequisites(&fx.pod, &["restartable-init-2", "restartable-init-3"]);
    assert!(!order.contains_key("restartable-init-3"));
    assert_eq!(
        order["restartable-init-2"],
        vec!["restartable-init-3".to_string()]
    );
}

#[test]
fn rt_42_pods_without_sidecars_are_killed_all_at_once() {
    let fx = with_init();
    assert!(termination_prerequisites(&fx.pod, &["foo1", "init1"]).is_empty());
    assert!(termination_prerequisites(&base().pod, &["foo1", "foo2"]).is_empty());
}
