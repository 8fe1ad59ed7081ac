//! Runtime container instances → API container statuses (kubelet
//! `convertToAPIContainerStatuses`, GS-01…GS-07).
//!
//! Owns the default waiting reasons, the carry-over of old statuses, the "container could not
//! be located" statuses, the runtime → API state mapping, state/lastState from the two newest
//! instances, and waiting reasons from the last failed start. Must not compute `ready` or
//! `started` (that is `readiness`, PR-15) and must not read probes or the clock.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus as ApiContainerStatus, Pod, ResourceRequirements,
    VolumeMount, VolumeMountStatus,
};

use super::api_time::to_api;
use super::spec::{self, is_running, last_terminated, terminated, RestartPolicy};
use crate::core::pod;
use crate::core::reason_cache::StartFailure;
use crate::core::runtime_status::{ContainerState, ContainerStatus};

/// Default waiting reason of a container the runtime has not reported.
pub const CONTAINER_CREATING: &str = "ContainerCreating";
/// Default waiting reason when the pod has init containers.
pub const POD_INITIALIZING: &str = "PodInitializing";
/// `kubecontainer.ContainerReasonStatusUnknown`.
pub const CONTAINER_STATUS_UNKNOWN: &str = "ContainerStatusUnknown";
/// GS-03: a container that was Running is gone from the runtime (note the two spaces).
pub const MSG_LOST_AFTER_RUNNING: &str =
    "The container could not be located when the pod was deleted.  The container used to be Running";
/// GS-04: the runtime reports Unknown for a container that was Running.
pub const MSG_LOST_WHEN_TERMINATED: &str =
    "The container could not be located when the pod was terminated";
/// The exit code reported for a container whose real exit is unknown.
pub const UNKNOWN_EXIT_CODE: i32 = 137;

/// One container of the spec, whichever list it comes from.
#[derive(Clone, Copy, Debug)]
pub struct SpecContainer<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its image as written in the spec.
    pub image: &'a str,
    /// An init container with `restartPolicy: Always`.
    pub sidecar: bool,
    /// Its volume mounts, as the spec lists them.
    pub volume_mounts: &'a [VolumeMount],
    /// Its resources (the allocated ones: ledgerlet does not resize pods in place).
    pub resources: Option<&'a ResourceRequirements>,
}

/// The kubelet's `recursiveReadOnly` of a read-only mount's status: `Enabled` when the spec
/// asks for it outright (the runtime then made it so, or the container did not start),
/// `Disabled` otherwise (ledgerlet does not ask the runtime whether `IfPossible` can be).
const RRO_ENABLED: &str = "Enabled";
const RRO_DISABLED: &str = "Disabled";

/// The volume mounts of a container's status (kubelet, RecursiveReadOnlyMounts on): one per
/// mount of the spec, `readOnly` shown only when true, with its recursive mode.
fn volume_mount_statuses(c: &SpecContainer) -> Option<Vec<VolumeMountStatus>> {
    if c.volume_mounts.is_empty() {
        return None;
    }
    let status = |m: &VolumeMount| {
        let read_only = m.read_only == Some(true);
        VolumeMountStatus {
            name: m.name.clone(),
            mount_path: m.mount_path.clone(),
            volume_status: None,
            read_only: read_only.then_some(true),
            recursive_read_only: read_only.then(|| {
                if m.recursive_read_only.as_deref() == Some(RRO_ENABLED) {
                    RRO_ENABLED.to_string()
                } else {
                    RRO_DISABLED.to_string()
                }
            }),
        }
    };
    Some(c.volume_mounts.iter().map(status).collect())
}

/// `resources` and `allocatedResources` of a status made from a runtime instance (kubelet,
/// InPlacePodVerticalScaling on): the spec's resources (`{}` when it has none) and its
/// requests. The runtime's own figures are not read: ledgerlet never resizes a running
/// container, so they are the spec's.
fn status_resources(
    c: &SpecContainer,
) -> (
    Option<ResourceRequirements>,
    Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
) {
    let resources = c.resources.cloned().unwrap_or_default();
    let allocated = resources.requests.clone().filter(|r| !r.is_empty());
    (Some(resources), allocated)
}

