//! The status manager (kubelet status_manager.go, BEHAVIOUR.md §B) as a pure reducer.
//!
//! Owns the node's versioned status of every pod (`SetPodStatus`, `TerminatePod`, the illegal
//! transition check, transition times, sticky start time, `normalizeStatus`,
//! `isPodStatusByKubeletEqual`), and every decision about the API server: when a status is
//! synced (`syncBatch`: at once on a new version, a full pass with `needsUpdate` and
//! `needsReconcile` every `status_sync_period_ms`), how it is merged with the API's
//! (`mergePodStatus`), what the PATCH says, whether the pod can then be deleted
//! (`canBeDeleted`), static ↔ mirror UID translation and the cleanup of orphaned statuses
//! and versions. Must not talk to the API server or read a clock: the shell's status syncer
//! (`shell::api::status_sync`) carries out `SyncPodStatus` with these functions and reports
//! `StatusSyncFinished`.
//!
//! Differences from upstream, by design (docs/status-manager.md): syncs to different pods run
//! concurrently (at most `status_sync_max_in_flight`, one per pod, versions in order) where
//! upstream syncs one pod at a time; a status is kept while its pod's worker still runs (the
//! node's `/pods` shows terminating pods) where upstream drops it with the config pod.

mod container_flags;
mod equality;
mod merge;
mod normalize;
mod patch;
mod store;
mod sync;
mod terminate;
mod transition;

#[cfg(test)]
mod tests;

pub use equality::{is_pod_status_by_kubelet_equal, semantically_equal};
pub use merge::{merge_pod_status, update_last_transition_time};
pub use normalize::{
    normalize_status, normalize_times, termination_message_bytes_per_status,
    MAX_POD_TERMINATION_MESSAGE_BYTES,
};
pub use patch::{apply_status_patch, status_patch};
pub use store::{k8s_time, InFlightSync, StatusStore, StatusUpdate, VersionedStatus};
pub use sync::{can_be_deleted, SyncTrigger};
pub use terminate::{has_pod_initialized, initialized_containers, terminated_status};
pub use transition::{check_container_state_transition, IllegalTransition};
