//! The vocabulary of a pod worker update (kubelet `UpdatePodOptions`).
//!
//! Owns `UpdatePod` (both the payload of the `UpdatePod` record and the pending/active
//! update a worker holds), `UpdateType`, `KillPodOptions` and `PodStatusOverride` (the
//! kubelet's `PodStatusFunc`, as data). Must not decide anything: `pod_workers` does.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde::{Deserialize, Serialize};

use super::pod;
use super::runtime_status::RunningPod;
use super::uid::Uid;
use crate::core::record::Time;

/// kubelet `SyncPodType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateType {
    /// `SyncPodCreate`: the pod was first seen.
    Create,
    /// `SyncPodUpdate`: its config changed.
    Update,
    /// `SyncPodSync`: periodic or event-driven resync.
    Sync,
    /// `SyncPodKill`: stop it.
    Kill,
}

impl UpdateType {
    /// The metric label value (`create`, `update`, `sync`, `kill`).
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateType::Create => "create",
            UpdateType::Update => "update",
            UpdateType::Sync => "sync",
            UpdateType::Kill => "kill",
        }
    }
}

/// The status changes a kill applies to the pod (the kubelet's `PodStatusFunc`, which is
/// always "set phase, reason, message and maybe a condition" in practice).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodStatusOverride {
    /// New phase (e.g. `Failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `phase` does not replace a `Succeeded` phase (the node shutdown's "set the pod
    /// status to failed, unless it was already in a successful terminal phase").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_succeeded: bool,
    /// New reason (e.g. `Evicted`, `DeadlineExceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// New message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Conditions to add or replace by type (e.g. `DisruptionTarget`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodCondition>,
}

/// kubelet `KillPodOptions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KillPodOptions {
    /// The kill is an eviction (content may be reclaimed aggressively).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub evict: bool,
    /// `PodTerminationGracePeriodSecondsOverride`. While a pod terminates, every accepted
    /// update carries the effective grace period here (never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_override_s: Option<i64>,
    /// `PodStatusFunc`: applied to the status generated while terminating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_override: Option<Box<PodStatusOverride>>,
    /// `CompletedCh`: the requester waits for a `KillCompleted` record naming the seq of
    /// this update, and gets `ExceededGracePeriod` if it takes longer than
    /// max(10 s, 1.5 × grace) (`killPodNow`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_completion: bool,
}

/// kubelet `UpdatePodOptions`: one update delivered to a pod worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UpdatePod {
    /// What kind of update this is.
    pub update_type: UpdateType,
    /// The config pod. Required unless `running_pod` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Arc<Pod>>,
    /// The mirror pod of a static pod, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_pod: Option<Arc<Pod>>,
    /// A runtime-only pod (no config); only valid with `Kill`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_pod: Option<Arc<RunningPod>>,
    /// Kill options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<KillPodOptions>,
    /// When the update was created (for `kubelet_pod_worker_duration_seconds`); coalescing
    /// keeps the oldest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

impl UpdatePod {
    /// An update of `update_type` for a config pod.
    pub fn for_pod(update_type: UpdateType, pod: Arc<Pod>) -> UpdatePod {
        UpdatePod {
            update_type,
            pod: Some(pod),
            mirror_pod: None,
            running_pod: None,
            kill: None,
            start_time: None,
        }
    }

    /// A kill of a runtime-only pod with the given grace period override.
    pub fn kill_running_pod(running: Arc<RunningPod>, grace_period_s: i64) -> UpdatePod {
        UpdatePod {
            update_type: UpdateType::Kill,
            pod: None,
            mirror_pod: None,
            running_pod: Some(running),
            kill: Some(KillPodOptions {
                grace_period_override_s: Some(grace_period_s),
                ..KillPodOptions::default()
            }),
            start_time: None,
        }
    }

    /// The UID this update is about (`podUIDAndRefForUpdate`).
    pub fn uid(&self) -> Option<Uid> {
        match (&self.pod, &self.running_pod) {
            (Some(p), _) => Some(pod::uid(p)),
            (None, Some(r)) => Some(r.uid.clone()),
            (None, None) => None,
        }
    }
}
