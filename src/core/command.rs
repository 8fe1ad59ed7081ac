//! What the core asks the shell to do.
//!
//! Owns `Command` and its payloads. A command is a plan, not an action: the shell carries it
//! out and reports the outcome as a new record (`SyncFinished`, `RuntimeStatusObserved`,
//! `TimerFired`, …). Must not contain anything the shell would need to decide on.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::runtime_status::{RunningPod, RuntimePodStatus};
use super::timers::ArmedTimer;
use super::uid::Uid;
use super::update::{PodStatusOverride, UpdateType};
use crate::core::record::Event;

/// The work a pod worker does in each state (kubelet `PodWorkerState` plus the runtime-only
/// variant of terminating).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkType {
    /// `SyncPod`: set up and run the pod.
    Sync,
    /// `SyncTerminatingPod`: stop every container.
    Terminating,
    /// `SyncTerminatingRuntimePod`: stop a runtime-only pod (no config, no API status).
    TerminatingRuntime,
    /// `SyncTerminatedPod`: release resources and write the final status.
    Terminated,
}

impl WorkType {
    /// The kubelet's span name for this work.
    pub fn span_name(self) -> &'static str {
        match self {
            WorkType::Sync => "syncPod",
            WorkType::Terminating => "syncTerminatingPod",
            WorkType::TerminatingRuntime => "syncTerminatingRuntimePod",
            WorkType::Terminated => "syncTerminatedPod",
        }
    }
}

/// Which list of the pod spec a container comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerKind {
    /// `spec.initContainers` (sidecars are init containers with `restartPolicy: Always`).
    Init,
    /// `spec.containers`.
    Regular,
    /// `spec.ephemeralContainers` (`kubectl debug`): started once, never restarted.
    Ephemeral,
}

impl ContainerKind {
    /// The kubelet's `container_type` metric label.
    pub fn metric_label(self) -> &'static str {
        match self {
            ContainerKind::Init => "init_container",
            ContainerKind::Regular => "container",
            ContainerKind::Ephemeral => "ephemeral_container",
        }
    }
}

/// Stop one container (`killContainer`): the decision, with everything the shell needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerKill {
    /// Runtime container ID.
    pub id: String,
    /// Container name.
    pub name: String,
    /// The `StopContainer` timeout, already clamped to the kubelet's minimum of 2 s.
    pub grace_period_s: i64,
    /// Why (`Killing` event message, e.g. "Container web failed liveness probe, will be
    /// restarted", or "Stopping container web").
    pub message: String,
    /// Run the container's preStop hook first, for at most this many seconds: the
    /// unclamped grace period (RT-39). The whole seconds it takes are subtracted from the
    /// grace, and `StopContainer` still gets at least 2 s. `None`: no preStop hook, or a
    /// grace period of 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop_s: Option<i64>,
    /// RT-42, in a whole-pod kill: after its preStop hook, wait (for at most what is left of
    /// the grace period) until these containers of the same kill have stopped. A sidecar
    /// waits for the regular containers and for the sidecar after it. Empty: stop at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_for: Vec<String>,
}

/// Stop a whole pod (`killPodWithSyncResult`): every container, then every sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodKill {
    /// Containers to stop, in parallel.
    pub containers: Vec<ContainerKill>,
    /// Sandboxes to stop after the containers (NotFound is success).
    pub sandbox_ids: Vec<String>,
}

/// Start one container of the spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStart {
    /// Init, regular or ephemeral.
    pub kind: ContainerKind,
    /// Index into the spec list of that kind.
    pub index: usize,
    /// Container name (for messages).
    pub name: String,
    /// The instance's restart count (CRI metadata attempt and annotation).
    pub restart_count: i32,
    /// The spec hash recorded on the container (`io.kubernetes.container.hash`).
    pub hash: String,
    /// Set while the pod's image pull is backing off (`Back-off pulling image "…"`): if the
    /// image must be pulled, the start fails with `ImagePullBackOff` instead (kubelet
    /// `EnsureImageExists`; an image already present starts as usual).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_backoff: Option<String>,
    /// The container has a postStart hook: how to kill the instance if the hook fails
    /// (RT-37; message `FailedPostStartHook`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start_failure_kill: Option<HookFailureKill>,
    /// An ephemeral container's `targetContainerName` resolved to that container's runtime
    /// ID: the container joins its PID namespace (CRI `NamespaceMode::Target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_container_id: Option<String>,
}

