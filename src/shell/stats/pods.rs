//! The pods of `/stats/summary` from CRI lists (`ListPodSandbox`, `ListContainers`,
//! `ListContainerStats`, `ListPodSandboxStats`), as the kubelet's CRI stats provider builds
//! them: one entry per pod with a ready sandbox (the newest when there are several), its
//! running containers, pod CPU and memory from the sandbox's stats or, when the runtime has
//! none, the sum of its containers'.
//!
//! Owns that mapping. Must not call the runtime (the lists are given) nor read a clock; the
//! only state it touches is the given `CpuRates`.

use std::collections::BTreeMap;

use crate::cri::v1;

use super::cpu_rate::{CpuRates, CpuReading};
use super::summary::{
    api_time, ContainerStats, CpuStats, FsStats, InterfaceStats, MemoryStats, NetworkStats,
    PodReference, PodStats, ProcessStats, SwapStats,
};

/// What the CRI said, in one place.
#[derive(Debug, Default)]
pub struct CriLists {
    /// `ListPodSandbox`.
    pub sandboxes: Vec<v1::PodSandbox>,
    /// `ListContainers`.
    pub containers: Vec<v1::Container>,
    /// `ListContainerStats`.
    pub container_stats: Vec<v1::ContainerStats>,
    /// `ListPodSandboxStats` (empty when the runtime does not answer it).
    pub sandbox_stats: Vec<v1::PodSandboxStats>,
}

/// How `usageNanoCores` is had when the runtime does not give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateMode {
    /// Take this reading into the cache and compute the rate from it (the full summary).
    Update,
    /// Only read the last rate computed (the CPU-and-memory path, `/metrics/resource`).
    ReadOnly,
}

/// The nano-cores of `cpu` under `key`: the runtime's own figure, else from the cache.
pub fn nano_cores(
    rates: &mut CpuRates,
    mode: RateMode,
    key: &str,
    cpu: &v1::CpuUsage,
) -> Option<u64> {
    if let Some(v) = &cpu.usage_nano_cores {
        return Some(v.value);
    }
    let used = cpu.usage_core_nano_seconds.as_ref()?.value;
    match mode {
        RateMode::Update => rates.observe(
            key,
            CpuReading {
                timestamp_ns: cpu.timestamp,
                usage_core_nano_seconds: used,
            },
        ),
        RateMode::ReadOnly => rates.last_rate(key),
    }
}

fn cpu_stats(rates: &mut CpuRates, mode: RateMode, key: &str, cpu: &v1::CpuUsage) -> CpuStats {
    CpuStats {
        time: api_time(cpu.timestamp),
        usage_nano_cores: nano_cores(rates, mode, key, cpu),
        usage_core_nano_seconds: cpu.usage_core_nano_seconds.as_ref().map(|v| v.value),
    }
}

fn memory_stats(m: &v1::MemoryUsage) -> MemoryStats {
    let v = |x: &Option<v1::UInt64Value>| x.as_ref().map(|v| v.value);
    MemoryStats {
        time: api_time(m.timestamp),
        available_bytes: v(&m.available_bytes),
        usage_bytes: v(&m.usage_bytes),
        working_set_bytes: v(&m.working_set_bytes),
        rss_bytes: v(&m.rss_bytes),
        page_faults: v(&m.page_faults),
        major_page_faults: v(&m.major_page_faults),
    }
}

fn swap_stats(s: &v1::SwapUsage) -> SwapStats {
    SwapStats {
        time: api_time(s.timestamp),
        swap_available_bytes: s.swap_available_bytes.as_ref().map(|v| v.value),
        swap_usage_bytes: s.swap_usage_bytes.as_ref().map(|v| v.value),
    }
}

/// The pod network's figures; a runtime that does not stamp them (containerd 1.6 leaves the
/// timestamp 0) gets the time of `fallback_ns`.
fn network_stats(n: &v1::NetworkUsage, fallback_ns: i64) -> Option<NetworkStats> {
    let iface = |i: &v1::NetworkInterfaceUsage| InterfaceStats {
        name: i.name.clone(),
        rx_bytes: i.rx_bytes.as_ref().map(|v| v.value),
        rx_errors: i.rx_errors.as_ref().map(|v| v.value),
        tx_bytes: i.tx_bytes.as_ref().map(|v| v.value),
        tx_errors: i.tx_errors.as_ref().map(|v| v.value),
    };
    let default = iface(n.default_interface.as_ref()?);
    let at = if n.timestamp > 0 {
        n.timestamp
    } else {
        fallback_ns
    };
    Some(NetworkStats {
        time: api_time(at),
        interfaces: std::iter::once(default.clone())
            .chain(n.interfaces.iter().map(iface))
            .collect(),
        default,
    })
}

