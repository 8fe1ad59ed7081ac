//! A pod's resource requests as the kubelet's admission and the scheduler count them
//! (`resource.PodRequests` of `k8s.io/component-helpers/resource`): the sum over the
//! regular containers, against the largest need of any init container (a sidecar, a
//! restartable init container, adds to the sum and to every later init container's need),
//! plus `spec.overhead`.
//!
//! Owns that arithmetic and the conversion to the integer units the checks compare (CPU in
//! millicores, everything else in whole units, rounded up as `MilliValue`/`Value` do). Must
//! not compare with the node (`fit` does). In-place resize (status resources) is not read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::core::pod_status::quantity::parse_nanos;
use crate::core::pod_status::spec::{containers, init_containers, is_sidecar};

/// Amounts by resource name, in nano-units (exact sums and maxima).
pub type ResourceList = BTreeMap<String, i128>;

/// A request that is not a quantity (the API server validates them; a static pod's
/// manifest may still hold one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadQuantity(pub String);

/// `PodRequests(pod, {})`.
pub fn pod_requests(pod: &Pod) -> Result<ResourceList, BadQuantity> {
    let mut reqs = ResourceList::new();
    for c in containers(pod) {
        add(&mut reqs, &container_requests(c, "spec.containers")?);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in init_containers(pod) {
        let own = container_requests(c, "spec.initContainers")?;
        let need = if is_sidecar(c) {
            add(&mut reqs, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut need = own;
            add(&mut need, &sidecars);
            need
        };
        max(&mut init_max, &need);
    }
    max(&mut reqs, &init_max);
    if let Some(overhead) = pod.spec.as_ref().and_then(|s| s.overhead.as_ref()) {
        add(&mut reqs, &parse_list(overhead, "spec.overhead")?);
    }
    Ok(reqs)
}

fn container_requests(c: &Container, field: &str) -> Result<ResourceList, BadQuantity> {
    match c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        Some(list) => parse_list(list, &format!("{field}[{}].resources.requests", c.name)),
        None => Ok(ResourceList::new()),
    }
}

/// Parses a resource list; `field` names it in the error.
pub fn parse_list(
    list: &BTreeMap<String, Quantity>,
    field: &str,
) -> Result<ResourceList, BadQuantity> {
    list.iter()
        .map(|(name, q)| match parse_nanos(&q.0) {
            Some(n) => Ok((name.clone(), n)),
            None => Err(BadQuantity(format!(
                "{field}[{name}]: {:?} is not a quantity",
                q.0
            ))),
        })
        .collect()
}

fn add(into: &mut ResourceList, other: &ResourceList) {
    for (name, v) in other {
        let e = into.entry(name.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

fn max(into: &mut ResourceList, other: &ResourceList) {
    for (name, v) in other {
        let e = into.entry(name.clone()).or_insert(*v);
        *e = (*e).max(*v);
    }
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// `Quantity.Value()`: whole units, rounded up.
pub fn value(nanos: i128) -> i64 {
    clamp(ceil_div(nanos, NANOS_PER_UNIT))
}

/// `Quantity.MilliValue()`: thousandths, rounded up.
pub fn milli_value(nanos: i128) -> i64 {
    clamp(ceil_div(nanos, NANOS_PER_MILLI))
}

fn ceil_div(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 {
        q + 1
    } else {
        q
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}
