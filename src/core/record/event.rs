//! The events the ledger records: the vocabulary of everything that happens to a node.
//!
//! Owns the `Event` enum (serialised as `{"kind": "<Variant>", "event": {...}}`) and the
//! payload structs that are not core vocabulary already. Names are the contract with
//! operators and exported ledgers: add variants, never rename them. Must not carry secrets
//! in clear (the shell redacts before append).

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::core::command::{ContainerKind, WorkType};
use crate::core::config::{CoreConfig, PodSource};
use crate::core::runtime_status::RuntimePodStatus;
use crate::core::timers::TimerKey;
use crate::core::uid::Uid;
use crate::core::update::UpdatePod;

/// The agent applied a configuration; the core folds everything after it with these values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigApplied {
    /// The configuration (boxed: it is the largest payload and appears once per run, so it
    /// should not set the size of every record).
    pub config: Box<CoreConfig>,
}

/// A config source delivered its initial state (kubelet `sourcesReady.AddSource`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceReady {
    /// The source.
    pub source: PodSource,
}

/// A pod config change from a source (`PodAdded`, `PodUpdated`, `PodRemoved`, `PodDeleted`,
/// `PodReconcile` share this payload).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodConfigChange {
    /// Which source saw the change.
    pub source: PodSource,
    /// The pod as the source has it now (for removals: as it was last seen).
    pub pod: Arc<Pod>,
}

/// PLEG event types (kubelet `PodLifeCycleEventType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlegEventKind {
    /// A container started.
    ContainerStarted,
    /// A container exited.
    ContainerDied,
    /// A container was removed from the runtime.
    ContainerRemoved,
    /// A container changed state in another way.
    ContainerChanged,
    /// Something about the pod changed; sync it.
    PodSync,
}

/// A pod lifecycle event from the PLEG.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlegEvent {
    /// The pod.
    pub uid: Uid,
    /// What happened.
    pub kind: PlegEventKind,
    /// The container (or sandbox) it happened to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
}

/// The runtime's view of a pod, from a relist or an `InspectPod`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStatusObserved {
    /// The pod.
    pub uid: Uid,
    /// The status; absent (with `error` absent) when the runtime has nothing for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Arc<RuntimePodStatus>>,
    /// Why the inspection failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The newest record appended before the runtime was read: the observation reflects
    /// everything that record and its predecessors had done, and maybe more. A read can be
    /// appended long after it began (a relist reads many pods), so freshness is judged by
    /// this, not by the record's own seq. Absent in ledgers written before it existed; the
    /// record's own seq less one stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_after_seq: Option<u64>,
}

impl RuntimeStatusObserved {
    /// The observation of one read of the pod: its status (none when the runtime showed
    /// nothing of it) or why the read failed.
    pub fn from_read(
        uid: Uid,
        read: Result<RuntimePodStatus, String>,
        read_after_seq: Option<u64>,
    ) -> RuntimeStatusObserved {
        let (status, error) = match read {
            Ok(s) => ((!s.is_empty()).then(|| Arc::new(s)), None),
            Err(e) => (None, Some(e)),
        };
        RuntimeStatusObserved {
            uid,
            status,
            error,
            read_after_seq,
        }
    }

    /// The seq this observation is at least as fresh as, given its own record's `seq`.
    pub fn fresh_as_of(&self, seq: u64) -> u64 {
        self.read_after_seq.unwrap_or(seq.saturating_sub(1))
    }
}

/// How a sync command ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum SyncOutcome {
    /// Finished without error.
    Ok,
    /// `SyncPod` finished and found the pod terminal (`isTerminal=true`).
    Terminal,
    /// Failed; the worker retries with backoff.
    Failed {
        /// The error, as the kubelet would log it.
        message: String,
    },
    /// Stopped early because it was cancelled (`context.Canceled`).
    Canceled,
}

/// A sync command ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncFinished {
    /// The pod.
    pub uid: Uid,
    /// The `sync_id` of the command.
    pub sync_id: u64,
    /// Which work it was.
    pub work: WorkType,
    /// How it ended.
    pub outcome: SyncOutcome,
}

