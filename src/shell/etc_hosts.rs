//! The kubelet-managed `/etc/hosts` of a pod (kubelet `makeHostsMount`, `ensureHostsFile`,
//! `managedHostsFileContent`, `hostsEntriesFromHostAliases`, `GeneratePodHostNameAndDomain`).
//!
//! Owns the file's content, writing it to `<pods_dir>/<uid>/etc-hosts` before each container
//! is created, and the mount that puts it at `/etc/hosts`. A pod with its own network gets
//! localhost, its IPs with its hostname (and FQDN with a subdomain) and its `hostAliases`;
//! a host-network pod gets the node's file and its `hostAliases`. Must not touch any other
//! file, nor mount over a container's own `/etc/hosts` volume mount.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, HostAlias, Pod};

use crate::core::pod;
use crate::cri::v1;

/// Where containers see the file.
pub const ETC_HOSTS_PATH: &str = "/etc/hosts";
/// The node's hosts file, the base of a host-network pod's.
pub const NODE_HOSTS_FILE: &str = "/etc/hosts";
/// A node hosts file longer than this is refused (it is copied into every host-network pod).
pub const MAX_NODE_HOSTS_FILE_BYTES: u64 = 1 << 20;
/// The first line of a pod-network pod's file (`managedHostsHeader`).
pub const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// The first line of a host-network pod's file (`managedHostsHeaderWithHostNetwork`).
pub const MANAGED_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";
/// The longest hostname the kernel takes.
pub const MAX_HOSTNAME_CHARS: usize = 63;

/// `GeneratePodHostNameAndDomain`: the pod's hostname (`spec.hostname` or its name, cut to
/// 63 characters without a trailing `-` or `.`) and, with a `spec.subdomain`, its domain
/// `<subdomain>.<namespace>.svc.<cluster domain>`.
pub fn hostname_and_domain(p: &Pod, cluster_domain: &str) -> Result<(String, String), String> {
    let spec = p.spec.as_ref();
    let who = || format!("pod {}/{}", pod::namespace(p), pod::name(p));
    let mut hostname = pod::name(p).to_string();
    if let Some(h) = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
    {
        if !is_dns1123_label(h) {
            return Err(format!(
                "{}: spec.hostname: {h:?} is not a valid DNS label",
                who()
            ));
        }
        hostname = h.to_string();
    }
    if hostname.len() > MAX_HOSTNAME_CHARS {
        hostname.truncate(MAX_HOSTNAME_CHARS);
        hostname = hostname.trim_end_matches(['-', '.']).to_string();
        if hostname.is_empty() {
            return Err(format!("{}: hostname {hostname:?} is invalid", who()));
        }
    }
    let mut domain = String::new();
    if let Some(sub) = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
    {
        if !is_dns1123_label(sub) {
            return Err(format!(
                "{}: spec.subdomain: {sub:?} is not a valid DNS label",
                who()
            ));
        }
        domain = format!("{sub}.{}.svc.{cluster_domain}", pod::namespace(p));
    }
    Ok((hostname, domain))
}

/// The longest fully qualified name `setHostnameAsFQDN` may set (`GetNodenameForKernel`).
pub const MAX_FQDN_HOSTNAME_CHARS: usize = 64;

/// The sandbox's hostname (kubelet `GetNodenameForKernel`): the pod's hostname, or with
/// `setHostnameAsFQDN` and a subdomain its fully qualified name (at most 64 characters).
pub fn kernel_hostname(p: &Pod, cluster_domain: &str) -> Result<String, String> {
    let (hostname, domain) = hostname_and_domain(p, cluster_domain)?;
    let fqdn = p
        .spec
        .as_ref()
        .and_then(|s| s.set_hostname_as_fqdn)
        .unwrap_or(false);
    if !fqdn || domain.is_empty() {
        return Ok(hostname);
    }
    let name = format!("{hostname}.{domain}");
    if name.len() > MAX_FQDN_HOSTNAME_CHARS {
        return Err(format!(
            "pod {}/{}: failed to construct FQDN from pod hostname and cluster domain, FQDN {name} \
             is too long ({MAX_FQDN_HOSTNAME_CHARS} characters is the max, {} characters \
             requested)",
            pod::namespace(p),
            pod::name(p),
            name.len()
        ));
    }
    Ok(name)
}

fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// `hostsEntriesFromHostAliases`: a blank line, a comment, then one line per alias IP.
pub fn host_alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        let names = a.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", a.ip));
    }
    out
}

/// `managedHostsFileContent`: the file of a pod with its own network.
pub fn managed_content(
    pod_ips: &[String],
    hostname: &str,
    domain: &str,
    aliases: &[HostAlias],
) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n"));
        }
    }
    out.push_str(&host_alias_entries(aliases));
    out
}

/// `nodeHostsFileContent`: the file of a host-network pod, from the node's.
pub fn host_network_content(node_hosts: &str, aliases: &[HostAlias]) -> String {
    format!(
        "{MANAGED_HEADER_HOST_NETWORK}{node_hosts}{}",
        host_alias_entries(aliases)
    )
}

/// `shouldMountHostsFile` for one container: a host-network pod always, another once it
/// has an IP; never over a container's own mount at `/etc/hosts`.
pub fn should_mount(p: &Pod, c: &Container, pod_ips: &[String]) -> bool {
    let host_network = p
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let own = c
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == ETC_HOSTS_PATH);
    (host_network || !pod_ips.is_empty()) && !own
}

/// The file's place on the node: `<pods_dir>/<uid>/etc-hosts`.
pub fn path(pods_dir: &Path, p: &Pod) -> PathBuf {
    pods_dir.join(pod::uid_str(p)).join("etc-hosts")
}

/// `makeHostsMount`: writes the pod's file (mode 0644) and returns its mount, or nothing
/// when the container does not get one. Errors name the pod and the file.
pub fn mount(
    pods_dir: &Path,
    cluster_domain: &str,
    p: &Pod,
    c: &Container,
    pod_ips: &[String],
) -> Result<Option<v1::Mount>, String> {
    if !should_mount(p, c, pod_ips) {
        return Ok(None);
    }
    let spec = p.spec.as_ref();
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    let content = if spec.and_then(|s| s.host_network).unwrap_or(false) {
        host_network_content(&read_node_hosts()?, aliases)
    } else {
        let (hostname, domain) = hostname_and_domain(p, cluster_domain)?;
        managed_content(pod_ips, &hostname, &domain, aliases)
    };
    let file = path(pods_dir, p);
    write(&file, &content).map_err(|e| {
        format!(
            "pod {}/{}: cannot write its hosts file {}: {e}",
            pod::namespace(p),
            pod::name(p),
            file.display()
        )
    })?;
    Ok(Some(v1::Mount {
        container_path: ETC_HOSTS_PATH.into(),
        host_path: file.to_string_lossy().into_owned(),
        readonly: false,
        ..Default::default()
    }))
}

