//! Gauges read from the folded state and the ledger, set just before `/metrics` is rendered.
//!
//! Owns `kubelet_desired_pods{static}`, `kubelet_active_pods{static}`, `kubelet_mirror_pods`,
//! `kubelet_working_pods{lifecycle,config,static}` (as the kubelet's housekeeping sets them,
//! every combination present), `ledgerlet_ledger_retained_records`,
//! `ledgerlet_ledger_retained_bytes`, `ledgerlet_ledger_evicted_records_total`,
//! `ledgerlet_ledger_snapshots` and `ledgerlet_ledger_last_seq`. Must not change state: it
//! reads a node it is handed.

use std::collections::BTreeMap;

use metrics::{counter, gauge};

use crate::core::pod_workers::PodWorkerState;
use crate::core::{pod, Node};
use crate::ledger::LedgerStats;

/// The `static` label of a pod that is not static, and of one that is.
const STATIC: [&str; 2] = ["false", "true"];

/// Sets the pod gauges of `node`.
pub fn set_node(node: &Node) {
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
    for (i, st) in STATIC.into_iter().enumerate() {
        gauge!("kubelet_desired_pods", "static" => st).set(desired[i] as f64);
        gauge!("kubelet_active_pods", "static" => st).set(active[i] as f64);
    }
    gauge!("kubelet_mirror_pods").set(node.pod_manager.mirror_pods().count() as f64);

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
                (config, STATIC[usize::from(pod::is_static(p))])
            }
        };
        *working.entry((lifecycle, config, st)).or_default() += 1;
    }
    for ((lifecycle, config, st), n) in working {
        gauge!("kubelet_working_pods", "config" => config, "lifecycle" => lifecycle, "static" => st)
            .set(n as f64);
    }
}

/// Sets the ledger gauges (and the eviction counter) from `stats`.
pub fn set_ledger(stats: &LedgerStats) {
    gauge!("ledgerlet_ledger_retained_records").set(stats.retained_records as f64);
    gauge!("ledgerlet_ledger_retained_bytes").set(stats.retained_bytes as f64);
    counter!("ledgerlet_ledger_evicted_records_total").absolute(stats.evicted_records);
    gauge!("ledgerlet_ledger_snapshots").set(stats.snapshots as f64);
    gauge!("ledgerlet_ledger_last_seq").set(stats.last_seq as f64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::testing::{recorded, total};

    #[test]
    fn process_metrics_describe_this_process() {
        let text = recorded(|h| {
            crate::observe::metrics::collect_process();
            h.render()
        });
        let value = |name: &str| -> f64 {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name} "))),
                "{name} missing:\n{text}"
            );
            total(&text, name)
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

    #[test]
    fn the_pod_and_ledger_gauges_are_set_from_what_they_are_handed() {
        let sim = crate::sim::scenarios::busy_node(5, 60 * 1000);
        let engine = sim.engine();
        let text = recorded(|h| {
            set_node(engine.node());
            set_ledger(&engine.ledger().stats());
            h.render()
        });
        let desired = engine.node().pod_manager.iter().count() as f64;
        assert!(desired > 0.0);
        assert_eq!(total(&text, "kubelet_desired_pods"), desired);
        // every combination of the working pods' labels is present
        let working = text
            .lines()
            .filter(|l| l.starts_with("kubelet_working_pods{"))
            .count();
        assert_eq!(working, 27, "{text}");
        let stats = engine.ledger().stats();
        assert_eq!(
            total(&text, "ledgerlet_ledger_last_seq"),
            stats.last_seq as f64
        );
        assert_eq!(
            total(&text, "ledgerlet_ledger_retained_records"),
            stats.retained_records as f64
        );
    }
}
