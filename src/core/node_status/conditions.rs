//! The node's status as the kubelet's setters compute it (`nodestatus.MemoryPressureCondition`,
//! `DiskPressureCondition`, `PIDPressureCondition`, `ReadyCondition`) and the comparison
//! that decides whether it is worth a PATCH (`nodeStatusHasChanged`).
//!
//! Owns the condition reasons and messages, the aggregation of "not ready" errors in the
//! format of `utilerrors.NewAggregate(...).Error()`, and the `lastTransitionTime` rule.
//! Must not read a clock (times come from the caller) nor decide when to write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::core::record::event::RuntimeHealth;
use crate::core::record::Time;
use crate::core::status::k8s_time;

/// `v1.NodeReady`.
pub const READY: &str = "Ready";
/// `v1.NodeMemoryPressure`.
pub const MEMORY_PRESSURE: &str = "MemoryPressure";
/// `v1.NodeDiskPressure`.
pub const DISK_PRESSURE: &str = "DiskPressure";
/// `v1.NodePIDPressure`.
pub const PID_PRESSURE: &str = "PIDPressure";

/// Ready condition reason while every check passes.
pub const REASON_READY: &str = "KubeletReady";
/// Ready condition message while every check passes.
pub const MESSAGE_READY: &str = "kubelet is posting ready status";
/// Ready condition reason while a check fails.
pub const REASON_NOT_READY: &str = "KubeletNotReady";

/// `runtimeState.runtimeErrors` before the first runtime status check.
pub const ERR_RUNTIME_NOT_CHECKED: &str =
    "container runtime status check may not have completed yet";
/// `ErrNetworkUnknown`, the network error before the first runtime status check.
pub const ERR_NETWORK_UNKNOWN: &str = "network state unknown";
/// `shutdownManager.ShutdownStatus()` during a graceful node shutdown.
pub const ERR_SHUTTING_DOWN: &str = "node is shutting down";

/// Capacities without which the node is not ready (`LocalStorageCapacityIsolation` is on by
/// default, so `ephemeral-storage` is required too).
pub const REQUIRED_CAPACITIES: [&str; 4] = ["cpu", "memory", "pods", "ephemeral-storage"];

/// `utilerrors.NewAggregate(errs).Error()`: empty for no error, the message itself for one,
/// `[a, b]` for several; duplicates are dropped and an element that is itself an aggregate
/// (`[x, y]`) is flattened into the list, as the aggregate's `visit` does.
pub fn aggregate<S: AsRef<str>>(errors: &[S]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let mut nested = false;
    for e in errors {
        let e = e.as_ref();
        if e.is_empty() {
            continue;
        }
        let (inner, was_aggregate) = match e.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(inner) => (inner, true),
            None => (e, false),
        };
        if parts.contains(&inner) {
            continue;
        }
        nested |= was_aggregate;
        parts.push(inner);
    }
    match parts.as_slice() {
        [] => String::new(),
        [one] if !nested => (*one).to_string(),
        _ => format!("[{}]", parts.join(", ")),
    }
}

/// The errors that make the node not ready, in the kubelet's order: runtime (including the
/// PLEG health check), network, node shutdown, missing capacity. Empty means ready.
///
/// `health` is the last `RuntimeHealth` record; its `message` (already in the aggregate
/// format, built by the shell's prober) is used as is. Before the first record the kubelet's
/// initial runtime state applies.
pub fn not_ready_errors(
    health: Option<&RuntimeHealth>,
    shutting_down: bool,
    capacity: Option<&BTreeMap<String, Quantity>>,
) -> Vec<String> {
    let mut errors = Vec::new();
    match health {
        None => {
            errors.push(ERR_RUNTIME_NOT_CHECKED.to_string());
            errors.push(ERR_NETWORK_UNKNOWN.to_string());
        }
        Some(h) if !(h.runtime_ready && h.network_ready && h.pleg_healthy) => {
            if !h.message.is_empty() {
                errors.push(h.message.clone());
            } else {
                if !h.pleg_healthy {
                    errors.push("PLEG is not healthy".to_string());
                }
                if !h.runtime_ready {
                    errors.push("container runtime not ready".to_string());
                }
                if !h.network_ready {
                    errors.push("container runtime network not ready".to_string());
                }
            }
        }
        Some(_) => {}
    }
    if shutting_down {
        errors.push(ERR_SHUTTING_DOWN.to_string());
    }
    let missing: Vec<&str> = REQUIRED_CAPACITIES
        .iter()
        .copied()
        .filter(|r| !capacity.is_some_and(|c| c.contains_key(*r)))
        .collect();
    if !missing.is_empty() {
        errors.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    errors
}

/// What goes into a computed status.
#[derive(Clone, Copy, Debug)]
pub struct StatusInputs<'a> {
    /// The machine's status as the shell observed it (capacity, addresses, node info, …).
    pub machine: &'a NodeStatus,
    /// The extended resources in the API server's `status.capacity` (an admin's).
    pub extended_capacity: Option<&'a BTreeMap<String, Quantity>>,
    /// The last runtime health record.
    pub health: Option<&'a RuntimeHealth>,
    /// A graceful node shutdown is under way.
    pub shutting_down: bool,
    /// The conditions of the status the API server has (the last one written successfully):
    /// the source of each condition's `lastTransitionTime`.
    pub previous: Option<&'a [NodeCondition]>,
    /// The record time: every condition's `lastHeartbeatTime`.
    pub now: Time,
}

