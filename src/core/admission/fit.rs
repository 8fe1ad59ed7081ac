//! Do a pod's requests fit the node's allocatable next to the active pods' requests? (the
//! scheduler framework's `Resource`, `noderesources.Fits` / `fitsRequest` and its
//! `InsufficientResource`, as the kubelet's predicate admit handler calls them; and
//! `removeMissingExtendedResources`).
//!
//! Owns the resource classes (cpu in millicores; memory, ephemeral-storage and the scalar
//! resources — extended, hugepages, prefixed native, attachable volumes — in units; `pods` as
//! the pod count) and the order and wording of the shortfalls. Must not compute a pod's
//! requests (`requests` does) nor build the verdict (`mod` does).

use std::collections::BTreeMap;

use super::requests::{milli_value, value, ResourceList};

/// `framework.Resource`: amounts in the units the checks compare.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub milli_cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    /// `pods` (allocatable only).
    pub allowed_pods: i64,
    /// Scalar resources by name, in units.
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// `Resource.Add(list)`: resources of no class (e.g. `storage`) are ignored.
    pub fn add(&mut self, list: &ResourceList) {
        for (name, nanos) in list {
            match name.as_str() {
                "cpu" => self.milli_cpu = self.milli_cpu.saturating_add(milli_value(*nanos)),
                "memory" => self.memory = self.memory.saturating_add(value(*nanos)),
                "ephemeral-storage" => {
                    self.ephemeral_storage = self.ephemeral_storage.saturating_add(value(*nanos))
                }
                "pods" => self.allowed_pods = self.allowed_pods.saturating_add(value(*nanos)),
                other if is_scalar_resource_name(other) => {
                    let e = self.scalar.entry(other.to_string()).or_insert(0);
                    *e = e.saturating_add(value(*nanos));
                }
                _ => {}
            }
        }
    }

    /// The amounts of `list`.
    pub fn of(list: &ResourceList) -> Resources {
        let mut r = Resources::default();
        r.add(list);
        r
    }
}

/// `InsufficientResource`: one resource the node lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insufficient {
    /// The resource name (`cpu`, `memory`, `pods`, …).
    pub resource: String,
    /// What the pod asks for.
    pub requested: i64,
    /// What the active pods use.
    pub used: i64,
    /// The node's allocatable.
    pub capacity: i64,
}

/// `fitsRequest`: every shortfall, in the scheduler's order (pods, cpu, memory,
/// ephemeral-storage, then scalar resources by name).
pub fn fits_request(
    request: &Resources,
    pod_count: usize,
    used: &Resources,
    allocatable: &Resources,
) -> Vec<Insufficient> {
    let mut out = Vec::new();
    let pods = i64::try_from(pod_count).unwrap_or(i64::MAX);
    if pods.saturating_add(1) > allocatable.allowed_pods {
        out.push(Insufficient {
            resource: "pods".into(),
            requested: 1,
            used: pods,
            capacity: allocatable.allowed_pods,
        });
    }
    let mut check = |resource: &str, requested: i64, used: i64, capacity: i64| {
        if requested > 0 && requested > capacity.saturating_sub(used) {
            out.push(Insufficient {
                resource: resource.to_string(),
                requested,
                used,
                capacity,
            });
        }
    };
    check(
        "cpu",
        request.milli_cpu,
        used.milli_cpu,
        allocatable.milli_cpu,
    );
    check("memory", request.memory, used.memory, allocatable.memory);
    check(
        "ephemeral-storage",
        request.ephemeral_storage,
        used.ephemeral_storage,
        allocatable.ephemeral_storage,
    );
    for (name, requested) in &request.scalar {
        let used = used.scalar.get(name).copied().unwrap_or(0);
        let capacity = allocatable.scalar.get(name).copied().unwrap_or(0);
        check(name, *requested, used, capacity);
    }
    out
}

/// `removeMissingExtendedResources`: drops requests of extended resources the node does not
/// advertise (cluster-level resources the kubelet cannot judge).
pub fn remove_missing_extended(request: &mut Resources, allocatable: &Resources) {
    request.scalar.retain(|name, _| {
        !is_extended_resource_name(name) || allocatable.scalar.contains_key(name)
    });
}

/// `IsPrefixedNativeResource`.
fn is_prefixed_native(name: &str) -> bool {
    name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: a qualified, non-native name not under `requests.`.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || is_prefixed_native(name);
    if native || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}"))
}

/// `IsScalarResourceName`.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || is_prefixed_native(name)
        || name.starts_with("attachable-volumes-")
}

/// `validation.IsQualifiedName`: `[prefix/]name`, the prefix a DNS subdomain, the name at
/// most 63 characters of alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || "-_.".contains(c));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}
