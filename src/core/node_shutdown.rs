//! Graceful node shutdown, as the kubelet's `nodeshutdown` manager does it
//! (`shutdownGracePeriod`, `shutdownGracePeriodCriticalPods`).
//!
//! Owns the split of pods into the non-critical and the critical group (`groupByPriority`
//! over the two groups `migrateConfig` builds), each pod's grace period (`killPods`), the
//! status a pod killed by the shutdown ends with, and the stage the shutdown is in. Must
//! not trigger a shutdown, wait for one or read a clock (the shell triggers it, the fold's
//! record time is the only clock), and must not kill pods itself: it returns the kills the
//! dispatcher appends.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde::{Deserialize, Serialize};

use super::config::CoreConfig;
use super::pod_status::conditions::DISRUPTION_TARGET;
use super::record::Time;
use super::uid::Uid;
use super::update::PodStatusOverride;

/// `scheduling.SystemCriticalPriority`: a pod at or above it is critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// The built-in priority classes whose value is at least [`SYSTEM_CRITICAL_PRIORITY`]
/// (`system-cluster-critical` = 2000000000, `system-node-critical` = 2000001000).
pub const CRITICAL_PRIORITY_CLASSES: [&str; 2] =
    ["system-cluster-critical", "system-node-critical"];
/// `nodeShutdownReason`: the reason of a pod killed by the shutdown.
pub const REASON: &str = "Terminated";
/// `nodeShutdownMessage`: the message of a pod killed by the shutdown and of its
/// `DisruptionTarget` condition.
pub const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// `v1.PodReasonTerminationByKubelet`: the reason of the `DisruptionTarget` condition.
pub const DISRUPTION_REASON: &str = "TerminationByKubelet";
/// `kubeletevents.NodeShutdown`: the reason of the node's event when a shutdown starts.
pub const EVENT_REASON: &str = "Shutdown";
/// The message of that event.
pub const EVENT_MESSAGE: &str = "Shutdown manager detected shutdown event";
/// `nodeShutdownNotAdmittedReason`: the reason of a pod rejected while shutting down.
pub const REJECT_REASON: &str = "NodeShutdown";
/// `nodeShutdownNotAdmittedMessage`.
pub const REJECT_MESSAGE: &str = "Pod was rejected as the node is shutting down.";

/// Where a graceful shutdown is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Stage {
    /// No graceful shutdown started, or every group has been asked to stop.
    #[default]
    Idle,
    /// The non-critical group is being killed; the critical group is killed once all of
    /// `waiting_on` stopped or `until` passed (`killPods` waits per group, at most the
    /// group's grace period).
    NonCritical {
        /// The non-critical pods being killed.
        waiting_on: Vec<Uid>,
        /// The critical pods, killed next.
        critical: Vec<Uid>,
        /// The end of the non-critical group's budget.
        until: Time,
    },
}

/// The two groups' budgets, from the configuration (`migrateConfig`). `None` when graceful
/// shutdown is off (`shutdownGracePeriod` 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budgets {
    /// `shutdownGracePeriod − shutdownGracePeriodCriticalPods`.
    pub non_critical_s: i64,
    /// `shutdownGracePeriodCriticalPods`.
    pub critical_s: i64,
}

impl Budgets {
    /// The budgets in force, or `None` when graceful shutdown is off.
    pub fn of(config: &CoreConfig) -> Option<Budgets> {
        let total = config.shutdown_grace_period_s as i64;
        let critical = config.shutdown_grace_period_critical_pods_s as i64;
        (total > 0 && critical <= total).then_some(Budgets {
            non_critical_s: total - critical,
            critical_s: critical,
        })
    }
}

/// True if the pod belongs to the critical group: its priority is at least
/// [`SYSTEM_CRITICAL_PRIORITY`] (`groupByPriority`). A pod without a resolved priority
/// (a static pod the API server's priority admission never saw) counts by its
/// `priorityClassName`, for the two built-in critical classes.
pub fn is_critical(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    match spec.priority {
        Some(p) => p >= SYSTEM_CRITICAL_PRIORITY,
        None => spec
            .priority_class_name
            .as_deref()
            .is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c)),
    }
}

/// The grace period a pod is killed with: the group's budget, or the pod's own
/// `terminationGracePeriodSeconds` when that is not longer (`killPods`).
pub fn kill_grace_s(pod: &Pod, group_budget_s: i64) -> i64 {
    match pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        Some(own) if own <= group_budget_s => own,
        _ => group_budget_s,
    }
}

/// The status a pod killed by the shutdown ends with: phase Failed (unless it already
/// succeeded), reason `Terminated`, the shutdown message, and the `DisruptionTarget`
/// condition (True, `TerminationByKubelet`, the same message).
pub fn status_override() -> PodStatusOverride {
    PodStatusOverride {
        phase: Some("Failed".into()),
        keep_succeeded: true,
        reason: Some(REASON.into()),
        message: Some(MESSAGE.into()),
        conditions: vec![PodCondition {
            type_: DISRUPTION_TARGET.into(),
            status: "True".into(),
            reason: Some(DISRUPTION_REASON.into()),
            message: Some(MESSAGE.into()),
            ..PodCondition::default()
        }],
    }
}
