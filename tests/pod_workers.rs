//! BEHAVIOUR.md §A (pod workers): one test per scenario, named by its ID, driving the real
//! engine through ledger records the way the shell would.

mod support;

use ledgerlet::core::command::{Command, EventType, WorkType};
use ledgerlet::core::pod_workers::{effective_grace_period, PodWorkerState, WorkerActivity};
use ledgerlet::core::record::event::{SyncKnownPods, SyncOutcome};
use ledgerlet::core::record::{Event, Time};
use ledgerlet::core::runtime_status::{ContainerState, RunningPod, RuntimePodStatus, SandboxState};
use ledgerlet::core::timers::TimerKey;
use ledgerlet::core::update::{KillPodOptions, PodStatusOverride, UpdatePod, UpdateType};
use std::collections::BTreeSet;
use std::sync::Arc;
use support::core_harness::{container_status, pod, runtime_pod, uid, Harness};

fn ms_between(a: Time, b: Time) -> u64 {
    b.since(a).as_millis() as u64
}

fn running_pod_status() -> RuntimePodStatus {
    let main = container_status("c1", "main", ContainerState::Running);
    runtime_pod("p", "ns", true, None, vec![main])
}

fn sync_known(h: &mut Harness, desired: &[&str]) -> Vec<Command> {
    let mut d: Vec<_> = desired.iter().map(|s| uid(s)).collect();
    d.sort();
    h.submit(Event::SyncKnownPods(SyncKnownPods { desired: Some(d) }))
}

#[test]
fn pw_01_new_pod_is_recorded_and_started() {
    let mut h = Harness::new();
    let p = pod("1", "running-pod", "ns").build();
    let t0 = h.now;
    let cmds = h.update(UpdateType::Create, &p);
    // The worker takes the update at once and asks for a fresh runtime status.
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::InspectPod { uid } if uid.as_str() == "1")));
    let s = h.status("1");
    assert_eq!(s.fullname, "running-pod_ns");
    assert_eq!(s.synced_at, t0);
    assert_eq!(s.started_at(), Some(t0));
    assert_eq!(
        s.active_update.as_ref().unwrap().pod.as_deref(),
        Some(&*p),
        "activeUpdate holds the pod"
    );
    assert!(!s.is_termination_requested());
    h.drain();
    let s = h.status("1");
    assert!(!s.is_working(), "idle after drain");
    let calls = h.sync_calls("1");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].work, WorkType::Sync);
    assert_eq!(calls[0].update_type, Some(UpdateType::Create));
    assert!(!h.workers().is_pod_known_terminated(&uid("1")));
}

#[test]
fn pw_02_update_pod_coalesces_into_the_newest_pending_update() {
    let mut h = Harness::new();
    for i in 0..20 {
        for j in i..20 {
            let p = pod(&format!("uid-{j}"), &format!("name-{i}"), "ns").build();
            h.update(UpdateType::Create, &p);
        }
    }
    h.drain();
    for i in 0..20 {
        let calls = h.sync_calls(&format!("uid-{i}"));
        assert!(!calls.is_empty(), "uid-{i} was never synced");
        assert!(
            calls.len() <= i + 1,
            "uid-{i} synced {} times, at most {} allowed",
            calls.len(),
            i + 1
        );
        assert_eq!(
            calls.last().unwrap().pod_name.as_deref(),
            Some(format!("name-{i}").as_str()),
            "the last sync of uid-{i} must see its newest update"
        );
    }
}

#[test]
fn pw_03_kill_is_never_lost_and_nothing_syncs_after_a_kill() {
    let mut h = Harness::new();
    for i in 0..20 {
        let p = pod(&format!("{i}"), &format!("pod-{i}"), "ns").build();
        h.update(UpdateType::Create, &p);
        h.kill(&p, KillPodOptions::default());
        h.update(UpdateType::Update, &p);
    }
    h.drain();
    for i in 0..20 {
        let calls = h.sync_calls(&format!("{i}"));
        let kinds: Vec<_> = calls.iter().map(|c| c.work).collect();
        let ok = kinds == [WorkType::Terminating, WorkType::Terminated]
            || kinds == [WorkType::Sync, WorkType::Terminating, WorkType::Terminated];
        assert!(ok, "pod {i}: {kinds:?}");
        let kill = calls
            .iter()
            .find(|c| c.work == WorkType::Terminating)
            .unwrap();
        assert_eq!(kill.grace_s, Some(30), "Kill(grace=30)");
        // no SyncPod after the first terminating call
        let first_kill = kinds
            .iter()
            .position(|k| *k == WorkType::Terminating)
            .unwrap();
        assert!(!kinds[first_kill..].contains(&WorkType::Sync));
        assert!(h.status(&format!("{i}")).is_finished());
    }
}

fn start_running(h: &mut Harness, p: &Arc<k8s_openapi::api::core::v1::Pod>) {
    h.update(UpdateType::Create, p);
    h.drain();
}

