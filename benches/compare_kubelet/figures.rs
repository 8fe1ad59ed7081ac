//! The figures of `compare_kubelet`: samples per row and side, percentiles, the ratios
//! kubelet / ledgerlet (above 1: ledgerlet is faster or smaller), the floors that fail the
//! bench, the targets it reports against, and the JSON, table and summary it writes.

use serde_json::{json, Value};

use crate::differential::{self, Difference};
use crate::workloads::{Bench, Side, Steady, Usage};

/// One measured row: samples in ms for each side (index 0 ledgerlet, 1 kubelet).
pub struct Row {
    pub name: String,
    /// A single figure per side (the burst), not a distribution.
    pub once: bool,
    pub samples: [Vec<f64>; 2],
}

impl Row {
    pub fn latency(name: &str) -> Row {
        Row {
            name: name.into(),
            once: false,
            samples: [Vec::new(), Vec::new()],
        }
    }

    pub fn once(name: &str) -> Row {
        Row {
            once: true,
            ..Row::latency(name)
        }
    }

    pub fn add(&mut self, side: Side, samples: Vec<f64>) {
        self.samples[side as usize].extend(samples);
    }

    /// The `q` quantile (nearest rank) of a side's samples, ms.
    pub fn quantile(&self, side: Side, q: f64) -> f64 {
        let mut s = self.samples[side as usize].clone();
        if s.is_empty() {
            return f64::NAN;
        }
        s.sort_by(f64::total_cmp);
        let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
        s[rank - 1]
    }

    /// (label, ledgerlet, kubelet) per figure of the row.
    fn figures(&self) -> Vec<(&'static str, f64, f64)> {
        let qs: &[(&str, f64)] = if self.once {
            &[("", 1.0)]
        } else {
            &[("p50", 0.5), ("p99", 0.99)]
        };
        qs.iter()
            .map(|(l, q)| {
                (
                    *l,
                    self.quantile(Side::Ledgerlet, *q),
                    self.quantile(Side::Kubelet, *q),
                )
            })
            .collect()
    }
}

pub struct Report {
    pub full: bool,
    pub meta: Value,
    pub rows: Vec<Row>,
    pub steady: Option<Steady>,
    /// Every status difference (the full set of specs; `None` when not run).
    pub differences: Option<Vec<Difference>>,
}

/// Whether ledgerlet's figure is no worse than the kubelet's (a missing figure is worse).
fn no_worse(ledgerlet: f64, kubelet: f64) -> bool {
    ledgerlet.partial_cmp(&kubelet).is_some_and(|o| o.is_le())
}

fn ratio(kubelet: f64, ledgerlet: f64) -> f64 {
    kubelet / ledgerlet
}