/// One step of a runtime plan (a CRI call or a short sequence of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RuntimeAction {
    /// `StopContainer` with the plan's grace period.
    KillContainer {
        /// Runtime ID.
        id: String,
        /// Container name.
        name: String,
        /// Why (the `Killing` event's message, e.g. "Container web failed liveness probe,
        /// will be restarted").
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// `StopPodSandbox`.
    StopSandbox {
        /// Runtime ID.
        id: String,
    },
    /// `RemoveContainer`.
    RemoveContainer {
        /// Runtime ID.
        id: String,
    },
    /// `RemovePodSandbox`.
    RemoveSandbox {
        /// Runtime ID.
        id: String,
    },
    /// `RunPodSandbox`.
    CreateSandbox {
        /// The sandbox attempt.
        attempt: u32,
    },
    /// A pull is about to start (`imagePullPolicy` and the runtime's image store call for
    /// one): the kubelet's `Pulling` event.
    PullingImage {
        /// The container it is for.
        container: String,
        /// The image reference.
        image: String,
    },
    /// Image presence check and pull per `imagePullPolicy`.
    PullImage {
        /// The container it is for.
        container: String,
        /// The image reference.
        image: String,
    },
    /// `CreateContainer`.
    CreateContainer {
        /// Container name.
        container: String,
        /// Init, regular or ephemeral.
        kind: ContainerKind,
    },
    /// `StartContainer`.
    StartContainer {
        /// Container name.
        container: String,
        /// Init, regular or ephemeral.
        kind: ContainerKind,
        /// Runtime ID.
        id: String,
    },
    /// The container's postStart hook, run after `StartContainer` (a failure kills it).
    PostStartHook {
        /// Container name.
        container: String,
        /// Runtime ID.
        id: String,
    },
    /// The container's preStop hook, run before `StopContainer` within the grace period.
    PreStopHook {
        /// Container name.
        name: String,
        /// Runtime ID.
        id: String,
    },
    /// A problem in the pod's configuration the shell found while forming its sandbox or
    /// setting up its volumes (the kubelet's pod Warning events `MissingClusterDNS`,
    /// `DNSConfigForming`, `FailedToRetrieveImagePullSecret`, `FailedMount`).
    PodConfigWarning {
        /// The event's reason.
        reason: String,
        /// The event's message.
        message: String,
    },
}

/// How a runtime step ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ActionOutcome {
    /// It worked.
    Ok {
        /// The ID of what was created, if anything.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// A human detail (e.g. "already present on machine").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// It failed; `reason` is the kubelet's error kind (`CreateContainerError`,
    /// `RunContainerError`, `ErrImagePull`, `CreateContainerConfigError`, …).
    Failed {
        /// One word.
        reason: String,
        /// The error as the kubelet words it (what the status and the event show).
        message: String,
        /// Where it arose, when the message alone does not say (the container and the pod
        /// spec field, e.g. `container main of pod default/web, env[0] (LATE)`); ledgerlet's
        /// own context, kept out of the API so a status reads as a kubelet-run node's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

/// A step of a runtime plan finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeActionFinished {
    /// The pod.
    pub uid: Uid,
    /// The sync whose plan this step belongs to.
    pub sync_id: u64,
    /// What was done.
    #[serde(flatten)]
    pub action: RuntimeAction,
    /// How it ended.
    pub outcome: ActionOutcome,
    /// How long it took, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
}

/// How a status sync ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum StatusSyncOutcome {
    /// The status was patched (and the pod deleted, if it could be).
    Patched {
        /// Size of the patch body in bytes.
        patch_bytes: u64,
        /// The pod was deleted with grace 0 afterwards.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deleted: bool,
    },
    /// The API already had this status (no PATCH was sent).
    Unchanged {
        /// The pod was deleted with grace 0.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deleted: bool,
    },
    /// The API object does not exist.
    NotFound,
    /// The API object has another UID (deleted and recreated): the status is stale.
    UidChanged {
        /// The UID found.
        api_uid: String,
    },
    /// A request failed; the status manager retries.
    Failed {
        /// HTTP status, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<u16>,
        /// What failed.
        message: String,
    },
}

