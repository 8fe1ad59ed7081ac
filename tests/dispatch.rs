//! BEHAVIOUR.md §J (housekeeping) and the kubelet's config/PLEG routing (kubelet.go
//! `HandlePod*`, `syncLoopIteration`), driven through ledger records.

mod support;

use std::sync::Arc;

use ledgerlet::core::command::{Command, EventType, WorkType};
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::record::event::{PlegEvent, PlegEventKind, PodConfigChange, SourceReady};
use ledgerlet::core::record::Event;
use ledgerlet::core::runtime_status::{ContainerState, RuntimePodStatus};
use ledgerlet::core::timers::TimerKey;
use ledgerlet::core::update::UpdateType;
use support::core_harness::{container_status, pod, runtime_pod, uid, Harness};

fn added(source: PodSource, p: &Arc<k8s_openapi::api::core::v1::Pod>) -> Event {
    Event::PodAdded(PodConfigChange {
        source,
        pod: p.clone(),
    })
}

fn removed(source: PodSource, p: &Arc<k8s_openapi::api::core::v1::Pod>) -> Event {
    Event::PodRemoved(PodConfigChange {
        source,
        pod: p.clone(),
    })
}

fn sync_known_records(h: &Harness) -> usize {
    h.engine
        .ledger()
        .since(0)
        .filter(|r| matches!(&r.event, Event::SyncKnownPods(s) if s.desired.is_none()))
        .count()
}

#[test]
fn hk_01_housekeeping_waits_for_every_source_then_reconciles_the_workers() {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::File, PodSource::Api],
        ..CoreConfig::default()
    });
    let (_, due) = h.timer(&TimerKey::Housekeeping).expect("armed at start");
    assert_eq!(due.since(h.now).as_millis(), 2_000, "housekeepingPeriod");
    h.submit(added(
        PodSource::File,
        &pod("b", "b", "ns").static_pod().build(),
    ));
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    assert_eq!(sync_known_records(&h), 0, "the api source has not reported");
    assert!(h.timer(&TimerKey::Housekeeping).is_some(), "re-armed");
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    h.submit(added(PodSource::Api, &pod("a", "a", "ns").build()));
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    assert_eq!(
        sync_known_records(&h),
        1,
        "desired = the pod manager's pods"
    );
    assert!(h.workers().pods_synced());
    let desired = [uid("a"), uid("b")];
    let report = h.workers().known_pods_report(desired.iter());
    assert_eq!(report.len(), 2);
    assert!(report.values().all(|s| !s.orphan), "{report:?}");
}

#[test]
fn hk_02_static_pod_restarted_with_a_fixed_uid() {
    let mut h = Harness::with_file_source();
    let v1 = pod("fixed", "etcd", "kube-system")
        .static_pod()
        .label("v", "1")
        .build();
    h.submit(added(PodSource::File, &v1));
    h.drain();
    assert_eq!(h.sync_kinds("fixed"), [WorkType::Sync]);
    // the manifest changes but keeps its UID: the source removes and re-adds the pod
    let v2 = pod("fixed", "etcd", "kube-system")
        .static_pod()
        .label("v", "2")
        .build();
    h.submit(removed(PodSource::File, &v1));
    h.submit(added(PodSource::File, &v2));
    assert!(h.status("fixed").restart_requested());
    h.drain();
    assert!(h.status("fixed").is_finished(), "the old pod terminated");
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    h.drain();
    let calls = h.sync_calls("fixed");
    let kinds: Vec<_> = calls.iter().map(|c| c.work).collect();
    assert_eq!(
        kinds,
        [
            WorkType::Sync,
            WorkType::Terminating,
            WorkType::Terminated,
            WorkType::Sync
        ]
    );
    let last = calls.last().unwrap();
    assert_eq!(last.update_type, Some(UpdateType::Create));
    assert_eq!(
        last.labels["v"], "2",
        "the new containers come from the new spec"
    );
}

