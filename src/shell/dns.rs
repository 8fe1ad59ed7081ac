//! A pod's DNS resolver configuration (kubelet `pkg/kubelet/network/dns`, `GetPodDNS`).
//!
//! Owns the node's DNS settings (`--cluster-dns`, `--cluster-domain`, `--resolv-conf`), the
//! bounded read and parse of the node's resolv.conf, and the merge of `dnsPolicy` and
//! `dnsConfig` into the CRI `DNSConfig` of a pod's sandbox, cut to the resolver's limits.
//! Problems the kubelet reports as Warning events (`MissingClusterDNS`, `DNSConfigForming`)
//! are returned as [`Warning`]s for the caller to report. Must not talk to the runtime or
//! decide anything else about the sandbox.

use std::io::Read;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfigOption};

use crate::core::pod;
use crate::cri::v1;

/// The kubelet's default `--resolv-conf`.
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";
/// The kubelet reads at most this much of the node's resolv.conf (`maxResolveConfLength`).
pub const MAX_RESOLV_CONF_BYTES: u64 = 10 << 20;
/// At most this many nameservers (`MaxDNSNameservers`).
pub const MAX_NAMESERVERS: usize = 3;
/// At most this many search paths (`MaxDNSSearchPaths`, expanded DNS config).
pub const MAX_SEARCH_PATHS: usize = 32;
/// At most this many characters in the search line (`MaxDNSSearchListChars`).
pub const MAX_SEARCH_LIST_CHARS: usize = 2048;
/// A search path longer than this is dropped (`DNS1123SubdomainMaxLength`).
pub const MAX_SEARCH_PATH_CHARS: usize = 253;
/// The options of a cluster-first pod (`defaultDNSOptions`).
pub const DEFAULT_OPTIONS: &[&str] = &["ndots:5"];

/// The node's DNS settings (kubelet `--cluster-dns`, `--cluster-domain`, `--resolv-conf`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsSettings {
    /// The cluster DNS servers; empty: none (cluster-first pods fall back to `Default`).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's domain (e.g. `cluster.local`); empty: no cluster search paths.
    pub cluster_domain: String,
    /// The node's resolver configuration, the base of every pod's; empty: none (pods
    /// with host DNS then resolve through the node's loopback, as the kubelet's do).
    pub resolv_conf: String,
    /// The node's IPs (a loopback nameserver of their family when `resolv_conf` is empty).
    pub node_ips: Vec<IpAddr>,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
            resolv_conf: DEFAULT_RESOLV_CONF.into(),
            node_ips: Vec::new(),
        }
    }
}

/// A problem the kubelet reports as a Warning event on the pod, worked around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The event's reason (`MissingClusterDNS`, `DNSConfigForming`).
    pub reason: &'static str,
    /// The event's message.
    pub message: String,
}

/// The pod's DNS configuration and the warnings forming it raised.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodDns {
    /// What the sandbox gets.
    pub config: v1::DnsConfig,
    /// What to report.
    pub warnings: Vec<Warning>,
}

/// `parseResolvConf`: nameservers accumulate; the last `search` and `options` lines win;
/// search domains lose a trailing dot. A `nameserver` line without an address is an error.
pub fn parse_resolv_conf(text: &str) -> Result<v1::DnsConfig, String> {
    let mut out = v1::DnsConfig::default();
    let mut empty_nameserver = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["nameserver", server, ..] => out.servers.push((*server).to_string()),
            ["nameserver"] => empty_nameserver = true,
            ["search", rest @ ..] => {
                out.searches = rest
                    .iter()
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_string())
                    .collect()
            }
            ["options", rest @ ..] => out.options = rest.iter().map(|s| s.to_string()).collect(),
            _ => {}
        }
    }
    if empty_nameserver {
        return Err("nameserver list is empty".into());
    }
    Ok(out)
}

