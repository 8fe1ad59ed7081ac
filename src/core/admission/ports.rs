//! Are the pod's host ports free on the node? (`nodeports.Fits` and the scheduler
//! framework's `HostPortInfo`).
//!
//! Owns the host port bookkeeping of the active pods' regular containers: an empty
//! `hostIP` is `0.0.0.0` and an empty protocol `TCP`; a wildcard address conflicts with the
//! same protocol and port on any address, a specific one with itself and the wildcard. Ports
//! without a `hostPort` are ignored. Must not look at init or ephemeral containers (the
//! pinned release does not).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use crate::core::pod_status::spec::containers;

const WILDCARD: &str = "0.0.0.0";

/// One used host port: (address, protocol, port).
type HostPort = (String, String, i32);

/// The host ports the pod's regular containers ask for.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    containers(pod)
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| {
            let ip = p
                .host_ip
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or(WILDCARD);
            let proto = p
                .protocol
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("TCP");
            (ip.to_string(), proto.to_string(), p.host_port.unwrap_or(0))
        })
        .collect()
}

/// True if none of `pod`'s host ports conflicts with those of `others`.
pub fn fits(pod: &Pod, others: &[&Pod]) -> bool {
    let wanted = host_ports(pod);
    if wanted.is_empty() {
        return true;
    }
    let used: BTreeSet<HostPort> = others.iter().flat_map(|p| host_ports(p)).collect();
    !wanted.iter().any(|(ip, proto, port)| {
        used.iter().any(|(uip, uproto, uport)| {
            uproto == proto && uport == port && (ip == WILDCARD || uip == WILDCARD || uip == ip)
        })
    })
}
