//! Pod admission (kubelet `canAdmitPod` with its predicate admit handler,
//! `predicateAdmitHandler.Admit` and `generalFilter` of `pkg/kubelet/lifecycle`): may a new
//! pod run on this node?
//!
//! Owns the order of the checks and the verdict's reason and message, in the kubelet's
//! words: the pod's `kubernetes.io/os` label and `spec.os` against the node's OS; then the
//! scheduler's admission checks (resources and pod count, required node affinity and
//! `nodeSelector`, node name, host ports) and the `NoExecute` taints the pod does not
//! tolerate (static pods exempt); the first failure is the verdict. Must not change state
//! (a rejection is reported by `dispatch`) nor fetch anything: the node is what the core
//! knows (`NodeView`). Not ported: critical-pod preemption on a failure, the device, CPU,
//! memory and topology managers' admit handlers, and the synchronous re-read of the Node
//! when node affinity alone fails (the core's view follows the Node watch).

pub mod affinity;
pub mod fit;
pub mod ports;
pub mod requests;
pub mod sysctl_names;
pub mod sysctls;
pub mod taints;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::pod;
use fit::{fits_request, remove_missing_extended, Insufficient, Resources};

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

/// The node as admission sees it (`getNodeAnyWay`).
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: &'a [Taint],
    /// `status.allocatable`; `None` while the machine is not known, when only the pod
    /// count is checked.
    pub allocatable: Option<&'a BTreeMap<String, Quantity>>,
    /// The `pods` allocatable (`--max-pods`).
    pub max_pods: u32,
    /// The node's operating system (`runtime.GOOS`: `status.nodeInfo.operatingSystem`).
    pub os: &'a str,
}

/// `v1.LabelOSStable`.
const OS_LABEL: &str = "kubernetes.io/os";

fn reject(reason: &str, message: String) -> Admission {
    Admission::Reject {
        reason: reason.to_string(),
        message,
    }
}

/// `PredicateFailureError{name, desc}`.
fn predicate(name: &str, desc: &str) -> Admission {
    reject(name, format!("Predicate {name} failed: {desc}"))
}

/// `InsufficientResourceError`.
fn insufficient(i: &Insufficient) -> Admission {
    reject(
        &format!("OutOf{}", i.resource),
        format!(
            "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
            i.resource, i.requested, i.used, i.capacity
        ),
    )
}

/// True if admission of `pod` depends on the other pods beyond their count (it requests
/// resources or host ports): callers may skip collecting them otherwise.
pub fn needs_other_pods(pod: &Pod) -> bool {
    !ports::host_ports(pod).is_empty()
        || requests::pod_requests(pod).map_or(true, |r| r.values().any(|v| *v > 0))
}

/// Runs every admit handler in order; the first rejection wins. `active_pods` are the
/// node's other active pods (all of them if [`needs_other_pods`], else at least when the
/// pod count may be at its limit).
pub fn can_admit_pod(node: &NodeView<'_>, active_pods: &[&Pod], pod: &Pod) -> Admission {
    let os = node.os;
    let pod_os_label = pod.metadata.labels.as_ref().and_then(|l| l.get(OS_LABEL));
    if pod_os_label.is_some_and(|l| l != os) {
        return reject(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label".into(),
        );
    }
    let pod_os = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    if pod_os.is_some_and(|o| o.name != os) {
        return reject(
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS".into(),
        );
    }
    match general_filter(node, active_pods, pod) {
        Ok(None) => Admission::Admit,
        Ok(Some(verdict)) => verdict,
        Err(requests::BadQuantity(why)) => reject(
            "UnexpectedAdmissionError",
            format!("pod {}: {why}, which is unexpected.", pod::full_name(pod)),
        ),
    }
}

/// `generalFilter`: the first failure, if any.
fn general_filter(
    node: &NodeView<'_>,
    active_pods: &[&Pod],
    pod: &Pod,
) -> Result<Option<Admission>, requests::BadQuantity> {
    let mut allocatable = match node.allocatable {
        Some(list) => Resources::of(&requests::parse_list(list, "node status.allocatable")?),
        None => Resources::default(),
    };
    allocatable.allowed_pods = i64::from(node.max_pods);
    let mut request = Resources::of(&requests::pod_requests(pod)?);
    remove_missing_extended(&mut request, &allocatable);
    let mut used = Resources::default();
    for other in active_pods {
        // an unreadable request of a pod already admitted counts as none
        if let Ok(r) = requests::pod_requests(other) {
            used.add(&r);
        }
    }
    let shortfalls = fits_request(&request, active_pods.len(), &used, &allocatable);
    let first_shortfall = shortfalls
        .iter()
        .find(|i| node.allocatable.is_some() || i.resource == "pods");
    if let Some(i) = first_shortfall {
        return Ok(Some(insufficient(i)));
    }
    if !affinity::matches(pod, node.name, node.labels) {
        return Ok(Some(predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        )));
    }
    let wanted = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if wanted.is_some_and(|n| !n.is_empty() && n != node.name) {
        return Ok(Some(predicate(
            "NodeName",
            "node(s) didn't match the requested node name",
        )));
    }
    if !ports::fits(pod, active_pods) {
        return Ok(Some(predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        )));
    }
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if !pod::is_static(pod) && taints::has_untolerated_no_execute(node.taints, tolerations) {
        return Ok(Some(predicate(
            "TaintToleration",
            "node(s) had taints that the pod didn't tolerate",
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
