//! The routes of the kubelet API: the node's shared HTTP endpoints, `/configz`, and the
//! routers other pieces hand in.
//!
//! Owns only the assembly (the handlers of `/healthz`, `/pods`, `/metrics`, `/debug/*` are
//! `http_server`'s, shared with the read-only port). Must not put a secret in `/configz`:
//! it names files, never their contents.

use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::http_server::{self, HttpState};

/// The running configuration as `/configz` serves it (`{"kubeletconfig": {...}}`).
#[derive(Clone, Debug)]
pub struct Configz(pub serde_json::Value);

/// Every route of the secure port: the shared endpoints, `/configz`, and `extra` (fully
/// stated routers from other pieces, e.g. `/containerLogs`; a path already taken panics at
/// start, as axum's merge does).
pub fn routes(state: HttpState, configz: Configz, extra: Router) -> Router {
    let body = serde_json::to_vec(&serde_json::json!({ "kubeletconfig": configz.0 }))
        .expect("configz serialises");
    let body = bytes::Bytes::from(body);
    http_server::router(state)
        .route(
            "/configz",
            get(move || {
                let body = body.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        body,
                    )
                        .into_response()
                }
            }),
        )
        .merge(extra)
}
