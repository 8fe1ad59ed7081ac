//! Graceful node shutdown in the core (`core::node_shutdown`, the kubelet's
//! `nodeshutdown` manager): the groups, each pod's grace period, the order of the groups,
//! the statuses pods end with, the admission of new pods and the node event. Behaviour NS-01
//! to NS-10.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use ledgerlet::core::command::{Command, EventType, KubeEvent, WorkType};
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::record::event::{NodeShutdown, PodConfigChange, SourceReady};
use ledgerlet::core::record::Event;
use ledgerlet::core::runtime_status::{ContainerState, RuntimePodStatus};
use ledgerlet::core::timers::TimerKey;
use support::core_harness::{self, pod, uid, Harness};

const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

fn node(total_s: u64, critical_s: u64) -> Harness {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        shutdown_grace_period_s: total_s,
        shutdown_grace_period_critical_pods_s: critical_s,
        ..CoreConfig::default()
    });
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    h
}

/// A pod with `terminationGracePeriodSeconds` `tgps` and, if set, `spec.priority`.
fn api_pod(name: &str, tgps: i64, priority: Option<i32>) -> Arc<Pod> {
    let mut p = (*pod(name, name, "ns").tgps(Some(tgps)).build()).clone();
    p.spec.as_mut().unwrap().priority = priority;
    Arc::new(p)
}

fn run(h: &mut Harness, p: &Arc<Pod>) {
    h.submit(Event::PodAdded(PodConfigChange {
        source: PodSource::Api,
        pod: p.clone(),
    }));
    h.drain();
}

/// The node shuts down; each pod killed then gets the runtime status its kill asks for
/// (so its `SyncTerminatingPod` starts), nothing more.
fn shut_down(h: &mut Harness) {
    h.submit(Event::NodeShutdown(NodeShutdown {}));
    answer_status_reads(h);
}

fn answer_status_reads(h: &mut Harness) {
    let waiting: Vec<String> = h
        .workers()
        .statuses()
        .map(|(u, _)| u.to_string())
        .filter(|u| h.awaiting_status(u))
        .collect();
    for u in waiting {
        h.respond(&u);
    }
}

/// The grace periods of the `SyncTerminatingPod` calls of `name`.
fn kill_graces(h: &Harness, name: &str) -> Vec<Option<i64>> {
    h.sync_calls(name)
        .into_iter()
        .filter(|c| c.work == WorkType::Terminating)
        .map(|c| c.grace_s)
        .collect()
}

fn api_status(h: &Harness, name: &str) -> PodStatus {
    (*h.node().statuses.get(&uid(name)).expect("a status").status).clone()
}

#[test]
fn ns_01_non_critical_pods_get_at_most_the_non_critical_budget_and_critical_pods_wait() {
    let mut h = node(30, 10);
    let long = api_pod("long", 300, None);
    let short = api_pod("short", 5, Some(1000));
    let critical = api_pod("critical", 300, Some(2_000_001_000));
    for p in [&long, &short, &critical] {
        run(&mut h, p);
    }
    shut_down(&mut h);
    assert_eq!(kill_graces(&h, "long"), [Some(20)], "min(300, 30 - 10)");
    assert_eq!(kill_graces(&h, "short"), [Some(5)], "its own, shorter");
    assert!(
        kill_graces(&h, "critical").is_empty(),
        "critical pods wait for the non-critical group"
    );
    h.drain_pod("long");
    assert!(kill_graces(&h, "critical").is_empty(), "short still runs");
    h.drain_pod("short");
    answer_status_reads(&mut h);
    assert_eq!(
        kill_graces(&h, "critical"),
        [Some(10)],
        "once the non-critical pods stopped: min(300, 10)"
    );
}

#[test]
fn ns_02_critical_pods_are_killed_when_the_non_critical_budget_runs_out() {
    let mut h = node(30, 10);
    let stuck = api_pod("stuck", 300, None);
    let critical = api_pod("critical", 3, Some(2_000_000_000));
    run(&mut h, &stuck);
    run(&mut h, &critical);
    shut_down(&mut h);
    let (_, due) = h
        .timer(&TimerKey::NodeShutdownGroup)
        .expect("the non-critical budget is armed");
    assert_eq!(due.since(h.now).as_millis(), 20_000);
    h.advance(20_000);
    h.fire(TimerKey::NodeShutdownGroup);
    answer_status_reads(&mut h);
    assert_eq!(kill_graces(&h, "critical"), [Some(3)], "its own, shorter");
    assert!(
        h.syncing("stuck").is_some(),
        "the non-critical pod is still stopping"
    );
}

#[test]
fn ns_03_the_critical_priority_classes_count_when_no_priority_was_resolved() {
    let mut h = node(30, 10);
    let mut p = (*api_pod("static-critical", 300, None)).clone();
    p.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
    let critical = Arc::new(p);
    let normal = api_pod("normal", 300, Some(1_999_999_999));
    run(&mut h, &critical);
    run(&mut h, &normal);
    shut_down(&mut h);
    assert_eq!(kill_graces(&h, "normal"), [Some(20)]);
    assert!(kill_graces(&h, "static-critical").is_empty());
    h.drain();
    assert_eq!(kill_graces(&h, "static-critical"), [Some(10)]);
}