/// The grace of a kill decided before the container exists (a failed postStart hook).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookFailureKill {
    /// The `StopContainer` timeout, at least 2 s.
    pub grace_period_s: i64,
    /// The preStop budget, as `ContainerKill::pre_stop_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop_s: Option<i64>,
}

/// The runtime plan of one `SyncPod` (kubelet `computePodActions` after backoff), executed by
/// the shell in the kubelet's order: kill the pod or unwanted containers, remove pruned
/// containers, create the sandbox, start init containers (a failure stops there unless the
/// container is a sidecar), start regular containers (failures do not stop the others).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimePlan {
    /// Kill the whole pod first (sandbox change or nothing left to run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_pod: Option<PodKill>,
    /// Containers to kill (when the pod is not killed as a whole).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kill_containers: Vec<ContainerKill>,
    /// Exited containers to remove (init pruning, dead instances beyond the newest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_containers: Vec<String>,
    /// Create a sandbox with this attempt number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_sandbox: Option<u32>,
    /// The sandbox to start containers in when none is created.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox_id: String,
    /// Ephemeral containers to start, before the init containers (a failure stops nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start_ephemeral: Vec<ContainerStart>,
    /// Init containers to start, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start_init: Vec<ContainerStart>,
    /// Regular containers to start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start: Vec<ContainerStart>,
}

impl RuntimePlan {
    /// True if the plan does nothing.
    pub fn is_empty(&self) -> bool {
        self.kill_pod.is_none()
            && self.kill_containers.is_empty()
            && self.remove_containers.is_empty()
            && self.create_sandbox.is_none()
            && self.start_ephemeral.is_empty()
            && self.start_init.is_empty()
            && self.start.is_empty()
    }
}

/// `SyncPod(ctx, updateType, pod, mirrorPod, podStatus)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncPodCommand {
    /// The pod.
    pub uid: Uid,
    /// Identifies this sync; its `SyncFinished` carries the same id.
    pub sync_id: u64,
    /// The update type that triggered it.
    pub update_type: UpdateType,
    /// The pod spec to reconcile towards.
    pub pod: Arc<Pod>,
    /// The mirror pod, for static pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_pod: Option<Arc<Pod>>,
    /// The runtime status the decision was made on.
    pub runtime: Arc<RuntimePodStatus>,
    /// What to do in the runtime.
    #[serde(default)]
    pub plan: RuntimePlan,
}

/// `SyncTerminatingPod(ctx, pod, podStatus, gracePeriod, podStatusFn)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncTerminatingPodCommand {
    /// The pod.
    pub uid: Uid,
    /// Identifies this sync.
    pub sync_id: u64,
    /// The last known pod spec.
    pub pod: Arc<Pod>,
    /// The runtime status.
    pub runtime: Arc<RuntimePodStatus>,
    /// The effective grace period; `None` means "the pod's own" (natural termination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_s: Option<i64>,
    /// The last status override requested by a kill (`PodStatusFunc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_override: Option<PodStatusOverride>,
    /// What to stop (computed from the runtime status; the shell re-lists before
    /// reporting success, so a container started meanwhile is caught).
    #[serde(default)]
    pub kill: PodKill,
}

/// `SyncTerminatingRuntimePod(ctx, runningPod)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncTerminatingRuntimePodCommand {
    /// The pod.
    pub uid: Uid,
    /// Identifies this sync.
    pub sync_id: u64,
    /// What the runtime has of it.
    pub running_pod: Arc<RunningPod>,
    /// What to stop (grace 1 s, clamped to 2 s per container).
    #[serde(default)]
    pub kill: PodKill,
}

/// `SyncTerminatedPod(ctx, pod, podStatus)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncTerminatedPodCommand {
    /// The pod.
    pub uid: Uid,
    /// Identifies this sync.
    pub sync_id: u64,
    /// The last known pod spec.
    pub pod: Arc<Pod>,
    /// The runtime status.
    pub runtime: Arc<RuntimePodStatus>,
}

