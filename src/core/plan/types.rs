//! The plan's output vocabulary (kubelet `podActions` and `containerToKillInfo`).
//!
//! Owns the data handed to the shell. Must not decide anything: the decisions are made in
//! `compute` and `init`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which list of the pod spec a container comes from (sidecars are `Init`); the same type
/// the runtime plan's commands carry.
pub use crate::core::command::ContainerKind;

/// Why a container is killed (kubelet `containerKillReason`, plus the cases upstream leaves
/// empty). Only `LivenessFailed` and `StartupFailed` change the grace period (RT-39).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum KillReason {
    /// The container's spec hash changed (upstream reason "").
    SpecChanged,
    /// The liveness probe failed (`reasonLivenessProbe`).
    LivenessFailed,
    /// The startup probe failed (`reasonStartupProbe`).
    StartupFailed,
    /// The runtime reports the container in the unknown state (`reasonUnknown`).
    UnknownState,
    /// The whole pod is being killed (`killPodWithSyncResult`).
    PodKilled,
    /// Anything else (e.g. a failed postStart hook, RT-37).
    Other,
}

/// One container the plan wants stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerToKill {
    /// The container's name in the spec.
    pub name: String,
    /// Which spec list it is in.
    pub kind: ContainerKind,
    /// Why it is killed.
    pub reason: KillReason,
    /// The message of the Normal `Killing` event, exactly as upstream words it.
    pub message: String,
}

/// What to do to a pod (kubelet `podActions`, SidecarContainers variant).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodActions {
    /// Stop every container and every sandbox of the pod.
    pub kill_pod: bool,
    /// Create a new sandbox (after the kill; init containers are then purged).
    pub create_sandbox: bool,
    /// The sandbox to reuse, or the one being replaced ("" if none, or if the network
    /// namespace mode changed: then no `SandboxChanged` event is emitted).
    pub sandbox_id: String,
    /// The attempt number of a new sandbox.
    pub attempt: u32,
    /// Indices into `spec.initContainers` to start, in order (sidecars included).
    pub init_containers_to_start: Vec<usize>,
    /// Indices into `spec.containers` to start, in order.
    pub containers_to_start: Vec<usize>,
    /// Containers to stop before anything starts, by runtime container ID.
    pub containers_to_kill: BTreeMap<String, ContainerToKill>,
    /// Indices into `spec.ephemeralContainers` to start (never restarted).
    pub ephemeral_containers_to_start: Vec<usize>,
}