/// What the shell found out about the machine at start-up: the Node as this host would
/// register it (labels, capacity, allocatable, addresses, node info, daemon endpoints).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeInfoObserved {
    /// The Node object without conditions (the core adds them).
    pub node: Arc<k8s_openapi::api::core::v1::Node>,
}

/// The Node object as the API server has it, reduced to what the core reads: its labels
/// and taints (admission's node affinity and `NoExecute` checks) and the extended resources
/// in its status (advertised by an admin, kept in allocatable by the node status). Recorded
/// by the node watch when any of them changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeObserved {
    /// `metadata.labels`.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// `spec.taints`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<k8s_openapi::api::core::v1::Taint>,
    /// The extended resources (`example.com/widget`) of `status.capacity`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub extended_capacity: std::collections::BTreeMap<String, Quantity>,
    /// The extended resources of `status.allocatable` (what admission may hand out).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub extended_allocatable: std::collections::BTreeMap<String, Quantity>,
}

/// The container runtime's health changed (kubelet `updateRuntimeUp`, every 5 s, recorded
/// only on change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeHealth {
    /// CRI `RuntimeReady`.
    pub runtime_ready: bool,
    /// CRI `NetworkReady`.
    pub network_ready: bool,
    /// PLEG health (`/healthz`'s pleg check).
    pub pleg_healthy: bool,
    /// Why not ready, if not (e.g. "container runtime is down").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The network's part of `message` (kubelet `runtimeState.networkErrors`), what a pod's
    /// `NetworkNotReady` names; empty while the network is ready.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub network_message: String,
}

impl RuntimeHealth {
    /// `networkErrors()`: why the network is not ready, `None` if it is. A record from before
    /// `network_message` existed gives the generic text.
    pub fn network_error(&self) -> Option<&str> {
        match (self.network_ready, self.network_message.as_str()) {
            (true, _) => None,
            (false, "") => Some("container runtime network not ready"),
            (false, m) => Some(m),
        }
    }
}

/// Which node write finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeAction {
    /// `Register`.
    Register,
    /// `RenewLease`.
    RenewLease,
    /// `PatchStatus`.
    PatchStatus,
    /// `CreateMirrorPod`.
    CreateMirrorPod,
    /// `DeleteMirrorPod`.
    DeleteMirrorPod,
}

/// A node write (`Command::Node`) finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSyncFinished {
    /// What it was.
    pub action: NodeAction,
    /// For mirror pods: the static pod's UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<Uid>,
    /// Ok, or why not.
    pub outcome: NodeSyncOutcome,
}

/// How a node write ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum NodeSyncOutcome {
    /// Done.
    Ok,
    /// Failed; retried later.
    Failed {
        /// HTTP status, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<u16>,
        /// What failed.
        message: String,
    },
}

/// A status sync (`SyncPodStatus`) finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusSyncFinished {
    /// The pod's UID in the node.
    pub uid: Uid,
    /// The version that was synced.
    pub version: u64,
    /// How it ended.
    pub outcome: StatusSyncOutcome,
}

/// The node is shutting down (the agent received SIGTERM with pods to stop): every pod is
/// killed with its own grace period and new pods are rejected, as the kubelet's graceful
/// node shutdown does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeShutdown {}

/// The shell measured a pod's `emptyDir` volume above the `sizeLimit` it was set up with
/// (the eviction manager's input, `emptyDirLimitEviction`): measured every
/// `eviction_monitoring_period_ms`, reported once per volume. The core decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeUsageObserved {
    /// The pod.
    pub uid: Uid,
    /// The volume's name in the pod spec.
    pub volume: String,
    /// Bytes in use (allocated blocks, each hard-linked file once).
    pub used_bytes: u64,
}

/// A timer armed by `SetTimer` fired.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerFired {
    /// What it was for.
    #[serde(flatten)]
    pub key: TimerKey,
    /// The generation from `SetTimer`.
    pub generation: u64,
}

/// Housekeeping reconciles the pod workers with the desired pods (`SyncKnownPods`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncKnownPods {
    /// The desired pods' UIDs, sorted. Absent (what housekeeping records): every pod in the
    /// pod manager at this point of the ledger, which a replay derives, so a busy node's
    /// housekeeping does not repeat its whole pod list every two seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<Vec<Uid>>,
}

