//! `syncBatch`, `needsUpdate`, `needsReconcile`, podIsFinished stickiness and status cleanup on
//! a node with an API source (SM-05, SM-07, SM-08, SM-11, SM-13, SM-14, SM-15, SM-29, SM-30).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::core::command::{Command, SyncPodStatusCommand};
use crate::core::config::{CoreConfig, PodSource};
use crate::core::node::Node;
use crate::core::pod_status::conditions::{FALSE, READY, TRUE};
use crate::core::pod_status::tests::fixtures::{cond, deleted, simple_pod, with_api_status};
use crate::core::pod_status::time_to_api;
use crate::core::record::event::{StatusSyncFinished, StatusSyncOutcome, SyncKnownPods};
use crate::core::record::Time;
use crate::core::status::SyncTrigger;
use crate::core::uid::Uid;

fn at(secs: i64) -> Time {
    Time::from_unix_nanos(secs * 1_000_000_000 + 250_000_000)
}

struct Api {
    node: Node,
}

type Syncs = Vec<SyncPodStatusCommand>;

fn named(uid: &str, name: &str) -> Pod {
    let mut p = simple_pod(&["app"]);
    p.metadata.uid = Some(uid.into());
    p.metadata.name = Some(name.into());
    p
}

fn static_pod(uid: &str) -> Pod {
    let mut p = named(uid, "web-node");
    let a = p.metadata.annotations.get_or_insert_with(Default::default);
    a.insert("kubernetes.io/config.source".into(), "file".into());
    p
}

fn mirror_of(uid: &str) -> Pod {
    let mut p = named(uid, "web-node");
    let a = p.metadata.annotations.get_or_insert_with(Default::default);
    a.insert("kubernetes.io/config.source".into(), "api".into());
    a.insert("kubernetes.io/config.mirror".into(), "hash".into());
    p
}

fn ready(value: &str) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![cond(READY, value)]),
        ..PodStatus::default()
    }
}

impl Api {
    fn new() -> Api {
        let config = CoreConfig {
            node_name: "node".into(),
            sources: vec![PodSource::Api],
            ..CoreConfig::default()
        };
        let node = Node {
            config,
            ..Node::default()
        };
        Api { node }
    }

    /// The pod as the API server (and so the pod manager) has it.
    fn desire(&mut self, p: &Pod) {
        let uid = Uid::new(p.metadata.uid.as_deref().unwrap());
        self.node.pod_manager.upsert(uid, Arc::new(p.clone()));
    }

    /// The API server's copy of `p` has `status`.
    fn desire_with(&mut self, p: &Pod, status: PodStatus) {
        self.desire(&with_api_status(p.clone(), status));
    }

    fn set(&mut self, p: &Pod, status: PodStatus, now: Time) {
        let uid = Uid::new(p.metadata.uid.as_deref().unwrap());
        self.node.set_pod_status(&uid, p, status, now);
    }

    fn batch(&mut self, trigger: SyncTrigger) -> Syncs {
        let mut out = Vec::new();
        self.node.status_sync_batch(trigger, &mut out);
        syncs(out)
    }

    /// Syncs what the channel has and acknowledges each sync as patched; returns the syncs.
    fn sync_patched(&mut self) -> Syncs {
        let cmds = self.batch(SyncTrigger::Changed);
        for c in &cmds {
            self.finish(c.uid.as_str(), c.version, patched());
        }
        cmds
    }

    fn finish(&mut self, uid: &str, version: u64, outcome: StatusSyncOutcome) -> Syncs {
        let (mut out, uid) = (Vec::new(), Uid::new(uid));
        let finished = StatusSyncFinished {
            uid,
            version,
            outcome,
        };
        self.node.on_status_sync_finished(&finished, &mut out);
        syncs(out)
    }

    fn acked(&self, api_uid: &str) -> Option<u64> {
        self.node.statuses.api_version(&Uid::new(api_uid))
    }

    /// The cached status of `uid`.
    fn cached(&self, uid: &str) -> PodStatus {
        (*self.node.statuses.get(&Uid::new(uid)).unwrap().status).clone()
    }

    fn finished(&self, uid: &str) -> bool {
        let cached = self.node.statuses.get(&Uid::new(uid));
        cached.unwrap().pod_is_finished
    }
}