/// The writable layer of a container, on a filesystem of `image_fs` capacity.
fn rootfs(w: &v1::FilesystemUsage, image_fs: Option<&FsStats>) -> FsStats {
    FsStats {
        time: api_time(w.timestamp),
        available_bytes: image_fs.and_then(|f| f.available_bytes),
        capacity_bytes: image_fs.and_then(|f| f.capacity_bytes),
        used_bytes: w.used_bytes.as_ref().map(|v| v.value),
        inodes_free: image_fs.and_then(|f| f.inodes_free),
        inodes: image_fs.and_then(|f| f.inodes),
        inodes_used: w.inodes_used.as_ref().map(|v| v.value),
    }
}

fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// Pod CPU as the sum of its containers' (the kubelet's fallback when the pod has no
/// stats of its own).
fn summed_cpu(cs: &[ContainerStats]) -> Option<CpuStats> {
    let cpus: Vec<&CpuStats> = cs.iter().filter_map(|c| c.cpu.as_ref()).collect();
    let first = cpus.first()?;
    Some(CpuStats {
        time: first.time.clone(),
        usage_nano_cores: cpus.iter().fold(None, |a, c| sum(a, c.usage_nano_cores)),
        usage_core_nano_seconds: cpus
            .iter()
            .fold(None, |a, c| sum(a, c.usage_core_nano_seconds)),
    })
}

fn summed_memory(cs: &[ContainerStats]) -> Option<MemoryStats> {
    let ms: Vec<&MemoryStats> = cs.iter().filter_map(|c| c.memory.as_ref()).collect();
    let first = ms.first()?;
    Some(MemoryStats {
        time: first.time.clone(),
        available_bytes: None,
        usage_bytes: ms.iter().fold(None, |a, m| sum(a, m.usage_bytes)),
        working_set_bytes: ms.iter().fold(None, |a, m| sum(a, m.working_set_bytes)),
        rss_bytes: ms.iter().fold(None, |a, m| sum(a, m.rss_bytes)),
        page_faults: ms.iter().fold(None, |a, m| sum(a, m.page_faults)),
        major_page_faults: ms.iter().fold(None, |a, m| sum(a, m.major_page_faults)),
    })
}

fn ephemeral(cs: &[ContainerStats], image_fs: Option<&FsStats>) -> Option<FsStats> {
    let roots: Vec<&FsStats> = cs.iter().filter_map(|c| c.rootfs.as_ref()).collect();
    let first = roots.first()?;
    Some(FsStats {
        time: first.time.clone(),
        available_bytes: image_fs.and_then(|f| f.available_bytes),
        capacity_bytes: image_fs.and_then(|f| f.capacity_bytes),
        used_bytes: roots.iter().fold(None, |a, r| sum(a, r.used_bytes)),
        inodes_free: image_fs.and_then(|f| f.inodes_free),
        inodes: image_fs.and_then(|f| f.inodes),
        inodes_used: roots.iter().fold(None, |a, r| sum(a, r.inodes_used)),
    })
}

