//! `/metrics/probes`: the kubelet's prober metrics, in a registry of their own (upstream
//! serves them apart from `/metrics`).
//!
//! Owns `prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`,
//! `prober_probe_duration_seconds{probe_type,container,pod,namespace}` (successful runs
//! only, Prometheus' default buckets, as upstream) and `process_start_time_seconds`. A
//! series not updated for `IDLE_TIMEOUT` is dropped, so pods that come and go do not grow
//! the registry without bound (upstream deletes a worker's series when it stops). Must not
//! influence decisions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use metrics_util::MetricKindMask;

use super::metrics::DEF_BUCKETS;
use crate::core::pod;
use crate::core::probes::{ProbeCommand, ProbeFinished, RunResult};

/// Probe runs, by type, result, container and pod.
pub const PROBE_TOTAL: &str = "prober_probe_total";
/// Duration of successful probe runs.
pub const PROBE_DURATION_SECONDS: &str = "prober_probe_duration_seconds";
/// Series not updated for this long are dropped.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Every this many recorded runs, idle series are pruned and histograms drained even if
/// nobody scrapes.
const UPKEEP_EVERY_RUNS: u64 = 1024;

struct Registry {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    runs: AtomicU64,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(PROBE_DURATION_SECONDS.into()), DEF_BUCKETS)
            .expect("the bucket layout is non-empty")
            .idle_timeout(
                MetricKindMask::COUNTER | MetricKindMask::HISTOGRAM,
                Some(IDLE_TIMEOUT),
            )
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::describe_counter!(
                PROBE_TOTAL,
                "Cumulative number of a liveness, readiness or startup probe for a container by result."
            );
            metrics::describe_histogram!(
                PROBE_DURATION_SECONDS,
                metrics::Unit::Seconds,
                "Duration in seconds for a probe response."
            );
            let started = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            metrics::gauge!("process_start_time_seconds").set(started);
        });
        Registry {
            recorder,
            handle,
            runs: AtomicU64::new(0),
        }
    })
}

/// Records one finished probe run.
pub fn record(cmd: &ProbeCommand, done: &ProbeFinished) {
    let r = registry();
    let probe_type = cmd.probe.label();
    let container = cmd.container.clone();
    let pod_name = pod::name(&cmd.pod).to_string();
    let namespace = pod::namespace(&cmd.pod).to_string();
    metrics::with_local_recorder(&r.recorder, || {
        metrics::counter!(
            PROBE_TOTAL,
            "probe_type" => probe_type,
            "result" => done.result.metric_label(),
            "container" => container.clone(),
            "pod" => pod_name.clone(),
            "namespace" => namespace.clone(),
            "pod_uid" => cmd.uid.to_string(),
        )
        .increment(1);
        if matches!(done.result, RunResult::Success | RunResult::Warning) {
            metrics::histogram!(
                PROBE_DURATION_SECONDS,
                "probe_type" => probe_type,
                "container" => container,
                "pod" => pod_name,
                "namespace" => namespace,
            )
            .record(done.duration_ms as f64 / 1000.0);
        }
    });
    if r.runs.fetch_add(1, Ordering::Relaxed) % UPKEEP_EVERY_RUNS == UPKEEP_EVERY_RUNS - 1 {
        r.handle.run_upkeep();
        let _ = r.handle.render();
    }
}

/// The Prometheus text of `/metrics/probes`.
pub fn render() -> String {
    registry().handle.render()
}
