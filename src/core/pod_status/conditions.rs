//! The pod conditions the kubelet owns (GS-12…GS-15) and their transition times (SM-04).
//!
//! Owns the condition types and reasons, which types the kubelet owns (SM-21), and the
//! generators for PodReadyToStartContainers, Initialized, ContainersReady and Ready. Must not
//! stamp times itself: generators return conditions without `lastTransitionTime`; `generate`
//! stamps `now`, and the status manager (`core::status`) keeps the old time of an unchanged
//! condition (SM-04).

use k8s_openapi::api::core::v1::{ContainerStatus as ApiContainerStatus, Pod, PodCondition};

use super::phase::{has_any_regular_container_started, FAILED, SUCCEEDED};
use super::spec::{self, find_status, is_started};

/// `PodScheduled`.
pub const POD_SCHEDULED: &str = "PodScheduled";
/// `Ready`.
pub const READY: &str = "Ready";
/// `Initialized`.
pub const INITIALIZED: &str = "Initialized";
/// `ContainersReady`.
pub const CONTAINERS_READY: &str = "ContainersReady";
/// `PodReadyToStartContainers`.
pub const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
/// `DisruptionTarget` (shared between the kubelet and the control plane).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// `PodResizePending`.
pub const POD_RESIZE_PENDING: &str = "PodResizePending";
/// `PodResizeInProgress`.
pub const POD_RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";

/// `"True"`.
pub const TRUE: &str = "True";
/// `"False"`.
pub const FALSE: &str = "False";

/// Reason: no container statuses at all.
pub const UNKNOWN_CONTAINER_STATUSES: &str = "UnknownContainerStatuses";
/// Reason: the pod succeeded.
pub const POD_COMPLETED: &str = "PodCompleted";
/// Reason: the pod failed.
pub const POD_FAILED: &str = "PodFailed";
/// Reason: some container is not ready or unknown.
pub const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
/// Reason: some init container has not completed.
pub const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
/// Reason: some readiness gate is missing or not True.
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// The condition types the kubelet owns (SM-21): it generates them and drops any copy found
/// in the API status. `DisruptionTarget` is shared, so it is not in this list.
pub const KUBELET_OWNED: [&str; 7] = [
    POD_SCHEDULED,
    READY,
    INITIALIZED,
    CONTAINERS_READY,
    POD_READY_TO_START_CONTAINERS,
    POD_RESIZE_PENDING,
    POD_RESIZE_IN_PROGRESS,
];

/// The condition types whose `lastTransitionTime` the kubelet manages (SM-04).
pub const TRANSITION_TIME_MANAGED: [&str; 6] = [
    CONTAINERS_READY,
    READY,
    INITIALIZED,
    POD_READY_TO_START_CONTAINERS,
    POD_SCHEDULED,
    DISRUPTION_TARGET,
];

/// `kubetypes.PodConditionByKubelet`.
pub fn is_kubelet_owned(condition_type: &str) -> bool {
    KUBELET_OWNED.contains(&condition_type)
}

fn condition(
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..PodCondition::default()
    }
}

/// Appends `<what>: [a b]` (Go's `%s` of a `[]string`) to a condition message, after `, `
/// if the message has a part already; nothing when `names` is empty. Built in place: this
/// runs for every pod with an unready container on every status generation.
fn push_names(message: &mut String, what: &str, names: &[&str]) {
    if names.is_empty() {
        return;
    }
    if !message.is_empty() {
        message.push_str(", ");
    }
    message.push_str(what);
    message.push_str(": [");
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            message.push(' ');
        }
        message.push_str(n);
    }
    message.push(']');
}

/// `PodReadyToStartContainers`: True iff no new sandbox is needed.
pub fn ready_to_start_containers_condition(sandbox_changed: bool) -> PodCondition {
    let status = if sandbox_changed { FALSE } else { TRUE };
    condition(POD_READY_TO_START_CONTAINERS, status, None, None)
}