fn patched() -> StatusSyncOutcome {
    StatusSyncOutcome::Patched {
        patch_bytes: 10,
        deleted: false,
    }
}

fn syncs(out: Vec<Command>) -> Syncs {
    out.into_iter()
        .filter_map(|c| match c {
            Command::SyncPodStatus(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn versions(cmds: &[SyncPodStatusCommand]) -> Vec<(&str, u64)> {
    cmds.iter().map(|c| (c.uid.as_str(), c.version)).collect()
}

#[test]
fn sm_05_versions_coalesce_and_the_latest_wins() {
    let mut api = Api::new();
    let p = named("u1", "p");
    api.desire(&p);
    for (v, now) in [(FALSE, 1), (TRUE, 2), (FALSE, 3)] {
        api.set(&p, ready(v), at(now));
    }
    let cmds = api.batch(SyncTrigger::Changed);
    assert_eq!(versions(&cmds), [("u1", 3)], "one sync, of version 3");
    assert!(api.finish("u1", 3, patched()).is_empty());
    assert_eq!(api.acked("u1"), Some(3));
    let signalled = api.node.statuses.is_signalled();
    assert!(!signalled, "nothing left in the channel");
    assert!(api.batch(SyncTrigger::Changed).is_empty());

    // while a sync is in flight, newer versions wait for it and then go as one
    api.set(&p, ready(TRUE), at(4));
    let cmds = api.batch(SyncTrigger::Changed);
    assert_eq!(versions(&cmds), [("u1", 4)]);
    api.set(&p, ready(FALSE), at(5));
    api.set(&p, ready(TRUE), at(6));
    let cmds = api.batch(SyncTrigger::Changed);
    assert!(cmds.is_empty(), "one sync per pod in flight");
    let next = api.finish("u1", 4, patched());
    assert_eq!(versions(&next), [("u1", 6)]);
    // a stale acknowledgement (of a sync no longer in flight) changes nothing
    assert!(api.finish("u1", 4, patched()).is_empty());
    assert_eq!(api.acked("u1"), Some(4));
    api.finish("u1", 6, patched());
    assert_eq!(api.acked("u1"), Some(6));
}

#[test]
fn sm_07_the_channel_syncs_new_versions_and_the_periodic_pass_also_reconciles() {
    let mut api = Api::new();
    let (a, b) = (named("a", "a"), named("b", "b"));
    for p in [&a, &b] {
        api.desire(p);
        api.set(p, ready(TRUE), at(1));
    }
    let cmds = api.sync_patched();
    assert_eq!(versions(&cmds), [("a", 1), ("b", 1)]);
    // the API server's copy of `a` agrees with the node, `b`'s was changed by someone else
    api.desire_with(&a, api.cached("a"));
    api.desire_with(&b, ready(FALSE));

    let why = "the channel only syncs versions the API server lacks";
    assert!(api.batch(SyncTrigger::Changed).is_empty(), "{why}");
    let cmds = api.batch(SyncTrigger::Periodic);
    let why = "the periodic pass reconciles b";
    assert_eq!(versions(&cmds), [("b", 1)], "{why}");
    let why = "its acknowledged version was forgotten";
    assert_eq!(api.acked("b"), None, "{why}");

    // signalling is a flag: many changes, one pass
    api.set(&a, ready(FALSE), at(2));
    api.set(&a, ready(TRUE), at(3));
    assert!(api.node.statuses.is_signalled());
    let cmds = api.batch(SyncTrigger::Changed);
    assert_eq!(versions(&cmds), [("a", 3)]);
    assert!(!api.node.statuses.is_signalled());
}

#[test]
fn sm_07_a_failed_version_waits_for_a_newer_one_or_the_periodic_pass() {
    let mut api = Api::new();
    let (gone, live) = (named("gone", "gone"), named("live", "live"));
    for p in [&gone, &live] {
        api.desire(p);
        api.set(p, ready(TRUE), at(1));
    }
    let cmds = api.batch(SyncTrigger::Changed);
    assert_eq!(versions(&cmds), [("gone", 1), ("live", 1)]);
    // the API server no longer has `gone` (the node authorizer answers 403)
    let forbidden = StatusSyncOutcome::Failed {
        code: Some(403),
        message: "no relationship found between node 'node' and this object".into(),
    };
    assert!(api.finish("gone", 1, forbidden.clone()).is_empty());
    api.finish("live", 1, patched());

    // other pods' changes do not repeat the failing request
    for now in 2..5 {
        let value = if now % 2 == 0 { FALSE } else { TRUE };
        api.set(&live, ready(value), at(now));
        let cmds = api.batch(SyncTrigger::Changed);
        assert_eq!(versions(&cmds), [("live", now as u64)]);
        api.finish("live", now as u64, patched());
    }
    // the periodic pass retries it
    api.desire_with(&live, api.cached("live"));
    let cmds = api.batch(SyncTrigger::Periodic);
    assert_eq!(versions(&cmds), [("gone", 1)]);
    api.finish("gone", 1, forbidden);
    // and so does a newer version of its own
    api.set(&gone, ready(FALSE), at(6));
    let cmds = api.batch(SyncTrigger::Changed);
    assert_eq!(versions(&cmds), [("gone", 2)]);
}

#[test]
fn sm_08_needs_reconcile_ignores_timestamp_precision_and_unknown_pods() {
    let mut api = Api::new();
    let p = named("u1", "p");
    api.desire(&p);
    let mut status = ready(TRUE);
    status.start_time = Some(time_to_api(at(7)));
    api.set(&p, status, at(7));
    api.sync_patched();

    // the API copy has the same status with sub-second timestamps: no reconcile
    let mut precise = api.cached("u1");
    let nanos = 7 * 1_000_000_000 + 999_000_000;
    precise.start_time = Some(time_to_api(Time::from_unix_nanos(nanos)));
    api.desire_with(&p, precise);
    assert!(api.batch(SyncTrigger::Periodic).is_empty());

    // a real difference: reconciled
    api.desire_with(&p, ready(FALSE));
    assert_eq!(versions(&api.batch(SyncTrigger::Periodic)).len(), 1);

    // a pod the pod manager does not know: no reconcile (the acknowledged version stands)
    let mut api = Api::new();
    api.set(&named("u2", "gone"), ready(TRUE), at(1));
    api.sync_patched();
    assert!(api.batch(SyncTrigger::Periodic).is_empty());
}

#[test]
fn sm_11_needs_update_retries_a_pod_that_can_now_be_deleted() {
    let mut api = Api::new();
    let p = deleted(named("u1", "p"));
    api.desire(&p);
    let mut failed = ready(FALSE);
    failed.phase = Some("Failed".into());
    api.set(&p, failed.clone(), at(1));
    api.sync_patched();
    api.node
        .statuses
        .terminate_pod(&Uid::new("u1"), &p, None, at(2));
    // the PATCH went through but the DELETE did not happen (e.g. it failed)
    let cmds = api.sync_patched();
    assert!(cmds[0].pod_is_finished);
    // the API now shows the terminal phase: the periodic pass tries again, to delete
    api.desire_with(&p, api.cached("u1"));
    let cmds = api.batch(SyncTrigger::Periodic);
    let why = "needsUpdate: the pod can be deleted";
    assert_eq!(versions(&cmds).len(), 1, "{why}");
    assert!(cmds[0].pod_is_finished);
}

#[test]
fn sm_13_pod_is_finished_is_sticky_for_non_static_pods() {
    let mut api = Api::new();
    // static pods are not forced (upstream TODO #116484)
    for (p, sticky) in [(named("u1", "p"), true), (static_pod("s1"), false)] {
        let uid = p.metadata.uid.clone().unwrap();
        api.set(&p, ready(TRUE), at(1));
        let statuses = &mut api.node.statuses;
        statuses.terminate_pod(&Uid::new(&uid), &p, None, at(2));
        if sticky {
            assert!(api.finished(&uid), "{uid}");
        }
        api.set(&p, ready(FALSE), at(3));
        let finished = api.finished(&uid);
        assert_eq!(finished, sticky, "{uid}: forced back to finished?");
    }
}

#[test]
fn sm_14_a_static_pod_waits_for_its_mirror_and_syncs_against_it() {
    let mut api = Api::new();
    let s = static_pod("static-uid");
    api.desire(&s);
    api.set(&s, ready(TRUE), at(1));
    let cmds = api.batch(SyncTrigger::Changed);
    assert!(cmds.is_empty(), "no mirror yet: no API call");
    assert!(api.batch(SyncTrigger::Periodic).is_empty());
    api.desire(&mirror_of("mirror-uid"));
    let cmds = api.batch(SyncTrigger::Changed);
    assert_eq!(cmds.len(), 1);
    let c = &cmds[0];
    assert_eq!(c.uid.as_str(), "static-uid", "cached under the static UID");
    assert_eq!(c.api_uid.as_str(), "mirror-uid", "written to the mirror");
    assert!(c.is_mirror);
    api.finish("static-uid", 1, patched());
    assert_eq!(api.acked("mirror-uid"), Some(1));

    // the mirror was replaced by one with another UID: the sync finds a stranger and the
    // cached status is dropped (the static pod's UID is not the one found)
    api.set(&s, ready(FALSE), at(2));
    let cmds = api.batch(SyncTrigger::Changed);
    let api_uid = "someone-else".into();
    let outcome = StatusSyncOutcome::UidChanged { api_uid };
    api.finish("static-uid", cmds[0].version, outcome);
    assert!(api.node.statuses.get(&Uid::new("static-uid")).is_none());
}

#[test]
fn sm_15_the_periodic_pass_forgets_versions_of_unknown_api_objects() {
    let mut api = Api::new();
    let p = named("kept", "kept");
    api.desire(&p);
    api.desire(&mirror_of("mirror-uid"));
    api.set(&p, ready(TRUE), at(1));
    api.sync_patched();
    api.desire_with(&p, api.cached("kept"));
    let versions = &mut api.node.statuses.api_versions;
    versions.insert(Uid::new("mirror-uid"), 4);
    versions.insert(Uid::new("orphan"), 9);

    api.batch(SyncTrigger::Changed);
    let orphan = api.acked("orphan");
    assert_eq!(orphan, Some(9), "only the periodic pass cleans up");
    api.batch(SyncTrigger::Periodic);
    assert_eq!(api.acked("orphan"), None);
    assert_eq!(api.acked("kept"), Some(1), "a cached pod's version stays");
    let mirror = api.acked("mirror-uid");
    assert_eq!(mirror, Some(4), "a known mirror's version stays");
}

#[test]
fn sm_29_remove_orphaned_statuses_keeps_those_of_desired_pods() {
    let mut api = Api::new();
    let (wanted, gone) = (named("wanted", "wanted"), named("gone", "gone"));
    api.desire(&wanted);
    api.set(&wanted, ready(TRUE), at(1));
    api.set(&gone, ready(TRUE), at(1));
    let known = SyncKnownPods { desired: None };
    api.node
        .handle_sync_known_pods(&known, 10, at(2), &mut Vec::new());
    assert!(api.node.statuses.get(&Uid::new("wanted")).is_some());
    let gone = api.node.statuses.get(&Uid::new("gone"));
    assert!(gone.is_none(), "neither desired nor tracked by a worker");
}

#[test]
fn sm_30_a_deleted_status_forgets_its_acknowledged_version_and_in_flight_sync() {
    let mut api = Api::new();
    let p = named("u1", "p");
    api.desire(&p);
    api.set(&p, ready(TRUE), at(1));
    api.sync_patched();
    api.set(&p, ready(FALSE), at(2));
    let in_flight = api.batch(SyncTrigger::Changed);
    assert_eq!(versions(&in_flight), [("u1", 2)]);

    let uid = Uid::new("u1");
    api.node.statuses.delete(&uid);
    assert_eq!(api.acked("u1"), None);
    assert!(api.node.statuses.in_flight(&uid).unwrap().orphaned);

    // a status of the same UID made since starts again at version 1 …
    api.set(&p, ready(TRUE), at(3));
    assert_eq!(api.node.statuses.get(&uid).unwrap().version, 1);
    // … and the old sync's acknowledgement does not stand for it
    let next = api.finish("u1", 2, patched());
    assert_eq!(api.acked("u1"), None);
    assert_eq!(versions(&next), [("u1", 1)]);
}
