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

struct World {
    config: CoreConfig,
    pods: crate::core::pod_manager::PodManager,
    runtime: RuntimeCache,
    timers: Timers,
    out: Vec<Command>,
}

impl World {
    fn new() -> World {
        World {
            config: CoreConfig::default(),
            pods: Default::default(),
            runtime: RuntimeCache::default(),
            timers: Timers::default(),
            out: Vec::new(),
        }
    }
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

#[test]
fn pw_27_allow_pod_start_table() {
    struct Case {
        name: &'static str,
        pod: Arc<Pod>,
        statuses: Vec<(&'static str, PodSyncStatus)>,
        started: Vec<(&'static str, &'static str)>,
        waiting: Vec<(&'static str, Vec<&'static str>)>,
        want: (bool, bool),
        want_started: Option<Vec<(&'static str, &'static str)>>,
        want_waiting: Option<Vec<(&'static str, Vec<&'static str>)>>,
    }
    let cases = vec![
        Case {
            name: "non-static pod",
            pod: pod("uid-0", false),
            statuses: vec![("uid-0", status("foo_")), ("uid-1", status("foo_"))],
            started: vec![("foo_", "uid-1")],
            waiting: vec![],
            want: (true, true),
            want_started: None,
            want_waiting: None,
        },
        Case {
            name: "static pod, none started",
            pod: pod("uid-0", true),
            statuses: vec![("uid-0", status("foo_"))],
            started: vec![],
            waiting: vec![],
            want: (true, true),
            want_started: Some(vec![("foo_", "uid-0")]),
            want_waiting: None,
        },
        Case {
            name: "static pod while another is started",
            pod: pod("uid-0", true),
            statuses: vec![("uid-0", status("foo_")), ("uid-1", status("foo_"))],
            started: vec![("foo_", "uid-1")],
            waiting: vec![],
            want: (false, true),
            want_started: Some(vec![("foo_", "uid-1")]),
            want_waiting: None,
        },
        Case {
            name: "static pod already started as itself",
            pod: pod("uid-0", true),
            statuses: vec![("uid-0", status("foo_"))],
            started: vec![("foo_", "uid-0")],
            waiting: vec![],
            want: (true, true),
            want_started: Some(vec![("foo_", "uid-0")]),
            want_waiting: None,
        },
        Case {
            name: "static pod first in the waiting list",
            pod: pod("uid-0", true),
            statuses: vec![("uid-0", status("foo_"))],
            started: vec![],
            waiting: vec![("foo_", vec!["uid-0"])],
            want: (true, true),
            want_started: Some(vec![("foo_", "uid-0")]),
            want_waiting: Some(vec![]),
        },
        Case {
            name: "static pod second behind a live uid",
            pod: pod("uid-1", true),
            statuses: vec![("uid-0", status("foo_")), ("uid-1", status("foo_"))],
            started: vec![],
            waiting: vec![("foo_", vec!["uid-0", "uid-1"])],
            want: (false, true),
            want_started: Some(vec![]),
            want_waiting: Some(vec![("foo_", vec!["uid-0", "uid-1"])]),
        },
        Case {
            name: "dead entries are skipped and pruned",
            pod: pod("uid-0", true),
            statuses: vec![
                ("uid-0", status("foo_")),
                ("uid-1", status("foo_")),
                ("uid-3", terminating("foo_")),
            ],
            started: vec![],
            waiting: vec![("foo_", vec!["uid-2", "uid-2", "uid-3", "uid-0", "uid-1"])],
            want: (true, true),
            want_started: Some(vec![("foo_", "uid-0")]),
            want_waiting: Some(vec![("foo_", vec!["uid-1"])]),
        },
        Case {
            name: "no sync status",
            pod: pod("uid-0", true),
            statuses: vec![],
            started: vec![],
            waiting: vec![],
            want: (false, false),
            want_started: None,
            want_waiting: None,
        },
        Case {
            name: "the pod itself is terminating",
            pod: pod("uid-0", true),
            statuses: vec![("uid-0", terminating("foo_"))],
            started: vec![],
            waiting: vec![("foo_", vec!["uid-0"])],
            want: (false, false),
            want_started: Some(vec![]),
            want_waiting: Some(vec![("foo_", vec!["uid-0"])]),
        },
    ];
    for c in cases {
        let mut w = PodWorkers::default();
        for (uid, s) in c.statuses {
            w.statuses.insert(u(uid), s);
        }
        for (name, uid) in c.started {
            w.started_static_pods_by_fullname
                .insert(name.into(), u(uid));
        }
        for (name, uids) in c.waiting {
            w.waiting_to_start_static_pods_by_fullname
                .insert(name.into(), uids.into_iter().map(u).collect());
        }
        let mut world = World::new();
        let d = w.allow_pod_start(&mut world.cx(), &c.pod);
        assert_eq!((d.can_start, d.can_ever_start), c.want, "{}", c.name);
        if c.want == (false, true) {
            assert!(
                world
                    .timers
                    .get(&TimerKey::PodWork {
                        uid: super::pod::uid(&c.pod)
                    })
                    .is_some(),
                "{}: requeued with backoff",
                c.name
            );
        }
        if let Some(want) = c.want_started {
            let want: BTreeMap<String, Uid> = want
                .into_iter()
                .map(|(n, id)| (n.to_string(), u(id)))
                .collect();
            assert_eq!(
                w.started_static_pods_by_fullname, want,
                "{}: started",
                c.name
            );
        }
        if let Some(want) = c.want_waiting {
            let want: BTreeMap<String, Vec<Uid>> = want
                .into_iter()
                .map(|(n, ids)| (n.to_string(), ids.into_iter().map(u).collect()))
                .collect();
            assert_eq!(
                w.waiting_to_start_static_pods_by_fullname, want,
                "{}: waiting",
                c.name
            );
        }
    }
}

fn update(uid: &str) -> UpdatePod {
    UpdatePod::for_pod(UpdateType::Sync, pod(uid, false))
}

#[test]
fn pw_30_remove_terminated_worker_table() {
    struct Case {
        name: &'static str,
        status: PodSyncStatus,
        orphaned: bool,
        removed: bool,
        check: fn(&PodSyncStatus),
    }
    let finished = {
        let mut s = status("foo_");
        s.mark_finished(Time::from_unix_secs(2));
        s
    };
    let started = {
        let mut s = status("foo_");
        s.queue = WorkerQueue::Idle;
        s.start(Time::from_unix_secs(2));
        s.active_update = Some(update("1"));
        s
    };
    let terminating_with_active = {
        let mut s = started.clone();
        s.request_termination(Time::from_unix_secs(3));
        s
    };
    let terminated_with_pending = {
        let mut s = terminating_with_active.clone();
        s.mark_terminated(Time::from_unix_secs(4));
        s.pending_update = Some(UpdatePod::for_pod(UpdateType::Kill, pod("1", false)));
        s
    };
    let terminating_no_active = {
        let mut s = status("foo_");
        s.start(Time::from_unix_secs(2));
        s.request_termination(Time::from_unix_secs(3));
        s
    };
    let cases = vec![
        Case {
            name: "finished",
            status: finished,
            orphaned: false,
            removed: true,
            check: |_| {},
        },
        Case {
            name: "not finished, not orphan, waiting",
            status: status("foo_"),
            orphaned: false,
            removed: false,
            check: |s| assert!(s.pending_update.is_none()),
        },
        Case {
            name: "not finished, not orphan, started",
            status: started.clone(),
            orphaned: false,
            removed: false,
            check: |s| assert!(s.terminating_at().is_none()),
        },
        Case {
            name: "orphan never started, no runtime",
            status: status("foo_"),
            orphaned: true,
            removed: true,
            check: |_| {},
        },
        Case {
            name: "orphan started, not terminating",
            status: started,
            orphaned: true,
            removed: false,
            check: |s| {
                assert_eq!(s.terminating_at(), Some(Time::from_unix_secs(100)));
                assert!(s.is_deleted());
                assert_eq!(s.grace_period_s(), 1, "no spec grace: 1");
                assert!(s.pending_update.is_some() && s.queue == WorkerQueue::Signaled);
            },
        },
        Case {
            name: "orphan terminating with an active update",
            status: terminating_with_active,
            orphaned: true,
            removed: false,
            check: |s| {
                assert_eq!(
                    s.pending_update, s.active_update,
                    "pending = copy of active"
                );
                assert_eq!(s.queue, WorkerQueue::Signaled, "one signal");
            },
        },
        Case {
            name: "orphan with an existing pending update",
            status: terminated_with_pending,
            orphaned: true,
            removed: false,
            check: |s| {
                assert_eq!(
                    s.pending_update.as_ref().unwrap().update_type,
                    UpdateType::Kill
                );
            },
        },
        Case {
            name: "orphan terminating without an active update",
            status: terminating_no_active,
            orphaned: true,
            removed: false,
            check: |s| {
                assert!(
                    s.pending_update.is_none()
                        && !s.is_working()
                        && s.queue != WorkerQueue::Signaled
                );
            },
        },
    ];
    for c in cases {
        let mut w = PodWorkers::default();
        w.statuses.insert(u("1"), c.status);
        let mut world = World::new();
        let removed = w.remove_terminated_worker(&mut world.cx(), &u("1"), c.orphaned);
        assert_eq!(removed, c.removed, "{}", c.name);
        assert_eq!(w.statuses.contains_key(&u("1")), !c.removed, "{}", c.name);
        if let Some(s) = w.statuses.get(&u("1")) {
            assert_eq!(s.activity, WorkerActivity::Idle);
            (c.check)(s);
        }
    }
}
