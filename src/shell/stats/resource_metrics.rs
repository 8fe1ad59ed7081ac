//! `/metrics/resource`: the kubelet's resource metrics (`pkg/kubelet/metrics/collectors/
//! resource_metrics.go`) in the Prometheus text format, rendered from a CPU-and-memory
//! summary. metrics-server reads these.
//!
//! Owns the metric names, help texts, label names and sample timestamps (milliseconds, the
//! time each figure was read). Must not read anything: it renders what it is given.

use std::fmt::Write;

use super::summary::{CpuStats, MemoryStats, Summary, SwapStats};

/// One metric family: name, help, type.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    /// component-base's stability level, the prefix of the help text.
    stability: &'static str,
}

const NODE_CPU: Family = Family {
    name: "node_cpu_usage_seconds_total",
    help: "Cumulative cpu time consumed by the node in core-seconds",
    kind: "counter",
    stability: "STABLE",
};
const NODE_MEMORY: Family = Family {
    name: "node_memory_working_set_bytes",
    help: "Current working set of the node in bytes",
    kind: "gauge",
    stability: "STABLE",
};
const NODE_SWAP: Family = Family {
    name: "node_swap_usage_bytes",
    help: "Current swap usage of the node in bytes. Reported only on non-windows systems",
    kind: "gauge",
    stability: "ALPHA",
};
const CONTAINER_CPU: Family = Family {
    name: "container_cpu_usage_seconds_total",
    help: "Cumulative cpu time consumed by the container in core-seconds",
    kind: "counter",
    stability: "STABLE",
};
const CONTAINER_MEMORY: Family = Family {
    name: "container_memory_working_set_bytes",
    help: "Current working set of the container in bytes",
    kind: "gauge",
    stability: "STABLE",
};
const CONTAINER_SWAP: Family = Family {
    name: "container_swap_usage_bytes",
    help:
        "Current amount of the container swap usage in bytes. Reported only on non-windows systems",
    kind: "gauge",
    stability: "ALPHA",
};
const CONTAINER_START: Family = Family {
    name: "container_start_time_seconds",
    help: "Start time of the container since unix epoch in seconds",
    kind: "gauge",
    stability: "STABLE",
};
const POD_CPU: Family = Family {
    name: "pod_cpu_usage_seconds_total",
    help: "Cumulative cpu time consumed by the pod in core-seconds",
    kind: "counter",
    stability: "STABLE",
};
const POD_MEMORY: Family = Family {
    name: "pod_memory_working_set_bytes",
    help: "Current working set of the pod in bytes",
    kind: "gauge",
    stability: "STABLE",
};
const POD_SWAP: Family = Family {
    name: "pod_swap_usage_bytes",
    help: "Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
    kind: "gauge",
    stability: "ALPHA",
};
const SCRAPE_ERROR: Family = Family {
    name: "resource_scrape_error",
    help: "1 if there was an error while getting container metrics, 0 otherwise",
    kind: "gauge",
    stability: "STABLE",
};

