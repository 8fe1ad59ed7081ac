//! The pod's QoS class (`v1qos.GetPodQOS` / `ComputePodQOS`).
//!
//! Owns the rule: no CPU or memory requests or limits anywhere → BestEffort; every container
//! (init included) limits both CPU and memory and the pod's summed requests equal its summed
//! limits → Guaranteed; otherwise Burstable. Must not look at other resources or at
//! pod-level resources (not supported yet, see docs/pod-status.md).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::quantity::parse_nanos;
use super::spec;

/// `BestEffort`.
pub const BEST_EFFORT: &str = "BestEffort";
/// `Burstable`.
pub const BURSTABLE: &str = "Burstable";
/// `Guaranteed`.
pub const GUARANTEED: &str = "Guaranteed";

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `GetPodQOS`: the class already in `pod.status.qosClass` (it is immutable), else computed.
pub fn pod_qos_class(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .filter(|c| !c.is_empty())
        .map_or_else(|| compute_pod_qos(pod).to_string(), str::to_string)
}

/// The positive CPU/memory amounts of one list, in nano-units.
fn positive(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<&'static str, i128> {
    let mut out = BTreeMap::new();
    for name in QOS_RESOURCES {
        if let Some(v) = list
            .and_then(|l| l.get(name))
            .and_then(|q| parse_nanos(&q.0))
        {
            if v > 0 {
                out.insert(name, v);
            }
        }
    }
    out
}

/// A container's (requests, limits). A limit without a request counts as the request too, as
/// API defaulting would have made it (static pods may reach us undefaulted).
fn container_amounts(
    c: &Container,
) -> (BTreeMap<&'static str, i128>, BTreeMap<&'static str, i128>) {
    let resources = c.resources.as_ref();
    let limits = positive(resources.and_then(|r| r.limits.as_ref()));
    let explicit = resources.and_then(|r| r.requests.as_ref());
    let mut requests = positive(explicit);
    for (name, v) in &limits {
        if explicit.is_none_or(|e| !e.contains_key(*name)) {
            requests.insert(name, *v);
        }
    }
    (requests, limits)
}

/// `ComputePodQOS` over the regular and init containers (ephemeral ones have no resources).
pub fn compute_pod_qos(pod: &Pod) -> &'static str {
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    for c in spec::containers(pod)
        .iter()
        .chain(spec::init_containers(pod))
    {
        let (r, l) = container_amounts(c);
        if !QOS_RESOURCES.iter().all(|n| l.contains_key(n)) {
            guaranteed = false;
        }
        for (name, v) in r {
            *requests.entry(name).or_default() += v;
        }
        for (name, v) in l {
            *limits.entry(name).or_default() += v;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return BEST_EFFORT;
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(n, r)| limits.get(n) == Some(r))
    {
        GUARANTEED
    } else {
        BURSTABLE
    }
}
