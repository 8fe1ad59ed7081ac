//! How long a kill may take (kubelet `setTerminationGracePeriod` and the clamps in
//! `killContainer`, RT-39) and the sidecar termination order (`newTerminationOrdering`,
//! RT-42).
//!
//! Owns the arithmetic. Must not wait, run preStop hooks or measure time: the shell runs
//! the hook, waits for its turn, subtracts the whole seconds that took from
//! [`kill_grace_base_s`] and passes the result through [`stop_timeout_s`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::policy::{init_containers, is_restartable_init_container, spec};
use super::types::KillReason;

/// The smallest timeout ever given to `StopContainer` (`minimumGracePeriodInSeconds`).
pub const MINIMUM_GRACE_PERIOD_S: i64 = 2;

/// The grace period a kill starts from, before preStop and ordering waits, unclamped:
/// `gracePeriodOverride` if given; else `metadata.deletionGracePeriodSeconds` (which beats
/// the probe-level value); else, when `spec.terminationGracePeriodSeconds` is set, the
/// failing probe's `terminationGracePeriodSeconds` for a liveness/startup kill, or the
/// pod's value; else 2. A preStop hook runs only if this is > 0.
pub fn kill_grace_base_s(
    pod: &Pod,
    container: Option<&Container>,
    reason: &KillReason,
    override_s: Option<i64>,
) -> i64 {
    if let Some(o) = override_s {
        return o;
    }
    if let Some(d) = pod.metadata.deletion_grace_period_seconds {
        return d;
    }
    let Some(tgps) = spec(pod).termination_grace_period_seconds else {
        return MINIMUM_GRACE_PERIOD_S;
    };
    let probe = container.and_then(|c| match reason {
        KillReason::LivenessFailed => c.liveness_probe.as_ref(),
        KillReason::StartupFailed => c.startup_probe.as_ref(),
        _ => None,
    });
    probe
        .and_then(|p| p.termination_grace_period_seconds)
        .unwrap_or(tgps)
}

/// RT-39: the `StopContainer` timeout for a kill, in seconds (at least 2), before preStop
/// accounting: [`kill_grace_base_s`] clamped by [`stop_timeout_s`].
pub fn kill_grace_period_s(
    pod: &Pod,
    container: Option<&Container>,
    reason: &KillReason,
    override_s: Option<i64>,
) -> i64 {
    stop_timeout_s(kill_grace_base_s(pod, container, reason, override_s))
}

/// The timeout passed to `StopContainer` once preStop and ordering waits have been
/// subtracted: never below [`MINIMUM_GRACE_PERIOD_S`].
pub fn stop_timeout_s(remaining_s: i64) -> i64 {
    remaining_s.max(MINIMUM_GRACE_PERIOD_S)
}

/// The message of the Normal `Killing` event: the plan's message, or
/// "Stopping container <name>" when there is none (pod kills).
pub fn killing_event_message(name: &str, message: &str) -> String {
    if message.is_empty() {
        format!("Stopping container {name}")
    } else {
        message.to_string()
    }
}

/// RT-42 termination ordering: for each running container that must wait before it is
/// stopped, the running containers it waits for (within its grace period). Only pods with
/// sidecars are ordered: every sidecar waits for all running regular containers and for
/// the next sidecar after it in spec order, if that one is running, so sidecars stop in
/// reverse order after the regular containers. Containers not listed stop at once.
pub fn termination_prerequisites(pod: &Pod, running: &[&str]) -> BTreeMap<String, Vec<String>> {
    let spec = spec(pod);
    let inits = init_containers(spec);
    let mut out = BTreeMap::new();
    if !inits.iter().any(is_restartable_init_container) {
        return out;
    }
    let running: BTreeSet<&str> = running.iter().copied().collect();
    let mains: Vec<String> = spec
        .containers
        .iter()
        .filter(|c| running.contains(c.name.as_str()))
        .map(|c| c.name.clone())
        .collect();
    let mut later_sidecar: Option<&str> = None;
    for ic in inits.iter().rev() {
        if !is_restartable_init_container(ic) {
            continue;
        }
        if running.contains(ic.name.as_str()) {
            let mut waits = mains.clone();
            if let Some(next) = later_sidecar.filter(|n| running.contains(n)) {
                waits.push(next.to_string());
            }
            if !waits.is_empty() {
                out.insert(ic.name.clone(), waits);
            }
        }
        later_sidecar = Some(ic.name.as_str());
    }
    out
}
