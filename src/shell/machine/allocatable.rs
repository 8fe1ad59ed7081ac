//! The node's allocatable (kubelet `GetNodeAllocatableReservation` and
//! `hardEvictionReservation` of `pkg/kubelet/cm`): capacity minus `--kube-reserved`, minus
//! `--system-reserved`, minus the hard eviction thresholds, never below zero.
//!
//! Owns the flags' syntax (`cpu=100m,memory=100Mi,ephemeral-storage=1Gi,pid=1000`, as the
//! kubelet's `parseResourceList`) and that subtraction. The hard eviction thresholds are the
//! kubelet's defaults (`memory.available<100Mi`, `nodefs.available<10%`); there is no
//! `--eviction-hard` flag, and no eviction manager acts on them. Must not read the host.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::binary_si;
use crate::core::admission::requests::{milli_value, value};
use crate::core::pod_status::quantity::parse_nanos;

/// Reserved amounts by resource, in nano-units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reserved(pub BTreeMap<String, i128>);

/// `--kube-reserved` and `--system-reserved`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reservations {
    /// `--kube-reserved`.
    pub kube: Reserved,
    /// `--system-reserved`.
    pub system: Reserved,
}

/// Resources the flags may reserve.
const RESERVABLE: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

/// `memory.available<100Mi`, the kubelet's default hard eviction threshold.
const EVICTION_HARD_MEMORY_BYTES: i128 = 100 * 1024 * 1024;
/// `nodefs.available<10%` (a Go `float32` percentage, widened as the kubelet does).
const EVICTION_HARD_NODEFS_FRACTION: f32 = 0.1;

const NANOS: i128 = 1_000_000_000;

/// Parses a `--kube-reserved`/`--system-reserved` value (clap names the flag in the error).
pub fn parse_reserved(text: &str) -> Result<Reserved, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!(
                "{pair:?} is not name=quantity (e.g. cpu=100m,memory=100Mi,ephemeral-storage=1Gi)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if !RESERVABLE.contains(&name) {
            return Err(format!(
                "cannot reserve {name:?} resource (only {})",
                RESERVABLE.join(", ")
            ));
        }
        let Some(nanos) = parse_nanos(value) else {
            return Err(format!(
                "failed to parse quantity {value:?} for {name:?} resource"
            ));
        };
        if nanos < 0 {
            return Err(format!(
                "resource quantity for {name:?} cannot be negative: {value}"
            ));
        }
        out.insert(name.to_string(), nanos);
    }
    Ok(Reserved(out))
}

/// `capacity − reservation` for every resource of `capacity`.
pub fn allocatable(
    capacity: &BTreeMap<String, Quantity>,
    reservations: &Reservations,
) -> BTreeMap<String, Quantity> {
    capacity
        .iter()
        .map(|(name, q)| {
            let Some(cap) = parse_nanos(&q.0) else {
                return (name.clone(), q.clone());
            };
            let reserved = reservation(name, cap, reservations);
            if reserved == 0 {
                return (name.clone(), q.clone());
            }
            let left = cap.saturating_sub(reserved).max(0);
            (name.clone(), Quantity(format_as(name, left)))
        })
        .collect()
}

/// What is reserved of `name` with `capacity` (nano-units).
fn reservation(name: &str, capacity: i128, r: &Reservations) -> i128 {
    let flags = [&r.kube, &r.system]
        .iter()
        .filter_map(|res| res.0.get(name))
        .fold(0i128, |a, b| a.saturating_add(*b));
    let eviction = match name {
        "memory" => EVICTION_HARD_MEMORY_BYTES * NANOS,
        "ephemeral-storage" => {
            let bytes = (capacity / NANOS) as f64;
            let threshold = (bytes * f64::from(EVICTION_HARD_NODEFS_FRACTION)) as i64;
            i128::from(threshold) * NANOS
        }
        _ => 0,
    };
    flags.saturating_add(eviction)
}

/// A non-negative amount in the canonical form of its resource: CPU in cores or
/// millicores, byte counts in binary units, anything else as a whole number.
fn format_as(name: &str, nanos: i128) -> String {
    let milli = milli_value(nanos);
    if name == "cpu" {
        return if milli % 1000 == 0 {
            (milli / 1000).to_string()
        } else {
            format!("{milli}m")
        };
    }
    let units = u64::try_from(value(nanos)).unwrap_or(0);
    if name == "memory" || name == "ephemeral-storage" {
        binary_si(units)
    } else {
        units.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        list.iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    #[test]
    fn allocatable_is_capacity_minus_reservations_and_hard_eviction_thresholds() {
        let capacity = caps(&[
            ("cpu", "2"),
            ("memory", "4Gi"),
            ("ephemeral-storage", "100Gi"),
            ("pods", "110"),
        ]);
        let r = Reservations {
            kube: parse_reserved("cpu=100m,memory=100Mi,ephemeral-storage=1Gi").unwrap(),
            system: parse_reserved("cpu=150m, memory=50Mi").unwrap(),
        };
        let a = allocatable(&capacity, &r);
        assert_eq!(a["cpu"].0, "1750m");
        assert_eq!(a["memory"].0, "3846Mi", "4096 - 100 - 50 - 100 (eviction)");
        // 100Gi - 1Gi - 10% of 100Gi (the float32 0.1 widened: a few bytes more than 10 Gi)
        let cap = 100u64 << 30;
        let eviction = (cap as f64 * f64::from(0.1f32)) as u64;
        assert_eq!(
            a["ephemeral-storage"].0,
            (cap - (1 << 30) - eviction).to_string()
        );
        assert_eq!(a["pods"].0, "110");
    }

    #[test]
    fn without_flags_only_the_eviction_thresholds_are_subtracted_and_never_below_zero() {
        let capacity = caps(&[
            ("cpu", "4"),
            ("memory", "64Mi"),
            ("ephemeral-storage", "10Gi"),
        ]);
        let a = allocatable(&capacity, &Reservations::default());
        assert_eq!(a["cpu"].0, "4");
        assert_eq!(a["memory"].0, "0");
        // 10Gi minus 10 % as the float32 0.1 computes it (16 bytes more than 1Gi)
        assert_eq!(a["ephemeral-storage"].0, "9663676400");
    }

    #[test]
    fn bad_reservations_are_refused_with_the_kubelets_reasons() {
        let err = |s: &str| parse_reserved(s).unwrap_err();
        assert!(err("gpu=1").contains("cannot reserve \"gpu\" resource"));
        assert!(err("cpu=lots").contains("failed to parse quantity \"lots\" for \"cpu\""));
        assert!(err("memory=-1Mi").contains("cannot be negative"));
        assert!(err("cpu").contains("not name=quantity"));
        assert_eq!(parse_reserved("").unwrap(), Reserved::default());
    }
}
