//! Pod admission (kubelet `canAdmitPod`): may a new pod run on this node?
//!
//! Owns the admit handlers as pure checks over the node's active pods. Today: the pod
//! count limit (`--max-pods`, the `pods` resource of the predicate admit handler). Later
//! handlers (resources, node affinity) plug in here. Must not change state: a rejection is
//! reported by `dispatch`.

use k8s_openapi::api::core::v1::Pod;

use super::config::CoreConfig;

/// The verdict of admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The pod may run.
    Admit,
    /// The pod may not run.
    Reject {
        /// One word (`OutOfpods`).
        reason: String,
        /// Why, for the Event and the status message.
        message: String,
    },
}

/// Runs every admit handler in order; the first rejection wins.
pub fn can_admit_pod(config: &CoreConfig, active_pods: &[&Pod], _pod: &Pod) -> Admission {
    let used = active_pods.len() as u64;
    let capacity = u64::from(config.max_pods);
    if used + 1 > capacity {
        return Admission::Reject {
            reason: "OutOfpods".into(),
            message: format!(
                "Node didn't have enough resource: pods, requested: 1, used: {used}, capacity: {capacity}"
            ),
        };
    }
    Admission::Admit
}
