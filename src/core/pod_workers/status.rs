//! Per-UID pod worker state (kubelet `podSyncStatus`) and what the worker is doing now.
//!
//! Owns `PodSyncStatus` with its `Lifecycle`, `Termination` and `WorkerQueue` (states whose
//! invalid combinations cannot be written: no "finished but not terminated", no signal
//! without a worker), `WorkerActivity` and `mergeLastUpdate`. Must not emit commands;
//! `lifecycle` and `update` drive these values.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use crate::core::command::WorkType;
use crate::core::record::Time;
use crate::core::update::{KillPodOptions, PodStatusOverride, UpdatePod, UpdateType};

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

/// Whether the pod has a worker, and whether it has work (the kubelet's `podUpdates`
/// channel, `working` and the signal in the channel, as one value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerQueue {
    /// No worker: none was started yet, or it stopped when the pod finished
    /// (`cleanupPodUpdates`).
    #[default]
    Absent,
    /// A worker with no update pending or being worked.
    Idle,
    /// An update is pending or being worked, and no signal is queued.
    Working,
    /// An update is pending and a signal waits in the worker's channel (capacity 1, as
    /// upstream); the worker takes the update as soon as it is idle.
    Signaled,
}

impl WorkerQueue {
    /// The worker's channel exists.
    pub fn exists(self) -> bool {
        self != WorkerQueue::Absent
    }

    /// An update is pending or being worked (`isWorking`).
    pub fn is_working(self) -> bool {
        matches!(self, WorkerQueue::Working | WorkerQueue::Signaled)
    }

    /// Work was queued: a worker gets the signal; without a worker there is nobody to
    /// signal (upstream's send to a nil channel falls through), so nothing changes.
    fn signal(&mut self) {
        if self.exists() {
            *self = WorkerQueue::Signaled;
        }
    }
}

/// Why and how a pod is being terminated; set once termination is requested and kept until
/// the UID is forgotten. Every combination of its flags can happen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Termination {
    /// When termination was requested.
    pub requested_at: Time,
    /// The effective grace period (only ever shortened).
    pub grace_period_s: i64,
    /// The worker observed the request (`acknowledgeTerminating`): no new container starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acknowledged: bool,
    /// Marked for deletion in the API, or no longer in config.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// Evicted by the kubelet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub evicted: bool,
    /// A create arrived for the same UID while terminating; purge and restart later.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restart_requested: bool,
    /// The pod was seen in the runtime (it must go through a terminating sync).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub observed_runtime: bool,
}

impl Termination {
    /// A termination requested at `at`, with no grace period decided yet.
    fn new(at: Time) -> Self {
        Termination {
            requested_at: at,
            grace_period_s: 0,
            acknowledged: false,
            deleted: false,
            evicted: false,
            restart_requested: false,
            observed_runtime: false,
        }
    }
}

/// Where a pod is in its life, as its worker sees it: sync → terminating → terminated →
/// finished (kubelet `podSyncStatus`'s `startedAt`, `terminatingAt`, `terminatedAt` and
/// `finished`). A later state keeps what the earlier ones learned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "lifecycle", rename_all = "snake_case")]
pub enum Lifecycle {
    /// The pod should run; the worker has not allowed it to start yet (no update taken,
    /// or a static pod waiting for its full name).
    Waiting,
    /// The pod should run; the worker allowed it to start at `started_at`.
    Started {
        /// When the worker allowed the pod to start.
        started_at: Time,
    },
    /// Termination was requested; containers are being stopped.
    Terminating {
        /// When the worker allowed the pod to start, if it ever did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
        /// The request.
        termination: Termination,
    },
    /// `SyncTerminatingPod` completed: no container can be running. `SyncTerminatedPod`
    /// remains.
    Terminated {
        /// When the worker allowed the pod to start, if it ever did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
        /// The request.
        termination: Termination,
        /// When every container was known stopped.
        terminated_at: Time,
    },
    /// `SyncTerminatedPod` completed (or the pod was terminated before it could start): the
    /// worker is gone and the UID is ignored until `SyncKnownPods` purges it.
    Finished {
        /// When the worker allowed the pod to start, if it ever did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
        /// The request.
        termination: Termination,
        /// When every container was known stopped.
        terminated_at: Time,
    },
}