fn read_node_hosts() -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(NODE_HOSTS_FILE)
        .map_err(|e| format!("cannot read the node's {NODE_HOSTS_FILE}: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_NODE_HOSTS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the node's {NODE_HOSTS_FILE}: {e}"))?;
    if bytes.len() as u64 > MAX_NODE_HOSTS_FILE_BYTES {
        return Err(format!(
            "the node's {NODE_HOSTS_FILE} is larger than {MAX_NODE_HOSTS_FILE_BYTES} bytes"
        ));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn write(file: &Path, content: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(file, content)?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "shop", "uid": "u1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn aliases() -> Vec<HostAlias> {
        serde_json::from_value(serde_json::json!([
            {"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]},
            {"ip": "10.1.2.3", "hostnames": ["foo.remote"]}
        ]))
        .unwrap()
    }

    #[test]
    fn a_pod_network_hosts_file_has_localhost_the_pod_ip_with_its_hostname_and_the_aliases() {
        let got = managed_content(&["10.244.0.7".into()], "web-0", "", &aliases());
        assert_eq!(
            got,
            "# Kubernetes-managed hosts file.\n\
             127.0.0.1\tlocalhost\n\
             ::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\n\
             fe00::0\tip6-mcastprefix\n\
             fe00::1\tip6-allnodes\n\
             fe00::2\tip6-allrouters\n\
             10.244.0.7\tweb-0\n\
             \n\
             # Entries added by HostAliases.\n\
             127.0.0.1\tfoo.local\tbar.local\n\
             10.1.2.3\tfoo.remote\n"
        );
    }

    #[test]
    fn a_subdomain_adds_the_fully_qualified_name_before_the_short_one() {
        let p = pod(serde_json::json!({
            "hostname": "db", "subdomain": "peers", "containers": [{"name": "main"}]
        }));
        let (h, d) = hostname_and_domain(&p, "cluster.local").unwrap();
        assert_eq!(
            (h.as_str(), d.as_str()),
            ("db", "peers.shop.svc.cluster.local")
        );
        let got = managed_content(&["10.244.0.7".into()], &h, &d, &[]);
        assert!(
            got.ends_with("10.244.0.7\tdb.peers.shop.svc.cluster.local\tdb\n"),
            "{got}"
        );
    }

    #[test]
    fn set_hostname_as_fqdn_makes_the_kernel_hostname_the_fully_qualified_name() {
        let p = pod(serde_json::json!({
            "hostname": "db", "subdomain": "peers", "setHostnameAsFQDN": true,
            "containers": [{"name": "main"}]
        }));
        assert_eq!(
            kernel_hostname(&p, "cluster.local").unwrap(),
            "db.peers.shop.svc.cluster.local"
        );
        let e = kernel_hostname(&p, &format!("{}.local", "x".repeat(50))).unwrap_err();
        assert!(e.contains("too long"), "{e}");
        let p = pod(serde_json::json!({"subdomain": "peers", "containers": [{"name": "main"}]}));
        assert_eq!(kernel_hostname(&p, "cluster.local").unwrap(), "web-0");
    }

    #[test]
    fn a_long_pod_name_is_cut_to_63_characters_without_a_trailing_dash() {
        let mut p = pod(serde_json::json!({"containers": [{"name": "main"}]}));
        p.metadata.name = Some(format!("{}-{}", "a".repeat(62), "b".repeat(10)));
        let (h, _) = hostname_and_domain(&p, "").unwrap();
        assert_eq!(h, "a".repeat(62));
        let p = pod(serde_json::json!({"hostname": "Bad_Name", "containers": [{"name": "main"}]}));
        let e = hostname_and_domain(&p, "").unwrap_err();
        assert!(
            e.contains("spec.hostname") && e.contains("shop/web-0"),
            "{e}"
        );
    }

    #[test]
    fn a_host_network_hosts_file_is_the_nodes_with_a_header_and_the_aliases() {
        let got = host_network_content("127.0.0.1 localhost\n", &aliases()[1..]);
        assert_eq!(
            got,
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n\
             # Entries added by HostAliases.\n10.1.2.3\tfoo.remote\n"
        );
    }

    #[test]
    fn the_file_is_mounted_once_the_pod_has_an_ip_and_never_over_a_containers_own_mount() {
        let p = pod(serde_json::json!({"containers": [{"name": "main"}]}));
        let c = &p.spec.as_ref().unwrap().containers[0];
        assert!(!should_mount(&p, c, &[]));
        assert!(should_mount(&p, c, &["10.0.0.1".into()]));
        let hn = pod(serde_json::json!({"hostNetwork": true, "containers": [{"name": "main"}]}));
        assert!(should_mount(
            &hn,
            &hn.spec.as_ref().unwrap().containers[0],
            &[]
        ));
        let own = pod(serde_json::json!({"containers": [{
            "name": "main", "volumeMounts": [{"name": "h", "mountPath": "/etc/hosts"}]
        }]}));
        let c = &own.spec.as_ref().unwrap().containers[0];
        assert!(!should_mount(&own, c, &["10.0.0.1".into()]));
    }

    #[test]
    fn the_written_file_is_under_the_pod_directory_with_mode_0644() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = pod(serde_json::json!({"containers": [{"name": "main"}]}));
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let m = mount(dir.path(), "cluster.local", &p, &c, &["10.0.0.9".into()])
            .unwrap()
            .unwrap();
        assert_eq!(m.container_path, "/etc/hosts");
        let file = dir.path().join("u1/etc-hosts");
        assert_eq!(m.host_path, file.to_string_lossy());
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .contains("10.0.0.9\tweb-0\n"));
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }
}
