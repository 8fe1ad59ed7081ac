//! The prober inside the node: workers created at SyncPod, results through `ProbeResult`
//! records, and their consequences (status, kills, Events, termination).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::fixture::{container, pod_with, probe, Fx};
use crate::core::command::{Command, KubeEvent};
use crate::core::probe_results::ProbeOutcome;
use crate::core::probes::{ProbeType, ResultReason, RunResult, WorkerKey};
use crate::core::record::{Event, Record};
use crate::core::timers::TimerKey;
use crate::core::Uid;

const UID: &str = "uid-web";

fn with(f: impl FnOnce(&mut Container)) -> Container {
    let mut c = container();
    f(&mut c);
    c
}

fn key(probe: ProbeType) -> WorkerKey {
    WorkerKey {
        uid: Uid::new(UID),
        container: "c".into(),
        probe,
    }
}

/// Runs the pod until its container runs, with the agent started long ago (no jitter).
fn started(c: Container) -> Fx {
    started_with(c, |_| {})
}

/// [`started`] with the pod's spec changed by `f`.
fn started_with(c: Container, f: impl FnOnce(&mut PodSpec)) -> Fx {
    let mut p = (*pod_with(c)).clone();
    f(p.spec.as_mut().unwrap());
    let mut fx = Fx::new();
    fx.advance(60_000);
    fx.add(Arc::new(p));
    fx
}

#[test]
fn pr_15_a_running_container_whose_readiness_probe_has_not_run_is_not_ready() {
    let mut fx = started(with(|c| c.readiness_probe = Some(probe(1, 0, 3))));
    // the container runs; no readiness result is cached for it yet
    let cs = fx.container(UID);
    assert!(cs.state.as_ref().unwrap().running.is_some());
    let why = "a readiness worker exists: not ready before its first result";
    assert!(!cs.ready, "{why}");
    assert_eq!(fx.pod_ready(UID).as_deref(), Some("False"));
    // the probe passes: ready, and the pod's Ready condition follows (SetContainerReadiness)
    fx.answer(ProbeType::Readiness, RunResult::Success, "");
    assert!(fx.ready(UID));
    assert_eq!(fx.pod_ready(UID).as_deref(), Some("True"));
    // a container without probes is ready as soon as it runs
    let fx = started(container());
    assert!(fx.ready(UID));
}

#[test]
fn pr_14_the_readiness_probe_runs_at_once_when_the_pod_syncs() {
    // period 10 s: the manual trigger at SyncPod runs the probe without waiting a period
    let mut fx = started(with(|c| c.readiness_probe = Some(probe(10, 0, 3))));
    assert_eq!(fx.probes.len(), 1, "{:?}", fx.probes);
    assert_eq!(fx.probes[0].0.probe, ProbeType::Readiness);
    fx.answer(ProbeType::Readiness, RunResult::Success, "");
    assert!(fx.ready(UID));
    // the ticker started over at the trigger: the next run is a period later
    fx.advance(9_000);
    assert!(fx.probes.is_empty());
    fx.advance(1_500);
    assert_eq!(fx.probes.len(), 1);
}

#[test]
fn pr_14_the_first_run_is_jittered_only_just_after_the_agent_started() {
    let p = with(|c| c.liveness_probe = Some(probe(10, 0, 3)));
    // right after start: due somewhere in [now, now + period)
    let mut fx = Fx::new();
    fx.add(pod_with(p.clone()));
    let (t, _) = fx.timers[&key(ProbeType::Liveness).timer()].clone();
    assert!(t.due >= fx.now && t.due < fx.now.plus_ms(10_000), "{t:?}");
    // the same pod added long after start: the first tick is due at once
    let mut fx = Fx::new();
    fx.advance(30_000);
    let added_at = fx.now;
    fx.add(pod_with(p));
    let first_tick = fx.find_command(|c| match c {
        Command::SetTimer(t) if matches!(t.key, TimerKey::Probe { .. }) => Some(t.due),
        _ => None,
    });
    assert_eq!(first_tick, Some(added_at));
}

