//! Observability: OpenTelemetry traces (fold, command, CRI and status spans), Prometheus
//! metrics with the kubelet's names, and the node's HTTP server.
//!
//! Owns metric names, span shapes, trace propagation and the HTTP endpoints. Must not
//! influence decisions: everything here is a side channel the core never reads.

pub mod command;
pub mod context;
pub mod describe;
pub mod fold;
pub mod grpc;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod otel;
pub mod probe_metrics;
pub mod rooted_pods;
pub mod starting_pods;
pub mod state_metrics;