/// Which of the pod's container lists is being converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerList {
    /// `spec.containers`: sorted by name.
    Regular,
    /// `spec.initContainers`: kept in spec order; one that exited 0 is never shown waiting.
    Init,
    /// `spec.ephemeralContainers`: sorted by name.
    Ephemeral,
}

/// What `convert_to_api_container_statuses` reads besides the spec list.
#[derive(Clone, Copy, Debug)]
pub struct ConvertInputs<'a> {
    /// The pod (restart policy, deletion timestamp, init containers).
    pub pod: &'a Pod,
    /// The runtime's container instances (any order; newest by `created_at` wins).
    pub runtime: &'a [ContainerStatus],
    /// `<runtime>` in `<runtime>://<id>`.
    pub runtime_name: &'a str,
    /// Last failed start per container name (the reason cache).
    pub start_failures: Option<&'a BTreeMap<String, StartFailure>>,
}

/// `kubecontainer.ContainerID.String()`: `<runtime>://<id>`.
pub fn container_id(runtime_name: &str, id: &str) -> String {
    // built in place (no formatting machinery): one per container per status generation
    let mut s = String::with_capacity(runtime_name.len() + 3 + id.len());
    s.push_str(runtime_name);
    s.push_str("://");
    s.push_str(id);
    s
}

/// The runtime ID inside `<runtime>://<id>` (the whole string if it has no scheme).
pub fn runtime_id(container_id: &str) -> &str {
    container_id
        .split_once("://")
        .map_or(container_id, |(_, id)| id)
}