/// A kill requested with `wait_for_completion` finished (the kubelet closes `CompletedCh`)
/// or its deadline passed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KillCompleted {
    /// The pod.
    pub uid: Uid,
    /// The seqs of the `UpdatePod` records that requested the kill.
    pub requests: Vec<u64>,
    /// True if the deadline passed first (`ExceededGracePeriod`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

/// Admission rejected a pod; the status manager marks it Failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodRejected {
    /// The pod.
    pub uid: Uid,
    /// One-word reason (e.g. `OutOfpods`).
    pub reason: String,
    /// `Pod was rejected: <why>`.
    pub message: String,
}

/// The agent started again on a durable ledger (`--ledger-dir`) that holds a previous
/// lifetime. Like a restarted kubelet, the core forgets everything it folded (in-flight
/// syncs, timers, caches): the sources, the PLEG and the API server tell it again what
/// exists, and the pod workers adopt what still runs. The history stays in the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRestarted {
    /// The last seq of the previous lifetime that was recovered.
    pub previous_seq: u64,
    /// What was dropped from the end of the durable ledger at start-up (a torn or unreadable
    /// record), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<String>,
}

/// The static pod source could not use a manifest (or the manifest path itself); the pods
/// it last accepted from that file, if any, keep running. Reported once per change, not per
/// scan. Informational for the core (a no-op fold); it is in the ledger for operators.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestRejected {
    /// The manifest file (or the manifest directory, for errors about the directory).
    pub path: String,
    /// What is wrong, naming the file, the document, the field and the problem.
    pub error: String,
}

macro_rules! events {
    ($( $(#[$doc:meta])* $variant:ident($payload:ty) ),* $(,)?) => {
        /// Something that happened, as recorded in the ledger.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Event {
            $( $(#[$doc])* $variant($payload), )*
        }

        impl Event {
            /// Every kind, in declaration order.
            pub const KINDS: &'static [&'static str] = &[$( stringify!($variant), )*];

            /// The position of the event's kind in [`Event::KINDS`] (for per-kind tables).
            pub fn kind_index(&self) -> usize {
                #[allow(non_camel_case_types, dead_code, clippy::enum_variant_names)]
                enum Index { $( $variant, )* }
                match self { $( Event::$variant(_) => Index::$variant as usize, )* }
            }

            /// The `kind` of the NDJSON line.
            pub fn kind(&self) -> &'static str {
                match self { $( Event::$variant(_) => stringify!($variant), )* }
            }

            /// Serialises the payload (the `event` field of a line).
            pub(crate) fn serialize_payload<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self { $( Event::$variant(p) => p.serialize(s), )* }
            }

            /// Decodes the `event` object of a line whose `kind` is `kind`.
            pub fn decode(kind: &str, event_json: &str) -> Result<Event, EventDecodeError> {
                match kind {
                    $( stringify!($variant) => serde_json::from_str::<$payload>(event_json)
                        .map(Event::$variant)
                        .map_err(|e| EventDecodeError::Payload { kind: stringify!($variant), error: e.to_string() }), )*
                    other => Err(EventDecodeError::UnknownKind(other.chars().take(64).collect())),
                }
            }

            /// Deserialises the payload of a `kind` event from `d` (the one-pass line
            /// decoder; an unknown kind is an error).
            pub(crate) fn deserialize_payload<'de, D: Deserializer<'de>>(
                kind: &str,
                d: D,
            ) -> Result<Event, D::Error> {
                match kind {
                    $( stringify!($variant) => <$payload>::deserialize(d).map(Event::$variant), )*
                    other => Err(D::Error::custom(EventDecodeError::UnknownKind(other.chars().take(64).collect()))),
                }
            }

            /// Decodes the payload of a `kind` event that starts `text` (followed by anything):
            /// the event and the length of its JSON text; `None` for an unknown kind or any
            /// error (the fast line decoder then leaves the line to the general one).
            pub(crate) fn decode_prefix(kind: &str, text: &str) -> Option<(Event, usize)> {
                fn prefix<T: serde::de::DeserializeOwned>(text: &str) -> Option<(T, usize)> {
                    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
                    let v = values.next()?.ok()?;
                    Some((v, values.byte_offset()))
                }
                match kind {
                    $( stringify!($variant) => prefix::<$payload>(text).map(|(p, n)| (Event::$variant(p), n)), )*
                    _ => None,
                }
            }

            fn from_value(kind: &str, v: serde_json::Value) -> Result<Event, EventDecodeError> {
                match kind {
                    $( stringify!($variant) => serde_json::from_value::<$payload>(v)
                        .map(Event::$variant)
                        .map_err(|e| EventDecodeError::Payload { kind: stringify!($variant), error: e.to_string() }), )*
                    other => Err(EventDecodeError::UnknownKind(other.chars().take(64).collect())),
                }
            }
        }
    };
}

