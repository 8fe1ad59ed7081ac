//! When statuses go to the API server (`syncBatch`, `needsUpdate`, `needsReconcile`,
//! `canBeDeleted`) and what a finished sync means (`syncPod`'s bookkeeping).
//!
//! Owns the `SyncPodStatus` commands and the fold of `StatusSyncFinished`. A new version is
//! synced at once (the status channel); every `status_sync_period_ms` a full pass also syncs
//! statuses the API server lacks, pods that can now be deleted, and statuses the API server
//! has diverged from. At most one sync per pod is in flight, so versions reach the API server
//! in order (invariant 5). Must not run without an API source: a standalone node keeps its
//! statuses for `/pods` only.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::super::command::{Command, SyncPodStatusCommand};
use super::super::node::Node;
use super::super::pod;
use super::super::pod_status::phase::is_terminal;
use super::super::timers::TimerKey;
use super::super::uid::Uid;
use super::equality::is_pod_status_by_kubelet_equal;
use super::normalize::normalize_status;
use super::store::{InFlightSync, StatusUpdate, VersionedStatus};
use crate::core::record::event::{StatusSyncFinished, StatusSyncOutcome};
use crate::core::record::Time;

/// What started a sync pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncTrigger {
    /// A status changed (`podStatusChannel`), or a sync ended and freed a slot: sync every
    /// pod the API server lags behind, except those whose last attempt failed with the
    /// version they still have.
    Changed,
    /// The periodic full pass (`syncBatch(true)`).
    Periodic,
}

/// `canBeDeleted(pod, status, podIsFinished)` on the API server's object: it is marked for
/// deletion, is not a mirror pod, its phase (as the API server has it) is terminal, and the
/// node finished the pod.
pub fn can_be_deleted(api_pod: &Pod, pod_is_finished: bool) -> bool {
    if api_pod.metadata.deletion_timestamp.is_none() || pod::is_mirror(api_pod) {
        return false;
    }
    if !is_terminal(pod::phase(api_pod)) {
        return false; // "Delaying pod deletion as the phase is non-terminal"
    }
    pod_is_finished
}

impl Node {
    /// True if this node writes to an API server.
    pub(in crate::core) fn has_api_source(&self) -> bool {
        self.config
            .sources
            .contains(&super::super::config::PodSource::Api)
    }

    /// `SetPodStatus` with the static pod's mirror (for the starting status).
    pub(in crate::core) fn set_pod_status(
        &mut self,
        uid: &Uid,
        p: &Pod,
        status: k8s_openapi::api::core::v1::PodStatus,
        now: Time,
    ) -> StatusUpdate {
        let mirror = self.mirror_of_static(p).cloned();
        // a new entry is keyed by the node's shared `Uid` (cheap merges in housekeeping)
        let canonical;
        let uid = if self.statuses.get(uid).is_none() {
            canonical = self.canonical_uid(uid);
            &canonical
        } else {
            uid
        };
        self.statuses
            .set_pod_status(uid, p, mirror.as_deref(), status, now)
    }

    /// `TerminatePod` for the pod a worker just finished (`SyncTerminatedPod` completed).
    pub(in crate::core) fn terminate_pod_status(&mut self, uid: &Uid, now: Time) {
        let Some(p) = self.pod_manager.get(uid).cloned().or_else(|| {
            self.pod_workers
                .status(uid)
                .and_then(|s| s.last_pod().cloned())
        }) else {
            return;
        };
        let mirror = self.mirror_of_static(&p).cloned();
        self.statuses.terminate_pod(uid, &p, mirror.as_deref(), now);
    }

    /// The mirror pod of a static pod, if the API server has one.
    fn mirror_of_static(&self, p: &Pod) -> Option<&Arc<Pod>> {
        if !pod::is_static(p) {
            return None;
        }
        self.pod_manager.mirror_by_full_name(&pod::full_name(p))
    }