fn waiting(reason: Option<&str>, message: Option<&str>) -> ApiState {
    let opt = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
    ApiState {
        waiting: Some(ContainerStateWaiting {
            reason: opt(reason),
            message: opt(message),
        }),
        ..ApiState::default()
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// A `Terminated` state for a container whose exit the kubelet could not observe.
pub fn unknown_termination(message: &str) -> ContainerStateTerminated {
    ContainerStateTerminated {
        reason: Some(CONTAINER_STATUS_UNKNOWN.to_string()),
        message: Some(message.to_string()),
        exit_code: UNKNOWN_EXIT_CODE,
        ..ContainerStateTerminated::default()
    }
}

/// `convertContainerStatus` (GS-05, GS-04): one runtime instance as an API status. `old` is
/// the previous API status of the same name, if any. `ready`/`started` are left unset.
pub fn convert_container_status(
    cs: &ContainerStatus,
    old: Option<&ApiContainerStatus>,
    runtime_name: &str,
) -> ApiContainerStatus {
    let cid = container_id(runtime_name, &cs.id);
    let mut restart_count = cs.restart_count;
    // not from the runtime, which does not know the volumes' names: the old status's
    let volume_mounts = old.and_then(|o| o.volume_mounts.clone());
    let state = match cs.state {
        ContainerState::Running => ApiState {
            running: Some(ContainerStateRunning {
                started_at: cs.started_at.map(to_api),
            }),
            ..ApiState::default()
        },
        ContainerState::Exited => ApiState {
            terminated: Some(ContainerStateTerminated {
                exit_code: cs.exit_code,
                reason: non_empty(&cs.reason),
                message: non_empty(&cs.message),
                started_at: cs.started_at.map(to_api),
                finished_at: cs.finished_at.map(to_api),
                container_id: Some(cid.clone()),
                signal: None,
            }),
            ..ApiState::default()
        },
        ContainerState::Unknown if old.is_some_and(is_running) => {
            // It ran and is gone: "never ran" must not be shown (a run-once pod would run
            // twice), so it is reported as a failed termination and counted as a restart.
            restart_count = old.map_or(0, |o| o.restart_count) + 1;
            ApiState {
                terminated: Some(unknown_termination(MSG_LOST_WHEN_TERMINATED)),
                ..ApiState::default()
            }
        }
        // Created ("waiting to be running") and any other Unknown.
        ContainerState::Created | ContainerState::Unknown => waiting(None, None),
    };
    ApiContainerStatus {
        name: cs.name.clone(),
        restart_count,
        image: cs.image.clone(),
        image_id: cs.image_ref.clone(),
        container_id: Some(cid),
        state: Some(state),
        last_state: Some(ApiState::default()),
        volume_mounts,
        ..ApiContainerStatus::default()
    }
}

/// `ShouldContainerBeRestarted`: will the next sync start this container? `latest` is its
/// newest runtime instance. A sidecar restarts under any pod restart policy (RT-33), so it is
/// judged as `Always` (see docs/pod-status.md).
pub fn should_container_be_restarted(
    pod: &Pod,
    sidecar: bool,
    latest: Option<&ContainerStatus>,
) -> bool {
    if pod::is_deleted(pod) {
        return false;
    }
    let Some(latest) = latest else {
        return true; // never started (or all instances garbage-collected)
    };
    match latest.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited => {
            let policy = if sidecar {
                RestartPolicy::Always
            } else {
                spec::restart_policy(pod)
            };
            match policy {
                RestartPolicy::Always => true,
                RestartPolicy::OnFailure => latest.exit_code != 0,
                RestartPolicy::Never => false,
            }
        }
    }
}

fn default_status(c: &SpecContainer, default_state: &ApiState) -> ApiContainerStatus {
    ApiContainerStatus {
        name: c.name.to_string(),
        image: c.image.to_string(),
        state: Some(default_state.clone()),
        last_state: Some(ApiState::default()),
        volume_mounts: volume_mount_statuses(c),
        ..ApiContainerStatus::default()
    }
}

fn is_default_waiting(s: &ApiContainerStatus, default_reason: &str) -> bool {
    s.state
        .as_ref()
        .and_then(|st| st.waiting.as_ref())
        .is_some_and(|w| w.reason.as_deref() == Some(default_reason))
}

/// A lookup by container name with the answers of a map built from the same pairs (the
/// last pair of a repeated name wins): a scan from the end for the few containers a pod
/// usually has, a sorted map beyond that.
enum ByName<'a, V> {
    /// Up to [`SCAN_AT_MOST`] pairs, in order.
    Scan(Vec<(&'a str, V)>),
    /// More pairs.
    Map(BTreeMap<&'a str, V>),
}

/// The most pairs [`ByName`] scans.
const SCAN_AT_MOST: usize = 8;

impl<'a, V: Copy> ByName<'a, V> {
    fn new(pairs: impl ExactSizeIterator<Item = (&'a str, V)>) -> Self {
        if pairs.len() <= SCAN_AT_MOST {
            ByName::Scan(pairs.collect())
        } else {
            ByName::Map(pairs.collect())
        }
    }

    fn get(&self, name: &str) -> Option<V> {
        match self {
            ByName::Scan(v) => v.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| *v),
            ByName::Map(m) => m.get(name).copied(),
        }
    }
}

/// `convertToAPIContainerStatuses` for one container list. `previous` are the old API
/// statuses of that list (status manager's, else the API's). Returns one status per spec
/// container: init containers in spec order, the others sorted by name.
pub fn convert_to_api_container_statuses(
    inputs: &ConvertInputs,
    specs: &[SpecContainer],
    previous: &[ApiContainerStatus],
    kind: ContainerList,
) -> Vec<ApiContainerStatus> {
    if specs.is_empty() {
        // every status below is one per spec container (most pods have no init or
        // ephemeral containers)
        return Vec::new();
    }
    let pod = inputs.pod;
    let old = ByName::new(previous.iter().map(|s| (s.name.as_str(), s)));
    let default_reason = if spec::has_init_containers(pod) {
        POD_INITIALIZING
    } else {
        CONTAINER_CREATING
    };
    let default_state = waiting(Some(default_reason), None);

    // Newest instance first; ties keep the runtime's (newest-first) order.
    let mut instances: Vec<&ContainerStatus> = inputs.runtime.iter().collect();
    instances.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    let latest = |name: &str| instances.iter().copied().find(|c| c.name == name);

    // GS-01/GS-02: defaults, an old Terminated status kept whole, else the old restart count
    // and last termination carried over.
    // A container the runtime has an instance of gets its status from that instance below
    // (GS-05, for the spec index its name resolves to), so it starts as a placeholder.
    let index = ByName::new(specs.iter().enumerate().map(|(i, c)| (c.name, i)));
    let mut statuses: Vec<ApiContainerStatus> = specs
        .iter()
        .enumerate()
        .map(|(i, c)| match old.get(c.name) {
            _ if index.get(c.name) == Some(i) && latest(c.name).is_some() => {
                ApiContainerStatus::default()
            }
            Some(o) if terminated(o).is_some() => (*o).clone(),
            Some(o) => ApiContainerStatus {
                restart_count: o.restart_count,
                last_state: o.last_state.clone().or_else(|| Some(ApiState::default())),
                ..default_status(c, &default_state)
            },
            None => default_status(c, &default_state),
        })
        .collect();

    // GS-03: the runtime lost a container that was Running.
    for (c, status) in specs.iter().zip(statuses.iter_mut()) {
        if latest(c.name).is_some() {
            continue;
        }
        let Some(o) = old.get(c.name) else { continue };
        if terminated(o).is_some()
            || !is_running(o)
            || !is_default_waiting(status, default_reason)
            || last_terminated(status).is_some()
        {
            continue;
        }
        status.last_state = Some(ApiState {
            terminated: Some(unknown_termination(MSG_LOST_AFTER_RUNNING)),
            ..ApiState::default()
        });
        if !pod::is_deleted(pod) {
            status.restart_count += 1;
        }
    }

    // GS-05/GS-06: the newest instance is the state, the second newest the last state.
    let mut seen = vec![0u8; specs.len()];
    for cs in &instances {
        let Some(i) = index.get(cs.name.as_str()) else {
            continue; // not in this list (or not in the spec at all)
        };
        if seen[i] >= 2 {
            continue;
        }
        let mut converted =
            convert_container_status(cs, old.get(cs.name.as_str()), inputs.runtime_name);
        if seen[i] == 0 {
            if converted.image.is_empty() {
                converted.image = specs[i].image.to_string();
            }
            (converted.resources, converted.allocated_resources) = status_resources(&specs[i]);
            statuses[i] = converted;
        } else {
            statuses[i].last_state = converted.state;
        }
        seen[i] += 1;
    }

    // GS-07: a container the next sync will (re)start shows why its last start failed.
    for (c, status) in specs.iter().zip(statuses.iter_mut()) {
        let newest = latest(c.name);
        if kind == ContainerList::Init
            && newest.is_some_and(|n| n.state == ContainerState::Exited && n.exit_code == 0)
        {
            continue;
        }
        if !should_container_be_restarted(pod, c.sidecar, newest) {
            continue;
        }
        let Some(failure) = inputs.start_failures.and_then(|f| f.get(c.name)) else {
            continue;
        };
        if terminated(status).is_some() {
            status.last_state = status.state.take();
        }
        status.state = Some(waiting(Some(&failure.reason), Some(&failure.message)));
    }

    if kind != ContainerList::Init {
        statuses.sort_by(|a, b| a.name.cmp(&b.name));
    }
    statuses
}

#[cfg(test)]
mod by_name_tests {
    use super::{ByName, SCAN_AT_MOST};
    use std::collections::BTreeMap;

    /// The scan and the map answer as a map built from the same pairs would: the last pair
    /// of a repeated name wins, an unknown name is absent.
    #[test]
    fn by_name_answers_like_a_map_on_both_sides_of_the_scan_limit() {
        for len in [0, 1, 3, SCAN_AT_MOST, SCAN_AT_MOST + 1, 20] {
            let names: Vec<String> = (0..len).map(|i| format!("c{}", i % 5)).collect();
            let pairs = || names.iter().enumerate().map(|(i, n)| (n.as_str(), i));
            let map: BTreeMap<&str, usize> = pairs().collect();
            let by_name = ByName::new(pairs());
            assert_eq!(matches!(by_name, ByName::Scan(_)), len <= SCAN_AT_MOST);
            for probe in ["c0", "c1", "c4", "c9", ""] {
                assert_eq!(
                    by_name.get(probe),
                    map.get(probe).copied(),
                    "len {len}, {probe}"
                );
            }
        }
    }
}
