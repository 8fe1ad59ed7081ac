//! Observability: tracing spans and metrics around the fold, Prometheus exposition, and the
//! node's HTTP server.
//!
//! Owns metric names, span shapes and the HTTP endpoints. Must not influence decisions:
//! everything here is a side channel the core never reads.

pub mod fold;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod probe_metrics;
