//! The kubelet's authenticated HTTPS API (`pkg/kubelet/server`, port 10250).
//!
//! Owns the secure server: TLS (`tls`), who a request is (`authn`), what it asks
//! (`attributes`), whether it may (`authz`, with `decision_cache`), the accept loop and the
//! guard (`server`), the routes (`routes`) and the endpoints that are routers of their own
//! (`container_logs`, `streaming`). Must not serve anything without authentication and authorization, and
//! must not let a token or key reach a log, a span or the ledger. The read-only port stays
//! `http_server`'s.

pub mod attributes;
pub mod authn;
pub mod authz;
pub mod container_logs;
pub mod decision_cache;
pub mod options;
pub mod routes;
pub mod server;
pub mod streaming;
pub mod tls;

pub use server::{guarded, serve, KubeletApi, Limits};