/// PW-13 with a housekeeping pass in between: the pass sees the pod terminating (nothing
/// to do), then a Create for the same UID arrives (a relist re-adds it: no map gains or
/// loses a key), and the next pass must purge the finished UID and start the pod afresh.
/// The restart request alone must invalidate what housekeeping remembered
/// (`core::housekeeping_memo`).
#[test]
fn pw_13_restart_requested_between_two_housekeeping_passes_is_honoured() {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        ..CoreConfig::default()
    });
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    let live = pod("a", "a", "ns").label("v", "1").build();
    h.submit(added(PodSource::Api, &live));
    h.drain();
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    h.drain();
    h.submit(Event::PodDeleted(PodConfigChange {
        source: PodSource::Api,
        pod: pod("a", "a", "ns").label("v", "1").deleted(30).build(),
    }));
    assert!(h.status("a").is_termination_requested());
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    assert!(!h.status("a").is_finished(), "still terminating");
    let again = pod("a", "a", "ns").label("v", "2").build();
    h.submit(added(PodSource::Api, &again));
    assert!(h.status("a").restart_requested());
    h.drain();
    assert!(h.status("a").is_finished(), "the old pod terminated");
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    h.drain();
    let calls = h.sync_calls("a");
    let kinds: Vec<_> = calls.iter().map(|c| c.work).collect();
    assert_eq!(
        kinds[..3],
        [WorkType::Sync, WorkType::Terminating, WorkType::Terminated,]
    );
    // a second life: housekeeping purged the finished UID and re-created the worker from
    // the new spec (the first life's terminal status then ends the second one too)
    let second = calls.get(3).expect("the pod got a second worker life");
    assert_eq!(second.labels["v"], "2", "{calls:?}");
}

/// A node of `--max-pods 1` whose API source is ready and that runs pod `a`: the next
/// pod added is rejected with `OutOfpods`.
fn full_node_running_a() -> Harness {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        max_pods: 1,
        ..CoreConfig::default()
    });
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    h.submit(added(PodSource::Api, &pod("a", "a", "ns").build()));
    h.drain();
    h
}

#[test]
fn hk_03_a_rejected_pod_deleted_with_a_terminal_phase_is_killed_once() {
    let mut h = full_node_running_a();
    let b = pod("b", "b", "ns").phase("Failed").deleted(0).build();
    let cmds = h.submit(added(PodSource::Api, &b));
    let ev = cmds
        .iter()
        .find_map(|c| match c {
            Command::RecordEvent(e) => Some(e),
            _ => None,
        })
        .expect("a rejection event");
    assert_eq!(
        (ev.event_type, ev.reason.as_str()),
        (EventType::Warning, "OutOfpods")
    );
    assert_eq!(
        ev.message,
        "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"
    );
    assert!(!h.has_status("b"), "never started");
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    let kills: Vec<_> = h
        .derived_updates()
        .into_iter()
        .filter(|(t, u)| *t == UpdateType::Kill && u.as_str() == "b")
        .collect();
    assert_eq!(kills.len(), 1, "killed so the status can be finalised");
    h.drain();
    assert!(h.status("b").is_finished());
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    let kills = h
        .derived_updates()
        .into_iter()
        .filter(|(t, u)| *t == UpdateType::Kill && u.as_str() == "b")
        .count();
    assert_eq!(kills, 1, "no re-entry: the pod is known to the workers now");
}

fn leftover(running: bool) -> RuntimePodStatus {
    let state = if running {
        ContainerState::Running
    } else {
        ContainerState::Exited
    };
    let app = container_status("c1", "app", state);
    runtime_pod("leftover", "ns", running, None, vec![app])
}

