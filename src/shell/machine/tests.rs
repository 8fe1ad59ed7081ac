use super::*;

fn config(root: &Path) -> MachineConfig {
    MachineConfig {
        node_name: "node-a".into(),
        hostname: "node-a".into(),
        node_ip: "10.0.0.7".into(),
        max_pods: 110,
        root_dir: root.to_path_buf(),
        http_port: 10255,
        runtime_name: "ledgerlet-embedded".into(),
        runtime_version: "0.1.0".into(),
        reserved: Default::default(),
    }
}

#[test]
fn the_node_of_this_host_has_capacity_labels_and_node_info() {
    let dir = tempfile::tempdir().unwrap();
    // a root dir that does not exist yet is measured by its nearest ancestor
    let node = observe(&config(&dir.path().join("not/yet"))).node;
    assert_eq!(node.metadata.name.as_deref(), Some("node-a"));
    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "node-a");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    let arch = go_arch(std::env::consts::ARCH);
    assert_eq!(labels["kubernetes.io/arch"], arch);
    assert_eq!(labels["beta.kubernetes.io/arch"], arch);

    let status = node.status.as_ref().unwrap();
    let cap = status.capacity.as_ref().unwrap();
    for r in ["cpu", "memory", "pods", "ephemeral-storage"] {
        let q = cap.get(r).map(|q| q.0.as_str());
        assert!(q.is_some_and(|q| !q.is_empty() && q != "0"), "{r}: {cap:?}");
    }
    assert_eq!(cap["pods"].0, "110");
    assert!(cap["cpu"].0.parse::<u64>().unwrap() >= 1);
    assert!(cap["memory"].0.ends_with('i'), "{}", cap["memory"].0);
    let allocatable = status.allocatable.as_ref().unwrap();
    assert_eq!(allocatable["cpu"], cap["cpu"], "no reservation");
    assert_eq!(allocatable["pods"], cap["pods"]);
    assert_ne!(
        allocatable["memory"], cap["memory"],
        "the 100Mi hard eviction threshold"
    );

    let addresses = status.addresses.iter().flatten();
    let addresses: Vec<(&str, &str)> = addresses.map(|a| (&*a.type_, &*a.address)).collect();
    let want = [("InternalIP", "10.0.0.7"), ("Hostname", "node-a")];
    assert_eq!(addresses, want);
    let info = status.node_info.as_ref().unwrap();
    assert_eq!(info.operating_system, "linux");
    assert_eq!(info.container_runtime_version, "ledgerlet-embedded://0.1.0");
    assert!(info.kubelet_version.starts_with("v1.31.0+ledgerlet."));
    assert!(!info.kernel_version.is_empty(), "uname works everywhere");
    assert!(!info.boot_id.is_empty());
    let ep = status.daemon_endpoints.as_ref().unwrap();
    assert_eq!(ep.kubelet_endpoint.as_ref().map(|e| e.port), Some(10255));
    assert!(status.conditions.is_none(), "conditions are the core's");
}

#[test]
fn unreadable_facts_degrade_to_empty_values() {
    let node = build_node(&config(Path::new("/")), &HostFacts::default());
    let status = node.status.unwrap();
    let cap = status.capacity.unwrap();
    assert_eq!(cap["cpu"].0, "1");
    assert!(!cap.contains_key("memory"), "reported missing by the core");
    let info = status.node_info.unwrap();
    assert_eq!(info.machine_id, "");
    assert_eq!(info.os_image, "");
}

#[test]
fn meminfo_total_is_read_in_kib() {
    let text =
        "MemTotal:        8039920 kB\nMemFree:         1234567 kB\nMemAvailable:    5000000 kB\n";
    assert_eq!(parse_meminfo_total_kib(text), Some(8_039_920));
    assert_eq!(parse_meminfo_total_kib("MemFree: 1 kB\n"), None);
    assert_eq!(parse_meminfo_total_kib("MemTotal: lots kB\n"), None);
    assert_eq!(parse_meminfo_total_kib(""), None);
}

#[test]
fn os_release_pretty_name_is_unquoted() {
    let text =
        "NAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nID=ubuntu\n";
    let pretty = parse_os_release_pretty_name;
    assert_eq!(pretty(text).as_deref(), Some("Ubuntu 24.04.1 LTS"));
    let debian = pretty("PRETTY_NAME='Debian GNU/Linux 12 (bookworm)'");
    assert_eq!(debian.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
    let alpine = pretty("PRETTY_NAME=Alpine\\ Linux");
    assert_eq!(alpine.as_deref(), Some("Alpine Linux"));
    assert_eq!(pretty("NAME=Fedora\n"), None);
    assert_eq!(pretty("PRETTY_NAME=\"\"\n"), None);
}

#[test]
fn byte_counts_are_canonical_binary_quantities() {
    assert_eq!(binary_si(8_039_920 * 1024), "8039920Ki");
    assert_eq!(binary_si(16 * 1024 * 1024 * 1024), "16Gi");
    assert_eq!(binary_si(1536 * 1024 * 1024), "1536Mi");
    assert_eq!(binary_si(1000), "1000");
    assert_eq!(binary_si(0), "0");
}

#[test]
fn architectures_use_go_names() {
    assert_eq!(go_arch("x86_64"), "amd64");
    assert_eq!(go_arch("aarch64"), "arm64");
    assert_eq!(go_arch("s390x"), "s390x");
    assert_eq!(go_arch("riscv64"), "riscv64");
}

#[test]
fn the_hostname_is_lowercase() {
    let h = system_hostname();
    assert_eq!(h, h.to_lowercase());
}

#[test]
fn the_runtime_version_is_reported_as_the_kubelet_parses_it() {
    assert_eq!(generic_version("1.6.20~ds1"), Some("1.6.20"));
    assert_eq!(generic_version("1.7.22"), Some("1.7.22"));
    assert_eq!(generic_version("2.0.0-rc.1"), Some("2.0.0"));
    assert_eq!(generic_version("1..2"), Some("1"));
    assert_eq!(generic_version("v1.2"), None);
    assert_eq!(generic_version(""), None);
}