/// A sample: labels, value, timestamp in milliseconds.
type Sample = (Vec<(&'static str, String)>, f64, Option<i64>);

/// The RFC 3339 time of a figure as Prometheus milliseconds.
fn millis(time: &str) -> Option<i64> {
    time.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, f: &Family, samples: &[Sample]) {
    if samples.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {} [{}] {}", f.name, f.stability, f.help);
    let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
    for (labels, value, ts) in samples {
        out.push_str(f.name);
        if !labels.is_empty() {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let _ = write!(out, "{{{}}}", l.join(","));
        }
        let _ = write!(out, " {value}");
        if let Some(ts) = ts {
            let _ = write!(out, " {ts}");
        }
        out.push('\n');
    }
}

fn cpu_seconds(c: &Option<CpuStats>) -> Option<(f64, Option<i64>)> {
    let c = c.as_ref()?;
    Some((c.usage_core_nano_seconds? as f64 / 1e9, millis(&c.time)))
}

fn working_set(m: &Option<MemoryStats>) -> Option<(f64, Option<i64>)> {
    let m = m.as_ref()?;
    Some((m.working_set_bytes? as f64, millis(&m.time)))
}

fn swap_usage(s: &Option<SwapStats>) -> Option<(f64, Option<i64>)> {
    let s = s.as_ref()?;
    Some((s.swap_usage_bytes? as f64, millis(&s.time)))
}

/// The exposition of `summary`; with `scrape_error` (the stats could not be had) only
/// `resource_scrape_error 1`, as the kubelet.
pub fn render(summary: Option<&Summary>) -> String {
    let mut out = String::new();
    let Some(s) = summary else {
        family(&mut out, &SCRAPE_ERROR, &[(vec![], 1.0, None)]);
        return out;
    };
    let one = |v: Option<(f64, Option<i64>)>| -> Vec<Sample> {
        v.map(|(v, ts)| vec![(vec![], v, ts)]).unwrap_or_default()
    };
    let node = &s.node;
    let mut per_container: [Vec<Sample>; 4] = Default::default();
    let mut per_pod: [Vec<Sample>; 3] = Default::default();
    for p in &s.pods {
        let pod = || {
            vec![
                ("namespace", p.pod_ref.namespace.clone()),
                ("pod", p.pod_ref.name.clone()),
            ]
        };
        for c in &p.containers {
            let labels = || {
                vec![
                    ("container", c.name.clone()),
                    ("namespace", p.pod_ref.namespace.clone()),
                    ("pod", p.pod_ref.name.clone()),
                ]
            };
            if let Some(start) = millis(&c.start_time) {
                per_container[0].push((labels(), start as f64 / 1000.0, Some(start)));
            }
            if let Some((v, ts)) = cpu_seconds(&c.cpu) {
                per_container[1].push((labels(), v, ts));
            }
            if let Some((v, ts)) = working_set(&c.memory) {
                per_container[2].push((labels(), v, ts));
            }
            if let Some((v, ts)) = swap_usage(&c.swap) {
                per_container[3].push((labels(), v, ts));
            }
        }
        if let Some((v, ts)) = cpu_seconds(&p.cpu) {
            per_pod[0].push((pod(), v, ts));
        }
        if let Some((v, ts)) = working_set(&p.memory) {
            per_pod[1].push((pod(), v, ts));
        }
        if let Some((v, ts)) = swap_usage(&p.swap) {
            per_pod[2].push((pod(), v, ts));
        }
    }
    family(&mut out, &CONTAINER_CPU, &per_container[1]);
    family(&mut out, &CONTAINER_MEMORY, &per_container[2]);
    family(&mut out, &CONTAINER_START, &per_container[0]);
    family(&mut out, &CONTAINER_SWAP, &per_container[3]);
    family(&mut out, &NODE_CPU, &one(cpu_seconds(&node.cpu)));
    family(&mut out, &NODE_MEMORY, &one(working_set(&node.memory)));
    family(&mut out, &NODE_SWAP, &one(swap_usage(&node.swap)));
    family(&mut out, &POD_CPU, &per_pod[0]);
    family(&mut out, &POD_MEMORY, &per_pod[1]);
    family(&mut out, &POD_SWAP, &per_pod[2]);
    family(&mut out, &SCRAPE_ERROR, &[(vec![], 0.0, None)]);
    out
}

#[cfg(test)]
mod tests {
    use super::super::summary::*;
    use super::*;

    fn summary() -> Summary {
        let t = "2026-01-01T00:00:10Z".to_string();
        Summary {
            node: NodeStats {
                node_name: "n".into(),
                cpu: Some(CpuStats {
                    time: t.clone(),
                    usage_core_nano_seconds: Some(2_500_000_000),
                    usage_nano_cores: Some(1),
                }),
                memory: Some(MemoryStats {
                    time: t.clone(),
                    working_set_bytes: Some(1024),
                    ..Default::default()
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "web".into(),
                    namespace: "default".into(),
                    uid: "u".into(),
                },
                containers: vec![ContainerStats {
                    name: "main".into(),
                    start_time: "2026-01-01T00:00:00Z".into(),
                    cpu: Some(CpuStats {
                        time: t.clone(),
                        usage_core_nano_seconds: Some(500_000_000),
                        usage_nano_cores: None,
                    }),
                    memory: Some(MemoryStats {
                        time: t.clone(),
                        working_set_bytes: Some(4096),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                cpu: Some(CpuStats {
                    time: t.clone(),
                    usage_core_nano_seconds: Some(500_000_000),
                    usage_nano_cores: None,
                }),
                memory: Some(MemoryStats {
                    time: t,
                    working_set_bytes: Some(4096),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn resource_metrics_have_the_kubelets_names_labels_and_millisecond_timestamps() {
        let text = render(Some(&summary()));
        let at = 1_767_225_610_000_i64; // 2026-01-01T00:00:10Z
        for line in [
            format!("node_cpu_usage_seconds_total 2.5 {at}"),
            format!("node_memory_working_set_bytes 1024 {at}"),
            format!("container_cpu_usage_seconds_total{{container=\"main\",namespace=\"default\",pod=\"web\"}} 0.5 {at}"),
            format!("container_memory_working_set_bytes{{container=\"main\",namespace=\"default\",pod=\"web\"}} 4096 {at}"),
            "container_start_time_seconds{container=\"main\",namespace=\"default\",pod=\"web\"} 1767225600 1767225600000".to_string(),
            format!("pod_cpu_usage_seconds_total{{namespace=\"default\",pod=\"web\"}} 0.5 {at}"),
            format!("pod_memory_working_set_bytes{{namespace=\"default\",pod=\"web\"}} 4096 {at}"),
            "resource_scrape_error 0".to_string(),
            "# TYPE node_cpu_usage_seconds_total counter".to_string(),
            "# TYPE container_memory_working_set_bytes gauge".to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "no line {line:?} in:\n{text}");
        }
        // a family without samples is left out entirely
        assert!(!text.contains("swap"), "{text}");
    }

    #[test]
    fn a_failed_scrape_renders_only_the_scrape_error() {
        let text = render(None);
        assert!(
            text.lines().any(|l| l == "resource_scrape_error 1"),
            "{text}"
        );
        assert!(!text.contains("node_cpu"), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        let mut s = summary();
        s.pods[0].pod_ref.name = "we\"b".into();
        let text = render(Some(&s));
        assert!(text.contains("pod=\"we\\\"b\""), "{text}");
    }
}