#[test]
fn hk_04_a_runtime_pod_not_in_config_is_killed_with_grace_one() {
    let mut h = Harness::with_file_source();
    h.runtime.insert(uid("ghost"), leftover(true));
    h.respond("ghost");
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    let kill = h
        .engine
        .ledger()
        .since(0)
        .find_map(|r| match &r.event {
            Event::UpdatePod(u) if u.running_pod.is_some() => Some(u.clone()),
            _ => None,
        })
        .expect("a runtime pod kill");
    assert_eq!(kill.update_type, UpdateType::Kill);
    assert_eq!(kill.kill.unwrap().grace_period_override_s, Some(1));
    let running = kill.running_pod.unwrap();
    assert_eq!(
        (running.name.as_str(), running.namespace.as_str()),
        ("leftover", "ns")
    );
    assert_eq!(running.containers.len(), 1);
    assert_eq!(h.sync_kinds("ghost"), [WorkType::TerminatingRuntime]);
    // while it terminates, the next pass reports it {Terminating, Orphan} and does not kill again
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    assert_eq!(h.sync_kinds("ghost").len(), 1);
    let s = h.status("ghost");
    assert!(s.is_termination_requested() && s.is_deleted());
    // the runtime stops it; the worker forgets it; the next pass leaves it alone
    h.runtime.insert(uid("ghost"), leftover(false));
    h.finish("ghost", ledgerlet::core::record::SyncOutcome::Ok);
    assert!(!h.has_status("ghost"));
    h.respond("ghost");
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    assert_eq!(h.sync_kinds("ghost").len(), 1, "gone by the next pass");
}

#[test]
fn pl_12_container_died_syncs_the_pod_and_container_removed_does_not() {
    let mut h = Harness::with_file_source();
    let p = pod("u", "web", "ns").build();
    h.submit(added(PodSource::Api, &p));
    h.drain();
    let pleg = |kind| {
        Event::PlegEvent(PlegEvent {
            uid: uid("u"),
            kind,
            container_id: Some("c1".into()),
        })
    };
    h.submit(pleg(PlegEventKind::ContainerRemoved));
    assert!(h.status("u").activity.is_idle(), "not sync-worthy");
    h.submit(pleg(PlegEventKind::ContainerDied));
    assert!(!h.status("u").activity.is_idle(), "HandlePodSyncs");
    let last = h.derived_updates().pop().unwrap();
    assert_eq!(last, (UpdateType::Sync, uid("u")));
    // an event for a pod that is not desired is ignored
    let n = h.derived_updates().len();
    h.submit(Event::PlegEvent(PlegEvent {
        uid: uid("unknown"),
        kind: PlegEventKind::ContainerStarted,
        container_id: None,
    }));
    assert_eq!(h.derived_updates().len(), n);
}

#[test]
fn removing_a_pod_kills_it_only_once_every_source_is_ready() {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::File, PodSource::Api],
        ..CoreConfig::default()
    });
    let p = pod("u", "web", "ns").static_pod().build();
    h.submit(added(PodSource::File, &p));
    h.drain();
    h.submit(removed(PodSource::File, &p));
    assert!(
        !h.status("u").is_termination_requested(),
        "deletePod is skipped while the api source has not reported"
    );
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    // housekeeping now treats the pod as orphaned and terminates it
    h.advance(2_000);
    h.fire(TimerKey::Housekeeping);
    assert!(h.status("u").is_termination_requested());
    h.drain();
    assert!(h.status("u").is_finished());
}

#[test]
fn admission_rejects_pods_beyond_max_pods_and_counts_only_active_ones() {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        max_pods: 2,
        ..CoreConfig::default()
    });
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    for u in ["a", "b"] {
        h.submit(added(PodSource::Api, &pod(u, u, "ns").build()));
    }
    h.drain();
    h.submit(added(PodSource::Api, &pod("c", "c", "ns").build()));
    assert!(!h.has_status("c"), "rejected");
    assert!(h.node().rejected.contains(&uid("c")));
    // a terminated pod frees its slot
    let a = pod("a", "a", "ns").build();
    h.kill(&a, Default::default());
    h.drain();
    h.submit(added(PodSource::Api, &pod("d", "d", "ns").build()));
    assert!(h.has_status("d"), "admitted once a is terminated");
}