#[test]
fn pw_04_a_kill_during_sync_cancels_the_sync() {
    type Make = fn(&Arc<k8s_openapi::api::core::v1::Pod>) -> UpdatePod;
    let variants: [(&str, Make); 4] = [
        ("deletion timestamp", |p| {
            let deleted = pod(p.metadata.uid.as_deref().unwrap(), "p", "ns")
                .deleted(30)
                .build();
            UpdatePod::for_pod(UpdateType::Update, deleted)
        }),
        ("terminal phase", |p| {
            let done = pod(p.metadata.uid.as_deref().unwrap(), "p", "ns")
                .phase("Failed")
                .build();
            UpdatePod::for_pod(UpdateType::Update, done)
        }),
        ("kill", |p| UpdatePod::for_pod(UpdateType::Kill, p.clone())),
        ("orphaned runtime pod", |p| {
            UpdatePod::kill_running_pod(
                Arc::new(RunningPod {
                    uid: ledgerlet::core::pod::uid(p),
                    name: "p".into(),
                    namespace: "ns".into(),
                    containers: vec![],
                    sandboxes: vec![],
                }),
                1,
            )
        }),
    ];
    for (what, make) in variants {
        let mut h = Harness::new();
        let p = pod("1", "p", "ns").build();
        start_running(&mut h, &p);
        // a resync is in flight
        h.update(UpdateType::Sync, &p);
        h.respond("1");
        let (sync_id, work) = h.syncing("1").expect("SyncPod in flight");
        assert_eq!(work, WorkType::Sync);
        let cmds = h.submit(Event::UpdatePod(make(&p)));
        assert!(
            cmds.iter()
                .any(|c| matches!(c, Command::CancelSync { sync_id: s, .. } if *s == sync_id)),
            "{what}: the running sync must be cancelled: {cmds:?}"
        );
        assert!(
            h.status("1").pending_update.is_some(),
            "{what}: the update waits as pending"
        );
        assert_eq!(
            h.syncing("1"),
            Some((sync_id, WorkType::Sync)),
            "{what}: still one sync"
        );
        let t = h.now;
        let cmds = h.finish("1", SyncOutcome::Canceled);
        // requeued like an error (10 s jittered) and the pending update runs at once
        let (_, due) = h.timer(&TimerKey::PodWork { uid: uid("1") }).unwrap();
        let delay = ms_between(t, due);
        assert!((10_000..15_000).contains(&delay), "{what}: backoff {delay}");
        assert!(
            cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })),
            "{what}: the terminating work starts immediately: {cmds:?}"
        );
        h.drain();
        let kinds = h.sync_kinds("1");
        // (for the runtime pod kill, the config pod is known, so it becomes a normal
        // terminating sync: PW-20)
        assert_eq!(kinds[2], WorkType::Terminating, "{what}: {kinds:?}");
        assert!(h.status("1").is_finished(), "{what}");
    }
}

#[test]
fn pw_05_grace_period_only_shortens() {
    let p = |tgps: Option<i64>, deletion: Option<i64>| {
        let mut b = pod("1", "p", "ns").tgps(tgps);
        if let Some(d) = deletion {
            b = b.deleted(d);
        }
        b.build()
    };
    let o = |s: i64| KillPodOptions {
        grace_period_override_s: Some(s),
        ..KillPodOptions::default()
    };
    // (current, spec, deletion, override) -> expected
    type Row = (i64, Option<i64>, Option<i64>, Option<i64>, i64);
    let table: [Row; 10] = [
        (0, Some(30), None, None, 30),
        (0, Some(30), Some(5), None, 5),
        (0, Some(30), Some(5), Some(2), 2),
        (0, Some(30), Some(0), None, 1),
        (0, Some(30), None, Some(0), 1),
        (0, None, None, None, 1),
        (10, Some(30), None, Some(20), 10),
        (10, Some(30), Some(20), None, 10),
        (10, Some(30), None, Some(3), 3),
        // deletion grace 0 then a larger override: never grows (upstream would give 31)
        (30, Some(30), Some(0), Some(31), 1),
    ];
    for (current, spec, deletion, over, want) in table {
        let kill = over.map(o);
        let (got, _) = effective_grace_period(current, &p(spec, deletion), kill.as_ref());
        assert_eq!(
            got, want,
            "current {current} spec {spec:?} deletion {deletion:?} override {over:?}"
        );
    }
}

#[test]
fn pw_06_a_shortened_grace_period_cancels_and_a_longer_one_is_ignored() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(&p, KillPodOptions::default());
    h.drain_pod_until_syncing("1");
    let (first, work) = h.syncing("1").unwrap();
    assert_eq!(work, WorkType::Terminating);
    assert_eq!(h.status("1").grace_period_s(), 30);

    // A: the API shortens the grace period to 10
    let shorter = pod("1", "p", "ns").deleted(10).build();
    let cmds = h.update(UpdateType::Update, &shorter);
    assert_eq!(h.status("1").grace_period_s(), 10);
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::CancelSync { sync_id, .. } if *sync_id == first)));
    h.finish("1", SyncOutcome::Canceled);
    h.drain_pod_until_syncing("1");
    let calls = h.sync_calls("1");
    let last = calls.last().unwrap();
    assert_eq!((last.work, last.grace_s), (WorkType::Terminating, Some(10)));

    // B: a later, longer override changes nothing and cancels nothing
    let (second, _) = h.syncing("1").unwrap();
    let (_, cmds) = h.kill(
        &shorter,
        KillPodOptions {
            grace_period_override_s: Some(20),
            ..KillPodOptions::default()
        },
    );
    assert_eq!(h.status("1").grace_period_s(), 10);
    assert!(!cmds.iter().any(|c| matches!(c, Command::CancelSync { .. })));
    assert_eq!(h.syncing("1").unwrap().0, second);
}

#[test]
fn pw_07_every_terminating_update_carries_the_grace_period() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);

    // Kill options on an update for a pod that is not terminating are discarded, and a
    // waiter is released at once.
    let seq = h.next_seq();
    let mut u = UpdatePod::for_pod(UpdateType::Update, p.clone());
    u.kill = Some(KillPodOptions {
        grace_period_override_s: Some(5),
        wait_for_completion: true,
        ..KillPodOptions::default()
    });
    let cmds = h.submit(Event::UpdatePod(u));
    assert_eq!(h.status("1").grace_period_s(), 0, "not terminating");
    let _ = cmds;
    assert!(
        kill_completed(&h, seq).is_some(),
        "CompletedCh closed at once"
    );
    h.drain();
    let last = h.sync_calls("1").pop().unwrap();
    assert_eq!(last.work, WorkType::Sync, "still running");

    // Once terminating, every accepted update carries the effective grace period.
    h.kill(&p, KillPodOptions::default());
    let pending_override = |h: &Harness| {
        let s = h.status("1");
        s.pending_update
            .as_ref()
            .or(s.active_update.as_ref())
            .and_then(|u| u.kill.as_ref())
            .and_then(|k| k.grace_period_override_s)
    };
    assert_eq!(pending_override(&h), Some(30));
    h.update(UpdateType::Update, &p);
    assert_eq!(
        h.status("1")
            .pending_update
            .as_ref()
            .and_then(|u| u.kill.as_ref())
            .and_then(|k| k.grace_period_override_s),
        Some(30),
        "a plain update while terminating is given the grace period"
    );
    h.drain();
    for c in h.sync_calls("1") {
        if c.work == WorkType::Terminating {
            assert_eq!(c.grace_s, Some(30));
        }
    }
}

