//! The port mappings of a pod's sandbox (kubelet `MakePortMappings` in
//! `generatePodSandboxConfig`).
//!
//! Owns turning the `ports` of a pod's regular containers into CRI `PortMapping`s: every
//! port, with its `hostPort` (0: none), `hostIP` and protocol, a port whose name (or, unnamed,
//! whose family, protocol, host IP and port numbers) repeats within a container left out.
//! The runtime's network plugin does the forwarding. Must not check ports against other pods
//! (admission's job) nor open anything itself.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use crate::cri::v1;

/// CRI's protocol for the API's (`toRuntimeProtocol`: anything unknown is TCP).
fn protocol(p: Option<&str>) -> i32 {
    match p {
        Some("UDP") => v1::Protocol::Udp as i32,
        Some("SCTP") => v1::Protocol::Sctp as i32,
        _ => v1::Protocol::Tcp as i32,
    }
}

/// Every regular container's ports as port mappings, in spec order.
pub fn port_mappings(p: &Pod) -> Vec<v1::PortMapping> {
    let mut out = Vec::new();
    let containers = p.spec.as_ref().map(|s| s.containers.as_slice());
    for c in containers.unwrap_or_default() {
        let mut names = BTreeSet::new();
        for port in c.ports.iter().flatten() {
            let host_ip = port.host_ip.clone().unwrap_or_default();
            let name = match port.name.as_deref().filter(|n| !n.is_empty()) {
                Some(n) => n.to_string(),
                None => {
                    let family = match host_ip.parse::<std::net::IpAddr>() {
                        _ if host_ip.is_empty() => "any",
                        Ok(ip) if ip.is_ipv6() => "v6",
                        _ => "v4",
                    };
                    format!(
                        "{family}-{}-{host_ip}:{}:{}",
                        port.protocol.as_deref().unwrap_or_default(),
                        port.container_port,
                        port.host_port.unwrap_or(0)
                    )
                }
            };
            if !names.insert(name) {
                continue;
            }
            out.push(v1::PortMapping {
                protocol: protocol(port.protocol.as_deref()),
                container_port: port.container_port,
                host_port: port.host_port.unwrap_or(0),
                host_ip,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_regular_container_port_maps_with_its_host_port_once_per_name() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}],
                "containers": [
                    {"name": "a", "ports": [
                        {"name": "http", "containerPort": 80, "hostPort": 8080},
                        {"name": "http", "containerPort": 81},
                        {"containerPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                        {"containerPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}
                    ]},
                    {"name": "b", "ports": [{"name": "http", "containerPort": 90, "protocol": "SCTP"}]}
                ]
            }
        }))
        .unwrap();
        let mappings = port_mappings(&p);
        let got: Vec<(i32, i32, i32, &str)> = mappings
            .iter()
            .map(|m| {
                (
                    m.protocol,
                    m.container_port,
                    m.host_port,
                    m.host_ip.as_str(),
                )
            })
            .collect();
        let (tcp, udp, sctp) = (
            v1::Protocol::Tcp as i32,
            v1::Protocol::Udp as i32,
            v1::Protocol::Sctp as i32,
        );
        assert_eq!(
            got,
            [
                (tcp, 80, 8080, ""),
                (udp, 53, 0, "10.0.0.1"),
                (sctp, 90, 0, "")
            ]
        );
    }
}
