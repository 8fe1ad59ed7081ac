//! The value of a downward API `resourceFieldRef` (kubelet `containerResourceRuntimeValue`,
//! `ExtractContainerResourceValue`, `MergeContainerResourceLimits`), for env and volumes.
//!
//! Owns the choice of the container, the fallback of an unset (or zero) cpu, memory or
//! ephemeral-storage limit to the node's allocatable, and the kubelet's rounding: the value
//! divided by the divisor and rounded up (cpu in milli-units, the others in units). Pure: the
//! caller passes the allocatable it read. Must not read anything itself.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::core::pod_status::quantity::parse_nanos;

/// The resources whose unset limit is the node's allocatable.
const DEFAULTED_LIMITS: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// True if `r` names a limit that falls back to the node's allocatable when unset (so the
/// caller should read the allocatable).
pub fn needs_allocatable(r: &ResourceFieldSelector) -> bool {
    r.resource
        .strip_prefix("limits.")
        .is_some_and(|res| DEFAULTED_LIMITS.contains(&res))
}

/// The value of `r` for the container it names (`containerName`), or `own` when it names
/// none (env). `allocatable`: the node's, for unset limits (`None`: not known, an error
/// when needed).
pub fn value(
    p: &Pod,
    own: Option<&Container>,
    r: &ResourceFieldSelector,
    allocatable: Option<&BTreeMap<String, Quantity>>,
) -> Result<String, String> {
    let cname = r.container_name.as_deref().unwrap_or_default();
    let c = match (cname, own) {
        ("", Some(c)) => c,
        _ => super::cri_config::container_named(p, cname)
            .ok_or_else(|| format!("container {cname:?} not found in the pod"))?,
    };
    let (kind, res) = r
        .resource
        .split_once('.')
        .filter(|(k, res)| {
            (*k == "limits" || *k == "requests")
                && (DEFAULTED_LIMITS.contains(res) || res.starts_with("hugepages-"))
        })
        .ok_or_else(|| format!("unsupported container resource : {}", r.resource))?;
    let resources = c.resources.as_ref();
    let list = match kind {
        "limits" => resources.and_then(|x| x.limits.as_ref()),
        _ => resources.and_then(|x| x.requests.as_ref()),
    };
    let nanos =
        |q: &Quantity| parse_nanos(&q.0).ok_or_else(|| format!("{:?} is not a quantity", q.0));
    let mut set = list.and_then(|m| m.get(res)).map(nanos).transpose()?;
    if kind == "limits" && DEFAULTED_LIMITS.contains(&res) && set.unwrap_or(0) == 0 {
        let node = allocatable
            .ok_or_else(|| {
                format!(
                    "{} of container {:?} is not set and the node's allocatable is not known",
                    r.resource, c.name
                )
            })?
            .get(res)
            .map(nanos)
            .transpose()?;
        set = node.or(set);
    }
    let value = set.unwrap_or(0);
    let divisor = match r.divisor.as_ref().map(nanos).transpose()? {
        Some(d) if d != 0 => d,
        _ => 1_000_000_000,
    };
    // Quantity.MilliValue for cpu, Quantity.Value for the others: each rounds up
    let unit = if res == "cpu" {
        1_000_000
    } else {
        1_000_000_000
    };
    let (v, d) = (ceil_div(value, unit), ceil_div(divisor, unit));
    if d <= 0 {
        return Err(format!("the divisor {:?} is not positive", r.divisor));
    }
    Ok(ceil_div(v, d).to_string())
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && (a > 0) == (b > 0) {
        q + 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [
                {"name": "c", "resources": {
                    "limits": {"cpu": "1500m", "memory": "64Mi"},
                    "requests": {"cpu": "250m", "memory": "1000"}}},
                {"name": "bare"}
            ]}
        }))
        .unwrap()
    }

    fn sel(c: &str, resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            container_name: (!c.is_empty()).then(|| c.to_string()),
            resource: resource.into(),
            divisor: divisor.map(|d| Quantity(d.into())),
        }
    }

    #[test]
    fn values_are_divided_and_rounded_up_as_the_kubelet_does() {
        let p = pod();
        for (resource, divisor, want) in [
            ("limits.cpu", None, "2"),
            ("limits.cpu", Some("1m"), "1500"),
            ("requests.cpu", None, "1"),
            ("requests.cpu", Some("1m"), "250"),
            ("limits.memory", Some("1Mi"), "64"),
            ("limits.memory", None, "67108864"),
            ("requests.memory", Some("1Ki"), "1"),
            ("requests.memory", Some("1m"), "1000"),
            ("requests.ephemeral-storage", None, "0"),
            ("limits.hugepages-2Mi", None, "0"),
        ] {
            let got = value(&p, None, &sel("c", resource, divisor), None);
            assert_eq!(got.as_deref(), Ok(want), "{resource} / {divisor:?}");
        }
    }

    #[test]
    fn an_unset_limit_is_the_nodes_allocatable() {
        let p = pod();
        let bare = &p.spec.as_ref().unwrap().containers[1];
        let alloc = BTreeMap::from([
            ("cpu".to_string(), Quantity("4".into())),
            ("memory".to_string(), Quantity("8Gi".into())),
        ]);
        let cpu = value(
            &p,
            Some(bare),
            &sel("", "limits.cpu", Some("1m")),
            Some(&alloc),
        );
        assert_eq!(cpu.as_deref(), Ok("4000"));
        let mem = value(
            &p,
            None,
            &sel("bare", "limits.memory", Some("1Gi")),
            Some(&alloc),
        );
        assert_eq!(mem.as_deref(), Ok("8"));
        // not in the allocatable either: zero, as the kubelet's empty quantity
        let eph = value(
            &p,
            Some(bare),
            &sel("", "limits.ephemeral-storage", None),
            Some(&alloc),
        );
        assert_eq!(eph.as_deref(), Ok("0"));
        let unknown = value(&p, Some(bare), &sel("", "limits.cpu", None), None);
        assert!(unknown.unwrap_err().contains("allocatable is not known"));
    }

    #[test]
    fn unknown_resources_and_containers_are_errors() {
        let p = pod();
        let e = value(&p, None, &sel("c", "limits.gpu", None), None).unwrap_err();
        assert_eq!(e, "unsupported container resource : limits.gpu");
        let e = value(&p, None, &sel("nope", "limits.cpu", None), None).unwrap_err();
        assert!(e.contains("\"nope\" not found"), "{e}");
    }
}