#[test]
fn pr_05_a_liveness_probe_failing_failure_threshold_times_restarts_the_container() {
    let mut fx = started(with(|c| c.liveness_probe = Some(probe(1, 0, 3))));
    let first_id = fx.container(UID).container_id.unwrap();
    fx.period(ProbeType::Liveness, RunResult::Success);
    for _ in 0..2 {
        assert_eq!(fx.period(ProbeType::Liveness, RunResult::Failure), 1);
        assert_eq!(fx.restarts(UID), 0, "below the threshold");
    }
    assert!(fx.kills.is_empty());
    fx.period(ProbeType::Liveness, RunResult::Failure);
    // the third failure: a ProbeResult names the run, the plan kills and restarts
    let failure = fx
        .results()
        .into_iter()
        .find(|r| r.result == Some(ProbeOutcome::Failure))
        .expect("a failure result");
    assert_eq!(failure.reason, ResultReason::Threshold);
    assert_eq!(failure.consecutive, 3);
    let msg = "Container c failed liveness probe, will be restarted";
    assert_eq!(fx.kills.len(), 1);
    assert_eq!(fx.kills[0].message, msg);
    assert_eq!(fx.kills[0].grace_period_s, 30);
    assert_eq!(fx.restarts(UID), 1);
    assert_ne!(fx.container(UID).container_id.unwrap(), first_id);
    // Events: one Unhealthy per failed run, then Killing
    let unhealthy: Vec<&str> = fx
        .events
        .iter()
        .filter(|e| e.reason == "Unhealthy")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(unhealthy, vec!["Liveness probe failed: out"; 3]);
    let killing = |e: &&KubeEvent| e.reason == "Killing" && e.message == msg;
    assert!(fx.events.iter().any(|e| killing(&e)));
    // PR-07: the new instance is probed again (the hold is lifted)
    assert_eq!(fx.period(ProbeType::Liveness, RunResult::Success), 1);
    assert_eq!(fx.restarts(UID), 1);
}

#[test]
fn rt_13_a_liveness_failure_under_never_kills_without_restart() {
    let mut fx = started_with(with(|c| c.liveness_probe = Some(probe(1, 0, 1))), |s| {
        s.restart_policy = Some("Never".into());
    });
    fx.period(ProbeType::Liveness, RunResult::Failure);
    let killed_with = fx.find_command(|c| match c {
        Command::SyncPod(s) if s.plan.kill_pod.is_some() => Some("pod".to_string()),
        Command::SyncPod(s) if !s.plan.kill_containers.is_empty() => {
            Some(s.plan.kill_containers[0].message.clone())
        }
        _ => None,
    });
    assert!(killed_with.is_some(), "the container is killed");
    assert_eq!(fx.restarts(UID), 0, "and not restarted");
}

#[test]
fn pr_21_a_liveness_kill_uses_the_probe_termination_grace_period() {
    let mut p = probe(1, 0, 1);
    p.termination_grace_period_seconds = Some(5);
    let mut fx = started_with(with(|c| c.liveness_probe = Some(p)), |s| {
        s.termination_grace_period_seconds = Some(500);
    });
    fx.period(ProbeType::Liveness, RunResult::Failure);
    assert_eq!(fx.kills.len(), 1);
    assert_eq!(fx.kills[0].grace_period_s, 5, "not the pod's 500");
}

#[test]
fn pr_08_startup_gates_liveness_and_readiness_is_probed_right_after_startup() {
    let mut fx = started(with(|c| {
        c.startup_probe = Some(probe(1, 0, 10));
        c.liveness_probe = Some(probe(1, 0, 1));
        c.readiness_probe = Some(probe(1, 0, 1));
    }));
    assert_eq!(fx.container(UID).started, Some(false));
    for _ in 0..3 {
        fx.advance(1000);
        let only_startup = fx.probes.iter().all(|(p, _)| p.probe == ProbeType::Startup);
        assert!(only_startup, "only startup runs: {:?}", fx.probes);
        fx.answer(ProbeType::Startup, RunResult::Failure, "not yet");
    }
    assert_eq!(fx.restarts(UID), 0);
    fx.advance(1000);
    fx.answer(ProbeType::Startup, RunResult::Success, "");
    assert_eq!(fx.container(UID).started, Some(true));
    // the startup result synced the pod, whose status triggered the readiness probe at once
    let readiness = fx
        .probes
        .iter()
        .any(|(p, _)| p.probe == ProbeType::Readiness);
    assert!(readiness, "{:?}", fx.probes);
    fx.answer(ProbeType::Readiness, RunResult::Success, "");
    assert!(fx.ready(UID));
    // now liveness applies
    fx.advance(1000);
    fx.answer(ProbeType::Liveness, RunResult::Failure, "dead");
    assert_eq!(fx.restarts(UID), 1);
}