/// Remove a finished pod's containers and sandboxes: the container GC's work for a pod whose
/// content may go (`ShouldPodContentBeRemoved`: deleted, evicted, or wanted by no config
/// source), done as soon as the pod is finished because ledgerlet has no container GC. It
/// runs after `SyncTerminatedPod`, so the API delete never waits for it (RT-44).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemovePodContentCommand {
    /// The pod.
    pub uid: Uid,
    /// Identifies this removal: each removal is a `RuntimeActionFinished` with this as its
    /// `sync_id` (drawn from the pod workers' sync ids, so never one of theirs).
    pub removal_id: u64,
    /// The containers to remove (all at once), as the runtime last showed them.
    pub containers: Vec<String>,
    /// The sandboxes to remove after the containers.
    pub sandboxes: Vec<String>,
}

/// Normal or Warning, as Kubernetes Events have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something went wrong.
    Warning,
}

/// The object a Kubernetes Event is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `Pod` or `Node`.
    pub kind: String,
    /// Namespace (empty for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference to node `name` (the kubelet's nodeRef uses the node name as its UID).
    pub fn node(name: &str) -> ObjectRef {
        ObjectRef {
            kind: "Node".into(),
            namespace: String::new(),
            name: name.to_string(),
            uid: name.to_string(),
        }
    }

    /// A reference to a pod.
    pub fn pod(pod: &Pod) -> ObjectRef {
        ObjectRef {
            kind: "Pod".into(),
            namespace: super::pod::namespace(pod).to_string(),
            name: super::pod::name(pod).to_string(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// A Kubernetes Event to record (what `kubectl describe` shows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeEvent {
    /// The object it is about.
    pub object: ObjectRef,
    /// Normal or Warning.
    pub event_type: EventType,
    /// The kubelet's reason string (e.g. `FailedSync`, `ExceededGracePeriod`).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// Sync one pod's status to the API server (the status manager's `syncPod`): GET the API
/// object, skip if its UID is not the expected one, merge (`core::status::merge_pod_status`),
/// PATCH the status subresource with a `metadata.uid` precondition if anything changed, then
/// DELETE with grace 0 and a UID precondition if `core::status::can_be_deleted` holds for the
/// patched object. Report `StatusSyncFinished` with the same uid and version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncPodStatusCommand {
    /// The pod's UID in the node (the static pod's UID for static pods).
    pub uid: Uid,
    /// The status version being synced.
    pub version: u64,
    /// Namespace of the API object.
    pub namespace: String,
    /// Name of the API object.
    pub name: String,
    /// The UID the API object must have (the mirror pod's for static pods).
    pub api_uid: Uid,
    /// The node's status at this version.
    pub status: Arc<k8s_openapi::api::core::v1::PodStatus>,
    /// The pod worker may still have running containers (no terminal phase may be written).
    pub could_have_running_containers: bool,
    /// `SyncTerminatedPod` completed: the pod may be deleted from the API.
    pub pod_is_finished: bool,
    /// The API object is a mirror pod (never deleted by the status manager).
    pub is_mirror: bool,
    /// When the oldest change not yet acknowledged by the API server was made (the start of
    /// `kubelet_pod_status_sync_duration_seconds`).
    #[serde(default)]
    pub changed_at: crate::core::record::Time,
}

/// A write to the API server about this node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "node_action", rename_all = "snake_case")]
pub enum NodeCommand {
    /// Create the Node object (`registerWithAPIServer`); if it exists already, update its
    /// labels and annotations instead. Report `NodeSyncFinished { action: register }`.
    Register {
        /// The Node to create.
        node: Arc<k8s_openapi::api::core::v1::Node>,
    },
    /// Create or renew the node's Lease in `kube-node-lease`. Report `renew_lease`.
    RenewLease {
        /// Lease name (the node name).
        name: String,
        /// `spec.leaseDurationSeconds`.
        duration_s: i32,
        /// `spec.renewTime`.
        renew_time: crate::core::record::Time,
    },
    /// PATCH the Node's status subresource (a strategic merge patch). Report `patch_status`.
    PatchStatus {
        /// The node name.
        name: String,
        /// The status to write.
        status: Arc<k8s_openapi::api::core::v1::NodeStatus>,
        /// Extended resources to delete from `status.allocatable` (set to null in the patch).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remove_allocatable: Vec<String>,
    },
    /// Create a mirror pod for a static pod (`CreateMirrorPod`). Report `create_mirror_pod`.
    CreateMirrorPod {
        /// The mirror pod to create (the static pod with the mirror annotation and an owner
        /// reference to the Node).
        pod: Arc<k8s_openapi::api::core::v1::Pod>,
    },
    /// Delete a mirror pod with grace 0 and a UID precondition. Report `delete_mirror_pod`.
    DeleteMirrorPod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The mirror pod's UID (precondition).
        uid: Uid,
    },
}

/// A request from the core to the shell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Append a derived event to the ledger (its `cause` is the record being folded), and
    /// fold it before any new input.
    Append(Event),
    /// Run `SyncPod`; report `SyncFinished`.
    SyncPod(SyncPodCommand),
    /// Run `SyncTerminatingPod`; report `SyncFinished`.
    SyncTerminatingPod(SyncTerminatingPodCommand),
    /// Run `SyncTerminatingRuntimePod`; report `SyncFinished`.
    SyncTerminatingRuntimePod(SyncTerminatingRuntimePodCommand),
    /// Run `SyncTerminatedPod`; report `SyncFinished`.
    SyncTerminatedPod(SyncTerminatedPodCommand),
    /// Remove a finished pod's containers and sandboxes; report each removal as a
    /// `RuntimeActionFinished` (nothing else: the core looks again by a timer).
    RemovePodContent(RemovePodContentCommand),
    /// Cancel the cancellable waits of a running sync (the kubelet's `cancelFn()`); the sync
    /// still reports `SyncFinished` (usually `canceled`).
    CancelSync {
        /// The pod.
        uid: Uid,
        /// The sync to cancel.
        sync_id: u64,
    },
    /// Inspect the pod in the runtime now and report `RuntimeStatusObserved` (where the
    /// kubelet's worker waits on `podCache.GetNewerThan`).
    InspectPod {
        /// The pod.
        uid: Uid,
    },
    /// Arm a timer; report `TimerFired` with the same key and generation when due.
    SetTimer(ArmedTimer),
    /// Record a Kubernetes Event.
    RecordEvent(KubeEvent),
    /// Sync a pod's status to the API server; report `StatusSyncFinished`.
    SyncPodStatus(SyncPodStatusCommand),
    /// Write something about the node to the API server; report `NodeSyncFinished`.
    Node(NodeCommand),
    /// Run one probe as a task (never blocking the fold); report `ProbeFinished`.
    RunProbe(super::probes::ProbeCommand),
}

