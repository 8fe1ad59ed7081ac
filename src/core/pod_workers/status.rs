//! Per-UID pod worker state (kubelet `podSyncStatus`) and what the worker is doing now.
//!
//! Owns `PodSyncStatus`, `WorkerActivity` and `mergeLastUpdate`. Must not emit commands;
//! `lifecycle` and `update` drive these values.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use crate::core::command::WorkType;
use crate::core::update::{KillPodOptions, PodStatusOverride, UpdatePod, UpdateType};
use crate::ledger::Time;

/// The phase of a pod's lifecycle as the worker sees it (kubelet `PodWorkerState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodWorkerState {
    /// The pod is expected to be started and running.
    Sync,
    /// The pod is no longer being set up; its running containers are being torn down.
    Terminating,
    /// The pod has no running containers; cleanup may run.
    Terminated,
}

impl PodWorkerState {
    /// The kubelet's string for the state (`sync`, `terminating`, `terminated`).
    pub fn as_str(self) -> &'static str {
        match self {
            PodWorkerState::Sync => "sync",
            PodWorkerState::Terminating => "terminating",
            PodWorkerState::Terminated => "terminated",
        }
    }
}

/// A unit of work taken from the pending update (kubelet `podWork`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodWork {
    /// The lifecycle state the work was taken in.
    pub state: PodWorkerState,
    /// The update being realised.
    pub options: UpdatePod,
}

impl PodWork {
    /// The sync method this work calls.
    pub fn work_type(&self) -> WorkType {
        match self.state {
            PodWorkerState::Sync => WorkType::Sync,
            PodWorkerState::Terminating if self.options.running_pod.is_some() => {
                WorkType::TerminatingRuntime
            }
            PodWorkerState::Terminating => WorkType::Terminating,
            PodWorkerState::Terminated => WorkType::Terminated,
        }
    }
}

/// What the pod's worker is doing right now (the kubelet's per-pod goroutine, as state).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "activity", rename_all = "snake_case")]
pub enum WorkerActivity {
    /// Not running anything. A signalled pending update is started at once.
    #[default]
    Idle,
    /// Took `work` and waits for a runtime status observed after its previous sync
    /// (the kubelet's `podCache.GetNewerThan`); an `InspectPod` was requested.
    AwaitingRuntimeStatus {
        /// The work to run once the status arrives.
        work: PodWork,
    },
    /// A sync command is running in the shell; exactly one `SyncFinished` with `sync_id`
    /// is expected. `canceled` is true once `CancelSync` was sent.
    Syncing {
        /// The command's id.
        sync_id: u64,
        /// Which sync method runs.
        work_type: WorkType,
        /// The update type that triggered it (for the pod worker duration metric).
        update_type: UpdateType,
        /// When the update was created, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time: Option<Time>,
        /// `CancelSync` was sent.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        canceled: bool,
    },
}

impl WorkerActivity {
    /// True if no work is taken.
    pub fn is_idle(&self) -> bool {
        matches!(self, WorkerActivity::Idle)
    }
}

/// Tracks one pod UID through sync → terminating → terminated → finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodSyncStatus {
    /// `name_namespace`.
    pub fullname: String,
    /// A worker exists for the UID (kubelet: an entry in `podUpdates`). Cleared when the
    /// worker shuts down (`cleanupPodUpdates`).
    pub worker: bool,
    /// The worker's update channel holds a signal (capacity 1, as upstream).
    pub signaled: bool,
    /// An update is pending or being worked.
    pub working: bool,
    /// What the worker is doing.
    pub activity: WorkerActivity,
    /// The newest update not yet taken by the worker (a newer one replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_update: Option<UpdatePod>,
    /// The accumulated state the worker reconciles towards (source of truth for the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_update: Option<UpdatePod>,
    /// When the worker first saw the pod.
    pub synced_at: Time,
    /// When the worker allowed the pod to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When termination was requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating_at: Option<Time>,
    /// When `SyncTerminatingPod` completed (no container can be running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated_at: Option<Time>,
    /// The effective grace period once termination is requested (0 before).
    pub grace_period_s: i64,
    /// Seqs of kill requests waiting for termination to complete (`notifyPostTerminating`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify_post_terminating: Vec<u64>,
    /// Status overrides of kills, applied last-one-wins (`statusPostTerminating`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_post_terminating: Vec<PodStatusOverride>,
    /// The worker has observed the termination request (no new container will start).
    pub started_terminating: bool,
    /// Marked for deletion in the API, or no longer in config.
    pub deleted: bool,
    /// Evicted by the kubelet.
    pub evicted: bool,
    /// `SyncTerminatedPod` completed; ignored until `SyncKnownPods` purges the UID.
    pub finished: bool,
    /// A create arrived for the same UID while terminating; purge and restart later.
    pub restart_requested: bool,
    /// The pod was seen in the runtime (must go through a terminating sync).
    pub observed_runtime: bool,
    /// Seq of the `SyncFinished` that ended the previous sync (`lastSyncTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_seq: Option<u64>,
}

