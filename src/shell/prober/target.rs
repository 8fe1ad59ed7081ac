//! Where a probe or hook handler points: ports by number or name, the default host, the
//! `User-Agent`, and `$(VAR)` expansion of exec commands.
//!
//! Owns the kubelet's `ResolveContainerPort`, `NewRequestForHTTPGetAction`'s URL parts and
//! `ExpandContainerCommandOnlyStatic`. Must not do I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::core::pod_status::spec::is_host_network;
use crate::shell::env::expand;
use crate::shell::http_get::{Scheme, Target};
use crate::shell::machine::KUBERNETES_VERSION;

/// `kube-<purpose>/<major>.<minor>` (`probe` or `lifecycle`), from the Kubernetes version
/// this node reports.
pub fn user_agent(purpose: &str) -> String {
    let v = KUBERNETES_VERSION.trim_start_matches('v');
    let mut parts = v.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    format!("kube-{purpose}/{major}.{minor}")
}

/// `ResolveContainerPort`: a number, or the name of one of the container's ports (or a
/// number written as a string); 1–65535.
pub fn resolve_port(port: &IntOrString, c: &Container) -> Result<u16, String> {
    let n: i64 = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            let named = c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port));
            match named.or_else(|| name.parse().ok()) {
                Some(n) => n,
                None => {
                    return Err(format!(
                        "port {name:?} not found in the ports of container {:?}",
                        c.name
                    ))
                }
            }
        }
    };
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("invalid port number: {n}"))
}

/// The host a probe or hook reaches when its handler names none: 127.0.0.1 for a
/// host-network pod, else the pod IP (the embedded runtime's pods have 127.0.0.1).
pub fn default_host(pod: &Pod, pod_ip: &str) -> Result<String, String> {
    if is_host_network(pod) {
        return Ok("127.0.0.1".into());
    }
    if pod_ip.is_empty() {
        return Err("the pod has no IP address yet".into());
    }
    Ok(pod_ip.to_string())
}

/// The GET an `httpGet` action makes.
pub fn http_target(
    action: &HTTPGetAction,
    c: &Container,
    pod: &Pod,
    pod_ip: &str,
) -> Result<Target, String> {
    let scheme = match action
        .scheme
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("") | Some("http") => Scheme::Http,
        Some("https") => Scheme::Https,
        Some(other) => return Err(format!("unsupported scheme {other:?}")),
    };
    let host = match action.host.as_deref().filter(|h| !h.is_empty()) {
        Some(h) => h.to_string(),
        None => default_host(pod, pod_ip)?,
    };
    Ok(Target {
        scheme,
        host,
        port: resolve_port(&action.port, c)?,
        path: action.path.clone().unwrap_or_default(),
        headers: action
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
    })
}

/// `ExpandContainerCommandOnlyStatic`: `$(VAR)` in an exec command becomes the value of a
/// variable the container sets with a literal `value` (not `valueFrom`).
pub fn expand_command(command: &[String], c: &Container) -> Vec<String> {
    let vars: BTreeMap<&str, &str> = c
        .env
        .iter()
        .flatten()
        .filter(|e| e.value_from.is_none())
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    let mapping = |k: &str| vars.get(k).copied();
    command.iter().map(|s| expand(s, mapping)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, EnvVar};

    #[test]
    fn ports_resolve_by_number_and_by_name() {
        let c = Container {
            name: "web".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        };
        assert_eq!(resolve_port(&IntOrString::Int(80), &c), Ok(80));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c),
            Ok(8080)
        );
        assert_eq!(resolve_port(&IntOrString::String("81".into()), &c), Ok(81));
        assert!(resolve_port(&IntOrString::String("grpc".into()), &c)
            .unwrap_err()
            .contains("\"grpc\" not found"));
        assert!(resolve_port(&IntOrString::Int(0), &c).is_err());
        assert!(resolve_port(&IntOrString::Int(70000), &c).is_err());
    }

    #[test]
    fn user_agent_is_kube_probe_major_minor() {
        assert_eq!(user_agent("probe"), "kube-probe/1.31");
        assert_eq!(user_agent("lifecycle"), "kube-lifecycle/1.31");
    }

    #[test]
    fn exec_commands_expand_static_variables_only() {
        let c = Container {
            env: Some(vec![EnvVar {
                name: "PORT".into(),
                value: Some("8080".into()),
                value_from: None,
            }]),
            ..Container::default()
        };
        let cmd = vec!["curl".into(), "localhost:$(PORT)/$(OTHER)".into()];
        assert_eq!(
            expand_command(&cmd, &c),
            vec!["curl".to_string(), "localhost:8080/$(OTHER)".into()]
        );
    }
}