#[test]
fn pr_06_a_failing_startup_probe_restarts_the_container() {
    let mut fx = started(with(|c| c.startup_probe = Some(probe(1, 0, 2))));
    fx.period(ProbeType::Startup, RunResult::Failure);
    assert_eq!(fx.restarts(UID), 0);
    fx.period(ProbeType::Startup, RunResult::Failure);
    assert_eq!(fx.restarts(UID), 1);
    let msg = "Container c failed startup probe, will be restarted";
    assert_eq!(fx.kills[0].message, msg);
}

#[test]
fn pr_22_termination_pins_readiness_to_failure_before_the_kill_and_stops_liveness() {
    let mut fx = started(with(|c| {
        c.readiness_probe = Some(probe(1, 0, 3));
        c.liveness_probe = Some(probe(1, 0, 1));
    }));
    fx.answer(ProbeType::Readiness, RunResult::Success, "");
    fx.period(ProbeType::Liveness, RunResult::Success);
    assert!(fx.ready(UID));
    fx.probes.clear(); // runs already started; their outcomes would be thrown away
    fx.finish_terminating = false;
    fx.remove_pod(UID);
    // the kill is under way (held back), and the pod is already not ready
    assert_eq!(fx.kills.len(), 1);
    assert!(!fx.ready(UID), "not ready before the containers stop");
    let pinned = fx.results().into_iter().last().unwrap();
    assert_eq!(pinned.probe, ProbeType::Readiness);
    assert_eq!(pinned.result, Some(ProbeOutcome::Failure));
    assert_eq!(pinned.reason, ResultReason::Terminating);
    assert!(fx.node().probers.get(&key(ProbeType::Liveness)).is_none());
    // no probe runs while terminating, so no liveness kill can come
    fx.advance(5_000);
    assert!(fx.probes.is_empty(), "{:?}", fx.probes);
    // once the containers are stopped every worker is gone (RemovePod)
    fx.finish_held_terminating();
    assert!(fx.node().probers.is_empty());
    assert!(fx.node().probes.get("ctr-1").readiness.is_none());
}

#[test]
fn pr_13_removing_workers_forgets_their_results_and_timers() {
    let mut fx = started(with(|c| c.readiness_probe = Some(probe(1, 0, 3))));
    fx.answer(ProbeType::Readiness, RunResult::Success, "");
    let readiness = fx.node().probes.get("ctr-1").readiness;
    assert_eq!(readiness, Some(ProbeOutcome::Success));
    fx.remove_pod(UID);
    assert!(fx.node().probers.is_empty());
    assert_eq!(fx.node().probes.get("ctr-1").readiness, None);
    let forgotten = fx
        .results()
        .into_iter()
        .any(|r| r.result.is_none() && r.reason == ResultReason::Stopped);
    assert!(forgotten);
    let timer = key(ProbeType::Readiness).timer();
    assert!(fx.node().timers.get(&timer).is_none());
}

#[test]
fn pr_20_probe_events() {
    let mut fx = started(with(|c| c.readiness_probe = Some(probe(1, 0, 3))));
    let out = "Probe terminated redirects";
    fx.answer(ProbeType::Readiness, RunResult::Warning, out);
    fx.period(ProbeType::Readiness, RunResult::Error);
    fx.period(ProbeType::Readiness, RunResult::Failure);
    let got: Vec<(String, String)> = fx
        .events
        .iter()
        .filter(|e| e.reason == "Unhealthy" || e.reason == "ProbeWarning")
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect();
    let want = [
        (
            "ProbeWarning",
            "Readiness probe warning: Probe terminated redirects",
        ),
        ("Unhealthy", "Readiness probe errored: out"),
        ("Unhealthy", "Readiness probe failed: out"),
    ];
    assert_eq!(got, want.map(|(r, m)| (r.to_string(), m.to_string())));
}