/// The pods, in namespace/name order, each with its running containers in name order.
/// `with_fs` adds the filesystem and network figures (the full summary).
pub fn build_pods(
    lists: &CriLists,
    rates: &mut CpuRates,
    mode: RateMode,
    image_fs: Option<&FsStats>,
    with_fs: bool,
) -> Vec<PodStats> {
    // the newest ready sandbox of each pod
    let mut sandboxes: BTreeMap<String, &v1::PodSandbox> = BTreeMap::new();
    for s in &lists.sandboxes {
        if s.state != v1::PodSandboxState::SandboxReady as i32 {
            continue;
        }
        let Some(m) = &s.metadata else { continue };
        let newer = sandboxes
            .get(&m.uid)
            .is_none_or(|o| o.created_at < s.created_at);
        if newer {
            sandboxes.insert(m.uid.clone(), s);
        }
    }
    let stats_by_id: BTreeMap<&str, &v1::ContainerStats> = lists
        .container_stats
        .iter()
        .filter_map(|s| Some((s.attributes.as_ref()?.id.as_str(), s)))
        .collect();
    let sandbox_stats_by_id: BTreeMap<&str, &v1::PodSandboxStats> = lists
        .sandbox_stats
        .iter()
        .filter_map(|s| Some((s.attributes.as_ref()?.id.as_str(), s)))
        .collect();
    let mut pods = Vec::new();
    for sandbox in sandboxes.values() {
        let m = sandbox.metadata.as_ref().expect("kept only with metadata");
        // the newest running container of each name in this sandbox
        let mut running: BTreeMap<&str, &v1::Container> = BTreeMap::new();
        for c in &lists.containers {
            if c.pod_sandbox_id != sandbox.id
                || c.state != v1::ContainerState::ContainerRunning as i32
            {
                continue;
            }
            let Some(cm) = &c.metadata else { continue };
            if running
                .get(cm.name.as_str())
                .is_none_or(|o| o.created_at < c.created_at)
            {
                running.insert(cm.name.as_str(), c);
            }
        }
        let containers: Vec<ContainerStats> = running
            .iter()
            .map(|(name, c)| {
                let s = stats_by_id.get(c.id.as_str());
                ContainerStats {
                    name: name.to_string(),
                    start_time: api_time(c.created_at),
                    cpu: s
                        .and_then(|s| s.cpu.as_ref())
                        .map(|cpu| cpu_stats(rates, mode, &c.id, cpu)),
                    memory: s.and_then(|s| s.memory.as_ref()).map(memory_stats),
                    swap: s.and_then(|s| s.swap.as_ref()).map(swap_stats),
                    rootfs: if with_fs {
                        s.and_then(|s| s.writable_layer.as_ref())
                            .map(|w| rootfs(w, image_fs))
                    } else {
                        None
                    },
                    logs: None,
                }
            })
            .collect();
        let linux = sandbox_stats_by_id
            .get(sandbox.id.as_str())
            .and_then(|s| s.linux.as_ref());
        let cpu = match linux.and_then(|l| l.cpu.as_ref()) {
            Some(cpu) if cpu.usage_core_nano_seconds.is_some() => {
                Some(cpu_stats(rates, mode, &sandbox.id, cpu))
            }
            _ => summed_cpu(&containers),
        };
        let memory = match linux.and_then(|l| l.memory.as_ref()) {
            Some(mem) if mem.working_set_bytes.is_some() => Some(memory_stats(mem)),
            _ => summed_memory(&containers),
        };
        pods.push(PodStats {
            pod_ref: PodReference {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
            },
            start_time: api_time(sandbox.created_at),
            cpu,
            memory,
            swap: None,
            network: if with_fs {
                let fallback = linux
                    .and_then(|l| l.cpu.as_ref())
                    .map_or(0, |c| c.timestamp);
                linux
                    .and_then(|l| l.network.as_ref())
                    .and_then(|n| network_stats(n, fallback))
            } else {
                None
            },
            ephemeral_storage: if with_fs {
                ephemeral(&containers, image_fs)
            } else {
                None
            },
            process_stats: linux
                .and_then(|l| l.process.as_ref())
                .map(|p| ProcessStats {
                    process_count: p.process_count.as_ref().map(|v| v.value),
                }),
            containers,
        });
    }
    pods.sort_by(|a, b| a.pod_ref.cmp(&b.pod_ref));
    if mode == RateMode::Update {
        // forget what is gone: containers and sandboxes no longer listed (the node stays)
        let live: std::collections::BTreeSet<&str> = lists
            .containers
            .iter()
            .map(|c| c.id.as_str())
            .chain(lists.sandboxes.iter().map(|s| s.id.as_str()))
            .collect();
        rates.retain(|k| k == super::NODE_KEY || live.contains(k));
    }
    pods
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(id: &str, uid: &str, created: i64, ready: bool) -> v1::PodSandbox {
        v1::PodSandbox {
            id: id.into(),
            metadata: Some(v1::PodSandboxMetadata {
                name: format!("pod-{uid}"),
                uid: uid.into(),
                namespace: "default".into(),
                attempt: 0,
            }),
            state: if ready {
                v1::PodSandboxState::SandboxReady as i32
            } else {
                v1::PodSandboxState::SandboxNotready as i32
            },
            created_at: created,
            ..Default::default()
        }
    }

    fn container(
        id: &str,
        sandbox: &str,
        name: &str,
        created: i64,
        running: bool,
    ) -> v1::Container {
        v1::Container {
            id: id.into(),
            pod_sandbox_id: sandbox.into(),
            metadata: Some(v1::ContainerMetadata {
                name: name.into(),
                attempt: 0,
            }),
            state: if running {
                v1::ContainerState::ContainerRunning as i32
            } else {
                v1::ContainerState::ContainerExited as i32
            },
            created_at: created,
            ..Default::default()
        }
    }

    fn stats(id: &str, at_s: i64, cpu_ns: u64, working_set: u64) -> v1::ContainerStats {
        let val = |value| Some(v1::UInt64Value { value });
        v1::ContainerStats {
            attributes: Some(v1::ContainerAttributes {
                id: id.into(),
                ..Default::default()
            }),
            cpu: Some(v1::CpuUsage {
                timestamp: at_s * 1_000_000_000,
                usage_core_nano_seconds: val(cpu_ns),
                ..Default::default()
            }),
            memory: Some(v1::MemoryUsage {
                timestamp: at_s * 1_000_000_000,
                working_set_bytes: val(working_set),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_newest_ready_sandbox_and_its_running_containers_are_reported() {
        let lists = CriLists {
            sandboxes: vec![
                sandbox("old", "a", 1, true),
                sandbox("new", "a", 2, true),
                sandbox("gone", "b", 3, false),
            ],
            containers: vec![
                container("c-old", "old", "main", 1, true),
                container("c1", "new", "main", 2, false),
                container("c2", "new", "main", 3, true),
                container("c3", "new", "side", 3, true),
                container("c4", "gone", "main", 3, true),
            ],
            container_stats: vec![stats("c2", 10, 1_000, 100), stats("c3", 10, 500, 50)],
            sandbox_stats: vec![],
        };
        let mut rates = CpuRates::new(16);
        let pods = build_pods(&lists, &mut rates, RateMode::Update, None, true);
        assert_eq!(pods.len(), 1, "{pods:#?}");
        assert_eq!(pods[0].pod_ref.uid, "a");
        let names: Vec<&str> = pods[0].containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["main", "side"]);
        // without sandbox stats the pod's figures are its containers' summed
        let cpu = pods[0].cpu.as_ref().unwrap();
        assert_eq!(cpu.usage_core_nano_seconds, Some(1_500));
        let mem = pods[0].memory.as_ref().unwrap();
        assert_eq!(mem.working_set_bytes, Some(150));
    }

    #[test]
    fn container_rates_come_from_successive_full_summaries_and_the_read_only_path_reads_them() {
        let mut lists = CriLists {
            sandboxes: vec![sandbox("s", "a", 1, true)],
            containers: vec![container("c", "s", "main", 1, true)],
            container_stats: vec![stats("c", 10, 0, 1)],
            sandbox_stats: vec![],
        };
        let mut rates = CpuRates::new(16);
        let first = build_pods(&lists, &mut rates, RateMode::Update, None, true);
        assert_eq!(
            first[0].containers[0]
                .cpu
                .as_ref()
                .unwrap()
                .usage_nano_cores,
            None
        );
        lists.container_stats = vec![stats("c", 12, 1_000_000_000, 1)];
        let read_only = build_pods(&lists, &mut rates, RateMode::ReadOnly, None, false);
        assert_eq!(
            read_only[0].containers[0]
                .cpu
                .as_ref()
                .unwrap()
                .usage_nano_cores,
            None
        );
        let second = build_pods(&lists, &mut rates, RateMode::Update, None, true);
        let cpu = second[0].containers[0].cpu.as_ref().unwrap();
        assert_eq!(cpu.usage_nano_cores, Some(500_000_000));
        let read_only = build_pods(&lists, &mut rates, RateMode::ReadOnly, None, false);
        assert_eq!(
            read_only[0].containers[0]
                .cpu
                .as_ref()
                .unwrap()
                .usage_nano_cores,
            Some(500_000_000)
        );
        assert!(read_only[0].containers[0].rootfs.is_none());
        // a container no longer listed is forgotten
        lists.containers.clear();
        build_pods(&lists, &mut rates, RateMode::Update, None, true);
        assert_eq!(rates.last_rate("c"), None);
    }
}