/// `getHostDNSConfig`: the node's resolv.conf, read up to [`MAX_RESOLV_CONF_BYTES`] (a
/// larger file is an error); nothing when `--resolv-conf` is empty.
pub fn host_config(settings: &DnsSettings) -> Result<v1::DnsConfig, String> {
    if settings.resolv_conf.is_empty() {
        return Ok(v1::DnsConfig::default());
    }
    let path = &settings.resolv_conf;
    let f = std::fs::File::open(path).map_err(|e| format!("open {path} (--resolv-conf): {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_RESOLV_CONF_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("read {path} (--resolv-conf): {e}"))?;
    if bytes.len() as u64 > MAX_RESOLV_CONF_BYTES {
        return Err(format!(
            "{path} (--resolv-conf) is larger than {MAX_RESOLV_CONF_BYTES} bytes"
        ));
    }
    parse_resolv_conf(&String::from_utf8_lossy(&bytes))
        .map_err(|e| format!("{path} (--resolv-conf): {e}"))
}

/// `GetPodDNS` with the node's resolv.conf read now.
pub fn for_pod(settings: &DnsSettings, p: &Pod) -> Result<PodDns, String> {
    let host = host_config(settings).map_err(|e| {
        format!(
            "pod {}/{}: cannot form its DNS configuration: {e}",
            pod::namespace(p),
            pod::name(p)
        )
    })?;
    Ok(pod_dns(settings, host, p))
}

/// Which base a pod's DNS starts from (`getPodDNSType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DnsType {
    /// The cluster DNS servers and search paths.
    Cluster,
    /// The node's resolv.conf.
    Host,
    /// Nothing: only `dnsConfig`.
    None,
}

fn dns_type(p: &Pod) -> DnsType {
    let spec = p.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    match spec.and_then(|s| s.dns_policy.as_deref()) {
        Some("None") => DnsType::None,
        Some("ClusterFirstWithHostNet") => DnsType::Cluster,
        Some("Default") => DnsType::Host,
        Some("ClusterFirst") | None if host_network => DnsType::Host,
        // ClusterFirst, the API's default; an unknown policy (the API server rejects
        // them) is cluster-first, as the kubelet's fallback
        _ => DnsType::Cluster,
    }
}

/// `GetPodDNS`: the sandbox's DNS from the node's resolver configuration `host`, the pod's
/// `dnsPolicy` and `dnsConfig`, cut to the limits (pure).
pub fn pod_dns(settings: &DnsSettings, host: v1::DnsConfig, p: &Pod) -> PodDns {
    let mut warnings = Vec::new();
    let mut config = host;
    let mut kind = dns_type(p);
    if kind == DnsType::Cluster && settings.cluster_dns.is_empty() {
        warnings.push(Warning {
            reason: crate::core::kubelet_sync::MISSING_CLUSTER_DNS,
            message: format!(
                "pod: \"{}_{}({})\". kubelet does not have ClusterDNS IP configured and cannot \
                 create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
                pod::name(p),
                pod::namespace(p),
                pod::uid_str(p)
            ),
        });
        kind = DnsType::Host;
    }
    match kind {
        DnsType::None => config = v1::DnsConfig::default(),
        DnsType::Cluster => {
            config.servers = settings
                .cluster_dns
                .iter()
                .map(|ip| ip.to_string())
                .collect();
            config.searches = cluster_searches(settings, &config.searches, p);
            config.options = DEFAULT_OPTIONS.iter().map(|s| s.to_string()).collect();
        }
        DnsType::Host if settings.resolv_conf.is_empty() => {
            config.servers = settings
                .node_ips
                .iter()
                .map(|ip| if ip.is_ipv6() { "::1" } else { "127.0.0.1" }.to_string())
                .collect();
            if config.servers.is_empty() {
                config.servers.push("127.0.0.1".into());
            }
            config.searches = vec![".".into()];
        }
        DnsType::Host => {}
    }
    if let Some(extra) = p.spec.as_ref().and_then(|s| s.dns_config.as_ref()) {
        config.servers = omit_duplicates(config.servers, extra.nameservers.iter().flatten());
        config.searches = omit_duplicates(config.searches, extra.searches.iter().flatten());
        config.options = merge_options(&config.options, extra.options.iter().flatten());
    }
    fit_limits(&mut config, &mut warnings);
    PodDns { config, warnings }
}

/// `generateSearchesForDNSClusterFirst`: `<ns>.svc.<domain>`, `svc.<domain>`, `<domain>`,
/// then the node's.
fn cluster_searches(settings: &DnsSettings, host: &[String], p: &Pod) -> Vec<String> {
    let domain = &settings.cluster_domain;
    if domain.is_empty() {
        return host.to_vec();
    }
    let cluster = [
        format!("{}.svc.{domain}", pod::namespace(p)),
        format!("svc.{domain}"),
        domain.clone(),
    ];
    omit_duplicates(cluster.to_vec(), host.iter())
}

/// `first` then `more`, each value once, in first-seen order.
fn omit_duplicates<'a>(first: Vec<String>, more: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in first.into_iter().chain(more.cloned()) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// `mergeDNSOptions`: `dnsConfig.options` override options of the same name. (The kubelet
/// orders the result by Go map iteration, which is random; here existing options keep
/// their place and new ones follow in the pod's order.)
fn merge_options<'a>(
    existing: &[String],
    extra: impl Iterator<Item = &'a PodDNSConfigOption>,
) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| match merged.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = value.to_string(),
        None => merged.push((name.to_string(), value.to_string())),
    };
    for op in existing {
        match op.split_once(':') {
            Some((name, value)) => set(name, value),
            None => set(op, ""),
        }
    }
    for op in extra {
        let name = op.name.as_deref().unwrap_or_default();
        set(name, op.value.as_deref().unwrap_or_default());
    }
    merged
        .into_iter()
        .map(|(n, v)| if v.is_empty() { n } else { format!("{n}:{v}") })
        .collect()
}