impl PodSyncStatus {
    /// A status for a pod first seen at `now`.
    pub fn new(now: Time, fullname: String) -> Self {
        PodSyncStatus {
            fullname,
            worker: false,
            signaled: false,
            working: false,
            activity: WorkerActivity::Idle,
            pending_update: None,
            active_update: None,
            synced_at: now,
            started_at: None,
            terminating_at: None,
            terminated_at: None,
            grace_period_s: 0,
            notify_post_terminating: Vec::new(),
            status_post_terminating: Vec::new(),
            started_terminating: false,
            deleted: false,
            evicted: false,
            finished: false,
            restart_requested: false,
            observed_runtime: false,
            last_sync_seq: None,
        }
    }

    /// Termination has been requested.
    pub fn is_termination_requested(&self) -> bool {
        self.terminating_at.is_some()
    }

    /// The worker observed the termination request.
    pub fn is_termination_started(&self) -> bool {
        self.started_terminating
    }

    /// All containers are known stopped.
    pub fn is_terminated(&self) -> bool {
        self.terminated_at.is_some()
    }

    /// The worker allowed the pod to start.
    pub fn is_started(&self) -> bool {
        self.started_at.is_some()
    }

    /// The lifecycle state (`WorkType()` upstream).
    pub fn state(&self) -> PodWorkerState {
        if self.is_terminated() {
            PodWorkerState::Terminated
        } else if self.is_termination_requested() {
            PodWorkerState::Terminating
        } else {
            PodWorkerState::Sync
        }
    }

    /// The last known config pod (active update first, then pending).
    pub fn last_pod(&self) -> Option<&Arc<Pod>> {
        self.active_update
            .as_ref()
            .and_then(|u| u.pod.as_ref())
            .or_else(|| self.pending_update.as_ref().and_then(|u| u.pod.as_ref()))
    }

    /// `mergeLastUpdate`: Pod and MirrorPod are updated (a RunningPod's synthetic pod only
    /// fills a gap), RunningPod is remembered for replay, KillPodOptions accumulate
    /// (evict and the grace override; the rest were consumed by `UpdatePod`).
    pub fn merge_last_update(&mut self, other: &UpdatePod) {
        // Upstream never copies UpdateType: the accumulated update keeps the zero value,
        // SyncPodSync, so a requeued copy of it is a sync.
        let opts = self.active_update.get_or_insert(UpdatePod {
            update_type: UpdateType::Sync,
            pod: None,
            mirror_pod: None,
            running_pod: None,
            kill: None,
            start_time: None,
        });
        if opts.pod.is_none() || other.running_pod.is_none() {
            opts.pod = other.pod.clone();
        }
        opts.running_pod = other.running_pod.clone();
        if other.mirror_pod.is_some() {
            opts.mirror_pod = other.mirror_pod.clone();
        }
        if let Some(k) = &other.kill {
            opts.kill = Some(KillPodOptions {
                evict: k.evict,
                grace_period_override_s: k.grace_period_override_s,
                status_override: None,
                wait_for_completion: false,
            });
        }
        // start_time is not copied: it only measures config propagation latency.
    }
}
