//! Observability: tracing spans and metrics around the fold (and, later, OTLP export,
//! Prometheus exposition and the HTTP server).
//!
//! Owns metric names and span shapes. Must not influence decisions: everything here is a
//! side channel the core never reads.

pub mod fold;
