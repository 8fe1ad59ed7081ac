//! The container resource settings the kubelet derives from the pod's QoS class and the
//! host, on top of the CPU and memory limits `cri_config` translates (kubelet
//! `pkg/kubelet/qos/policy.go` `GetContainerOOMScoreAdjust`, and `kuberuntime_container_linux.go`
//! `configureContainerSwapResources` with the default `NoSwap` behaviour).
//!
//! Owns `oom_score_adj` by QoS class and the swap limit. Reads two host facts when asked
//! (the memory capacity from `/proc/meminfo`, whether the swap controller exists); must not
//! decide anything else about the container nor touch cgroups itself.

use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::core::pod_status::{qos, quantity::parse_nanos, spec};
use crate::cri::v1;

/// `guaranteedOOMScoreAdj`.
pub const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
/// `besteffortOOMScoreAdj`.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;
/// The priority class of node-critical pods (`scheduling.SystemNodeCritical`).
const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
/// The cgroup v2 file of a container's swap limit (`cm.Cgroup2MaxSwapFilename`).
pub const CGROUP2_MAX_SWAP: &str = "memory.swap.max";

/// `Requests.Memory().Value()`: the container's memory request in bytes (rounded up), 0
/// when it has none.
fn memory_request_bytes(c: &Container) -> i64 {
    let nanos = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| parse_nanos(&q.0))
        .unwrap_or(0);
    let bytes = nanos.div_euclid(1_000_000_000) + i128::from(nanos.rem_euclid(1_000_000_000) != 0);
    bytes.clamp(0, i128::from(i64::MAX)) as i64
}

fn is_sidecar(p: &Pod, c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
        && spec::init_containers(p).iter().any(|i| i.name == c.name)
}

/// `GetContainerOOMScoreAdjust`: -997 for node-critical and Guaranteed pods, 1000 for
/// BestEffort ones; a Burstable container gets `1000 - 1000 * request / capacity`, a sidecar
/// no more than its pod's smallest regular container, kept within 3..=999.
pub fn oom_score_adj(p: &Pod, c: &Container, memory_capacity_bytes: i64) -> i64 {
    let critical = p
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref())
        == Some(SYSTEM_NODE_CRITICAL);
    if critical {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match qos::pod_qos_class(p).as_str() {
        qos::GUARANTEED => return GUARANTEED_OOM_SCORE_ADJ,
        qos::BEST_EFFORT => return BEST_EFFORT_OOM_SCORE_ADJ,
        _ => {}
    }
    let capacity = i128::from(memory_capacity_bytes.max(1));
    let adj = |request: i64| 1000 - (1000 * i128::from(request)) / capacity;
    let mut score = adj(memory_request_bytes(c));
    if is_sidecar(p, c) {
        let smallest = spec::containers(p).iter().map(memory_request_bytes).min();
        if let Some(min) = smallest {
            score = score.min(adj(min));
        }
    }
    let floor = i128::from(1000 + GUARANTEED_OOM_SCORE_ADJ);
    if score < floor {
        return floor as i64;
    }
    if score == i128::from(BEST_EFFORT_OOM_SCORE_ADJ) {
        return BEST_EFFORT_OOM_SCORE_ADJ - 1;
    }
    score as i64
}

/// Where the swap controller shows, if this host has one: cgroup v1's
/// `memory.memsw.limit_in_bytes`, or (v2) `memory.swap.max` of the agent's own cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapController {
    /// No swap accounting: nothing is set.
    Absent,
    /// cgroup v1 with swap accounting.
    V1,
    /// cgroup v2 with `memory.swap.max`.
    V2,
}

/// `configureContainerSwapResources` with `NoSwap`: on v1 the memory+swap limit equals the
/// memory limit, on v2 `memory.swap.max` is 0.
pub fn configure_no_swap(swap: SwapController, r: &mut v1::LinuxContainerResources) {
    match swap {
        SwapController::Absent => {}
        SwapController::V1 => r.memory_swap_limit_in_bytes = r.memory_limit_in_bytes,
        SwapController::V2 => {
            r.unified.insert(CGROUP2_MAX_SWAP.into(), "0".into());
        }
    }
}