fn kill_completed(h: &Harness, request: u64) -> Option<bool> {
    h.engine.ledger().since(0).find_map(|r| match &r.event {
        Event::KillCompleted(k) if k.requests.contains(&request) => Some(k.timed_out),
        _ => None,
    })
}

#[test]
fn pw_08_a_deletion_timestamp_starts_termination() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.advance(1000);
    let t = h.now;
    let deleted = pod("1", "p", "ns").deleted(15).build();
    h.update(UpdateType::Update, &deleted);
    let s = h.status("1");
    assert!(s.is_deleted());
    assert_eq!(s.terminating_at(), Some(t));
    assert_eq!(s.grace_period_s(), 15);
    h.drain();
    let s = h.status("1");
    assert!(s.is_termination_started());
    assert!(s.is_finished());
    assert_eq!(
        s.active_update
            .as_ref()
            .unwrap()
            .kill
            .as_ref()
            .unwrap()
            .grace_period_override_s,
        Some(15)
    );
    let calls = h.sync_calls("1");
    let tail: Vec<_> = calls.iter().skip(1).map(|c| (c.work, c.grace_s)).collect();
    assert_eq!(
        tail,
        [
            (WorkType::Terminating, Some(15)),
            (WorkType::Terminated, None)
        ]
    );
    assert!(h.workers().is_pod_known_terminated(&uid("1")));
}

#[test]
fn pw_09_eviction_marks_the_pod_evicted_and_its_content_removable() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(
        &p,
        KillPodOptions {
            evict: true,
            ..KillPodOptions::default()
        },
    );
    assert!(h.status("1").is_evicted());
    assert_eq!(h.status("1").grace_period_s(), 30);
    h.drain();
    assert!(h.status("1").is_finished());
    assert!(
        !h.status("1").is_deleted(),
        "eviction alone is not deletion"
    );
    assert!(h.workers().should_pod_content_be_removed(&uid("1")));
}

#[test]
fn pw_10_kill_without_deletion_terminates_but_keeps_content() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(&p, KillPodOptions::default());
    h.drain();
    let s = h.status("1");
    assert!(s.is_terminated() && s.is_finished());
    assert!(!s.is_deleted() && !s.is_evicted());
    assert!(!h.workers().should_pod_content_be_removed(&uid("1")));
    assert!(!h.workers().could_have_running_containers(&uid("1")));
}

#[test]
fn pw_11_terminal_phase_on_first_update_without_cache_entry() {
    // The kubelet's pod cache answers an unknown pod with an empty status; the scenario's
    // "Get returns NotFound" is a failed inspection here. The terminal-cache shortcut of
    // PW-12 must not apply, so the pod takes the full terminating path.
    let mut h = Harness::with_file_source();
    h.respond_error("1", "NotFound: pod \"1\" not found in the runtime");
    let p = pod("1", "p", "ns").phase("Succeeded").build();
    h.submit(Event::PodAdded(
        ledgerlet::core::record::event::PodConfigChange {
            source: ledgerlet::core::config::PodSource::File,
            pod: p.clone(),
        },
    ));
    let s = h.status("1");
    assert_eq!(
        s.terminating_at(),
        Some(s.synced_at),
        "terminating from the first update"
    );
    assert_eq!(s.grace_period_s(), 30);
    assert!(s.terminated_at().is_none(), "not the PW-12 shortcut");
    // the failed inspection also fails the first status wait: FailedSync, retry on the timer
    assert!(h
        .commands
        .iter()
        .any(|(_, c)| matches!(c, Command::RecordEvent(e) if e.reason == "FailedSync")));
    h.fire(TimerKey::PodWork { uid: uid("1") });
    h.drain();
    let kinds: Vec<_> = h
        .sync_calls("1")
        .iter()
        .map(|c| (c.work, c.grace_s))
        .collect();
    assert_eq!(
        kinds,
        [
            (WorkType::Terminating, Some(30)),
            (WorkType::Terminated, None)
        ],
        "SyncPod is never called"
    );
    assert!(h.status("1").is_finished());
    assert!(h.workers().is_pod_known_terminated(&uid("1")));
}

#[test]
fn pw_12_terminal_pod_after_restart_only_runs_sync_terminated_pod() {
    let mut h = Harness::new();
    // the runtime cache knows the pod and nothing of it runs
    let mut exited = running_pod_status();
    exited.containers[0].state = ContainerState::Exited;
    exited.sandboxes[0].state = SandboxState::SandboxNotready;
    h.runtime.insert(uid("1"), exited);
    h.respond("1");
    let p = pod("1", "p", "ns").phase("Succeeded").build();
    h.update(UpdateType::Create, &p);
    let s = h.status("1");
    assert_eq!(s.terminating_at(), Some(s.synced_at));
    assert_eq!(s.terminated_at(), Some(s.synced_at));
    assert!(s.is_termination_started());
    assert!(!s.is_finished());
    assert!(s.is_working());
    // never counted as active by admission (kubernetes/kubernetes#105523)
    let pods = [p.clone()];
    assert!(h.node().active_pods(pods.iter()).is_empty());
    h.drain();
    assert_eq!(h.sync_kinds("1"), [WorkType::Terminated]);
    assert!(h.status("1").is_finished());
    assert!(!h.status("1").restart_requested());

    // A static pod in the same situation finishes without any sync (cleanupUnstartedPod).
    let mut h = Harness::new();
    let mut exited = running_pod_status();
    exited.containers.clear();
    exited.sandboxes[0].state = SandboxState::SandboxNotready;
    h.runtime.insert(uid("s"), exited);
    h.respond("s");
    let p = pod("s", "p", "ns").static_pod().phase("Failed").build();
    h.update(UpdateType::Create, &p);
    h.drain();
    assert!(h.sync_kinds("s").is_empty());
    assert!(h.status("s").is_finished());
}

