//! The Prometheus exposition of every metric recorded through the `metrics` facade.
//!
//! Owns the recorder installation and the bucket layouts (the kubelet's, where the kubelet
//! has the metric). Must not record metrics itself.

use std::sync::OnceLock;

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

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder once and returns the handle that renders `/metrics`.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Prefix("kubelet_pleg_relist".into()), DEF_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("kubelet_evented_pleg_connection_latency_seconds".into()),
                        DEF_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("kubelet_pod_status_sync_duration_seconds".into()),
                        STATUS_SYNC_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Prefix("ledgerlet_".into()), FAST_BUCKETS)
                })
                .and_then(|b| b.set_buckets(DEF_BUCKETS))
                .expect("bucket layouts are non-empty");
            match builder.install_recorder() {
                Ok(handle) => handle,
                // another recorder is installed (e.g. in a test process): render our own
                Err(_) => PrometheusBuilder::new().build_recorder().handle(),
            }
        })
        .clone()
}
