//! The pod's cgroup under the QoS hierarchy, as the kubelet lays it out with the cgroupfs
//! driver and `--cgroups-per-qos` (kubelet `pkg/kubelet/cm`: `qos_container_manager_linux.go`,
//! `pod_container_manager_linux.go`, `helpers_linux.go` `ResourceConfigForPod`).
//!
//! Owns the names (`/kubepods/pod<uid>` for Guaranteed pods, `/kubepods/burstable/pod<uid>`,
//! `/kubepods/besteffort/pod<uid>`), the pod-level limits (CPU shares, CFS quota, memory
//! limit) and, on a cgroup v1 host, creating the pod's cgroup with them before its sandbox
//! starts and removing it once the pod is terminated. Must not touch a cgroup outside
//! `/kubepods`, nor decide when (the executor calls it), nor kill processes.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::cri_config::{milli_cpu_to_quota, milli_cpu_to_shares, CPU_PERIOD_US};
use crate::core::pod;
use crate::core::pod_status::{qos, quantity::parse_nanos, spec};

/// The node-level cgroup every pod's cgroup is under (`defaultNodeAllocatableCgroupName`).
pub const KUBEPODS: &str = "kubepods";
/// `MinShares`: the CPU shares of a BestEffort pod and its QoS cgroup.
pub const MIN_SHARES: i64 = 2;
/// Where cgroup v1 hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The v1 hierarchies the pod's cgroup is created in (the ones its limits are written to;
/// runc creates the others when it starts the sandbox).
const LIMITED_SUBSYSTEMS: [&str; 2] = ["cpu", "memory"];

/// The pod's cgroup (cgroupfs name) under its QoS class: the CRI sandbox's `cgroup_parent`.
pub fn cgroup_parent(p: &Pod) -> String {
    let uid = pod::uid_str(p);
    match qos::pod_qos_class(p).as_str() {
        qos::GUARANTEED => format!("/{KUBEPODS}/pod{uid}"),
        qos::BEST_EFFORT => format!("/{KUBEPODS}/besteffort/pod{uid}"),
        _ => format!("/{KUBEPODS}/burstable/pod{uid}"),
    }
}

/// The limits of a pod's cgroup (`ResourceConfig`): `None` leaves the runtime's default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodLimits {
    /// `cpu.shares`.
    pub cpu_shares: i64,
    /// `cpu.cfs_quota_us` (with `cpu.cfs_period_us` = [`CPU_PERIOD_US`]).
    pub cpu_quota_us: Option<i64>,
    /// `memory.limit_in_bytes`.
    pub memory_bytes: Option<i64>,
}

/// A container's amount of `resource` in `list` (`requests`/`limits`), in nano-units.
fn amount(c: &Container, limits: bool, resource: &str) -> i128 {
    let r = c.resources.as_ref();
    let list = if limits {
        r.and_then(|r| r.limits.as_ref())
    } else {
        r.and_then(|r| r.requests.as_ref())
    };
    list.and_then(|l| l.get(resource))
        .and_then(|q| parse_nanos(&q.0))
        .unwrap_or(0)
        .max(0)
}

/// `PodRequests` / `PodLimits` for one resource: the sum over the regular containers and
/// sidecars, or an init container's amount plus the sidecars started before it, whichever
/// is larger.
fn pod_amount(p: &Pod, limits: bool, resource: &str) -> i128 {
    let mut sidecars = 0;
    let mut init_peak = 0;
    for c in spec::init_containers(p) {
        let v = amount(c, limits, resource);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars += v;
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(sidecars + v);
        }
    }
    let regular: i128 = spec::containers(p)
        .iter()
        .map(|c| amount(c, limits, resource))
        .sum();
    (regular + sidecars).max(init_peak)
}

/// True if every regular and init container limits `resource`.
fn all_limit(p: &Pod, resource: &str) -> bool {
    spec::containers(p)
        .iter()
        .chain(spec::init_containers(p))
        .all(|c| amount(c, true, resource) > 0)
}

/// `ResourceConfigForPod`: Guaranteed pods get shares, quota and memory limit; Burstable
/// ones shares, and quota or memory limit only when every container limits that resource;
/// BestEffort ones the minimum shares.
pub fn pod_limits(p: &Pod) -> PodLimits {
    let class = qos::pod_qos_class(p);
    if class == qos::BEST_EFFORT {
        return PodLimits {
            cpu_shares: MIN_SHARES,
            ..Default::default()
        };
    }
    let milli =
        |limits| (pod_amount(p, limits, "cpu") / 1_000_000).clamp(0, i64::MAX as i128) as i64;
    let memory =
        (pod_amount(p, true, "memory").div_euclid(1_000_000_000)).clamp(0, i64::MAX as i128) as i64;
    let guaranteed = class == qos::GUARANTEED;
    PodLimits {
        cpu_shares: milli_cpu_to_shares(milli(false)),
        cpu_quota_us: (guaranteed || all_limit(p, "cpu"))
            .then(|| milli_cpu_to_quota(milli(true), CPU_PERIOD_US)),
        memory_bytes: (guaranteed || all_limit(p, "memory")).then_some(memory),
    }
}