#[test]
fn pw_13_restart_requested_with_the_same_uid() {
    // UID reuse is a static-pod affair (HK-02): a static pod keeps its phase through
    // TerminatePod (SM-27, PH-09), so the re-created worker really runs SyncPod again. An API
    // pod would come back with its sticky terminal phase and terminate at once (GS-08).
    let mut h = Harness::with_file_source();
    let p = pod("1", "p", "ns").static_pod().label("v", "1").build();
    h.submit(Event::PodAdded(
        ledgerlet::core::record::event::PodConfigChange {
            source: ledgerlet::core::config::PodSource::File,
            pod: p.clone(),
        },
    ));
    h.drain();
    h.kill(&p, KillPodOptions::default());
    h.drain_pod_until_syncing("1");
    assert_eq!(
        h.syncing("1").unwrap().1,
        WorkType::Terminating,
        "worker busy terminating"
    );

    let relabelled = pod("1", "p", "ns").static_pod().label("v", "2").build();
    h.update(UpdateType::Create, &relabelled);
    let s = h.status("1");
    assert!(s.restart_requested());
    assert_eq!(
        s.active_update
            .as_ref()
            .unwrap()
            .pod
            .as_ref()
            .unwrap()
            .metadata
            .labels
            .as_ref()
            .unwrap()["v"],
        "1",
        "the create is dropped"
    );
    h.drain();
    assert!(h.status("1").is_finished());
    let before = h.sync_calls("1").len();

    // Housekeeping purges the history although the pod is still desired, then re-creates it.
    sync_known(&mut h, &["1"]);
    let s = h.status("1");
    assert!(!s.is_finished(), "a fresh worker");
    assert!(!s.restart_requested());
    assert!(h
        .derived_updates()
        .iter()
        .any(|(t, u)| *t == UpdateType::Create && u.as_str() == "1"));
    h.drain();
    let calls = h.sync_calls("1");
    assert_eq!(calls[before].work, WorkType::Sync);
    assert_eq!(calls[before].update_type, Some(UpdateType::Create));
}

#[test]
fn pw_14_a_finished_uid_never_restarts_until_purged() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(&p, KillPodOptions::default());
    h.drain();
    let n = h.sync_calls("1").len();
    for t in [
        UpdateType::Create,
        UpdateType::Update,
        UpdateType::Sync,
        UpdateType::Kill,
    ] {
        let cmds = h.update(t, &p);
        assert!(cmds.is_empty(), "{t:?} must be ignored: {cmds:?}");
    }
    assert_eq!(h.sync_calls("1").len(), n);
    sync_known(&mut h, &[]);
    assert!(!h.has_status("1"), "purged once not desired");
    h.update(UpdateType::Create, &p);
    h.drain();
    let calls = h.sync_calls("1");
    assert_eq!(calls.len(), n + 1);
    assert_eq!(calls[n].work, WorkType::Sync);
}

#[test]
fn pw_15_a_create_on_first_sighting_is_not_a_restart_request() {
    let mut h = Harness::new();
    let mut done = running_pod_status();
    done.containers.clear();
    done.sandboxes.clear();
    h.runtime.insert(uid("1"), done);
    h.respond("1");
    let p = pod("1", "p", "ns").phase("Succeeded").build();
    h.update(UpdateType::Create, &p);
    assert!(h.status("1").is_termination_requested());
    assert!(!h.status("1").restart_requested(), "first sighting");
    // the same create again, now that termination is requested, is a restart request
    h.update(UpdateType::Create, &p);
    assert!(h.status("1").restart_requested());
}

#[test]
fn pw_16_runtime_only_pod_kill() {
    let mut h = Harness::new();
    let running = Arc::new(RunningPod {
        uid: uid("1"),
        name: "orphaned-pod".into(),
        namespace: "ns".into(),
        containers: vec![],
        sandboxes: vec!["sb".into()],
    });
    let t = h.now;
    let cmds = h.submit(Event::UpdatePod(UpdatePod::kill_running_pod(running, 1)));
    let s = h.status("1");
    assert_eq!(s.fullname, "orphaned-pod_ns");
    assert_eq!(s.terminating_at(), Some(t));
    assert_eq!(s.synced_at, t);
    assert_eq!(s.grace_period_s(), 1);
    assert!(s.is_deleted() && s.observed_runtime());
    assert_eq!(
        s.active_update
            .as_ref()
            .unwrap()
            .kill
            .as_ref()
            .unwrap()
            .grace_period_override_s,
        Some(1)
    );
    assert!(
        !cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })),
        "no pod cache wait for a runtime pod"
    );
    h.drain();
    assert_eq!(h.sync_kinds("1"), [WorkType::TerminatingRuntime]);
    assert!(!h.has_status("1"), "the status is deleted entirely");
    assert!(!h.workers().is_pod_known_terminated(&uid("1")));
}

#[test]
fn pw_17_a_runtime_pod_with_a_non_kill_update_is_ignored() {
    let mut h = Harness::new();
    let mut u = UpdatePod::kill_running_pod(
        Arc::new(RunningPod {
            uid: uid("1"),
            name: "x".into(),
            namespace: "ns".into(),
            containers: vec![],
            sandboxes: vec![],
        }),
        1,
    );
    u.update_type = UpdateType::Create;
    let cmds = h.submit(Event::UpdatePod(u));
    assert!(cmds.is_empty());
    assert!(!h.has_status("1"));
}

#[test]
fn pw_18_running_pod_together_with_pod_is_dropped() {
    let mut h = Harness::new();
    let p = pod("1", "from-pod", "ns").build();
    let mut u = UpdatePod::for_pod(UpdateType::Create, p);
    u.running_pod = Some(Arc::new(RunningPod {
        uid: uid("1"),
        name: "from-runtime".into(),
        namespace: "other".into(),
        containers: vec![],
        sandboxes: vec![],
    }));
    h.submit(Event::UpdatePod(u));
    assert_eq!(h.status("1").fullname, "from-pod_ns");
    h.drain();
    assert_eq!(h.sync_kinds("1"), [WorkType::Sync]);
}

#[test]
fn pw_19_runtime_pod_kill_after_termination_is_ignored() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(&p, KillPodOptions::default());
    // run until SyncTerminatedPod is in flight: terminated, not finished
    for _ in 0..10 {
        if h.syncing("1").map(|s| s.1) == Some(WorkType::Terminated) {
            break;
        }
        if h.awaiting_status("1") {
            h.respond("1");
        } else {
            h.finish("1", SyncOutcome::Ok);
        }
    }
    assert!(h.status("1").is_terminated() && !h.status("1").is_finished());
    let n = h.sync_calls("1").len();
    let cmds = h.submit(Event::UpdatePod(UpdatePod::kill_running_pod(
        Arc::new(RunningPod {
            uid: uid("1"),
            name: "p".into(),
            namespace: "ns".into(),
            containers: vec![],
            sandboxes: vec![],
        }),
        1,
    )));
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(h.status("1").pending_update.is_none());
    h.drain();
    assert_eq!(h.sync_calls("1").len(), n);
}