    /// The API object a status is written to: the pod itself, or a static pod's mirror
    /// (`None` while it has none: nothing to write to yet).
    fn api_object(&self, uid: &Uid, v: &VersionedStatus) -> Option<Uid> {
        if v.is_static {
            let full = pod::build_full_name(&v.pod_name, &v.pod_namespace);
            self.pod_manager
                .mirror_by_full_name(&full)
                .map(|m| pod::uid(m))
        } else {
            Some(uid.clone())
        }
    }

    /// `TranslatePodUID`: a mirror pod's UID becomes its static pod's.
    fn translate_pod_uid(&self, api_uid: &Uid) -> Uid {
        if let Some(m) = self.pod_manager.mirror(api_uid) {
            if let Some(p) = self.pod_manager.get_pod_and_mirror_pod(m).pod {
                return pod::uid(&p);
            }
        }
        api_uid.clone()
    }

    /// `needsUpdate`: the API server lacks this version, or the pod can be deleted now.
    fn needs_status_update(&self, api_uid: &Uid, v: &VersionedStatus) -> bool {
        if self
            .statuses
            .api_version(api_uid)
            .is_none_or(|acked| acked < v.version)
        {
            return true;
        }
        // (a mirror UID finds no config pod: mirror pods are never deleted here)
        self.pod_manager
            .get(api_uid)
            .is_some_and(|p| can_be_deleted(p, v.pod_is_finished))
    }

    /// `needsReconcile`: the API server's status (as the pod manager last saw it) differs from
    /// the node's in what the kubelet owns.
    fn needs_status_reconcile(&self, uid: &Uid, v: &VersionedStatus) -> bool {
        let Some(mut p) = self.pod_manager.get(uid) else {
            return false;
        };
        if pod::is_static(p) {
            match self.mirror_of_static(p) {
                Some(m) => p = m,
                None => return false,
            }
        }
        let mut api_status = p.status.clone().unwrap_or_default();
        normalize_status(p, &mut api_status);
        !is_pod_status_by_kubelet_equal(&api_status, &v.status)
    }

    /// `syncBatch`: emits `SyncPodStatus` for every pod that needs one now.
    pub(in crate::core) fn status_sync_batch(
        &mut self,
        trigger: SyncTrigger,
        out: &mut Vec<Command>,
    ) {
        self.statuses.signalled = false;
        if !self.has_api_source() {
            return;
        }
        if trigger == SyncTrigger::Periodic {
            // SM-15: versions of API objects that are neither a kept status nor a known mirror
            let keep: Vec<Uid> = self
                .statuses
                .api_versions
                .keys()
                .filter(|u| self.statuses.get(u).is_some() || self.pod_manager.mirror(u).is_some())
                .cloned()
                .collect();
            self.statuses.api_versions.retain(|u, _| keep.contains(u));
        }
        let max = self.config.status_sync_max_in_flight as usize;
        let mut picked: Vec<(Uid, Uid, bool)> = Vec::new();
        for (uid, v) in self.statuses.iter() {
            if self.statuses.in_flight.len() + picked.len() >= max {
                break; // the rest start as slots free up
            }
            if self.statuses.in_flight.contains_key(uid) {
                continue; // its newest version goes when this sync ends
            }
            let Some(api_uid) = self.api_object(uid, v) else {
                continue; // a static pod without a mirror yet
            };
            match trigger {
                SyncTrigger::Changed => {
                    let behind = self
                        .statuses
                        .api_version(&api_uid)
                        .is_none_or(|acked| acked < v.version);
                    // a version that failed waits for a newer one or the periodic pass
                    let failed = self
                        .statuses
                        .failed
                        .get(uid)
                        .is_some_and(|&version| version >= v.version);
                    if behind && !failed {
                        picked.push((uid.clone(), api_uid, false));
                    }
                }
                SyncTrigger::Periodic => {
                    if self.needs_status_update(&api_uid, v) {
                        picked.push((uid.clone(), api_uid, false));
                    } else if self.needs_status_reconcile(uid, v) {
                        picked.push((uid.clone(), api_uid, true));
                    }
                }
            }
        }
        for (uid, api_uid, reconcile) in picked {
            if reconcile {
                // force the PATCH of an unchanged version
                self.statuses.api_versions.remove(&api_uid);
            }
            self.emit_status_sync(&uid, api_uid, out);
        }
    }

