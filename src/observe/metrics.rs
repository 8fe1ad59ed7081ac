//! The Prometheus exposition of every metric, all recorded through the `metrics` facade.
//!
//! Owns the recorder installation, the bucket layouts (the kubelet's, where the kubelet has
//! the metric), the recorder's upkeep (histogram samples are folded into their buckets
//! every few seconds, so memory does not grow between scrapes) and the process collector
//! (`metrics-process`, collected at scrape time). Must not record metrics itself.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Prometheus' default buckets (`prometheus.DefBuckets`).
pub const DEF_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets for fold and command latencies (sub-millisecond resolution).
pub const FAST_BUCKETS: &[f64] = &[
    0.000_001, 0.000_005, 0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1,
];

/// `kubelet_pod_status_sync_duration_seconds` (the kubelet's `PodStatusSyncDuration`).
pub const STATUS_SYNC_BUCKETS: &[f64] =
    &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0];

/// The kubelet's `podStartupDurationBuckets` (pod start and SLI histograms).
pub const POD_STARTUP_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// `kubelet_runtime_operations_duration_seconds`: ExponentialBuckets(.005, 2.5, 14).
pub const RUNTIME_OPERATION_BUCKETS: &[f64] = &[
    0.005,
    0.0125,
    0.03125,
    0.078125,
    0.1953125,
    0.48828125,
    1.220703125,
    3.0517578125,
    7.62939453125,
    19.073486328125,
    47.6837158203125,
    119.20928955078125,
    298.0232238769531,
    745.0580596923828,
];

/// `rest_client_request_duration_seconds`.
pub const REST_CLIENT_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// Buckets for command durations (a sync may take a grace period of seconds to minutes).
pub const COMMAND_BUCKETS: &[f64] = &[
    0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// `kubelet_containers_per_pod_count` (ExponentialBuckets(1, 2, 5)).
pub const CONTAINERS_PER_POD_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0];

/// `ledgerlet_pod_worker_transition_duration_seconds` (a pod may live for hours).
pub const TRANSITION_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
];

/// How often histogram samples are folded into buckets.
pub const UPKEEP_PERIOD_MS: u64 = 5_000;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// A recorder with the bucket layouts (not installed): the agent installs one, tests render
/// their own.
pub fn builder() -> PrometheusBuilder {
    // by full name, or by prefix where the name ends in `*`
    let layouts: &[(&str, &[f64])] = &[
        ("kubelet_pleg_relist*", DEF_BUCKETS),
        (
            "kubelet_evented_pleg_connection_latency_seconds",
            DEF_BUCKETS,
        ),
        (
            "kubelet_pod_status_sync_duration_seconds",
            STATUS_SYNC_BUCKETS,
        ),
        (
            "kubelet_runtime_operations_duration_seconds",
            RUNTIME_OPERATION_BUCKETS,
        ),
        ("rest_client_request_duration_seconds", REST_CLIENT_BUCKETS),
        ("ledgerlet_command_duration_seconds", COMMAND_BUCKETS),
        ("ledgerlet_status_sync_wait_seconds", STATUS_SYNC_BUCKETS),
        (
            "ledgerlet_pod_worker_transition_duration_seconds",
            TRANSITION_BUCKETS,
        ),
        (
            "kubelet_containers_per_pod_count",
            CONTAINERS_PER_POD_BUCKETS,
        ),
        ("kubelet_pod_start_*", POD_STARTUP_BUCKETS),
        ("ledgerlet_*", FAST_BUCKETS),
    ];
    let mut b = PrometheusBuilder::new();
    for (name, buckets) in layouts {
        let m = match name.strip_suffix('*') {
            Some(prefix) => Matcher::Prefix(prefix.into()),
            None => Matcher::Full(name.to_string()),
        };
        b = b
            .set_buckets_for_metric(m, buckets)
            .expect("bucket layouts are non-empty");
    }
    b.set_buckets(DEF_BUCKETS)
        .expect("bucket layouts are non-empty")
}

/// Histograms whose names end in `count`: the exporter renders their count sample without
/// the `_count` suffix (it adds a suffix only when the name does not already end with it).
const COUNT_NAMED_HISTOGRAMS: &[&str] = &["kubelet_containers_per_pod_count"];

/// Counters with sub-second values: facade counters are whole numbers, so these are recorded
/// as gauges and declared counters here, as the kubelet's process collector declares them.
const FLOAT_COUNTERS: &[&str] = &["process_cpu_seconds_total"];