#[test]
fn pw_20_runtime_pod_kill_for_a_uid_with_config_uses_the_spec() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").label("app", "web").build();
    start_running(&mut h, &p);
    h.submit(Event::UpdatePod(UpdatePod::kill_running_pod(
        Arc::new(RunningPod {
            uid: uid("1"),
            name: "p".into(),
            namespace: "ns".into(),
            containers: vec![],
            sandboxes: vec![],
        }),
        1,
    )));
    h.drain();
    let calls = h.sync_calls("1");
    let kill = calls
        .iter()
        .find(|c| c.work == WorkType::Terminating)
        .expect("normal SyncTerminatingPod");
    assert_eq!(kill.labels["app"], "web", "the last known spec");
    assert_eq!(kill.grace_s, Some(1));
    assert!(!calls.iter().any(|c| c.work == WorkType::TerminatingRuntime));
}

#[test]
fn pw_21_sync_pod_reporting_terminal_moves_to_terminating() {
    let mut h = Harness::new();
    let p = pod("1", "job", "ns").build();
    h.update(UpdateType::Create, &p);
    h.respond("1");
    let t = h.now;
    h.finish("1", SyncOutcome::Terminal);
    let s = h.status("1");
    assert_eq!(s.terminating_at(), Some(t));
    assert!(s.is_termination_started());
    let (_, due) = h.timer(&TimerKey::PodWork { uid: uid("1") }).unwrap();
    assert_eq!(due, t, "Enqueue(uid, 0)");
    h.drain();
    assert_eq!(
        h.sync_kinds("1"),
        [WorkType::Sync, WorkType::Terminating, WorkType::Terminated]
    );
    let s = h.status("1");
    assert!(s.is_termination_requested() && s.is_terminated());
}

#[test]
fn pw_22_requeue_timing_after_each_sync() {
    let delay_after = |outcome: SyncOutcome| {
        let mut h = Harness::new();
        let p = pod("1", "p", "ns").build();
        h.update(UpdateType::Create, &p);
        h.respond("1");
        let t = h.now;
        h.finish("1", outcome);
        let (_, due) = h.timer(&TimerKey::PodWork { uid: uid("1") }).unwrap();
        (ms_between(t, due), h.status("1").is_working())
    };
    let (d, working) = delay_after(SyncOutcome::Terminal);
    assert_eq!(d, 0, "phase transition");
    assert!(working, "the terminating work is pending");
    let (d, working) = delay_after(SyncOutcome::Ok);
    assert!((60_000..90_000).contains(&d), "resync {d}");
    assert!(!working);
    let (d, _) = delay_after(SyncOutcome::Failed {
        message: "network is not ready: cni config uninitialized".into(),
    });
    assert!((1_000..1_500).contains(&d), "network not ready {d}");
    let (d, _) = delay_after(SyncOutcome::Failed {
        message: "failed to start container".into(),
    });
    assert!((10_000..15_000).contains(&d), "error backoff {d}");
    let (d, _) = delay_after(SyncOutcome::Canceled);
    assert!(
        (10_000..15_000).contains(&d),
        "canceled is requeued like an error {d}"
    );

    // A pending update is delivered right away after a sync.
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    h.update(UpdateType::Create, &p);
    h.respond("1");
    h.update(UpdateType::Update, &p);
    let cmds = h.finish("1", SyncOutcome::Ok);
    assert!(cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })));
    assert!(h.status("1").is_working());

    // Different pods get different jitter (derived from the record, not a random source).
    let mut seen = BTreeSet::new();
    let mut h = Harness::new();
    for i in 0..20 {
        let p = pod(&format!("{i}"), "p", "ns").build();
        h.update(UpdateType::Create, &p);
        h.respond(&format!("{i}"));
        let t = h.now;
        h.finish(&format!("{i}"), SyncOutcome::Ok);
        let (_, due) = h
            .timer(&TimerKey::PodWork {
                uid: uid(&format!("{i}")),
            })
            .unwrap();
        seen.insert(ms_between(t, due));
    }
    assert!(seen.len() > 10, "jitter varies: {seen:?}");
}

fn static_pod(u: &str) -> Arc<k8s_openapi::api::core::v1::Pod> {
    pod(u, "pod1", "test1").static_pod().build()
}

/// PW-23 setup: 1-normal and 2-static running with the same full name.
fn static_setup() -> Harness {
    let mut h = Harness::new();
    h.update(
        UpdateType::Create,
        &pod("1-normal", "pod1", "test1").build(),
    );
    h.update(UpdateType::Create, &static_pod("2-static"));
    h.drain();
    h
}

#[test]
fn pw_23_static_pods_start_in_full_name_order() {
    let mut h = static_setup();
    assert_eq!(
        h.sync_kinds("1-normal"),
        [WorkType::Sync],
        "non-static never blocked"
    );
    assert_eq!(h.sync_kinds("2-static"), [WorkType::Sync]);
    assert_eq!(
        h.workers().started_static_pods().get("pod1_test1"),
        Some(&uid("2-static"))
    );
    for u in ["3-static", "4-static"] {
        h.update(UpdateType::Create, &static_pod(u));
        assert!(
            h.timer(&TimerKey::PodWork { uid: uid(u) }).is_some(),
            "{u} requeued with backoff"
        );
    }
    h.drain();
    assert!(h.sync_kinds("3-static").is_empty());
    assert!(h.sync_kinds("4-static").is_empty());
    assert_eq!(
        h.workers().waiting_static_pods().get("pod1_test1"),
        Some(&vec![uid("3-static"), uid("4-static")])
    );
}

