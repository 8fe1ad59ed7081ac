//! The status manager's state (status_manager.go `manager`): the node's versioned status of
//! each pod and what the API server has acknowledged.
//!
//! Owns `podStatuses` (by the pod's UID; a static pod's status lives under its own UID),
//! `apiStatusVersions` (by the UID of the API object: the mirror pod's for static pods), the
//! status syncs in flight and the pods whose last sync failed. `SetPodStatus`,
//! `TerminatePod` and `updateStatusInternal` are here; `SetContainerReadiness` and
//! `SetContainerStartup` are in `container_flags`; the sync decisions (`syncBatch`) in
//! `sync`. Must not talk to the API server or read a clock: time is the folded record's.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KTime;
use serde::{Deserialize, Serialize};

use super::super::fold_log::FoldLog;
use super::super::pod;
use super::super::pod_status::conditions::TRANSITION_TIME_MANAGED;
use super::super::uid::Uid;
use super::super::uid_map::UidMap;
use super::equality::is_pod_status_by_kubelet_equal;
use super::merge::update_last_transition_time;
use super::normalize::normalize_status;
use super::terminate::{has_pod_initialized, terminated_status};
use super::transition::{check_container_state_transition, IllegalTransition};
use crate::core::record::Time;

/// A status with the version the node gave it (`versionedPodStatus`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionedStatus {
    /// Increases by one on every change; the API server is told versions in order.
    pub version: u64,
    /// The status.
    pub status: Arc<PodStatus>,
    /// When it last changed.
    pub changed_at: Time,
    /// When the oldest change the API server has not acknowledged yet was made (`at`, for
    /// `kubelet_pod_status_sync_duration_seconds`); `None` once it has the newest version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsynced_since: Option<Time>,
    /// The pod's name, for the API requests.
    #[serde(default)]
    pub pod_name: String,
    /// The pod's namespace.
    #[serde(default)]
    pub pod_namespace: String,
    /// The pod is a static pod: its API object is its mirror pod.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_static: bool,
    /// `SyncTerminatedPod` has completed (`TerminatePod`): the API object may be deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pod_is_finished: bool,
}

/// A status sync the shell is carrying out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightSync {
    /// The version being synced.
    pub version: u64,
    /// The UID the API object was expected to have.
    pub api_uid: Uid,
    /// The status was deleted while this sync ran: its outcome frees the slot and is
    /// otherwise ignored (a status of the same UID made since starts again at version 1, and
    /// an old version's acknowledgement must not stand for it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub orphaned: bool,
}

/// What `updateStatusInternal` did with a status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusUpdate {
    /// A new version was recorded.
    Recorded {
        /// Its number.
        version: u64,
    },
    /// The API server would see no difference: nothing recorded.
    Unchanged,
    /// A terminated container would have become non-terminated: the update was dropped.
    Illegal(IllegalTransition),
}

/// The status manager's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusStore {
    statuses: UidMap<VersionedStatus>,
    /// `apiStatusVersions`: the newest version the API server acknowledged, by API object UID.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) api_versions: BTreeMap<Uid, u64>,
    /// Syncs in flight, by the pod's UID (at most one per pod).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) in_flight: BTreeMap<Uid, InFlightSync>,
    /// Pods whose last sync failed, with the version it carried: retried when the pod has a
    /// newer version or at the periodic pass, not whenever another pod's status changes
    /// (SM-07: with syncs running concurrently that would repeat a failing request once
    /// per status change on the node).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) failed: BTreeMap<Uid, u64>,
    /// A status changed since the last batch (`podStatusChannel`, capacity 1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) signalled: bool,
    /// Generations known to change nothing (not state: never serialised, always equal).
    #[serde(skip)]
    pub memo: crate::core::status_memo::StatusMemo,
    /// The pods whose status got a new version in the record being folded (not state; see
    /// `core::fold_log`).
    #[serde(skip)]
    recorded: FoldLog<Uid>,
}

/// Converts a ledger time to a Kubernetes time truncated to whole seconds.
pub fn k8s_time(t: Time) -> KTime {
    super::super::pod_status::time_to_api(t.truncated_to_secs())
}

impl StatusStore {
    /// The status of a pod, by the pod's UID (`GetPodStatus` after translation).
    pub fn get(&self, uid: &Uid) -> Option<&VersionedStatus> {
        self.statuses.get(uid)
    }