/// Tracks one pod UID through sync → terminating → terminated → finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodSyncStatus {
    /// `name_namespace`.
    pub fullname: String,
    /// The worker and its queue.
    pub queue: WorkerQueue,
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
    /// The pod's place in its life.
    pub lifecycle: Lifecycle,
    /// Seqs of kill requests waiting for termination to complete (`notifyPostTerminating`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify_post_terminating: Vec<u64>,
    /// Status overrides of kills, applied last-one-wins (`statusPostTerminating`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_post_terminating: Vec<PodStatusOverride>,
    /// Seq of the `SyncFinished` that ended the previous sync (`lastSyncTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_seq: Option<u64>,
}

impl PodSyncStatus {
    /// A status for a pod first seen at `now`.
    pub fn new(now: Time, fullname: String) -> Self {
        PodSyncStatus {
            fullname,
            queue: WorkerQueue::Absent,
            activity: WorkerActivity::Idle,
            pending_update: None,
            active_update: None,
            synced_at: now,
            lifecycle: Lifecycle::Waiting,
            notify_post_terminating: Vec::new(),
            status_post_terminating: Vec::new(),
            last_sync_seq: None,
        }
    }

    /// The termination request, once there is one.
    pub fn termination(&self) -> Option<&Termination> {
        match &self.lifecycle {
            Lifecycle::Waiting | Lifecycle::Started { .. } => None,
            Lifecycle::Terminating { termination, .. }
            | Lifecycle::Terminated { termination, .. }
            | Lifecycle::Finished { termination, .. } => Some(termination),
        }
    }

    /// The termination request, to update it.
    pub(super) fn termination_mut(&mut self) -> Option<&mut Termination> {
        match &mut self.lifecycle {
            Lifecycle::Waiting | Lifecycle::Started { .. } => None,
            Lifecycle::Terminating { termination, .. }
            | Lifecycle::Terminated { termination, .. }
            | Lifecycle::Finished { termination, .. } => Some(termination),
        }
    }

    /// When the worker allowed the pod to start, if it did.
    pub fn started_at(&self) -> Option<Time> {
        match &self.lifecycle {
            Lifecycle::Waiting => None,
            Lifecycle::Started { started_at } => Some(*started_at),
            Lifecycle::Terminating { started_at, .. }
            | Lifecycle::Terminated { started_at, .. }
            | Lifecycle::Finished { started_at, .. } => *started_at,
        }
    }

    /// When termination was requested, if it was.
    pub fn terminating_at(&self) -> Option<Time> {
        self.termination().map(|t| t.requested_at)
    }

    /// When every container was known stopped, if they are.
    pub fn terminated_at(&self) -> Option<Time> {
        match &self.lifecycle {
            Lifecycle::Terminated { terminated_at, .. }
            | Lifecycle::Finished { terminated_at, .. } => Some(*terminated_at),
            _ => None,
        }
    }

    /// The effective grace period once termination is requested (0 before).
    pub fn grace_period_s(&self) -> i64 {
        self.termination().map_or(0, |t| t.grace_period_s)
    }

    /// Termination has been requested.
    pub fn is_termination_requested(&self) -> bool {
        self.termination().is_some()
    }

    /// The worker observed the termination request.
    pub fn is_termination_started(&self) -> bool {
        self.termination().is_some_and(|t| t.acknowledged)
    }

    /// All containers are known stopped.
    pub fn is_terminated(&self) -> bool {
        self.terminated_at().is_some()
    }