/// `formDNSConfigFitsLimits`: at most 3 nameservers; at most 32 search paths, none longer
/// than 253 characters, the line at most 2048 characters (dropping from the end).
fn fit_limits(config: &mut v1::DnsConfig, warnings: &mut Vec<Warning>) {
    if config.servers.len() > MAX_NAMESERVERS {
        config.servers.truncate(MAX_NAMESERVERS);
        warnings.push(Warning {
            reason: "DNSConfigForming",
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the \
                 applied nameserver line is: {}",
                config.servers.join(" ")
            ),
        });
    }
    let searches = &mut config.searches;
    let mut exceeded = false;
    if searches.len() > MAX_SEARCH_PATHS {
        searches.truncate(MAX_SEARCH_PATHS);
        exceeded = true;
    }
    let before = searches.len();
    searches.retain(|s| s.len() <= MAX_SEARCH_PATH_CHARS);
    exceeded |= searches.len() != before;
    while searches.join(" ").len() > MAX_SEARCH_LIST_CHARS {
        searches.pop();
        exceeded = true;
    }
    if exceeded {
        warnings.push(Warning {
            reason: "DNSConfigForming",
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the \
                 applied search line is: {}",
                searches.join(" ")
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn settings(cluster_dns: &[&str]) -> DnsSettings {
        DnsSettings {
            cluster_dns: cluster_dns.iter().map(|s| s.parse().unwrap()).collect(),
            cluster_domain: "cluster.local".into(),
            resolv_conf: DEFAULT_RESOLV_CONF.into(),
            node_ips: vec!["10.0.0.5".parse().unwrap()],
        }
    }

    fn host() -> v1::DnsConfig {
        parse_resolv_conf(
            "# node\nnameserver 192.168.1.1\nsearch old.example\nnameserver 192.168.1.2\n\
             search corp.example. lan\noptions timeout:1\n",
        )
        .unwrap()
    }

    fn containers() -> serde_json::Value {
        serde_json::json!([{"name": "main"}])
    }

    #[test]
    fn resolv_conf_nameservers_accumulate_and_the_last_search_and_options_lines_win() {
        let h = host();
        assert_eq!(h.servers, ["192.168.1.1", "192.168.1.2"]);
        assert_eq!(h.searches, ["corp.example", "lan"]);
        assert_eq!(h.options, ["timeout:1"]);
        assert!(parse_resolv_conf("nameserver\n").is_err());
    }

    #[test]
    fn an_unreadable_resolv_conf_is_an_error_naming_the_pod_and_the_flag() {
        let p = pod(serde_json::json!({"containers": containers()}));
        let mut s = settings(&["10.96.0.10"]);
        s.resolv_conf = "/nonexistent/resolv.conf".into();
        let e = for_pod(&s, &p).unwrap_err();
        assert!(
            e.contains("shop/web") && e.contains("/nonexistent/resolv.conf (--resolv-conf)"),
            "{e}"
        );
    }

    #[test]
    fn a_cluster_first_pod_gets_the_cluster_dns_its_namespace_search_path_and_ndots_5() {
        let p = pod(serde_json::json!({"containers": containers()}));
        let d = pod_dns(&settings(&["10.96.0.10"]), host(), &p);
        assert_eq!(d.config.servers, ["10.96.0.10"]);
        assert_eq!(
            d.config.searches,
            [
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "lan"
            ]
        );
        assert_eq!(d.config.options, ["ndots:5"]);
        assert!(d.warnings.is_empty());
    }

    #[test]
    fn cluster_first_without_cluster_dns_falls_back_to_the_node_resolver_with_a_warning() {
        let p = pod(serde_json::json!({"dnsPolicy": "ClusterFirst", "containers": containers()}));
        let d = pod_dns(&settings(&[]), host(), &p);
        assert_eq!(d.config, host());
        assert_eq!(d.warnings.len(), 1);
        assert_eq!(d.warnings[0].reason, "MissingClusterDNS");
        assert!(
            d.warnings[0].message.contains("web_shop(u1)"),
            "{:?}",
            d.warnings
        );
    }

    #[test]
    fn host_network_cluster_first_uses_the_node_resolver_unless_cluster_first_with_host_net() {
        let p = pod(serde_json::json!({"hostNetwork": true, "containers": containers()}));
        assert_eq!(
            pod_dns(&settings(&["10.96.0.10"]), host(), &p).config,
            host()
        );
        let p = pod(serde_json::json!({
            "hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet", "containers": containers()
        }));
        let d = pod_dns(&settings(&["10.96.0.10"]), host(), &p);
        assert_eq!(d.config.servers, ["10.96.0.10"]);
    }

    #[test]
    fn default_policy_without_resolv_conf_resolves_through_the_node_loopback() {
        let p = pod(serde_json::json!({"dnsPolicy": "Default", "containers": containers()}));
        let mut s = settings(&["10.96.0.10"]);
        s.resolv_conf = String::new();
        let d = pod_dns(&s, v1::DnsConfig::default(), &p);
        assert_eq!(d.config.servers, ["127.0.0.1"]);
        assert_eq!(d.config.searches, ["."]);
    }

    #[test]
    fn policy_none_takes_only_the_pod_dns_config_and_options_override_by_name() {
        let p = pod(serde_json::json!({
            "dnsPolicy": "None",
            "dnsConfig": {
                "nameservers": ["1.1.1.1", "1.1.1.1"],
                "searches": ["a.example"],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]
            },
            "containers": containers()
        }));
        let d = pod_dns(&settings(&["10.96.0.10"]), host(), &p);
        assert_eq!(d.config.servers, ["1.1.1.1"]);
        assert_eq!(d.config.searches, ["a.example"]);
        assert_eq!(d.config.options, ["ndots:2", "edns0"]);
        let p = pod(serde_json::json!({
            "dnsConfig": {"options": [{"name": "ndots", "value": "1"}, {"name": "attempts", "value": "3"}]},
            "containers": containers()
        }));
        let d = pod_dns(&settings(&["10.96.0.10"]), host(), &p);
        assert_eq!(d.config.options, ["ndots:1", "attempts:3"]);
    }

    #[test]
    fn nameservers_and_search_paths_beyond_the_limits_are_dropped_with_a_warning() {
        let long = "x".repeat(254);
        let many: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
        let mut searches = vec![long.clone()];
        searches.extend(many.iter().cloned());
        let p = pod(serde_json::json!({
            "dnsPolicy": "None",
            "dnsConfig": {
                "nameservers": ["1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"],
                "searches": searches,
            },
            "containers": containers()
        }));
        let d = pod_dns(&settings(&[]), host(), &p);
        assert_eq!(d.config.servers, ["1.0.0.1", "1.0.0.2", "1.0.0.3"]);
        // the first 32, less the one too long
        assert_eq!(d.config.searches, many[..31].to_vec());
        let reasons: Vec<_> = d.warnings.iter().map(|w| w.reason).collect();
        assert_eq!(reasons, ["DNSConfigForming", "DNSConfigForming"]);
        // a line over 2048 characters loses paths from its end
        let wide: Vec<String> = (0..12).map(|i| format!("{i:0>200}")).collect();
        let p = pod(serde_json::json!({
            "dnsPolicy": "None", "dnsConfig": {"searches": wide}, "containers": containers()
        }));
        let d = pod_dns(&settings(&[]), host(), &p);
        assert_eq!(d.config.searches, wide[..10].to_vec());
        assert!(d.config.searches.join(" ").len() <= MAX_SEARCH_LIST_CHARS);
    }
}