/// `GenerateContainersReadyCondition` (GS-13). `statuses` holds the init and regular statuses;
/// `None` stands for Go's nil list.
pub fn containers_ready_condition(
    pod: &Pod,
    statuses: Option<&[ApiContainerStatus]>,
    phase: &str,
) -> PodCondition {
    let Some(statuses) = statuses else {
        return condition(
            CONTAINERS_READY,
            FALSE,
            Some(UNKNOWN_CONTAINER_STATUSES),
            None,
        );
    };
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    let sidecars = spec::init_containers(pod)
        .iter()
        .filter(|c| spec::is_sidecar(c));
    for c in sidecars.chain(spec::containers(pod)) {
        match find_status(statuses, &c.name) {
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
            None => unknown.push(c.name.as_str()),
        }
    }
    if (phase == SUCCEEDED && unknown.is_empty()) || phase == FAILED {
        let reason = if phase == FAILED {
            POD_FAILED
        } else {
            POD_COMPLETED
        };
        return condition(CONTAINERS_READY, FALSE, Some(reason), None);
    }
    let mut message = String::new();
    push_names(&mut message, "containers with unknown status", &unknown);
    push_names(&mut message, "containers with unready status", &unready);
    if message.is_empty() {
        condition(CONTAINERS_READY, TRUE, None, None)
    } else {
        condition(
            CONTAINERS_READY,
            FALSE,
            Some(CONTAINERS_NOT_READY),
            Some(message),
        )
    }
}

/// `GeneratePodReadyCondition` (GS-14): ContainersReady, then every readiness gate must name
/// a condition in `conditions` whose status is True.
pub fn ready_condition(
    pod: &Pod,
    conditions: &[PodCondition],
    statuses: Option<&[ApiContainerStatus]>,
    phase: &str,
) -> PodCondition {
    ready_condition_from(
        pod,
        conditions,
        &containers_ready_condition(pod, statuses, phase),
    )
}

/// [`ready_condition`] given the pod's `ContainersReady` condition (as
/// [`containers_ready_condition`] generates it for the same statuses and phase).
pub fn ready_condition_from(
    pod: &Pod,
    conditions: &[PodCondition],
    containers_ready: &PodCondition,
) -> PodCondition {
    if containers_ready.status != TRUE {
        return PodCondition {
            type_: READY.to_string(),
            ..containers_ready.clone()
        };
    }
    let mut messages = Vec::new();
    for gate in spec::readiness_gates(pod) {
        match conditions.iter().find(|c| c.type_ == gate) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate {gate:?} does not exist."
            )),
            Some(c) if c.status != TRUE => messages.push(format!(
                "the status of pod readiness gate {gate:?} is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        condition(READY, TRUE, None, None)
    } else {
        condition(
            READY,
            FALSE,
            Some(READINESS_GATES_NOT_READY),
            Some(messages.join(", ")),
        )
    }
}

/// `NeedToReconcilePodReadiness` (GS-17): the pod has readiness gates and the Ready
/// condition in its API status differs (status or message) from the one its API status
/// generates, e.g. a controller has just set a gate's condition True.
pub fn need_to_reconcile_pod_readiness(pod: &Pod) -> bool {
    if spec::readiness_gates(pod).next().is_none() {
        return false;
    }
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let Some(current) = conditions.iter().find(|c| c.type_ == READY) else {
        return false;
    };
    let generated = ready_condition(
        pod,
        conditions,
        status.container_statuses.as_deref(),
        status.phase.as_deref().unwrap_or_default(),
    );
    current.status != generated.status || current.message != generated.message
}

/// `GeneratePodInitializedCondition` (GS-15). A regular init container counts when Ready, a
/// sidecar when Started.
pub fn initialized_condition(
    pod: &Pod,
    statuses: Option<&[ApiContainerStatus]>,
    phase: &str,
) -> PodCondition {
    let inits = spec::init_containers(pod);
    let statuses = match statuses {
        Some(s) => s,
        None if inits.is_empty() => &[],
        None => return condition(INITIALIZED, FALSE, Some(UNKNOWN_CONTAINER_STATUSES), None),
    };
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in inits {
        match find_status(statuses, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) => {
                let done = if spec::is_sidecar(c) {
                    is_started(s)
                } else {
                    s.ready
                };
                if !done {
                    incomplete.push(c.name.as_str());
                }
            }
        }
    }
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition(INITIALIZED, TRUE, Some(POD_COMPLETED), None);
    }
    if has_any_regular_container_started(pod, statuses) {
        return condition(INITIALIZED, TRUE, None, None);
    }
    let mut message = String::new();
    push_names(&mut message, "containers with unknown status", &unknown);
    push_names(
        &mut message,
        "containers with incomplete status",
        &incomplete,
    );
    if message.is_empty() {
        condition(INITIALIZED, TRUE, None, None)
    } else {
        condition(
            INITIALIZED,
            FALSE,
            Some(CONTAINERS_NOT_INITIALIZED),
            Some(message),
        )
    }
}

/// The kubelet-generated `PodScheduled=True`.
pub fn scheduled_condition() -> PodCondition {
    condition(POD_SCHEDULED, TRUE, None, None)
}
