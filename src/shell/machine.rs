//! The machine as this host would register it: the `NodeInfoObserved` record's Node (labels,
//! capacity and allocatable, addresses, node info, daemon endpoints), as the kubelet's
//! `initialNode` and its `MachineInfo`, `VersionInfo`, `GoRuntime` and `DaemonEndpoints`
//! setters build it.
//!
//! Owns reading host facts (`/proc/meminfo`, `/etc/os-release`, machine, system and boot IDs,
//! `uname`, online CPUs, `statvfs` of the root directory) and the pure parsers and builder
//! behind them. Must not fail: an unreadable fact becomes an empty string (or an absent
//! capacity, which the core reports as "missing node capacity") with a debug log. Must not
//! add conditions: they are the core's (`core::node_status`).
//!
//! Choices: allocatable is capacity minus `--kube-reserved`, `--system-reserved` and the
//! kubelet's default hard eviction thresholds (`machine::allocatable`); `nodeInfo.architecture` and the arch labels use Go's names
//! (`amd64`, `arm64`), as the kubelet's `GOARCH` does, because cluster workloads select on
//! them; `kubeletVersion` is [`kubelet_version`]; the kubelet endpoint port is the agent's HTTP
//! port.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::record::event::NodeInfoObserved;

/// The Kubernetes release whose kubelet behaviour ledgerlet follows.
pub const KUBERNETES_VERSION: &str = "v1.31.0";

/// `nodeInfo.kubeletVersion`: `v1.31.0+ledgerlet.<crate version>`. Build metadata (`+`),
/// not a pre-release (`-`), so version comparisons see exactly v1.31.0.
pub fn kubelet_version() -> String {
    format!(
        "{KUBERNETES_VERSION}+ledgerlet.{}",
        env!("CARGO_PKG_VERSION")
    )
}

/// What the agent knows that the host does not tell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineConfig {
    /// `metadata.name`.
    pub node_name: String,
    /// The `kubernetes.io/hostname` label and the `Hostname` address.
    pub hostname: String,
    /// The `InternalIP` address (omitted when empty).
    pub node_ip: String,
    /// `pods` capacity (`--max-pods`).
    pub max_pods: u32,
    /// The agent's root directory: `ephemeral-storage` is the size of its filesystem.
    pub root_dir: PathBuf,
    /// `daemonEndpoints.kubeletEndpoint.Port`: the kubelet API's bound port (`--port`).
    pub http_port: u16,
    /// CRI `Version.runtime_name` (e.g. `containerd`).
    pub runtime_name: String,
    /// CRI `Version.runtime_version` (e.g. `1.7.22`).
    pub runtime_version: String,
    /// `--kube-reserved` and `--system-reserved`.
    pub reserved: allocatable::Reservations,
}