/// The text of `/metrics`: what `handle`'s recorder holds, each histogram's count sample
/// named `<name>_count`, each of [`FLOAT_COUNTERS`] typed a counter.
pub fn render(handle: &PrometheusHandle) -> String {
    let text = handle.render();
    // one pass over the lines, rewriting the few that need it
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let gauge = line
            .strip_prefix("# TYPE ")
            .and_then(|l| l.strip_suffix(" gauge\n"));
        let sample_of = |n: &&str| {
            line.strip_prefix(*n)
                .is_some_and(|r| r.starts_with([' ', '{']))
        };
        if let Some(name) = gauge.filter(|n| FLOAT_COUNTERS.contains(n)) {
            out += &format!("# TYPE {name} counter\n");
        } else if let Some(name) = COUNT_NAMED_HISTOGRAMS.iter().copied().find(sample_of) {
            out += &format!("{name}_count{}", &line[name.len()..]);
        } else {
            out += line;
        }
    }
    out
}

/// The process metrics (`process_*`), read now: called just before `/metrics` is rendered.
pub fn collect_process() {
    metrics_process::Collector::default().collect();
}

/// Installs the process-wide recorder once and returns the handle that renders `/metrics`.
/// Histogram upkeep runs on a small thread of its own.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let handle = match builder().install_recorder() {
                Ok(handle) => handle,
                // another recorder is installed (e.g. in a test process): render our own
                Err(_) => builder().build_recorder().handle(),
            };
            let h = handle.clone();
            let _ = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(Duration::from_millis(UPKEEP_PERIOD_MS));
                    h.run_upkeep();
                });
            super::describe::describe_all();
            metrics_process::Collector::default().describe();
            handle
        })
        .clone()
}

/// Rendering what a test records.
#[cfg(test)]
pub mod testing {
    use metrics_exporter_prometheus::PrometheusHandle;

    /// Runs `f` with a recorder of the agent's bucket layouts in scope on this thread (handles
    /// made in `f` record into it), handing it the handle that renders the recorder.
    pub fn recorded<T>(f: impl FnOnce(&PrometheusHandle) -> T) -> T {
        let recorder = super::builder().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || f(&handle))
    }

    /// The sum of the samples of `series` in exposition `text`: a metric name (every series
    /// of it) or a name with its labels.
    pub fn total(text: &str, series: &str) -> f64 {
        text.lines()
            .filter_map(|l| l.strip_prefix(series))
            .filter(|rest| rest.starts_with([' ', '{']) || series.ends_with('}'))
            .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_named_count_has_a_count_sample_named_count() {
        let text = testing::recorded(|h| {
            metrics::histogram!("kubelet_containers_per_pod_count").record(2.0);
            render(h)
        });
        assert!(
            text.contains("\nkubelet_containers_per_pod_count_count 1\n"),
            "{text}"
        );
        assert!(text.contains("\nkubelet_containers_per_pod_count_sum 2\n"));
        assert!(text.contains("kubelet_containers_per_pod_count_bucket{le=\"2\"} 1\n"));
        assert!(
            !text.contains("\nkubelet_containers_per_pod_count "),
            "{text}"
        );
    }

    /// This process's CPU time (user + system) from `/proc/self/stat`, in seconds.
    fn own_cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let rest = stat.rsplit_once(')').unwrap().1;
        let ticks: f64 = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|f| f.parse::<f64>().unwrap())
            .sum();
        // SAFETY: sysconf has no preconditions.
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
    }

    #[test]
    fn process_cpu_seconds_are_a_counter_with_sub_second_precision() {
        // work until the process has used a fraction of a second more than whole seconds
        let mut x = 0u64;
        while !(0.2..0.8).contains(&own_cpu_seconds().fract()) {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        let text = testing::recorded(|h| {
            collect_process();
            render(h)
        });
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{text}"
        );
        let seconds = testing::total(&text, "process_cpu_seconds_total");
        assert!(seconds > 0.0 && seconds.fract() > 0.0, "{seconds}");
    }

    #[test]
    fn bucket_layouts_are_the_kubelets() {
        assert_eq!(DEF_BUCKETS.len(), 11);
        assert_eq!(POD_STARTUP_BUCKETS.len(), 25);
        assert_eq!(POD_STARTUP_BUCKETS[0], 0.5);
        assert_eq!(POD_STARTUP_BUCKETS[24], 3600.0);
        // ExponentialBuckets(.005, 2.5, 14)
        for (i, b) in RUNTIME_OPERATION_BUCKETS.iter().enumerate() {
            let want = 0.005 * 2.5f64.powi(i as i32);
            assert!((b - want).abs() < 1e-9, "{i}: {b} != {want}");
        }
        assert_eq!(
            REST_CLIENT_BUCKETS,
            &[0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0]
        );
        assert_eq!(STATUS_SYNC_BUCKETS[10], 60.0);
    }
}