events! {
    /// The agent's configuration (first record of a run).
    ConfigApplied(ConfigApplied),
    /// A config source has delivered its initial state.
    SourceReady(SourceReady),
    /// A pod appeared in a source (`HandlePodAdditions`).
    PodAdded(PodConfigChange),
    /// A pod's spec or metadata changed (`HandlePodUpdates`).
    PodUpdated(PodConfigChange),
    /// A pod left a source (`HandlePodRemoves`).
    PodRemoved(PodConfigChange),
    /// A pod was marked for graceful deletion (treated as an update).
    PodDeleted(PodConfigChange),
    /// Only a pod's status changed in the API (`HandlePodReconcile`).
    PodReconcile(PodConfigChange),
    /// An update delivered to a pod worker (`podWorkers.UpdatePod`).
    UpdatePod(UpdatePod),
    /// A pod lifecycle event from the PLEG.
    PlegEvent(PlegEvent),
    /// The runtime's view of a pod.
    RuntimeStatusObserved(RuntimeStatusObserved),
    /// A sync command ended.
    SyncFinished(SyncFinished),
    /// A timer fired.
    TimerFired(TimerFired),
    /// Housekeeping reconciled the workers with the desired pods.
    SyncKnownPods(SyncKnownPods),
    /// A waited-for kill completed or timed out.
    KillCompleted(KillCompleted),
    /// Admission rejected a pod.
    PodRejected(PodRejected),
    /// A step of a runtime plan finished.
    RuntimeActionFinished(RuntimeActionFinished),
    /// The node is shutting down.
    NodeShutdown(NodeShutdown),
    /// The agent restarted on a durable ledger; the core starts afresh.
    AgentRestarted(AgentRestarted),
    /// A status sync finished.
    StatusSyncFinished(StatusSyncFinished),
    /// The machine as the node would register it.
    NodeInfoObserved(NodeInfoObserved),
    /// The container runtime's health changed.
    RuntimeHealth(RuntimeHealth),
    /// A node write finished.
    NodeSyncFinished(NodeSyncFinished),
    /// The static pod source rejected a manifest (its last valid pods keep running).
    ManifestRejected(ManifestRejected),
    /// A probe run ended (the shell's report of a `RunProbe`).
    ProbeFinished(crate::core::probes::ProbeFinished),
    /// A probe's cached result changed (derived; only on change).
    ProbeResult(crate::core::probes::ProbeResult),
    /// The Node object's labels or taints changed in the API server.
    NodeObserved(NodeObserved),
    /// A pod's `emptyDir` was measured above its `sizeLimit`.
    VolumeUsageObserved(VolumeUsageObserved),
}