impl Report {
    pub fn new(bench: &Bench, full: bool) -> Report {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_default();
        let mem_kib: f64 = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let containerd = std::process::Command::new("containerd")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let meta = json!({
            "date": jiff::Timestamp::now().to_string(),
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "machine": {
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                "cpu_model": cpu,
                "memory_gib": (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
                "kernel": read("/proc/sys/kernel/osrelease").trim(),
            },
            "versions": {
                "kubernetes": bench.env.get("KUBERNETES_VERSION"),
                "ledgerlet": env!("CARGO_PKG_VERSION"),
                "containerd": containerd,
            },
            "nodes": {"ledgerlet": bench.node(Side::Ledgerlet), "kubelet": bench.node(Side::Kubelet)},
            "how": "both nodes in one cluster, each on its own containerd (same package and \
                    configuration); workloads alternate between the nodes, ledgerlet first in \
                    even rounds; latencies are from the bench's request to what its watch sees",
        });
        Report {
            full,
            meta,
            rows: Vec::new(),
            steady: None,
            differences: None,
        }
    }

    fn steady_figures(&self) -> Vec<(&'static str, f64, f64)> {
        let Some(s) = &self.steady else {
            return Vec::new();
        };
        let f = |g: fn(&Usage) -> f64| (g(&s.ledgerlet), g(&s.kubelet));
        [
            ("agent CPU, cores", f(|u| u.cpu_cores)),
            ("agent RSS mean, MiB", f(|u| u.rss_mean_mib)),
            ("agent RSS max, MiB", f(|u| u.rss_max_mib)),
            ("containerd CPU, cores", f(|u| u.containerd_cpu_cores)),
        ]
        .into_iter()
        .map(|(n, (l, k))| (n, l, k))
        .collect()
    }

    /// The steady-state figures the bench judges: the agent's CPU and mean RSS (the others
    /// are information).
    fn judged_steady_figures(&self) -> Vec<(&'static str, f64, f64)> {
        let mut figures = self.steady_figures();
        figures.truncate(2);
        figures
    }

    fn unexplained(&self) -> Vec<&Difference> {
        self.differences
            .iter()
            .flatten()
            .filter(|d| differential::deliberate(d).is_none())
            .collect()
    }

    /// Why the bench fails: ledgerlet slower than the kubelet on a latency figure, more CPU or
    /// RSS, or a status difference nothing explains.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for row in &self.rows {
            for (q, l, k) in row.figures() {
                if !no_worse(l, k) {
                    out.push(format!(
                        "{} {q}: ledgerlet {l:.0} ms, kubelet {k:.0} ms",
                        row.name
                    ));
                }
            }
        }
        for (name, l, k) in self.judged_steady_figures() {
            if !no_worse(l, k) {
                out.push(format!(
                    "steady state {name}: ledgerlet {l:.3}, kubelet {k:.3}"
                ));
            }
        }
        for d in self.unexplained() {
            out.push(format!(
                "status {}: {}: ledgerlet {:?}, kubelet {:?}",
                d.spec, d.field, d.ledgerlet, d.kubelet
            ));
        }
        out
    }

    /// The targets reported against: (what, ratio, target ratio).
    fn targets(&self) -> Vec<(String, f64, f64)> {
        let mut out = Vec::new();
        let row = |prefix: &str| self.rows.iter().find(|r| r.name.starts_with(prefix));
        if let Some(r) = row("exit") {
            let q = 0.5;
            out.push((
                "exit → status p50".into(),
                ratio(r.quantile(Side::Kubelet, q), r.quantile(Side::Ledgerlet, q)),
                10.0,
            ));
        }
        if let Some(r) = row("startup") {
            let q = 0.99;
            out.push((
                "startup p99".into(),
                ratio(r.quantile(Side::Kubelet, q), r.quantile(Side::Ledgerlet, q)),
                1.0,
            ));
        }
        for (name, l, k) in self.judged_steady_figures() {
            out.push((format!("steady {name}"), ratio(k, l), 2.0));
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let figures: Vec<Value> = r
                    .figures()
                    .into_iter()
                    .map(|(q, l, k)| json!({"figure": q, "ledgerlet_ms": l, "kubelet_ms": k, "ratio": ratio(k, l)}))
                    .collect();
                json!({
                    "row": r.name,
                    "samples_ms": {"ledgerlet": r.samples[0], "kubelet": r.samples[1]},
                    "figures": figures,
                })
            })
            .collect();
        let steady = self.steady.as_ref().map(|s| {
            let usage = |u: &Usage| json!({
                "cpu_cores": u.cpu_cores, "rss_mean_mib": u.rss_mean_mib, "rss_max_mib": u.rss_max_mib,
                "containerd_cpu_cores": u.containerd_cpu_cores, "pods": u.pods,
            });
            json!({
                "seconds": s.seconds,
                "ledgerlet": usage(&s.ledgerlet),
                "kubelet": usage(&s.kubelet),
                "ratios": self.steady_figures().into_iter()
                    .map(|(n, l, k)| json!({"figure": n, "ratio": ratio(k, l)})).collect::<Vec<_>>(),
            })
        });
        let differences = self.differences.as_ref().map(|ds| {
            ds.iter()
                .map(|d| json!({
                    "spec": d.spec, "field": d.field, "ledgerlet": d.ledgerlet, "kubelet": d.kubelet,
                    "deliberate": differential::deliberate(d),
                }))
                .collect::<Vec<_>>()
        });
        json!({
            "meta": self.meta,
            "full": self.full,
            "rows": rows,
            "steady": steady,
            "status_specs": self.differences.as_ref().map(|_| differential::all().iter().map(|s| json!({"name": s.name, "what": s.what})).collect::<Vec<_>>()),
            "status_differences": differences,
            "targets": self.targets().into_iter().map(|(w, r, t)| json!({"what": w, "ratio": r, "target": t, "met": r >= t})).collect::<Vec<_>>(),
            "failures": self.failures(),
            "summary": self.summary(),
        })
    }

    /// The Markdown table (docs/performance.md leads with it).
    pub fn table(&self) -> String {
        let mut t = String::from(
            "| workload | figure | ledgerlet | kubelet | kubelet / ledgerlet |\n|---|---|---:|---:|---:|\n",
        );
        for r in &self.rows {
            for (q, l, k) in r.figures() {
                t += &format!(
                    "| {} | {q} | {l:.0} ms | {k:.0} ms | {:.2}× |\n",
                    r.name,
                    ratio(k, l)
                );
            }
        }
        if let Some(s) = &self.steady {
            for (n, l, k) in self.steady_figures() {
                t += &format!(
                    "| steady state, {} pods a node, {} s | {n} | {l:.3} | {k:.3} | {:.2}× |\n",
                    s.ledgerlet.pods,
                    s.seconds,
                    ratio(k, l)
                );
            }
        }
        if let Some(ds) = &self.differences {
            let unexplained = self.unexplained().len();
            t += &format!(
                "| differential status check, {} specs | differences | {} ({} deliberate) | | |\n",
                differential::all().len(),
                ds.len(),
                ds.len() - unexplained
            );
            for d in ds {
                t += &format!(
                    "|  | {}: {} | {} | {} | {} |\n",
                    d.spec,
                    d.field,
                    d.ledgerlet.as_deref().unwrap_or("(absent)"),
                    d.kubelet.as_deref().unwrap_or("(absent)"),
                    differential::deliberate(d).unwrap_or("UNEXPLAINED")
                );
            }
        }
        t
    }

    /// One line: every ratio kubelet / ledgerlet, then the status differences.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for r in &self.rows {
            let short = r
                .name
                .split(':')
                .next()
                .unwrap_or(&r.name)
                .split(' ')
                .next()
                .unwrap_or("");
            for (q, l, k) in r.figures() {
                parts.push(format!(
                    "{short}{}{q} {:.2}×",
                    if q.is_empty() { "" } else { " " },
                    ratio(k, l)
                ));
            }
        }
        for (n, l, k) in self.judged_steady_figures() {
            parts.push(format!(
                "{} {:.2}×",
                n.split(',').next().unwrap_or(n),
                ratio(k, l)
            ));
        }
        let status = match &self.differences {
            Some(ds) => format!(
                "; status differences: {} ({} unexplained)",
                ds.len(),
                self.unexplained().len()
            ),
            None => String::new(),
        };
        if parts.is_empty() {
            return format!("kubelet / ledgerlet: no timing{status}");
        }
        format!("kubelet / ledgerlet: {}{status}", parts.join(", "))
    }

    /// The `cargo test` check: every row has samples on both sides, every figure is a
    /// positive number.
    pub fn check_every_figure_is_made(&self) {
        assert_eq!(self.rows.len(), 4, "startup, exit, deletion and burst rows");
        for r in &self.rows {
            for (q, l, k) in r.figures() {
                assert!(
                    l > 0.0 && k > 0.0,
                    "{} {q}: ledgerlet {l}, kubelet {k}",
                    r.name
                );
            }
        }
        let steady = self.steady_figures();
        assert_eq!(steady.len(), 4, "the steady-state figures");
        for (n, l, k) in steady {
            assert!(
                l.is_finite() && k.is_finite() && l >= 0.0 && k >= 0.0,
                "{n}: {l} {k}"
            );
        }
        assert!(self
            .summary()
            .starts_with("kubelet / ledgerlet: startup p50 "));
    }
}