impl Command {
    /// The command's name, for spans and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Append(_) => "append",
            Command::SyncPod(_) => "syncPod",
            Command::SyncTerminatingPod(_) => "syncTerminatingPod",
            Command::SyncTerminatingRuntimePod(_) => "syncTerminatingRuntimePod",
            Command::SyncTerminatedPod(_) => "syncTerminatedPod",
            Command::RemovePodContent(_) => "removePodContent",
            Command::CancelSync { .. } => "cancelSync",
            Command::InspectPod { .. } => "inspectPod",
            Command::SetTimer(_) => "setTimer",
            Command::RecordEvent(_) => "recordEvent",
            Command::SyncPodStatus(_) => "status.sync",
            Command::Node(NodeCommand::Register { .. }) => "node.register",
            Command::Node(NodeCommand::RenewLease { .. }) => "node.renewLease",
            Command::Node(NodeCommand::PatchStatus { .. }) => "node.patchStatus",
            Command::Node(NodeCommand::CreateMirrorPod { .. }) => "mirrorPod.create",
            Command::Node(NodeCommand::DeleteMirrorPod { .. }) => "mirrorPod.delete",
            Command::RunProbe(_) => "probe",
        }
    }

    /// The sync id and pod of a sync command.
    pub fn sync_id(&self) -> Option<(&Uid, u64)> {
        match self {
            Command::SyncPod(c) => Some((&c.uid, c.sync_id)),
            Command::SyncTerminatingPod(c) => Some((&c.uid, c.sync_id)),
            Command::SyncTerminatingRuntimePod(c) => Some((&c.uid, c.sync_id)),
            Command::SyncTerminatedPod(c) => Some((&c.uid, c.sync_id)),
            _ => None,
        }
    }
}