#[test]
fn pw_24_a_queued_static_pod_killed_before_start() {
    let mut h = static_setup();
    h.update(UpdateType::Create, &static_pod("3-static"));
    h.update(UpdateType::Create, &static_pod("4-static"));
    h.kill(&static_pod("3-static"), KillPodOptions::default());
    let s = h.status("3-static");
    assert!(s.is_finished() && s.is_terminated(), "terminated at once");
    assert!(!s.is_working());
    assert!(h.sync_kinds("3-static").is_empty(), "without any sync");
    assert_eq!(
        h.workers().started_static_pods().get("pod1_test1"),
        Some(&uid("2-static"))
    );
    assert_eq!(
        h.workers().waiting_static_pods().get("pod1_test1"),
        Some(&vec![uid("3-static"), uid("4-static")]),
        "pruned lazily"
    );
}

#[test]
fn pw_25_a_static_successor_starts_after_its_predecessor_terminates() {
    let mut h = static_setup();
    h.update(UpdateType::Create, &static_pod("3-static"));
    h.update(UpdateType::Create, &static_pod("4-static"));
    h.kill(&static_pod("3-static"), KillPodOptions::default());
    h.kill(&static_pod("2-static"), KillPodOptions::default());
    h.drain();
    assert!(h.status("2-static").is_finished());
    assert!(h.workers().started_static_pods().is_empty());
    h.update(UpdateType::Sync, &static_pod("4-static"));
    h.drain();
    assert_eq!(h.sync_kinds("4-static"), [WorkType::Sync]);
    assert_eq!(
        h.workers().started_static_pods().get("pod1_test1"),
        Some(&uid("4-static"))
    );
    assert!(h.workers().waiting_static_pods().is_empty());
}

#[test]
fn pw_26_a_terminating_queued_static_pod_never_blocks_its_successors() {
    // Upstream holds 5's worker so its kill is processed after 6's update. Here a worker
    // takes its update at once, so the observable outcome is what we pin: a
    // termination-requested static pod in the waiting list is skipped, and it finishes
    // without ever syncing.
    let mut h = static_setup();
    h.kill(&static_pod("2-static"), KillPodOptions::default());
    h.drain();
    h.update(UpdateType::Create, &static_pod("4-static"));
    h.drain();
    assert_eq!(h.sync_kinds("4-static"), [WorkType::Sync]);
    h.update(UpdateType::Create, &static_pod("5-static"));
    h.update(UpdateType::Create, &static_pod("6-static"));
    assert_eq!(
        h.workers().waiting_static_pods().get("pod1_test1"),
        Some(&vec![uid("5-static"), uid("6-static")])
    );
    h.kill(&static_pod("5-static"), KillPodOptions::default());
    assert!(h.status("5-static").is_termination_requested());
    h.kill(&static_pod("4-static"), KillPodOptions::default());
    h.drain();
    h.update(UpdateType::Sync, &static_pod("6-static"));
    h.drain();
    assert_eq!(
        h.sync_kinds("6-static"),
        [WorkType::Sync],
        "6 starts, skipping 5"
    );
    assert_eq!(
        h.workers().started_static_pods().get("pod1_test1"),
        Some(&uid("6-static"))
    );
    assert!(h.status("5-static").is_finished());
    assert!(
        h.sync_kinds("5-static").is_empty(),
        "5 terminates without syncing"
    );
}

/// PW-28 setup: 20 running pods, all but 2 and 14 killed (even ones via deletion).
fn twenty_pods() -> Harness {
    let mut h = Harness::new();
    for i in 0..20 {
        h.update(
            UpdateType::Create,
            &pod(&format!("{i}"), &format!("p{i}"), "ns").build(),
        );
    }
    h.drain();
    for i in 0..20 {
        if i == 2 || i == 14 {
            continue;
        }
        let u = format!("{i}");
        if i % 2 == 0 {
            h.update(
                UpdateType::Update,
                &pod(&u, &format!("p{i}"), "ns").deleted(30).build(),
            );
        } else {
            h.kill(
                &pod(&u, &format!("p{i}"), "ns").build(),
                KillPodOptions::default(),
            );
        }
    }
    h.drain();
    h
}

#[test]
fn pw_28_sync_known_pods_purges_and_answers_queries() {
    let mut h = twenty_pods();
    let w = h.workers();
    assert!(w.should_pod_containers_be_terminating(&uid("0")));
    assert!(w.should_pod_containers_be_terminating(&uid("1")));
    assert!(!w.should_pod_containers_be_terminating(&uid("2")));
    assert!(w.is_pod_termination_requested(&uid("0")));
    assert!(!w.is_pod_termination_requested(&uid("2")));
    assert!(!w.could_have_running_containers(&uid("0")));
    assert!(!w.could_have_running_containers(&uid("1")));
    assert!(w.could_have_running_containers(&uid("2")));
    assert!(w.should_pod_content_be_removed(&uid("0")));
    assert!(!w.should_pod_content_be_removed(&uid("1")));
    assert!(!w.should_pod_content_be_removed(&uid("2")));
    let abc = uid("abc");
    assert!(!w.should_pod_containers_be_terminating(&abc));
    assert!(w.could_have_running_containers(&abc));
    assert!(!w.should_pod_content_be_removed(&abc));
    assert!(!w.should_pod_be_finished(&abc));

    sync_known(&mut h, &["2", "14"]);
    let w = h.workers();
    let left: Vec<String> = w.statuses().map(|(u, _)| u.to_string()).collect();
    assert_eq!(left, ["14", "2"]);
    assert!(w.should_pod_containers_be_terminating(&abc));
    assert!(!w.could_have_running_containers(&abc));
    assert!(w.should_pod_content_be_removed(&abc));
    assert!(
        w.should_pod_be_finished(&abc),
        "ShouldPodBeFinished(unknown) = podsSynced"
    );
}

#[test]
fn pw_29_orphaned_running_pods_are_driven_to_completion() {
    let mut h = twenty_pods();
    sync_known(&mut h, &["2", "14"]);
    let t = h.now;
    sync_known(&mut h, &[]);
    for u in ["2", "14"] {
        let s = h.status(u);
        assert_eq!(s.terminating_at(), Some(t));
        assert_eq!(s.grace_period_s(), 30, "from the last pod spec");
        assert!(s.is_deleted());
    }
    h.drain();
    let w = h.workers();
    assert_eq!(w.len(), 2, "finished statuses are kept");
    assert!(w
        .statuses()
        .all(|(_, s)| s.is_finished() && !s.queue.exists()));
    sync_known(&mut h, &[]);
    assert_eq!(h.workers().len(), 0);
}