/// Where an event holds its pod's UID (see [`Event::pod_uid_ref`]).
enum UidRef<'a> {
    /// A `Uid` the event carries.
    Uid(&'a Uid),
    /// The text of a pod object's `metadata.uid`.
    Text(&'a str),
}

impl Event {
    /// The pod UID the event is about, if it is about one pod.
    pub fn pod_uid(&self) -> Option<Uid> {
        self.pod_uid_ref().map(|u| match u {
            UidRef::Uid(u) => u.clone(),
            UidRef::Text(t) => Uid::new(t),
        })
    }

    /// [`Event::pod_uid`] as text, without allocating (maps keyed by `Uid` accept `&str`).
    pub fn pod_uid_str(&self) -> Option<&str> {
        self.pod_uid_ref().map(|u| match u {
            UidRef::Uid(u) => u.as_str(),
            UidRef::Text(t) => t,
        })
    }

    /// Where the event holds its pod's UID: a `Uid` it carries, or a pod object's text.
    fn pod_uid_ref(&self) -> Option<UidRef<'_>> {
        fn text(p: &k8s_openapi::api::core::v1::Pod) -> UidRef<'_> {
            UidRef::Text(crate::core::pod::uid_str(p))
        }
        match self {
            Event::PodAdded(e)
            | Event::PodUpdated(e)
            | Event::PodRemoved(e)
            | Event::PodDeleted(e)
            | Event::PodReconcile(e) => Some(text(&e.pod)),
            Event::UpdatePod(u) => match (&u.pod, &u.running_pod) {
                (Some(p), _) => Some(text(p)),
                (None, Some(r)) => Some(UidRef::Uid(&r.uid)),
                (None, None) => None,
            },
            Event::PlegEvent(e) => Some(UidRef::Uid(&e.uid)),
            Event::RuntimeStatusObserved(e) => Some(UidRef::Uid(&e.uid)),
            Event::SyncFinished(e) => Some(UidRef::Uid(&e.uid)),
            Event::TimerFired(t) => match &t.key {
                TimerKey::PodWork { uid }
                | TimerKey::KillDeadline { uid, .. }
                | TimerKey::BackoffExpiry { uid }
                | TimerKey::ActiveDeadline { uid }
                | TimerKey::PodContentRemoval { uid }
                | TimerKey::Probe { uid, .. } => Some(UidRef::Uid(uid)),
                TimerKey::Housekeeping
                | TimerKey::StatusSync
                | TimerKey::NodeStatusUpdate
                | TimerKey::LeaseRenew
                | TimerKey::NodeRegister
                | TimerKey::NodeShutdownGroup => None,
            },
            Event::KillCompleted(e) => Some(UidRef::Uid(&e.uid)),
            Event::PodRejected(e) => Some(UidRef::Uid(&e.uid)),
            Event::RuntimeActionFinished(e) => Some(UidRef::Uid(&e.uid)),
            Event::StatusSyncFinished(e) => Some(UidRef::Uid(&e.uid)),
            Event::NodeSyncFinished(e) => e.uid.as_ref().map(UidRef::Uid),
            Event::ProbeFinished(e) => Some(UidRef::Uid(&e.uid)),
            Event::ProbeResult(e) => Some(UidRef::Uid(&e.uid)),
            Event::VolumeUsageObserved(e) => Some(UidRef::Uid(&e.uid)),
            Event::NodeInfoObserved(_) | Event::RuntimeHealth(_) | Event::NodeObserved(_) => None,
            Event::ConfigApplied(_)
            | Event::SourceReady(_)
            | Event::SyncKnownPods(_)
            | Event::NodeShutdown(_)
            | Event::AgentRestarted(_)
            | Event::ManifestRejected(_) => None,
        }
    }

    /// The pod object the event carries, if any (for `namespace/name` filters).
    pub fn pod(&self) -> Option<&Pod> {
        match self {
            Event::PodAdded(e)
            | Event::PodUpdated(e)
            | Event::PodRemoved(e)
            | Event::PodDeleted(e)
            | Event::PodReconcile(e) => Some(&e.pod),
            Event::UpdatePod(u) => u.pod.as_deref(),
            _ => None,
        }
    }
}

/// Why an event payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventDecodeError {
    /// The `kind` is not one this version knows.
    #[error("unknown kind {0:?}")]
    UnknownKind(String),
    /// The payload does not match the kind's schema.
    #[error("bad {kind} event: {error}")]
    Payload {
        /// The kind.
        kind: &'static str,
        /// What serde said.
        error: String,
    },
}

/// Serialises the payload of an event (the `event` field of a line).
struct Payload<'a>(&'a Event);

impl Serialize for Payload<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_payload(s)
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("kind", self.kind())?;
        m.serialize_entry("event", &Payload(self))?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        #[derive(Deserialize)]
        struct Tagged {
            kind: String,
            event: serde_json::Value,
        }
        let t = Tagged::deserialize(d)?;
        Event::from_value(&t.kind, t.event).map_err(D::Error::custom)
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}
