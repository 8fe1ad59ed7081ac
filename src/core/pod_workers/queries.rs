//! The questions other components ask the pod workers (kubelet `PodWorkers` query methods).
//!
//! Owns the answers' rules, including what an unknown UID means before and after the first
//! `SyncKnownPods`. Must not change state.

use super::PodWorkers;
use crate::core::uid::Uid;

impl PodWorkers {
    /// `IsPodKnownTerminated`: terminated, per the workers (false for unknown UIDs).
    pub fn is_pod_known_terminated(&self, uid: &Uid) -> bool {
        self.statuses.get(uid).is_some_and(|s| s.is_terminated())
    }

    /// True if the sync command `sync_id` of `uid` is the one running (its `SyncFinished` is
    /// the expected one, not a stale report).
    pub fn is_sync_in_flight(&self, uid: &Uid, sync_id: u64) -> bool {
        self.statuses.get(uid).is_some_and(|s| {
            matches!(s.activity, super::WorkerActivity::Syncing { sync_id: id, .. } if id == sync_id)
        })
    }

    /// `CouldHaveRunningContainers`: true until terminated; for unknown UIDs, true only
    /// before the first `SyncKnownPods`.
    pub fn could_have_running_containers(&self, uid: &Uid) -> bool {
        match self.statuses.get(uid) {
            Some(s) => !s.is_terminated(),
            None => !self.pods_synced,
        }
    }

    /// `ShouldPodBeFinished`: `SyncTerminatedPod` completed; unknown UIDs count as finished
    /// once the workers have synced.
    pub fn should_pod_be_finished(&self, uid: &Uid) -> bool {
        match self.statuses.get(uid) {
            Some(s) => s.is_finished(),
            None => self.pods_synced,
        }
    }

    /// `IsPodTerminationRequested`: termination requested (false for unknown UIDs).
    pub fn is_pod_termination_requested(&self, uid: &Uid) -> bool {
        self.statuses
            .get(uid)
            .is_some_and(|s| s.is_termination_requested())
    }

    /// `ShouldPodContainersBeTerminating`: the worker observed the termination; unknown UIDs
    /// should be torn down once the workers have synced.
    pub fn should_pod_containers_be_terminating(&self, uid: &Uid) -> bool {
        match self.statuses.get(uid) {
            Some(s) => s.is_termination_started(),
            None => self.pods_synced,
        }
    }

    /// `ShouldPodRuntimeBeRemoved`: terminated; unknown UIDs once synced.
    pub fn should_pod_runtime_be_removed(&self, uid: &Uid) -> bool {
        match self.statuses.get(uid) {
            Some(s) => s.is_terminated(),
            None => self.pods_synced,
        }
    }

    /// `ShouldPodContentBeRemoved`: evicted, or deleted and terminated; unknown UIDs once
    /// synced.
    pub fn should_pod_content_be_removed(&self, uid: &Uid) -> bool {
        match self.statuses.get(uid) {
            Some(s) => s.is_evicted() || (s.is_deleted() && s.is_terminated()),
            None => self.pods_synced,
        }
    }

    /// `IsPodForMirrorPodTerminatingByFullName`: the started static pod with this full name
    /// is terminating and not yet terminated (its mirror must not be deleted yet).
    pub fn is_pod_for_mirror_pod_terminating_by_full_name(&self, fullname: &str) -> bool {
        let Some(uid) = self.started_static_pods_by_fullname.get(fullname) else {
            return false;
        };
        self.statuses
            .get(uid)
            .is_some_and(|s| s.is_termination_requested() && !s.is_terminated())
    }
}