#[test]
fn pw_31_sync_known_pods_reports_each_worker() {
    let mut h = static_setup();
    // 2-static terminates but stays desired
    h.kill(&static_pod("2-static"), KillPodOptions::default());
    h.drain();
    // 5-static queued behind 7-static and killed before it ever started
    h.update(UpdateType::Create, &static_pod("7-static"));
    h.drain();
    h.update(UpdateType::Create, &static_pod("5-static"));
    h.kill(&static_pod("5-static"), KillPodOptions::default());
    h.update(
        UpdateType::Create,
        &pod("8-static", "other", "ns").static_pod().build(),
    );
    h.drain();

    let all = ["1-normal", "2-static", "5-static", "7-static", "8-static"];
    let report = sync_report(&mut h, &all);
    use ledgerlet::core::pod_workers::PodWorkerSync as S;
    assert_eq!(
        report["1-normal"],
        S {
            state: PodWorkerState::Sync,
            orphan: false,
            has_config: true,
            is_static: false
        }
    );
    assert_eq!(
        report["2-static"],
        S {
            state: PodWorkerState::Terminated,
            orphan: false,
            has_config: true,
            is_static: true
        }
    );
    assert_eq!(
        report["5-static"],
        S {
            state: PodWorkerState::Terminated,
            orphan: false,
            has_config: false,
            is_static: false
        }
    );
    let report = sync_report(&mut h, &["8-static"]);
    assert_eq!(
        report["1-normal"],
        S {
            state: PodWorkerState::Terminating,
            orphan: true,
            has_config: true,
            is_static: false
        }
    );
}

/// Folds SyncKnownPods with `desired` and returns the kubelet's report of it.
fn sync_report(
    h: &mut Harness,
    desired: &[&str],
) -> std::collections::BTreeMap<String, ledgerlet::core::pod_workers::PodWorkerSync> {
    let set: BTreeSet<_> = desired.iter().map(|s| uid(s)).collect();
    sync_known(h, desired);
    h.workers()
        .known_pods_report(set.iter())
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

#[test]
fn pw_32_mirror_pod_guard_while_the_static_pod_terminates() {
    let mut h = static_setup();
    let w = h.workers();
    assert!(
        !w.is_pod_for_mirror_pod_terminating_by_full_name("pod1_test1"),
        "running"
    );
    h.kill(&static_pod("2-static"), KillPodOptions::default());
    assert!(h
        .workers()
        .is_pod_for_mirror_pod_terminating_by_full_name("pod1_test1"));
    h.drain();
    assert!(
        !h.workers()
            .is_pod_for_mirror_pod_terminating_by_full_name("pod1_test1"),
        "terminated"
    );
    assert!(!h
        .workers()
        .is_pod_for_mirror_pod_terminating_by_full_name("nope_ns"));
}

#[test]
fn pw_33_kill_pod_now_completes_or_reports_exceeded_grace_period() {
    // completes: [Kill, Terminated] and the waiter is released, not timed out
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    let failed = PodStatusOverride {
        phase: Some("Failed".into()),
        reason: Some("Evicted".into()),
        message: Some("The node was low on resource: memory.".into()),
        ..PodStatusOverride::default()
    };
    let (req, _) = h.kill(
        &p,
        KillPodOptions {
            grace_period_override_s: Some(0),
            status_override: Some(Box::new(failed.clone())),
            wait_for_completion: true,
            ..KillPodOptions::default()
        },
    );
    let (_, due) = h
        .timer(&TimerKey::KillDeadline {
            uid: uid("1"),
            request: req,
        })
        .expect("deadline armed");
    assert_eq!(ms_between(h.now, due), 10_000, "max(10s, 1.5 × 0)");
    h.drain();
    let calls = h.sync_calls("1");
    let tail: Vec<_> = calls[1..].iter().map(|c| (c.work, c.grace_s)).collect();
    assert_eq!(
        tail,
        [
            (WorkType::Terminating, Some(1)),
            (WorkType::Terminated, None)
        ]
    );
    assert_eq!(calls[1].status_override.as_ref(), Some(&failed));
    assert_eq!(kill_completed(&h, req), Some(false));
    // the deadline firing later is harmless
    h.fire(TimerKey::KillDeadline {
        uid: uid("1"),
        request: req,
    });
    assert!(!h
        .commands
        .iter()
        .any(|(_, c)| matches!(c, Command::RecordEvent(e) if e.reason == "ExceededGracePeriod")));

    // times out: ExceededGracePeriod and a timed-out completion
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    let (req, _) = h.kill(
        &p,
        KillPodOptions {
            grace_period_override_s: Some(30),
            wait_for_completion: true,
            ..KillPodOptions::default()
        },
    );
    let (_, due) = h
        .timer(&TimerKey::KillDeadline {
            uid: uid("1"),
            request: req,
        })
        .unwrap();
    assert_eq!(ms_between(h.now, due), 45_000, "1.5 × 30 s");
    h.advance(45_000);
    let cmds = h.fire(TimerKey::KillDeadline {
        uid: uid("1"),
        request: req,
    });
    let ev = cmds
        .iter()
        .find_map(|c| match c {
            Command::RecordEvent(e) => Some(e),
            _ => None,
        })
        .expect("a warning event");
    assert_eq!(ev.event_type, EventType::Warning);
    assert_eq!(ev.reason, "ExceededGracePeriod");
    assert_eq!(
        ev.message,
        "Container runtime did not kill the pod within specified grace period."
    );
    assert_eq!(kill_completed(&h, req), Some(true));

    // already terminated: released at once
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(&p, KillPodOptions::default());
    h.drain();
    let (req, _) = h.kill(
        &p,
        KillPodOptions {
            wait_for_completion: true,
            ..KillPodOptions::default()
        },
    );
    assert_eq!(kill_completed(&h, req), Some(false));
}

#[test]
fn pw_34_the_last_status_override_wins() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    let preempt = PodStatusOverride {
        phase: Some("Failed".into()),
        reason: Some("Preempting".into()),
        ..PodStatusOverride::default()
    };
    let evict = PodStatusOverride {
        phase: Some("Failed".into()),
        reason: Some("Evicted".into()),
        ..PodStatusOverride::default()
    };
    h.kill(
        &p,
        KillPodOptions {
            status_override: Some(Box::new(preempt.clone())),
            ..KillPodOptions::default()
        },
    );
    h.drain_pod_until_syncing("1");
    assert_eq!(
        h.sync_calls("1").last().unwrap().status_override,
        Some(preempt)
    );
    h.kill(
        &p,
        KillPodOptions {
            status_override: Some(Box::new(evict.clone())),
            ..KillPodOptions::default()
        },
    );
    // the running attempt fails; the retry gets the eviction
    h.finish(
        "1",
        SyncOutcome::Failed {
            message: "rpc error".into(),
        },
    );
    h.drain_pod_until_syncing("1");
    let last = h.sync_calls("1").pop().unwrap();
    assert_eq!(last.work, WorkType::Terminating);
    assert_eq!(last.status_override, Some(evict));
}