/// The host's swap controller (`swapControllerAvailable`).
pub fn host_swap_controller() -> SwapController {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let path = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/")
            .trim_start_matches('/')
            .to_string();
        if root.join(path).join(CGROUP2_MAX_SWAP).exists() {
            return SwapController::V2;
        }
        return SwapController::Absent;
    }
    if root.join("memory/memory.memsw.limit_in_bytes").exists() {
        return SwapController::V1;
    }
    SwapController::Absent
}

/// The host's memory capacity in bytes (`MemTotal`), as the kubelet's machine info has it.
pub fn host_memory_capacity_bytes() -> Option<i64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = super::machine::parse_meminfo_total_kib(&text)?;
    i64::try_from(kib.checked_mul(1024)?).ok()
}

/// The QoS- and host-derived settings of container `c` of `p` on `r`.
pub fn apply_host_policy(p: &Pod, c: &Container, r: &mut v1::LinuxContainerResources) {
    if let Some(capacity) = host_memory_capacity_bytes() {
        r.oom_score_adj = oom_score_adj(p, c, capacity);
    }
    configure_no_swap(host_swap_controller(), r);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: serde_json::Value, init: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": containers, "initContainers": init}
        }))
        .unwrap()
    }

    fn with(requests: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
    }

    const GI: i64 = 1 << 30;

    #[test]
    fn oom_score_adj_follows_the_qos_class_and_the_share_of_memory_requested() {
        use serde_json::json;
        // (requests, limits, capacity, score)
        let cases = [
            (json!({}), json!({}), 4 * GI, 1000),
            (
                json!({"cpu": "1", "memory": "1Gi"}),
                json!({"cpu": "1", "memory": "1Gi"}),
                4 * GI,
                -997,
            ),
            (json!({"memory": "1Gi"}), json!({}), 4 * GI, 750),
            (json!({"memory": "4Gi"}), json!({}), 4 * GI, 3),
            (json!({"memory": "1"}), json!({}), 4 * GI, 999),
            (json!({"cpu": "100m"}), json!({}), 4 * GI, 999),
        ];
        for (requests, limits, capacity, want) in cases {
            let p = pod(json!([with(requests.clone(), limits.clone())]), json!([]));
            let c = &p.spec.as_ref().unwrap().containers[0];
            assert_eq!(oom_score_adj(&p, c, capacity), want, "{requests} {limits}");
        }
        let mut p = pod(
            json!([with(json!({"memory": "1Gi"}), json!({}))]),
            json!([]),
        );
        p.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
        let c = &p.spec.as_ref().unwrap().containers[0];
        assert_eq!(oom_score_adj(&p, c, 4 * GI), -997);
    }

    #[test]
    fn a_sidecar_scores_no_higher_than_the_smallest_regular_container() {
        use serde_json::json;
        let mut sidecar = with(json!({"memory": "10Mi"}), json!({}));
        sidecar["name"] = json!("side");
        sidecar["restartPolicy"] = json!("Always");
        let p = pod(
            json!([with(json!({"memory": "2Gi"}), json!({}))]),
            json!([sidecar]),
        );
        let side = &p.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0];
        assert_eq!(oom_score_adj(&p, side, 4 * GI), 500);
    }

    #[test]
    fn no_swap_caps_memory_and_swap_at_the_memory_limit_or_zero_swap_on_v2() {
        let mut r = v1::LinuxContainerResources {
            memory_limit_in_bytes: 64 << 20,
            ..Default::default()
        };
        configure_no_swap(SwapController::Absent, &mut r);
        assert_eq!(r.memory_swap_limit_in_bytes, 0);
        configure_no_swap(SwapController::V1, &mut r);
        assert_eq!(r.memory_swap_limit_in_bytes, 64 << 20);
        configure_no_swap(SwapController::V2, &mut r);
        assert_eq!(r.unified[CGROUP2_MAX_SWAP], "0");
    }
}