/// Facts read from the host; each is empty (or `None`) when it could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// Online CPUs (at least 1).
    pub cpus: u64,
    /// `MemTotal` in KiB.
    pub mem_total_kib: Option<u64>,
    /// Size in bytes of the filesystem holding the root directory.
    pub fs_capacity_bytes: Option<u64>,
    /// `/etc/machine-id` (or `/var/lib/dbus/machine-id`).
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid` (root only).
    pub system_uuid: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `uname -r`.
    pub kernel_version: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os_image: String,
}

impl HostFacts {
    /// Reads every fact; never fails.
    pub fn read(root_dir: &Path) -> HostFacts {
        HostFacts {
            cpus: online_cpus(),
            mem_total_kib: parse_meminfo_total_kib(&read_or_empty("/proc/meminfo")),
            fs_capacity_bytes: fs_capacity(root_dir),
            machine_id: first_readable(&["/etc/machine-id", "/var/lib/dbus/machine-id"]),
            system_uuid: read_or_empty("/sys/class/dmi/id/product_uuid")
                .trim()
                .to_string(),
            boot_id: read_or_empty("/proc/sys/kernel/random/boot_id")
                .trim()
                .to_string(),
            kernel_version: uname_release(),
            os_image: parse_os_release_pretty_name(&first_readable(&[
                "/etc/os-release",
                "/usr/lib/os-release",
            ]))
            .unwrap_or_default(),
        }
    }
}

/// Reads the host and builds the record the shell appends at start-up.
pub fn observe(config: &MachineConfig) -> NodeInfoObserved {
    let facts = HostFacts::read(&config.root_dir);
    NodeInfoObserved {
        node: Arc::new(build_node(config, &facts)),
    }
}

/// The Node without conditions, from configuration and host facts (pure).
pub fn build_node(config: &MachineConfig, facts: &HostFacts) -> Node {
    let os = std::env::consts::OS;
    let arch = go_arch(std::env::consts::ARCH);
    let labels = BTreeMap::from([
        (
            "kubernetes.io/hostname".to_string(),
            config.hostname.clone(),
        ),
        ("kubernetes.io/os".to_string(), os.to_string()),
        ("kubernetes.io/arch".to_string(), arch.to_string()),
        ("beta.kubernetes.io/os".to_string(), os.to_string()),
        ("beta.kubernetes.io/arch".to_string(), arch.to_string()),
    ]);
    // `enableControllerAttachDetach` defaults to true upstream.
    let annotations = BTreeMap::from([(
        "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
        "true".to_string(),
    )]);
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), Quantity(facts.cpus.max(1).to_string()));
    if let Some(kib) = facts.mem_total_kib {
        capacity.insert("memory".to_string(), Quantity(binary_si(kib * 1024)));
    }
    capacity.insert("pods".to_string(), Quantity(config.max_pods.to_string()));
    if let Some(bytes) = facts.fs_capacity_bytes {
        capacity.insert("ephemeral-storage".to_string(), Quantity(binary_si(bytes)));
    }
    let mut addresses = Vec::new();
    if !config.node_ip.is_empty() {
        addresses.push(NodeAddress {
            type_: "InternalIP".into(),
            address: config.node_ip.clone(),
        });
    }
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: config.hostname.clone(),
    });
    let runtime_version = generic_version(&config.runtime_version).unwrap_or("Unknown");
    Node {
        metadata: ObjectMeta {
            name: Some(config.node_name.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            allocatable: Some(allocatable::allocatable(&capacity, &config.reserved)),
            capacity: Some(capacity),
            addresses: Some(addresses),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: i32::from(config.http_port),
                }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: arch.to_string(),
                boot_id: facts.boot_id.clone(),
                container_runtime_version: format!("{}://{runtime_version}", config.runtime_name),
                kernel_version: facts.kernel_version.clone(),
                kubelet_version: kubelet_version(),
                machine_id: facts.machine_id.clone(),
                operating_system: os.to_string(),
                os_image: facts.os_image.clone(),
                system_uuid: facts.system_uuid.clone(),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

/// `MemTotal` of `/proc/meminfo` text, in KiB.
pub fn parse_meminfo_total_kib(text: &str) -> Option<u64> {
    let rest = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let mut words = rest.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(value),
        Some(_) => None,
    }
}

/// `PRETTY_NAME` of `os-release` text, unquoted (`"…"` or `'…'`, with `\` escapes).
pub fn parse_os_release_pretty_name(text: &str) -> Option<String> {
    let raw = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let unquoted = match raw.chars().next() {
        Some(q @ ('"' | '\'')) if raw.len() >= 2 && raw.ends_with(q) => &raw[1..raw.len() - 1],
        _ => raw,
    };
    let mut out = String::with_capacity(unquoted.len());
    let mut chars = unquoted.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    Some(out).filter(|s| !s.is_empty())
}

/// A byte count as a canonical `BinarySI` quantity: the largest of `Ki`, `Mi`, `Gi`, `Ti`,
/// `Pi`, `Ei` that divides it exactly, else plain bytes.
pub fn binary_si(bytes: u64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (mut value, mut suffix) = (bytes, "");
    for s in SUFFIXES {
        if value == 0 || value % 1024 != 0 {
            break;
        }
        value /= 1024;
        suffix = s;
    }
    format!("{value}{suffix}")
}

/// Go's `GOARCH` for a Rust target architecture.
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        "mips64" if cfg!(target_endian = "little") => "mips64le",
        "mips" if cfg!(target_endian = "little") => "mipsle",
        other => other, // arm, riscv64, s390x, mips, mips64 have the same name
    }
}

/// The system hostname, lowercased and trimmed (`nodeutil.GetHostname`); empty if unknown.
pub fn system_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // (the last byte stays 0 even if it truncates).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot read the hostname");
        return String::new();
    }
    CStr::from_bytes_until_nul(&buf)
        .map(|s| s.to_string_lossy().trim().to_lowercase())
        .unwrap_or_default()
}

fn read_or_empty(path: &str) -> String {
    match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(path, error = %e, "machine info: cannot read");
            String::new()
        }
    }
}

fn first_readable(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| read_or_empty(p).trim().to_string())
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        return n as u64;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

fn uname_release() -> String {
    // SAFETY: utsname is plain data; uname fills it and NUL-terminates each field.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "machine info: uname failed");
        return String::new();
    }
    // SAFETY: release is NUL-terminated by uname.
    unsafe { CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// The size of the filesystem holding `dir`, or of its nearest existing ancestor.
fn fs_capacity(dir: &Path) -> Option<u64> {
    for candidate in dir.ancestors() {
        let Ok(c) = std::ffi::CString::new(candidate.as_os_str().as_encoded_bytes()) else {
            break;
        };
        // SAFETY: `c` is a valid C string and `st` a valid out-pointer.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0 {
            #[allow(clippy::unnecessary_cast)] // the field types differ between targets
            return Some(st.f_blocks as u64 * st.f_frsize as u64);
        }
    }
    tracing::debug!(dir = %dir.display(), "machine info: cannot statvfs the root directory");
    None
}

pub mod allocatable;

/// The version the kubelet reports for a runtime: the leading dot-separated numbers of CRI's
/// `runtime_version` (its `ParseGeneric`, so Debian's `1.6.20~ds1` is `1.6.20`); `None` when
/// it does not start with a number (the kubelet then says `Unknown`).
fn generic_version(raw: &str) -> Option<&str> {
    let mut end = 0;
    let mut expect_digit = true;
    for (i, c) in raw.char_indices() {
        match c {
            '0'..='9' => {
                expect_digit = false;
                end = i + 1;
            }
            '.' if !expect_digit => expect_digit = true,
            _ => break,
        }
    }
    (end > 0).then(|| &raw[..end])
}

#[cfg(test)]
mod tests;