    /// `SyncTerminatedPod` completed; the UID waits to be purged.
    pub fn is_finished(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Finished { .. })
    }

    /// Marked for deletion in the API, or no longer in config.
    pub fn is_deleted(&self) -> bool {
        self.termination().is_some_and(|t| t.deleted)
    }

    /// Evicted by the kubelet.
    pub fn is_evicted(&self) -> bool {
        self.termination().is_some_and(|t| t.evicted)
    }

    /// A create for the same UID arrived while it was terminating.
    pub fn restart_requested(&self) -> bool {
        self.termination().is_some_and(|t| t.restart_requested)
    }

    /// The pod was seen in the runtime.
    pub fn observed_runtime(&self) -> bool {
        self.termination().is_some_and(|t| t.observed_runtime)
    }

    /// The worker allowed the pod to start.
    pub fn is_started(&self) -> bool {
        self.started_at().is_some()
    }

    /// An update is pending or being worked.
    pub fn is_working(&self) -> bool {
        self.queue.is_working()
    }

    /// The lifecycle state (`WorkType()` upstream).
    pub fn state(&self) -> PodWorkerState {
        match self.lifecycle {
            Lifecycle::Waiting | Lifecycle::Started { .. } => PodWorkerState::Sync,
            Lifecycle::Terminating { .. } => PodWorkerState::Terminating,
            Lifecycle::Terminated { .. } | Lifecycle::Finished { .. } => PodWorkerState::Terminated,
        }
    }

    /// The worker allows the pod to start at `now` (a pod that is already terminating
    /// keeps its state).
    pub(super) fn start(&mut self, now: Time) {
        match &mut self.lifecycle {
            Lifecycle::Waiting => self.lifecycle = Lifecycle::Started { started_at: now },
            Lifecycle::Started { .. } => {}
            Lifecycle::Terminating { started_at, .. }
            | Lifecycle::Terminated { started_at, .. }
            | Lifecycle::Finished { started_at, .. } => {
                started_at.get_or_insert(now);
            }
        }
    }

    /// Termination is requested at `now`, unless it already was; the request either way.
    pub(super) fn request_termination(&mut self, now: Time) -> &mut Termination {
        let started_at = match &self.lifecycle {
            Lifecycle::Waiting => Some(None),
            Lifecycle::Started { started_at } => Some(Some(*started_at)),
            _ => None,
        };
        if let Some(started_at) = started_at {
            self.lifecycle = Lifecycle::Terminating {
                started_at,
                termination: Termination::new(now),
            };
        }
        self.termination_mut().expect("termination requested above")
    }

    /// Every container is known stopped at `now` (`completeTerminating`); requests
    /// termination first if nobody had.
    pub(super) fn mark_terminated(&mut self, now: Time) {
        self.request_termination(now);
        if let Lifecycle::Terminating {
            started_at,
            termination,
        } = &self.lifecycle
        {
            self.lifecycle = Lifecycle::Terminated {
                started_at: *started_at,
                termination: termination.clone(),
                terminated_at: now,
            };
        }
    }

    /// `SyncTerminatedPod` completed, or the pod is given up before it started: the worker
    /// stops and the UID waits to be purged (terminated at `now` if it was not yet).
    pub(super) fn mark_finished(&mut self, now: Time) {
        self.mark_terminated(now);
        if let Lifecycle::Terminated {
            started_at,
            termination,
            terminated_at,
        } = &self.lifecycle
        {
            self.lifecycle = Lifecycle::Finished {
                started_at: *started_at,
                termination: termination.clone(),
                terminated_at: *terminated_at,
            };
        }
        self.queue = WorkerQueue::Absent;
    }

    /// Work was queued for the worker (signalled if it has one).
    pub(super) fn signal(&mut self) {
        self.queue.signal();
    }

    /// The worker took the signalled update.
    pub(super) fn take_signal(&mut self) {
        if self.queue == WorkerQueue::Signaled {
            self.queue = WorkerQueue::Working;
        }
    }

    /// The worker has nothing pending or being worked.
    pub(super) fn settle(&mut self) {
        if self.queue.exists() {
            self.queue = WorkerQueue::Idle;
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
