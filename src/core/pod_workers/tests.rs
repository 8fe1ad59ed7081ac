//! Table tests that need the workers' private state: PW-27 (allowPodStart) and PW-30
//! (removeTerminatedWorker).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::status::{PodSyncStatus, WorkerActivity, WorkerQueue};
use super::{Cx, PodWorkers};
use crate::core::command::Command;
use crate::core::config::CoreConfig;
use crate::core::record::Time;
use crate::core::runtime_status::RuntimeCache;
use crate::core::timers::{TimerKey, Timers};
use crate::core::uid::Uid;
use crate::core::update::{UpdatePod, UpdateType};

fn pod(uid: &str, is_static: bool) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            uid: Some(uid.into()),
            name: Some("foo".into()),
            namespace: Some(String::new()),
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/config.source".to_string(),
                if is_static { "file" } else { "api" }.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

#[derive(Default)]
struct World {
    config: CoreConfig,
    pods: crate::core::pod_manager::PodManager,
    runtime: RuntimeCache,
    timers: Timers,
    out: Vec<Command>,
}

impl World {
    fn cx(&mut self) -> Cx<'_> {
        Cx {
            seq: 1,
            now: Time::from_unix_secs(100),
            config: &self.config,
            pods: &self.pods,
            runtime: &self.runtime,
            timers: &mut self.timers,
            out: &mut self.out,
        }
    }
}

fn status(fullname: &str) -> PodSyncStatus {
    PodSyncStatus::new(Time::from_unix_secs(1), fullname.into())
}

fn terminating(fullname: &str) -> PodSyncStatus {
    let mut s = status(fullname);
    s.request_termination(Time::from_unix_secs(2));
    s
}

fn u(s: &str) -> Uid {
    Uid::new(s)
}

/// The static pods' map for fullname `foo_` from space-separated uids (`""`: empty).
fn by_fullname<T>(ids: &str, f: impl FnOnce(Vec<Uid>) -> T) -> BTreeMap<String, T> {
    let ids: Vec<Uid> = ids.split_whitespace().map(u).collect();
    match ids.is_empty() {
        true => BTreeMap::new(),
        false => BTreeMap::from([("foo_".to_string(), f(ids))]),
    }
}

#[test]
fn pw_27_allow_pod_start_table() {
    // (name, pod uid, static, statuses (`!`: terminating), started, waiting,
    //  (can_start, can_ever_start), started after, waiting after; "-": not checked)
    #[rustfmt::skip]
    let cases = [
        ("non-static pod", "0", false, "0 1", "1", "", (true, true), "-", "-"),
        ("static pod, none started", "0", true, "0", "", "", (true, true), "0", "-"),
        ("static pod while another is started", "0", true, "0 1", "1", "", (false, true), "1", "-"),
        ("static pod already started as itself", "0", true, "0", "0", "", (true, true), "0", "-"),
        ("static pod first in the waiting list", "0", true, "0", "", "0", (true, true), "0", ""),
        ("static pod second behind a live uid", "1", true, "0 1", "", "0 1", (false, true), "", "0 1"),
        ("dead entries are skipped and pruned", "0", true, "0 1 3!", "", "2 2 3 0 1", (true, true), "0", "1"),
        ("no sync status", "0", true, "", "", "", (false, false), "-", "-"),
        ("the pod itself is terminating", "0", true, "0!", "", "0", (false, false), "", "0"),
    ];
    for (name, uid, is_static, statuses, started, waiting, want, want_started, want_waiting) in
        cases
    {
        let mut w = PodWorkers::default();
        for id in statuses.split_whitespace() {
            match id.strip_suffix('!') {
                Some(id) => w.statuses.insert(u(id), terminating("foo_")),
                None => w.statuses.insert(u(id), status("foo_")),
            };
        }
        w.started_static_pods_by_fullname = by_fullname(started, |mut v| v.remove(0));
        w.waiting_to_start_static_pods_by_fullname = by_fullname(waiting, |v| v);
        let mut world = World::default();
        let p = pod(uid, is_static);
        let d = w.allow_pod_start(&mut world.cx(), &p);
        assert_eq!((d.can_start, d.can_ever_start), want, "{name}");
        if want == (false, true) {
            let uid = super::pod::uid(&p);
            let requeued = world.timers.get(&TimerKey::PodWork { uid }).is_some();
            assert!(requeued, "{name}: requeued with backoff");
        }
        if want_started != "-" {
            let want = by_fullname(want_started, |mut v| v.remove(0));
            assert_eq!(w.started_static_pods_by_fullname, want, "{name}: started");
        }
        if want_waiting != "-" {
            let got = &w.waiting_to_start_static_pods_by_fullname;
            assert_eq!(got, &by_fullname(want_waiting, |v| v), "{name}: waiting");
        }
    }
}