    fn emit_status_sync(&mut self, uid: &Uid, api_uid: Uid, out: &mut Vec<Command>) {
        let Some(v) = self.statuses.get(uid) else {
            return;
        };
        let cmd = SyncPodStatusCommand {
            uid: uid.clone(),
            version: v.version,
            namespace: v.pod_namespace.clone(),
            name: v.pod_name.clone(),
            api_uid: api_uid.clone(),
            status: v.status.clone(),
            could_have_running_containers: self.pod_workers.could_have_running_containers(uid),
            pod_is_finished: v.pod_is_finished,
            is_mirror: v.is_static,
            changed_at: v.unsynced_since.unwrap_or(v.changed_at),
        };
        self.statuses.in_flight.insert(
            uid.clone(),
            InFlightSync {
                version: v.version,
                api_uid,
                orphaned: false,
            },
        );
        self.statuses.failed.remove(uid);
        out.push(Command::SyncPodStatus(cmd));
    }

    /// The periodic pass: re-arm, then `syncBatch(true)`.
    pub(in crate::core) fn status_sync_tick(&mut self, now: Time, out: &mut Vec<Command>) {
        let due = now.plus_ms(self.config.status_sync_period_ms);
        self.timers.set(TimerKey::StatusSync, due, out);
        self.status_sync_batch(SyncTrigger::Periodic, out);
    }

    /// Arms the periodic pass once an API source is configured.
    pub(in crate::core) fn arm_status_sync(&mut self, now: Time, out: &mut Vec<Command>) {
        if self.has_api_source() && !self.timers.is_armed(&TimerKey::StatusSync) {
            let due = now.plus_ms(self.config.status_sync_period_ms);
            self.timers.set(TimerKey::StatusSync, due, out);
        }
    }

    /// Folds the end of a status sync (`syncPod`'s bookkeeping), then starts what waited for
    /// its slot.
    pub(in crate::core) fn on_status_sync_finished(
        &mut self,
        f: &StatusSyncFinished,
        out: &mut Vec<Command>,
    ) {
        let matches = self
            .statuses
            .in_flight
            .get(&f.uid)
            .is_some_and(|i| i.version == f.version);
        if !matches {
            return; // not the sync in flight (a replayed or duplicated report)
        }
        let inflight = self.statuses.in_flight.remove(&f.uid).expect("checked");
        if inflight.orphaned {
            // the status it carried was deleted meanwhile
            self.status_sync_batch(SyncTrigger::Changed, out);
            return;
        }
        match &f.outcome {
            StatusSyncOutcome::Patched { deleted, .. }
            | StatusSyncOutcome::Unchanged { deleted } => {
                self.statuses
                    .acknowledge(&f.uid, &inflight.api_uid, f.version);
                if *deleted {
                    // "Pod fully terminated and removed from etcd"
                    self.statuses.delete(&f.uid);
                }
            }
            // removed by RemoveOrphanedStatuses once the pod leaves the config
            StatusSyncOutcome::NotFound | StatusSyncOutcome::Failed { .. } => {
                self.statuses.failed.insert(f.uid.clone(), f.version);
            }
            StatusSyncOutcome::UidChanged { api_uid } => {
                let found = self.translate_pod_uid(&Uid::new(api_uid.as_str()));
                if found != f.uid {
                    // "Pod was deleted and then recreated, skipping status update"
                    self.statuses.delete(&f.uid);
                }
                // else the node learnt of a new mirror meanwhile: the next pass uses it
            }
        }
        self.status_sync_batch(SyncTrigger::Changed, out);
    }
}