/// True if this host has the cgroup v1 hierarchies the pod limits are written to, and this
/// process may create cgroups in them (an agent run without root on the embedded runtime,
/// which has no cgroups, may not).
pub fn host_has_cgroup_v1() -> bool {
    LIMITED_SUBSYSTEMS.iter().all(|s| {
        let hierarchy = Path::new(CGROUP_ROOT).join(s);
        hierarchy.join("cgroup.procs").exists() && writable(&hierarchy)
    })
}

fn writable(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn dir(subsystem: &str, cgroup: &str) -> PathBuf {
    Path::new(CGROUP_ROOT)
        .join(subsystem)
        .join(cgroup.trim_start_matches('/'))
}

fn write(path: &Path, value: impl ToString) -> Result<(), String> {
    std::fs::write(path, value.to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `EnsureExists` of the pod's cgroup with its limits (cgroup v1; elsewhere nothing is
/// created here and the runtime creates the cgroup without pod-level limits). The
/// BestEffort QoS cgroup gets the minimum shares.
pub fn ensure(p: &Pod) -> Result<(), String> {
    if !host_has_cgroup_v1() {
        return Ok(());
    }
    let cgroup = cgroup_parent(p);
    for s in LIMITED_SUBSYSTEMS {
        let d = dir(s, &cgroup);
        std::fs::create_dir_all(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    if qos::pod_qos_class(p) == qos::BEST_EFFORT {
        write(
            &dir("cpu", &format!("/{KUBEPODS}/besteffort")).join("cpu.shares"),
            MIN_SHARES,
        )?;
    }
    let limits = pod_limits(p);
    let cpu = dir("cpu", &cgroup);
    write(&cpu.join("cpu.shares"), limits.cpu_shares)?;
    if let Some(q) = limits.cpu_quota_us {
        write(&cpu.join("cpu.cfs_period_us"), CPU_PERIOD_US)?;
        write(&cpu.join("cpu.cfs_quota_us"), q)?;
    }
    if let Some(m) = limits.memory_bytes {
        write(&dir("memory", &cgroup).join("memory.limit_in_bytes"), m)?;
    }
    Ok(())
}

/// Removes pod `uid`'s cgroup from every v1 hierarchy it is in, under any QoS class
/// (`Destroy`, once its containers are gone). A cgroup that still has processes stays, and
/// the error says so.
pub fn remove(uid: &str) -> Result<(), String> {
    let Ok(subsystems) = std::fs::read_dir(CGROUP_ROOT) else {
        return Ok(());
    };
    let mut errors = Vec::new();
    for s in subsystems.flatten() {
        let s = s.file_name().to_string_lossy().into_owned();
        for class in ["", "burstable/", "besteffort/"] {
            let d = dir(&s, &format!("/{KUBEPODS}/{class}pod{uid}"));
            if !d.is_dir() {
                continue;
            }
            // container cgroups the runtime left behind go first
            if let Ok(children) = std::fs::read_dir(&d) {
                for c in children.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(c.path());
                }
            }
            if let Err(e) = std::fs::remove_dir(&d) {
                errors.push(format!("cannot remove {}: {e}", d.display()));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"containers": containers}
        }))
        .unwrap()
    }

    fn c(requests: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn each_qos_class_has_its_place_and_pod_limits() {
        use serde_json::json;
        let best = pod(json!([c(json!({}), json!({}))]));
        assert_eq!(cgroup_parent(&best), "/kubepods/besteffort/podu1");
        assert_eq!(
            pod_limits(&best),
            PodLimits {
                cpu_shares: 2,
                ..Default::default()
            }
        );
        let guaranteed = pod(json!([
            c(
                json!({"cpu": "250m", "memory": "64Mi"}),
                json!({"cpu": "250m", "memory": "64Mi"})
            ),
            c(
                json!({"cpu": "250m", "memory": "64Mi"}),
                json!({"cpu": "250m", "memory": "64Mi"})
            ),
        ]));
        assert_eq!(cgroup_parent(&guaranteed), "/kubepods/podu1");
        assert_eq!(
            pod_limits(&guaranteed),
            PodLimits {
                cpu_shares: 512,
                cpu_quota_us: Some(50_000),
                memory_bytes: Some(128 << 20)
            }
        );
        // a Burstable pod limits a resource only if every container does
        let burstable = pod(json!([
            c(json!({"cpu": "100m"}), json!({"memory": "32Mi"})),
            c(
                json!({"cpu": "100m"}),
                json!({"cpu": "1", "memory": "32Mi"})
            ),
        ]));
        assert_eq!(cgroup_parent(&burstable), "/kubepods/burstable/podu1");
        assert_eq!(
            pod_limits(&burstable),
            PodLimits {
                cpu_shares: 204,
                cpu_quota_us: None,
                memory_bytes: Some(64 << 20)
            }
        );
    }
}