/// AM-01: a rejected pod is Failed with the kubelet's reason and message (`rejectPod`), and a
/// later update of it (a label change) never starts it: its terminal status is sticky.
#[test]
fn am_01_a_rejected_pod_is_failed_and_a_later_update_does_not_start_it() {
    let mut h = full_node_running_a();
    h.submit(added(PodSource::Api, &pod("b", "b", "ns").build()));
    let status = h.node().statuses.get(&uid("b")).expect("a status for b");
    assert_eq!(status.status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.status.reason.as_deref(), Some("OutOfpods"));
    assert_eq!(
        status.status.message.as_deref(),
        Some("Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1")
    );
    assert_eq!(status.status.qos_class.as_deref(), Some("BestEffort"));
    let relabelled = pod("b", "b", "ns").label("touched", "yes").build();
    h.submit(Event::PodUpdated(PodConfigChange {
        source: PodSource::Api,
        pod: relabelled,
    }));
    h.drain();
    let started = h
        .commands
        .iter()
        .any(|(_, c)| matches!(c, Command::SyncPod(s) if s.uid == uid("b")));
    assert!(!started, "a rejected pod is never synced to run");
    let status = h.node().statuses.get(&uid("b")).expect("a status for b");
    assert_eq!(status.status.phase.as_deref(), Some("Failed"));
}

/// AM-03 through dispatch: an extended resource is allocatable once the API server's Node
/// has it in allocatable (`NodeObserved`): requests count against it next to the running
/// pods' (`OutOfexample.com/widget`), and one the node does not advertise is dropped.
#[test]
fn am_03_extended_resources_in_the_observed_nodes_allocatable_are_admitted_up_to_it() {
    use k8s_openapi::api::core::v1::{Node as ApiNode, NodeStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use ledgerlet::core::record::event::{NodeInfoObserved, NodeObserved};
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        ..CoreConfig::default()
    });
    let allocatable = [("cpu", "1"), ("memory", "1Gi"), ("pods", "110")]
        .map(|(k, v)| (k.to_string(), Quantity(v.into())));
    h.submit(Event::NodeInfoObserved(NodeInfoObserved {
        node: Arc::new(ApiNode {
            status: Some(NodeStatus {
                allocatable: Some(allocatable.into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }));
    let widgets = [("example.com/widget".to_string(), Quantity("2".into()))];
    h.submit(Event::NodeObserved(NodeObserved {
        extended_capacity: widgets.clone().into(),
        extended_allocatable: widgets.into(),
        ..Default::default()
    }));
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    let requesting = |name: &str, resource: &str, n: &str| {
        let mut p = (*pod(name, name, "ns").build()).clone();
        p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
            requests: Some([(resource.to_string(), Quantity(n.into()))].into()),
            ..Default::default()
        });
        Arc::new(p)
    };
    h.submit(added(
        PodSource::Api,
        &requesting("one", "example.com/widget", "1"),
    ));
    assert_eq!(rejection_reason(&h, "one"), None);
    h.submit(added(
        PodSource::Api,
        &requesting("two", "example.com/widget", "2"),
    ));
    let status = h
        .node()
        .statuses
        .get(&uid("two"))
        .expect("a status for two");
    assert_eq!(
        status.status.reason.as_deref(),
        Some("OutOfexample.com/widget")
    );
    assert_eq!(
        status.status.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: example.com/widget, requested: \
             2, used: 1, capacity: 2"
        )
    );
    h.submit(added(
        PodSource::Api,
        &requesting("elsewhere", "other.example/gadget", "5"),
    ));
    assert_eq!(rejection_reason(&h, "elsewhere"), None);
    assert!(h.has_status("elsewhere"), "admitted");
}

fn rejection_reason(h: &Harness, u: &str) -> Option<String> {
    let status = h.node().statuses.get(&uid(u))?;
    (status.status.phase.as_deref() == Some("Failed"))
        .then(|| status.status.reason.clone().unwrap_or_default())
}

/// AM-03/AM-06 through dispatch: admission reads the machine's allocatable
/// (`NodeInfoObserved`) and the API Node's taints (`NodeObserved`), and a taint's removal
/// admits the next pod.
#[test]
fn am_06_admission_reads_the_machines_allocatable_and_the_observed_nodes_taints() {
    use k8s_openapi::api::core::v1::{Node as ApiNode, NodeStatus, ResourceRequirements, Taint};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use ledgerlet::core::record::event::{NodeInfoObserved, NodeObserved};
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        ..CoreConfig::default()
    });
    let allocatable = [("cpu", "1"), ("memory", "1Gi"), ("pods", "110")]
        .map(|(k, v)| (k.to_string(), Quantity(v.into())));
    h.submit(Event::NodeInfoObserved(NodeInfoObserved {
        node: Arc::new(ApiNode {
            status: Some(NodeStatus {
                allocatable: Some(allocatable.into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }));
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    let mut greedy = (*pod("greedy", "greedy", "ns").build()).clone();
    greedy.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("2".into()))].into()),
        ..Default::default()
    });
    h.submit(added(PodSource::Api, &Arc::new(greedy)));
    assert_eq!(rejection_reason(&h, "greedy").as_deref(), Some("OutOfcpu"));

    let taint = |effect: &str| Taint {
        key: "maintenance".into(),
        effect: effect.into(),
        ..Default::default()
    };
    h.submit(Event::NodeObserved(NodeObserved {
        taints: vec![taint("NoSchedule"), taint("NoExecute")],
        ..Default::default()
    }));
    h.submit(added(PodSource::Api, &pod("t1", "t1", "ns").build()));
    assert_eq!(
        rejection_reason(&h, "t1").as_deref(),
        Some("TaintToleration")
    );
    h.submit(Event::NodeObserved(NodeObserved {
        taints: vec![taint("NoSchedule")],
        ..Default::default()
    }));
    h.submit(added(PodSource::Api, &pod("t2", "t2", "ns").build()));
    assert!(
        h.has_status("t2"),
        "admitted: NoSchedule is not the kubelet's to check"
    );
    assert_eq!(rejection_reason(&h, "t2"), None);
}

