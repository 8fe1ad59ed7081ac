//! ledgerlet: a Kubernetes node agent built as an event-sourced reconciler.
//!
//! Every input becomes an immutable record in the [`ledger`]; pure reducers in [`core`] fold
//! records into state and commands; the [`shell`] carries out commands and reports their
//! outcomes as new records. See docs/architecture.md.

pub mod bounded_map;
pub mod cli;
pub mod core;
pub mod cri;
pub mod daemon;
pub mod engine;
pub mod error_chain;
pub mod http_server;
pub mod kubelet_api;
pub mod ledger;
pub mod observe;
pub mod postmortem;
pub mod runtime;
pub mod shell;
pub mod sim;
pub mod sources;
pub mod stream;
