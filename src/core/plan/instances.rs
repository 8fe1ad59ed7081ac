//! Bookkeeping over a pod's container instances around a sync: the restart count of the
//! next instance (RT-38) and which old instances may be removed (kubelet
//! `pruneInitContainersBeforeStart`, `purgeInitContainers`).
//!
//! Owns the choice of instances. Must not remove anything or read log directories: the
//! shell removes, and falls back to the log directory when there is no previous instance.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::policy::{find_status, init_containers, spec};
use crate::core::runtime_status::{ContainerState, RuntimePodStatus};

/// RT-38: the restart count for the next instance of container `name`: the newest
/// previous instance's count + 1, or 0 if the runtime has none (the shell then derives it
/// from the newest `{n}.log` in the container's log directory).
pub fn next_restart_count(runtime: &RuntimePodStatus, name: &str) -> i32 {
    find_status(runtime, name).map_or(0, |s| s.restart_count.saturating_add(1))
}

/// The IDs of exited or unknown instances that may be removed: for each container name,
/// every exited/unknown instance except the newest one (kept for the last termination
/// state and the backoff). Never a running or created instance. In runtime order
/// (newest first).
pub fn removable_containers(runtime: &RuntimePodStatus) -> Vec<String> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    runtime
        .containers
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Exited | ContainerState::Unknown))
        .filter(|c| !seen.insert(c.name.as_str()))
        .map(|c| c.id.clone())
        .collect()
}

/// `purgeInitContainers`: the IDs of every instance of every init container, removed when
/// the pod gets a new sandbox (after the kill, so none is running). In runtime order.
pub fn purgeable_init_containers(pod: &Pod, runtime: &RuntimePodStatus) -> Vec<String> {
    let names: BTreeSet<&str> = init_containers(spec(pod))
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    runtime
        .containers
        .iter()
        .filter(|c| names.contains(c.name.as_str()))
        .map(|c| c.id.clone())
        .collect()
}