/// RT-44: a pod no config source wants any more (a removed static pod) has its containers
/// and sandboxes removed once finished, as the kubelet's container GC would
/// (`ShouldPodContentBeRemoved`), by a command of its own after `SyncTerminatedPod`, so the
/// final status never waits for it; while the runtime still shows some of it, the node
/// removes it again after the sync error back-off.
#[test]
fn rt_44_a_removed_pods_content_is_removed_after_it_finishes_and_again_if_left() {
    let removals = |h: &Harness| {
        h.commands
            .iter()
            .filter(|(_, c)| matches!(c, Command::RemovePodContent(r) if r.uid.as_str() == "gone"))
            .count()
    };
    let mut h = Harness::with_file_source();
    let gone = pod("gone", "gone", "ns").static_pod().build();
    h.submit(added(PodSource::File, &gone));
    h.drain();
    assert_eq!(removals(&h), 0, "running, not finished");
    // it ran: the runtime shows its exited container and its stopped sandbox
    let exited = container_status("c1", "app", ContainerState::Exited);
    let stopped = runtime_pod("gone", "ns", false, None, vec![exited]);
    h.runtime.insert(uid("gone"), stopped);
    h.submit(removed(PodSource::File, &gone));
    h.drain();
    let kinds = h.sync_kinds("gone");
    assert_eq!(kinds.last(), Some(&WorkType::Terminated));
    assert_eq!(removals(&h), 1, "removed once finished");
    let last_removal = |h: &Harness| {
        h.commands.iter().rev().find_map(|(_, c)| match c {
            Command::RemovePodContent(r) => Some((r.containers.clone(), r.sandboxes.clone())),
            _ => None,
        })
    };
    let what = (vec!["c1".to_string()], vec!["sb".to_string()]);
    assert_eq!(last_removal(&h), Some(what), "what the runtime last showed");
    let position = |want: fn(&Command) -> bool| h.commands.iter().position(|(_, c)| want(c));
    let terminated = position(|c| matches!(c, Command::SyncTerminatedPod(_))).unwrap();
    let removal = position(|c| matches!(c, Command::RemovePodContent(_))).unwrap();
    assert!(
        removal > terminated,
        "after SyncTerminatedPod, not inside it"
    );

    // the runtime still shows the stopped sandbox: removed again when the timer fires
    let key = TimerKey::PodContentRemoval { uid: uid("gone") };
    let (_, due) = h.timer(&key).expect("the node looks again");
    assert_eq!(
        due.since(h.now).as_millis(),
        10_000,
        "the sync error back-off"
    );
    h.runtime
        .insert(uid("gone"), runtime_pod("gone", "ns", false, None, vec![]));
    h.respond("gone");
    h.advance(10_000);
    h.fire(key.clone());
    assert_eq!(removals(&h), 2, "what is left is removed again");
    let what = (vec![], vec!["sb".to_string()]);
    assert_eq!(last_removal(&h), Some(what));
    // once the runtime has nothing of it, the node stops looking
    h.runtime.remove(&uid("gone"));
    h.respond("gone");
    h.advance(10_000);
    h.fire(key);
    assert_eq!(removals(&h), 2, "nothing left");
}

