//! The pod's network as the status shows it: does it need a new sandbox, and which IPs.
//!
//! Owns the choice and ordering of pod IPs, and asks the runtime plan's `PodSandboxChanged`
//! whether the pod needs a new sandbox (the basis of PodReadyToStartContainers). Must not decide what
//! the runtime does about a changed sandbox (that is the runtime plan's job).

use core::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::spec;
use crate::core::plan;
use crate::core::runtime_status::{RuntimePodStatus, SandboxState};

/// `PodSandboxChanged`'s verdict (the runtime plan's port, [`plan::pod_sandbox_changed`]):
/// true if the pod needs a new sandbox: none exists, more than one is ready, the newest is
/// not ready, its network namespace mode differs from the spec, or (not host network) its
/// network status has an empty IP.
pub fn pod_sandbox_changed(pod: &Pod, runtime: &RuntimePodStatus) -> bool {
    plan::pod_sandbox_changed(pod, runtime).0
}

/// `sortPodIPs`: the first IP of the node's family (IPv4 if the node IP is unknown), then the
/// first IP of the other family. Anything that is not an IP is dropped.
pub fn sort_pod_ips(ips: &[String], host_ip: Option<&str>) -> Vec<String> {
    let host_v6 = host_ip
        .and_then(|h| h.parse::<IpAddr>().ok())
        .is_some_and(|a| a.is_ipv6());
    let first_of = |v6: bool| {
        ips.iter()
            .find(|ip| ip.parse::<IpAddr>().is_ok_and(|a| a.is_ipv6() == v6))
            .cloned()
    };
    first_of(host_v6)
        .into_iter()
        .chain(first_of(!host_v6))
        .collect()
}

/// The pod IPs to report, primary first: the runtime's IPs, else the newest sandbox's if it is
/// ready; sorted by the node's family. A host-network pod with none gets the node IP. If there
/// is still nothing, the IPs of `old` are kept (a stopped pod keeps its IPs, RT-43/PL-11).
pub fn pod_ips(
    pod: &Pod,
    runtime: &RuntimePodStatus,
    host_ip: Option<&str>,
    old: &PodStatus,
) -> Vec<String> {
    let mut ips = sort_pod_ips(&runtime.ips, host_ip);
    if ips.is_empty() {
        if let Some(ip) = runtime
            .newest_sandbox()
            .filter(|s| s.state == SandboxState::SandboxReady)
            .and_then(|s| s.ip.as_deref())
        {
            ips = sort_pod_ips(&[ip.to_string()], host_ip);
        }
    }
    if ips.is_empty() && spec::is_host_network(pod) {
        if let Some(h) = host_ip.filter(|h| !h.is_empty()) {
            ips.push(h.to_string());
        }
    }
    if ips.is_empty() {
        ips = match old.pod_ips.as_deref() {
            Some(list) if !list.is_empty() => list.iter().map(|p| p.ip.clone()).collect(),
            _ => old
                .pod_ip
                .iter()
                .filter(|ip| !ip.is_empty())
                .cloned()
                .collect(),
        };
    }
    ips
}