fn secs(s: i64) -> Time {
    Time::from_unix_secs(s)
}

fn with(mut s: PodSyncStatus, f: impl FnOnce(&mut PodSyncStatus)) -> PodSyncStatus {
    f(&mut s);
    s
}

fn update(uid: &str) -> UpdatePod {
    UpdatePod::for_pod(UpdateType::Sync, pod(uid, false))
}

#[test]
fn pw_30_remove_terminated_worker_table() {
    let finished = with(status("foo_"), |s| s.mark_finished(secs(2)));
    let started = with(status("foo_"), |s| {
        s.queue = WorkerQueue::Idle;
        s.start(secs(2));
        s.active_update = Some(update("1"));
    });
    let terminating_with_active = with(started.clone(), |s| {
        s.request_termination(secs(3));
    });
    let terminated_with_pending = with(terminating_with_active.clone(), |s| {
        s.mark_terminated(secs(4));
        s.pending_update = Some(UpdatePod::for_pod(UpdateType::Kill, pod("1", false)));
    });
    let terminating_no_active = with(status("foo_"), |s| {
        s.start(secs(2));
        s.request_termination(secs(3));
    });
    type Check = fn(&str, &PodSyncStatus);
    let none: Check = |_, _| {};
    let waiting: Check = |n, s| assert!(s.pending_update.is_none(), "{n}");
    let not_terminating: Check = |n, s| assert!(s.terminating_at().is_none(), "{n}");
    let orphan_started: Check = |n, s| {
        assert_eq!(s.terminating_at(), Some(secs(100)), "{n}");
        assert!(s.is_deleted(), "{n}");
        assert_eq!(s.grace_period_s(), 1, "{n}: no spec grace: 1");
        let signalled = s.queue == WorkerQueue::Signaled;
        assert!(s.pending_update.is_some() && signalled, "{n}");
    };
    let copy_of_active: Check = |n, s| {
        let pending = &s.pending_update;
        assert_eq!(pending, &s.active_update, "{n}: pending = copy of active");
        assert_eq!(s.queue, WorkerQueue::Signaled, "{n}: one signal");
    };
    let kept_kill: Check = |n, s| {
        let pending = s.pending_update.as_ref().unwrap();
        assert_eq!(pending.update_type, UpdateType::Kill, "{n}");
    };
    let not_signalled: Check = |n, s| {
        let quiet = s.pending_update.is_none() && !s.is_working();
        assert!(quiet && s.queue != WorkerQueue::Signaled, "{n}");
    };
    // (name, status, orphaned, removed, check of the status kept)
    #[rustfmt::skip]
    let cases = [
        ("finished", finished, false, true, none),
        ("not finished, not orphan, waiting", status("foo_"), false, false, waiting),
        ("not finished, not orphan, started", started.clone(), false, false, not_terminating),
        ("orphan never started, no runtime", status("foo_"), true, true, none),
        ("orphan started, not terminating", started, true, false, orphan_started),
        ("orphan terminating with an active update", terminating_with_active, true, false, copy_of_active),
        ("orphan with an existing pending update", terminated_with_pending, true, false, kept_kill),
        ("orphan terminating without an active update", terminating_no_active, true, false, not_signalled),
    ];
    for (name, status, orphaned, want_removed, check) in cases {
        let mut w = PodWorkers::default();
        w.statuses.insert(u("1"), status);
        let mut world = World::default();
        let removed = w.remove_terminated_worker(&mut world.cx(), &u("1"), orphaned);
        assert_eq!(removed, want_removed, "{name}");
        assert_eq!(w.statuses.contains_key(&u("1")), !want_removed, "{name}");
        if let Some(s) = w.statuses.get(&u("1")) {
            assert_eq!(s.activity, WorkerActivity::Idle, "{name}");
            check(name, s);
        }
    }
}