/// A terminated pod still in config keeps its containers (and so its logs).
#[test]
fn rt_44_a_terminated_pod_still_in_config_keeps_its_content() {
    let mut h = Harness::with_file_source();
    let done = pod("done", "done", "ns").static_pod().build();
    h.submit(added(PodSource::File, &done));
    h.drain();
    let (seq, _) = h.kill(&done, Default::default());
    assert!(seq > 0);
    h.drain();
    assert_eq!(h.sync_kinds("done").last(), Some(&WorkType::Terminated));
    let removed = h
        .commands
        .iter()
        .any(|(_, c)| matches!(c, Command::RemovePodContent(_)));
    assert!(!removed, "still wanted by its source");
}

/// AD-02: a pod with `activeDeadlineSeconds` is synced when its deadline passes (a timer
/// from its start time), is failed with `DeadlineExceeded` and its event, and is killed.
#[test]
fn ad_02_a_pod_past_its_active_deadline_fails_with_deadline_exceeded_and_is_killed() {
    let mut h = Harness::with_file_source();
    let mut p = (*pod("d", "deadline", "ns").static_pod().build()).clone();
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(30);
    let p = Arc::new(p);
    h.submit(added(PodSource::File, &p));
    h.drain();
    let key = TimerKey::ActiveDeadline { uid: uid("d") };
    let (_, due) = h.timer(&key).expect("armed when the pod first synced");
    assert_eq!(due.since(h.now).as_millis(), 30_000, "start time + 30 s");
    let status = |h: &Harness| h.node().statuses.get(&uid("d")).unwrap().status.clone();
    assert_eq!(status(&h).phase.as_deref(), Some("Pending"));
    h.advance(30_000);
    h.fire(key);
    h.drain();
    let s = status(&h);
    assert_eq!(
        (
            s.phase.as_deref(),
            s.reason.as_deref(),
            s.message.as_deref()
        ),
        (
            Some("Failed"),
            Some("DeadlineExceeded"),
            Some("Pod was active on the node longer than the specified deadline")
        )
    );
    assert!(h.commands.iter().any(|(_, c)| matches!(c,
        Command::RecordEvent(e) if e.reason == "DeadlineExceeded" && e.event_type == EventType::Normal)));
    assert_eq!(
        h.sync_kinds("d"),
        [WorkType::Sync, WorkType::Terminating, WorkType::Terminated],
        "the deadline's sync found the pod terminal (no runtime action) and it was terminated"
    );
}