    /// All statuses in UID order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uid, &VersionedStatus)> {
        self.statuses.iter()
    }

    /// The pods whose status got a new version in the record being folded (not state).
    pub fn recorded(&self) -> &FoldLog<Uid> {
        &self.recorded
    }

    /// Empties the log of new versions (before each record).
    pub(crate) fn clear_recorded(&mut self) {
        self.recorded.clear();
    }

    /// The number of statuses kept.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// The key-set generation of the statuses (`UidMap::generation`).
    pub fn generation(&self) -> crate::core::uid_map::Generation {
        self.statuses.generation()
    }

    /// True if no status is kept.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// Signals the sync loop (`podStatusChannel`): the API objects may need a pass, e.g. a
    /// static pod's mirror appeared.
    pub fn signal(&mut self) {
        self.signalled = true;
    }

    /// True if a status changed (or a signal came) since the last sync pass.
    pub fn is_signalled(&self) -> bool {
        self.signalled
    }

    /// The version the API server last acknowledged for the API object `api_uid`.
    pub fn api_version(&self, api_uid: &Uid) -> Option<u64> {
        self.api_versions.get(api_uid).copied()
    }

    /// The sync in flight for a pod, if any.
    pub fn in_flight(&self, uid: &Uid) -> Option<&InFlightSync> {
        self.in_flight.get(uid)
    }

    /// `SetPodStatus(pod, status)`: records `status`; a pod marked for deletion always gets a
    /// new version (so the worker can drive its status and deletion). `mirror` is the static
    /// pod's mirror, whose status is the starting point before the node has one.
    pub fn set_pod_status(
        &mut self,
        uid: &Uid,
        p: &Pod,
        mirror: Option<&Pod>,
        status: PodStatus,
        now: Time,
    ) -> StatusUpdate {
        let force = p.metadata.deletion_timestamp.is_some();
        self.update_status_internal(uid, p, mirror, status, force, false, now)
    }

    /// `TerminatePod(pod)` (SM-25 … SM-27): containers the runtime could not report end as
    /// failed, the phase becomes terminal (not for static pods), and the pod is finished.
    pub fn terminate_pod(
        &mut self,
        uid: &Uid,
        p: &Pod,
        mirror: Option<&Pod>,
        now: Time,
    ) -> StatusUpdate {
        let api_status = p.status.clone().unwrap_or_default();
        let cached = self.statuses.get(uid).map(|v| v.status.clone());
        let base: &PodStatus = cached.as_deref().unwrap_or(&api_status);
        // upstream asks the API copy only; the node's own copy is evidence too
        let initialized = has_pod_initialized(p, &api_status)
            || cached.as_deref().is_some_and(|c| has_pod_initialized(p, c));
        let status = terminated_status(p, base, initialized);
        self.update_status_internal(uid, p, mirror, status, true, true, now)
    }

    /// `updateStatusInternal`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_status_internal(
        &mut self,
        uid: &Uid,
        p: &Pod,
        mirror: Option<&Pod>,
        mut status: PodStatus,
        force: bool,
        mut pod_is_finished: bool,
        now: Time,
    ) -> StatusUpdate {
        let cached = self.statuses.get(uid);
        let api_status;
        let old: &PodStatus = match cached {
            Some(c) => {
                // SM-13: finished is sticky (static pods excepted upstream, TODO #116484)
                if !pod::is_static(p) && c.pod_is_finished && !pod_is_finished {
                    pod_is_finished = true;
                }
                &c.status
            }
            None => {
                api_status = mirror
                    .and_then(|m| m.status.clone())
                    .or_else(|| p.status.clone())
                    .unwrap_or_default();
                &api_status
            }
        };
        if let Err(e) = check_container_state_transition(old, &status, p) {
            return StatusUpdate::Illegal(e);
        }
        for t in TRANSITION_TIME_MANAGED {
            update_last_transition_time(&mut status, old, t, now);
        }
        match &old.start_time {
            Some(t) => status.start_time = Some(t.clone()),
            None if status.start_time.is_none() => status.start_time = Some(k8s_time(now)),
            None => {}
        }
        normalize_status(p, &mut status);
        if let Some(c) = cached {
            if !force && is_pod_status_by_kubelet_equal(&c.status, &status) {
                return StatusUpdate::Unchanged;
            }
        }
        let version = cached.map_or(0, |c| c.version) + 1;
        let unsynced_since = cached.and_then(|c| c.unsynced_since).or(Some(now));
        self.statuses.insert(
            uid.clone(),
            VersionedStatus {
                version,
                status: Arc::new(status),
                changed_at: now,
                unsynced_since,
                pod_name: pod::name(p).to_string(),
                pod_namespace: pod::namespace(p).to_string(),
                is_static: pod::is_static(p),
                pod_is_finished,
            },
        );
        self.signalled = true;
        self.recorded.note(uid.clone());
        StatusUpdate::Recorded { version }
    }

    /// `deletePodStatus`: forgets a pod's status and the version the API server had of it
    /// (a later status of the same UID starts again at version 1 and must be synced). A sync
    /// in flight keeps its slot until its outcome is folded. A static pod's API version is
    /// under its mirror's UID and goes with the periodic pass (SM-15).
    pub fn delete(&mut self, uid: &Uid) {
        if let Some(v) = self.statuses.remove(uid) {
            if !v.is_static {
                self.api_versions.remove(uid);
            }
        }
        if let Some(i) = self.in_flight.get_mut(uid) {
            i.orphaned = true;
        }
        self.failed.remove(uid);
        self.memo.forget(uid);
    }

    /// Records that the API server acknowledged `version` for the pod `uid`, whose API
    /// object is `api_uid`.
    pub(super) fn acknowledge(&mut self, uid: &Uid, api_uid: &Uid, version: u64) {
        self.api_versions.insert(api_uid.clone(), version);
        self.failed.remove(uid);
        if let Some(v) = self.statuses.get_mut(uid) {
            if v.version <= version {
                v.unsynced_since = None;
            }
        }
    }

    /// Removes `uid`'s status (used by `RemoveOrphanedStatuses`).
    pub fn remove(&mut self, uid: &Uid) {
        self.delete(uid);
    }
}
