//! Observability: OpenTelemetry traces (fold, command, CRI and status spans) and Prometheus
//! metrics with the kubelet's names.
//!
//! Owns metric names, span shapes and trace propagation (`http_server` serves the metrics).
//! Must not influence decisions: everything here is a side channel the core never reads.

pub mod command;
pub mod context;
pub mod describe;
pub mod fold;
pub mod grpc;
pub mod logging;
pub mod metrics;
pub mod otel;
pub mod probe_metrics;
pub mod rooted_pods;
pub mod starting_pods;
pub mod state_metrics;