/// The status the kubelet's setters would produce: the machine's fields plus the
/// conditions MemoryPressure, DiskPressure, PIDPressure and Ready, Ready last (upstream
/// keeps it last for old readers). Times are whole seconds, as the API server stores them.
pub fn compute_status(i: StatusInputs<'_>) -> NodeStatus {
    let now = k8s_time(i.now);
    let condition = |type_: &str, status: &str, reason: &str, message: String| {
        let transition = match i.previous.and_then(|p| p.iter().find(|c| c.type_ == type_)) {
            Some(p) if p.status == status => p.last_transition_time.clone(),
            _ => None,
        };
        NodeCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: Some(reason.to_string()),
            message: Some(message),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(transition.unwrap_or_else(|| now.clone())),
        }
    };
    let mut status = i.machine.clone();
    keep_extended_resources(&mut status, i.extended_capacity);
    let errors = not_ready_errors(i.health, i.shutting_down, status.capacity.as_ref());
    let ready = if errors.is_empty() {
        condition(READY, "True", REASON_READY, MESSAGE_READY.to_string())
    } else {
        condition(READY, "False", REASON_NOT_READY, aggregate(&errors))
    };
    // No eviction manager yet: the node never reports pressure.
    status.conditions = Some(vec![
        condition(
            MEMORY_PRESSURE,
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available".to_string(),
        ),
        condition(
            DISK_PRESSURE,
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure".to_string(),
        ),
        condition(
            PID_PRESSURE,
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available".to_string(),
        ),
        ready,
    ]);
    status
}

/// The MachineInfo setter keeps capacity it does not know (extended resources an admin
/// advertised, "Advertise Extended Resources for a Node") and derives their allocatable:
/// the capacity, as nothing is reserved of them. Only allocatable is written: the API
/// server's capacity keeps the admin's entries under the strategic merge patch, and one the
/// admin removed is not brought back.
fn keep_extended_resources(status: &mut NodeStatus, extended: Option<&BTreeMap<String, Quantity>>) {
    let Some(extended) = extended else {
        return;
    };
    for (name, quantity) in extended {
        if status
            .capacity
            .as_ref()
            .is_some_and(|c| c.contains_key(name))
        {
            continue;
        }
        status
            .allocatable
            .get_or_insert_with(BTreeMap::new)
            .insert(name.clone(), quantity.clone());
    }
}

/// `nodeStatusHasChanged`: anything differs except the conditions' `lastHeartbeatTime`.
pub fn status_changed(old: &NodeStatus, new: &NodeStatus) -> bool {
    fn without_heartbeats(s: &NodeStatus) -> NodeStatus {
        let mut s = s.clone();
        if let Some(cs) = s.conditions.as_mut() {
            for c in cs.iter_mut() {
                c.last_heartbeat_time = None;
            }
            cs.sort_by(|a, b| a.type_.cmp(&b.type_));
        }
        s
    }
    without_heartbeats(old) != without_heartbeats(new)
}

/// The condition of type `type_`, if the status has it.
pub fn condition<'a>(status: &'a NodeStatus, type_: &str) -> Option<&'a NodeCondition> {
    status
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// True if the status has `Ready=True`.
pub fn is_ready(status: &NodeStatus) -> bool {
    condition(status, READY).is_some_and(|c| c.status == "True")
}

/// The node Events (`recordNodeStatusEvent`) for the conditions of `new` whose status differs
/// from `previous`: a pressure condition also when it is new, Ready only when it changed.
pub fn condition_events(previous: Option<&NodeStatus>, new: &NodeStatus) -> Vec<&'static str> {
    let mut events = Vec::new();
    for c in new.conditions.iter().flatten() {
        let before = previous.and_then(|p| condition(p, &c.type_));
        if before.is_some_and(|b| b.status == c.status) {
            continue;
        }
        let on = c.status == "True";
        let event = match (c.type_.as_str(), on) {
            (READY, _) if before.is_none() => continue,
            (READY, true) => "NodeReady",
            (READY, false) => "NodeNotReady",
            (MEMORY_PRESSURE, true) => "NodeHasInsufficientMemory",
            (MEMORY_PRESSURE, false) => "NodeHasSufficientMemory",
            (DISK_PRESSURE, true) => "NodeHasDiskPressure",
            (DISK_PRESSURE, false) => "NodeHasNoDiskPressure",
            (PID_PRESSURE, true) => "NodeHasInsufficientPID",
            (PID_PRESSURE, false) => "NodeHasSufficientPID",
            _ => continue,
        };
        events.push(event);
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_matches_utilerrors() {
        assert_eq!(aggregate::<&str>(&[]), "");
        assert_eq!(aggregate(&["a"]), "a");
        assert_eq!(aggregate(&["a", "b"]), "[a, b]");
        assert_eq!(aggregate(&["a", "a"]), "a", "duplicates are dropped");
        assert_eq!(
            aggregate(&["[a, b]", "c"]),
            "[a, b, c]",
            "nested are flattened"
        );
        assert_eq!(aggregate(&["[a, b]"]), "[a, b]");
        assert_eq!(aggregate(&["", "x"]), "x");
    }

    #[test]
    fn before_any_runtime_check_the_node_is_not_ready_as_upstream_starts() {
        let errors = not_ready_errors(None, false, None);
        assert_eq!(
            aggregate(&errors),
            "[container runtime status check may not have completed yet, network state unknown, \
             missing node capacity for resources: cpu, memory, pods, ephemeral-storage]"
        );
    }
}