#[test]
fn pw_35_each_step_waits_for_a_runtime_status_newer_than_the_last_sync() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    // the next sync needs a status observed after the previous sync finished
    let cmds = h.update(UpdateType::Sync, &p);
    assert!(cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })));
    assert!(h.awaiting_status("1"));
    h.respond("1");
    h.finish("1", SyncOutcome::Ok);
    // a relist after the sync makes the cache fresh: no wait
    h.respond("1");
    let cmds = h.update(UpdateType::Sync, &p);
    assert!(!cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })));
    assert!(h.syncing("1").is_some());
    h.finish("1", SyncOutcome::Ok);
    // an inspection error: FailedSync "error determining status", retried with backoff
    h.update(UpdateType::Sync, &p);
    let t = h.now;
    let cmds = h.respond_error("1", "rpc error: code = Unavailable");
    let ev = cmds
        .iter()
        .find_map(|c| match c {
            Command::RecordEvent(e) => Some(e),
            _ => None,
        })
        .expect("FailedSync");
    assert_eq!(ev.reason, "FailedSync");
    assert_eq!(
        ev.message,
        "error determining status: rpc error: code = Unavailable"
    );
    let (_, due) = h.timer(&TimerKey::PodWork { uid: uid("1") }).unwrap();
    assert!((10_000..15_000).contains(&ms_between(t, due)));
    assert!(h.status("1").activity.is_idle());
    // a runtime-only pod's terminating step never waits on the cache
    let cmds = h.submit(Event::UpdatePod(UpdatePod::kill_running_pod(
        Arc::new(RunningPod {
            uid: uid("r"),
            name: "r".into(),
            namespace: "ns".into(),
            containers: vec![],
            sandboxes: vec![],
        }),
        1,
    )));
    assert!(!cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })));
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::SyncTerminatingRuntimePod(_))));
    let _ = WorkerActivity::Idle;
}

#[test]
fn pw_35_a_runtime_read_begun_before_the_last_sync_finished_is_not_fresh() {
    // A relist reads the runtime while a sync is starting the container, and its record
    // is appended only after the sync finished. Taken as fresh, the next sync would plan
    // a second "first" start of a container that already runs.
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    let before_start = RuntimePodStatus {
        containers: vec![],
        ..running_pod_status()
    };
    h.runtime.insert(uid("1"), before_start.clone());
    start_running(&mut h, &p);
    h.update(UpdateType::Sync, &p);
    h.drain_pod_until_syncing("1");
    let relist_began = h.engine.ledger().last_seq();
    h.finish("1", SyncOutcome::Ok);
    h.respond_read_after("1", relist_began);
    let cmds = h.update(UpdateType::Sync, &p);
    assert!(
        cmds.iter().any(|c| matches!(c, Command::InspectPod { .. })),
        "a read begun before the sync ended does not count: {cmds:?}"
    );
    assert!(h.awaiting_status("1"));
    assert!(h.syncing("1").is_none());
    // the inspection, begun now, sees the running container and the sync goes ahead
    h.runtime.insert(uid("1"), running_pod_status());
    h.respond("1");
    assert!(h.syncing("1").is_some());
    // an older read appended later never replaces the newer cache entry
    let fresh = h.node().runtime.get(&uid("1")).unwrap();
    h.runtime.insert(uid("1"), before_start);
    h.respond_read_after("1", relist_began);
    assert_eq!(h.node().runtime.get(&uid("1")).unwrap(), fresh);
}

trait DrainUntil {
    fn drain_pod_until_syncing(&mut self, uid: &str);
}

impl DrainUntil for Harness {
    /// Answers status waits until `uid` has a sync running.
    fn drain_pod_until_syncing(&mut self, uid: &str) {
        for _ in 0..10 {
            if self.syncing(uid).is_some() {
                return;
            }
            assert!(
                self.awaiting_status(uid),
                "{uid} is neither syncing nor waiting"
            );
            self.respond(uid);
        }
        panic!("{uid} never started a sync");
    }
}

#[test]
fn rt_43_a_failed_pod_kill_records_failed_to_kill_pod_and_is_retried() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    start_running(&mut h, &p);
    h.kill(&p, KillPodOptions::default());
    h.drain_pod_until_syncing("1");
    let failed_to_kill = |cmds: &[Command]| -> Vec<(EventType, String, String)> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::RecordEvent(e) if e.reason == "FailedToKillPod" => {
                    Some((e.event_type, e.object.name.clone(), e.message.clone()))
                }
                _ => None,
            })
            .collect()
    };
    let message = "error killing pod: failed to \"KillPodSandbox\" for \"sb\" with KillPodSandboxError: \"rpc error: code = Unknown\"";
    let cmds = h.finish(
        "1",
        SyncOutcome::Failed {
            message: message.into(),
        },
    );
    assert_eq!(
        failed_to_kill(&cmds),
        [(EventType::Warning, "p".to_string(), message.to_string())]
    );
    assert!(!h.status("1").is_terminated(), "the kill is retried");
    // a terminating sync that fails after the kill (the check for survivors) is no kill error
    h.update(UpdateType::Sync, &p);
    h.drain_pod_until_syncing("1");
    assert_eq!(h.syncing("1").map(|(_, w)| w), Some(WorkType::Terminating));
    let cmds = h.finish(
        "1",
        SyncOutcome::Failed {
            message: "detected running containers after a successful KillPod".into(),
        },
    );
    assert_eq!(failed_to_kill(&cmds), []);
}
