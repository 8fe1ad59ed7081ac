//! Service-link variables (kubelet `getServiceEnvVarMap`, `envvars.FromServices`): for each
//! Service with a cluster IP, `{NAME}_SERVICE_HOST`, `{NAME}_SERVICE_PORT`,
//! `{NAME}_SERVICE_PORT_{PORT_NAME}` and the Docker-link `{NAME}_PORT…` variables.
//!
//! Owns which Services count (the `kubernetes` Service of `default` always; the pod
//! namespace's own when `enableServiceLinks`, a namespace's `kubernetes` Service replacing
//! the master one) and the variables' names and values. Pure: the caller lists the Services.
//! Must not read the API.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

/// The namespace of the master Services.
pub const MASTER_NAMESPACE: &str = "default";
/// The master Services, linked into every pod.
pub const MASTER_SERVICES: [&str; 1] = ["kubernetes"];

/// `IsServiceIPSet`: a cluster IP that is neither empty nor `None`.
fn ip_set(s: &Service) -> Option<&str> {
    let ip = s.spec.as_ref()?.cluster_ip.as_deref()?;
    (!ip.is_empty() && ip != "None").then_some(ip)
}

/// `makeEnvVariableName`: upper case, `-` as `_`.
fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

/// `net.JoinHostPort`.
fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The variables of one Service (`FromServices` for one).
fn variables(s: &Service, out: &mut BTreeMap<String, String>) {
    let Some(ip) = ip_set(s) else { return };
    let ports = s
        .spec
        .as_ref()
        .and_then(|sp| sp.ports.as_deref())
        .unwrap_or_default();
    let Some(first) = ports.first() else { return };
    let prefix = env_name(s.metadata.name.as_deref().unwrap_or_default());
    out.insert(format!("{prefix}_SERVICE_HOST"), ip.to_string());
    let port_var = format!("{prefix}_SERVICE_PORT");
    out.insert(port_var.clone(), first.port.to_string());
    for p in ports {
        if let Some(n) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.insert(format!("{port_var}_{}", env_name(n)), p.port.to_string());
        }
    }
    for (i, p) in ports.iter().enumerate() {
        let protocol = p
            .protocol
            .as_deref()
            .filter(|x| !x.is_empty())
            .unwrap_or("TCP");
        let lower = protocol.to_lowercase();
        let url = format!("{lower}://{}", host_port(ip, p.port));
        if i == 0 {
            out.insert(format!("{prefix}_PORT"), url.clone());
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        out.insert(format!("{port_prefix}_PROTO"), lower);
        out.insert(format!("{port_prefix}_PORT"), p.port.to_string());
        out.insert(format!("{port_prefix}_ADDR"), ip.to_string());
        out.insert(port_prefix, url);
    }
}

/// The service-link variables of a pod in `namespace`: `masters` are the master Services
/// of the `default` namespace (the caller read them), `own` the Services of the pod's
/// namespace (read only when `enable_service_links`).
pub fn service_env(
    namespace: &str,
    enable_service_links: bool,
    masters: &[Service],
    own: &[Service],
) -> BTreeMap<String, String> {
    let name = |s: &Service| s.metadata.name.as_deref().unwrap_or_default().to_string();
    let in_ns = |s: &Service, ns: &str| s.metadata.namespace.as_deref() == Some(ns);
    let mut by_name: BTreeMap<String, &Service> = BTreeMap::new();
    for s in masters.iter().filter(|s| ip_set(s).is_some()) {
        if in_ns(s, MASTER_NAMESPACE) && MASTER_SERVICES.contains(&name(s).as_str()) {
            by_name.entry(name(s)).or_insert(s);
        }
    }
    let own = own.iter().filter(|_| enable_service_links);
    for s in own.filter(|s| ip_set(s).is_some() && in_ns(s, namespace)) {
        by_name.insert(name(s), s);
    }
    let mut out = BTreeMap::new();
    for s in by_name.values() {
        variables(s, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports}
        }))
        .unwrap()
    }

    fn master() -> Service {
        svc(
            "default",
            "kubernetes",
            "10.96.0.1",
            serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
        )
    }

    #[test]
    fn a_service_gives_the_kubelets_host_port_and_docker_link_variables() {
        let web = svc(
            "shop",
            "web-front",
            "10.96.3.4",
            serde_json::json!([{"port": 80}, {"name": "metrics", "port": 9090, "protocol": "UDP"}]),
        );
        let env = service_env("shop", true, &[], &[web]);
        let want: BTreeMap<String, String> = [
            ("WEB_FRONT_SERVICE_HOST", "10.96.3.4"),
            ("WEB_FRONT_SERVICE_PORT", "80"),
            ("WEB_FRONT_SERVICE_PORT_METRICS", "9090"),
            ("WEB_FRONT_PORT", "tcp://10.96.3.4:80"),
            ("WEB_FRONT_PORT_80_TCP", "tcp://10.96.3.4:80"),
            ("WEB_FRONT_PORT_80_TCP_PROTO", "tcp"),
            ("WEB_FRONT_PORT_80_TCP_PORT", "80"),
            ("WEB_FRONT_PORT_80_TCP_ADDR", "10.96.3.4"),
            ("WEB_FRONT_PORT_9090_UDP", "udp://10.96.3.4:9090"),
            ("WEB_FRONT_PORT_9090_UDP_PROTO", "udp"),
            ("WEB_FRONT_PORT_9090_UDP_PORT", "9090"),
            ("WEB_FRONT_PORT_9090_UDP_ADDR", "10.96.3.4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
    }

    #[test]
    fn the_master_service_is_always_linked_and_the_namespaces_only_when_enabled() {
        let own = svc(
            "shop",
            "db",
            "10.96.0.9",
            serde_json::json!([{"port": 5432}]),
        );
        let off = service_env("shop", false, &[master()], std::slice::from_ref(&own));
        assert_eq!(
            off.get("KUBERNETES_SERVICE_HOST").map(String::as_str),
            Some("10.96.0.1")
        );
        assert_eq!(
            off.get("KUBERNETES_SERVICE_PORT_HTTPS").map(String::as_str),
            Some("443")
        );
        assert!(!off.contains_key("DB_SERVICE_HOST"));
        let on = service_env("shop", true, &[master()], &[own]);
        assert_eq!(
            on.get("DB_SERVICE_HOST").map(String::as_str),
            Some("10.96.0.9")
        );
        assert_eq!(
            on.get("KUBERNETES_PORT").map(String::as_str),
            Some("tcp://10.96.0.1:443")
        );
    }

    #[test]
    fn headless_services_and_other_namespaces_are_not_linked() {
        let headless = svc("shop", "peers", "None", serde_json::json!([{"port": 7000}]));
        let other = svc(
            "elsewhere",
            "db",
            "10.96.0.9",
            serde_json::json!([{"port": 5432}]),
        );
        assert!(service_env("shop", true, &[], &[headless, other]).is_empty());
    }

    #[test]
    fn a_namespaces_own_kubernetes_service_replaces_the_master_one() {
        let own = svc(
            "shop",
            "kubernetes",
            "10.96.7.7",
            serde_json::json!([{"port": 8080}]),
        );
        let env = service_env("shop", true, &[master()], &[own]);
        assert_eq!(
            env.get("KUBERNETES_SERVICE_HOST").map(String::as_str),
            Some("10.96.7.7")
        );
        assert_eq!(
            env.get("KUBERNETES_SERVICE_PORT").map(String::as_str),
            Some("8080")
        );
        assert!(!env.contains_key("KUBERNETES_SERVICE_PORT_HTTPS"));
    }
}
