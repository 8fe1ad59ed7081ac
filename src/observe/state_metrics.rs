//! Gauges read from the folded state and the ledger at scrape time, and the process
//! collector.
//!
//! Owns `kubelet_desired_pods{static}`, `kubelet_active_pods{static}`, `kubelet_mirror_pods`,
//! `kubelet_working_pods{lifecycle,config,static}` (as the kubelet's housekeeping sets them,
//! every combination present), `ledgerlet_ledger_retained_records`,
//! `ledgerlet_ledger_retained_bytes`, `ledgerlet_ledger_evicted_records_total`,
//! `ledgerlet_ledger_snapshots`, `ledgerlet_ledger_last_seq`, and the `process_*` metrics
//! (resident and virtual memory, CPU seconds, start time, open and max fds) read from
//! `/proc/self`. Must not change state: it reads a node it is handed.

use std::collections::BTreeMap;

use crate::core::pod_workers::PodWorkerState;
use crate::core::{pod, Node};
use crate::ledger::LedgerStats;

use super::exposition::Text;

fn static_label(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

/// Writes the pod gauges of `node`.
pub fn render_node(node: &Node, out: &mut Text) {
    let mut desired = [0u64; 2];
    let mut active = [0u64; 2];
    for (uid, p) in node.pod_manager.iter() {
        let s = usize::from(pod::is_static(p));
        desired[s] += 1;
        let terminated = node
            .pod_workers
            .status(uid)
            .is_some_and(|w| w.is_finished() || w.is_terminated());
        let terminal = node
            .statuses
            .get(uid)
            .and_then(|v| v.status.phase.as_deref())
            .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
        if !terminated && !terminal {
            active[s] += 1;
        }
    }
    out.family(
        "kubelet_desired_pods",
        "gauge",
        "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.",
    );
    for (i, n) in desired.iter().enumerate() {
        out.sample(
            "kubelet_desired_pods",
            &[("static", static_label(i == 1))],
            *n as f64,
        );
    }
    out.family(
        "kubelet_active_pods",
        "gauge",
        "The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.",
    );
    for (i, n) in active.iter().enumerate() {
        out.sample(
            "kubelet_active_pods",
            &[("static", static_label(i == 1))],
            *n as f64,
        );
    }
    out.family(
        "kubelet_mirror_pods",
        "gauge",
        "The number of mirror pods the kubelet will try to create (one per admitted static pod)",
    );
    out.sample(
        "kubelet_mirror_pods",
        &[],
        node.pod_manager.mirror_pods().count() as f64,
    );

    let mut working: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for lifecycle in ["sync", "terminating", "terminated"] {
        for config in ["desired", "orphan", "runtime_only"] {
            for st in ["true", "false", "unknown"] {
                working.insert((lifecycle, config, st), 0);
            }
        }
    }
    for (uid, w) in node.pod_workers.statuses() {
        if !w.queue.exists() && w.is_finished() {
            continue;
        }
        let lifecycle = match w.state() {
            PodWorkerState::Sync => "sync",
            PodWorkerState::Terminating => "terminating",
            PodWorkerState::Terminated => "terminated",
        };
        let (config, st) = match w.last_pod() {
            None => ("runtime_only", "unknown"),
            Some(p) => {
                let config = if node.pod_manager.get(uid).is_some() {
                    "desired"
                } else {
                    "orphan"
                };
                (config, static_label(pod::is_static(p)))
            }
        };
        *working.entry((lifecycle, config, st)).or_default() += 1;
    }
    out.family(
        "kubelet_working_pods",
        "gauge",
        "Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.",
    );
    for ((lifecycle, config, st), n) in &working {
        out.sample(
            "kubelet_working_pods",
            &[("config", config), ("lifecycle", lifecycle), ("static", st)],
            *n as f64,
        );
    }
}

/// Writes the ledger gauges.
pub fn render_ledger(stats: &LedgerStats, out: &mut Text) {
    for (name, kind, help, v) in [
        (
            "ledgerlet_ledger_retained_records",
            "gauge",
            "Records retained in the in-memory ledger.",
            stats.retained_records as f64,
        ),
        (
            "ledgerlet_ledger_retained_bytes",
            "gauge",
            "Bytes retained by the ledger (records and the objects they share, each once).",
            stats.retained_bytes as f64,
        ),
        (
            "ledgerlet_ledger_evicted_records_total",
            "counter",
            "Records evicted by retention since start.",
            stats.evicted_records as f64,
        ),
        (
            "ledgerlet_ledger_snapshots",
            "gauge",
            "Snapshots of the folded state retained for replay.",
            stats.snapshots as f64,
        ),
        (
            "ledgerlet_ledger_last_seq",
            "gauge",
            "Seq of the newest record.",
            stats.last_seq as f64,
        ),
    ] {
        out.family(name, kind, help);
        out.sample(name, &[], v);
    }
}

fn clock_ticks_per_s() -> f64 {
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> f64 {
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as f64
    } else {
        4096.0
    }
}

/// Boot time in unix seconds (`btime` of /proc/stat).
fn boot_time_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Writes the standard process collector's metrics (as Go's `process_*`).
pub fn render_process(out: &mut Text) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // fields after the command name (which may contain spaces) start at field 3
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok());
    let ticks = clock_ticks_per_s();
    if let (Some(utime), Some(stime)) = (num(14), num(15)) {
        out.family(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
        );
        out.sample("process_cpu_seconds_total", &[], (utime + stime) / ticks);
    }
    if let (Some(start), Some(boot)) = (num(22), boot_time_s()) {
        out.family(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
        );
        out.sample("process_start_time_seconds", &[], boot + start / ticks);
    }
    if let Some(vsize) = num(23) {
        out.family(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
        );
        out.sample("process_virtual_memory_bytes", &[], vsize);
    }
    if let Some(rss) = num(24) {
        out.family(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
        );
        out.sample("process_resident_memory_bytes", &[], rss * page_size());
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        out.family(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
        );
        out.sample("process_open_fds", &[], fds.count() as f64);
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        out.family(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
        );
        out.sample("process_max_fds", &[], lim.rlim_cur as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_metrics_describe_this_process() {
        let mut t = Text::default();
        render_process(&mut t);
        let value = |name: &str| -> f64 {
            t.0.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing:\n{}", t.0))
                .parse()
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1e5);
        assert!(value("process_open_fds") >= 3.0);
        let start = value("process_start_time_seconds");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start}"
        );
        assert!(value("process_cpu_seconds_total") >= 0.0);
    }
}