#[test]
fn ns_04_pods_end_failed_terminated_with_the_disruption_target_condition() {
    let mut h = node(30, 10);
    let p = api_pod("p", 300, None);
    run(&mut h, &p);
    shut_down(&mut h);
    h.drain();
    let s = api_status(&h, "p");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Terminated"));
    assert_eq!(s.message.as_deref(), Some(MESSAGE));
    let dt = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget");
    assert_eq!(dt.status, "True");
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(dt.message.as_deref(), Some(MESSAGE));
    assert!(h.node().all_pods_stopped());
}

#[test]
fn ns_05_pods_added_during_the_shutdown_are_rejected_with_the_kubelets_reason() {
    let mut h = node(30, 10);
    shut_down(&mut h);
    let late = api_pod("late", 30, None);
    run(&mut h, &late);
    let s = api_status(&h, "late");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("NodeShutdown"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: Pod was rejected as the node is shutting down."),
        "rejectPod's prefix and the shutdown manager's message"
    );
    assert!(kill_graces(&h, "late").is_empty(), "never started");
}

#[test]
fn ns_06_without_a_shutdown_grace_period_every_pod_stops_at_once_with_its_own_grace() {
    let mut h = node(0, 0);
    let normal = api_pod("normal", 300, None);
    let critical = api_pod("critical", 40, Some(2_000_001_000));
    run(&mut h, &normal);
    run(&mut h, &critical);
    shut_down(&mut h);
    assert_eq!(kill_graces(&h, "normal"), [Some(300)]);
    assert_eq!(kill_graces(&h, "critical"), [Some(40)]);
    assert!(
        !h.commands.iter().any(
            |(_, c)| matches!(c, Command::SetTimer(t) if t.key == TimerKey::NodeShutdownGroup)
        ),
        "graceful shutdown off: no budget timer"
    );
}

#[test]
fn ns_07_a_critical_pods_budget_above_the_total_is_a_config_error_naming_the_field() {
    let c = CoreConfig {
        shutdown_grace_period_s: 10,
        shutdown_grace_period_critical_pods_s: 11,
        ..CoreConfig::default()
    };
    let e = c.validate().unwrap_err();
    assert_eq!(e.field, "shutdown_grace_period_critical_pods_s");
}

#[test]
fn ns_08_a_second_shutdown_record_kills_nothing_again() {
    let mut h = node(30, 10);
    let p = api_pod("p", 300, None);
    run(&mut h, &p);
    shut_down(&mut h);
    shut_down(&mut h);
    h.drain();
    assert_eq!(kill_graces(&h, "p"), [Some(20)]);
}

/// The node events a shutdown record emits.
fn shutdown_events(h: &mut Harness) -> Vec<KubeEvent> {
    h.submit(Event::NodeShutdown(NodeShutdown {}))
        .into_iter()
        .filter_map(|c| match c {
            Command::RecordEvent(e) if e.object.kind == "Node" => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn ns_09_a_graceful_shutdown_records_the_kubelets_shutdown_event_on_the_node() {
    let mut h = node(30, 10);
    let events = shutdown_events(&mut h);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].object.name, "node");
    assert_eq!(events[0].event_type, EventType::Normal);
    assert_eq!(events[0].reason, "Shutdown");
    assert_eq!(
        events[0].message,
        "Shutdown manager detected shutdown event"
    );
    let mut off = node(0, 0);
    assert!(
        shutdown_events(&mut off).is_empty(),
        "without graceful shutdown there is no shutdown manager to record it"
    );
}

fn runtime_pod(name: &str, running: bool) -> RuntimePodStatus {
    let state = if running {
        ContainerState::Running
    } else {
        ContainerState::Exited
    };
    let mut main = core_harness::container_status("c1", "main", state);
    if !running {
        main.finished_at = main.started_at;
    }
    core_harness::runtime_pod(name, "ns", true, None, vec![main])
}

#[test]
fn ns_10_a_pod_that_succeeded_while_the_node_shut_down_stays_succeeded() {
    let mut h = node(30, 10);
    let mut p = (*api_pod("done", 30, None)).clone();
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let p = Arc::new(p);
    h.runtime.insert(uid("done"), runtime_pod("done", true));
    run(&mut h, &p);
    h.runtime.insert(uid("done"), runtime_pod("done", false));
    shut_down(&mut h);
    h.drain();
    let s = api_status(&h, "done");
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(s.reason.as_deref(), Some("Terminated"));
    assert_eq!(s.message.as_deref(), Some(MESSAGE));
}

#[test]
fn ns_01_with_only_critical_pods_they_are_killed_at_once_with_the_critical_budget() {
    let mut h = node(30, 10);
    let critical = api_pod("critical", 300, Some(2_000_000_000));
    run(&mut h, &critical);
    shut_down(&mut h);
    assert_eq!(
        kill_graces(&h, "critical"),
        [Some(10)],
        "an empty group is not waited for"
    );
    assert!(
        !h.commands.iter().any(
            |(_, c)| matches!(c, Command::SetTimer(t) if t.key == TimerKey::NodeShutdownGroup)
        ),
        "no budget timer for an empty group"
    );
}