#[test]
fn pr_11_workers_of_a_finished_pod_are_cleaned_up() {
    let mut fx = started(with(|c| c.readiness_probe = Some(probe(1, 0, 3))));
    assert_eq!(fx.node().probers.len(), 1);
    fx.remove_pod(UID);
    fx.advance(5_000);
    assert!(fx.node().probers.is_empty());
    assert!(fx.node().probes.for_container(&Uid::new(UID), "c", "ctr-1") == Default::default());
}

#[test]
fn probe_records_replay_to_the_same_state() {
    let mut fx = started(with(|c| {
        c.readiness_probe = Some(probe(1, 0, 1));
        c.liveness_probe = Some(probe(1, 0, 2));
    }));
    fx.answer(ProbeType::Readiness, RunResult::Success, "");
    for _ in 0..3 {
        fx.advance(1000);
        fx.answer(ProbeType::Liveness, RunResult::Failure, "x");
        fx.answer(ProbeType::Readiness, RunResult::Success, "");
    }
    // the ledger's lines (Record's serde is the ledger codec's)
    let text: String = fx
        .records()
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    let replayed = crate::postmortem::replay::replay(text.as_bytes(), None).unwrap();
    assert_eq!(&replayed.node, fx.node());
    let finished = |r: &Arc<Record>| matches!(&r.event, Event::ProbeFinished(_));
    assert!(fx.records().iter().any(finished));
}

#[test]
fn rt_39_kills_give_the_pre_stop_hook_the_unclamped_grace_period() {
    use k8s_openapi::api::core::v1::{Lifecycle, LifecycleHandler, SleepAction};
    let sleep = |seconds| {
        let sleep = Some(SleepAction { seconds });
        Some(LifecycleHandler {
            sleep,
            ..LifecycleHandler::default()
        })
    };
    let (pre_stop, post_start) = (sleep(5), sleep(0));
    let hook = Lifecycle {
        pre_stop,
        post_start,
        ..Lifecycle::default()
    };
    let mut lp = probe(1, 0, 1);
    lp.termination_grace_period_seconds = Some(7);
    let mut fx = started(with(|c| {
        c.lifecycle = Some(hook.clone());
        c.liveness_probe = Some(lp);
    }));
    // the start plan says how a failed postStart would kill it (the pod's 30 s)
    let start = fx.find_command(|c| match c {
        Command::SyncPod(s) if !s.plan.start.is_empty() => Some(s.plan.start[0].clone()),
        _ => None,
    });
    let start = start.unwrap();
    let k = start.post_start_failure_kill.unwrap();
    assert_eq!((k.grace_period_s, k.pre_stop_s), (30, Some(30)));
    // a liveness kill: the probe's grace, all of it for preStop
    fx.period(ProbeType::Liveness, RunResult::Failure);
    assert_eq!(fx.kills[0].pre_stop_s, Some(7));
    assert_eq!(fx.kills[0].grace_period_s, 7);
    // a pod kill: the pod's grace
    fx.remove_pod(UID);
    let last = fx.kills.last().unwrap();
    assert_eq!((last.grace_period_s, last.pre_stop_s), (30, Some(30)));
    // grace 0: the pod worker raises a kill's grace to 1 s (invariant 2), so preStop gets 1 s
    // and StopContainer the minimum 2 s
    let mut fx = Fx::new();
    let mut p = (*pod_with(with(|c| c.lifecycle = Some(hook.clone())))).clone();
    p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(0);
    let p = Arc::new(p);
    fx.add(p.clone());
    fx.remove(p);
    let last = fx.kills.last().unwrap();
    assert_eq!((last.grace_period_s, last.pre_stop_s), (2, Some(1)));
}
