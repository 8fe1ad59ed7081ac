//! The node's HTTP server (the kubelet's read-only port, plus ledgerlet's debug endpoints).
//!
//! Owns `/healthz`, `/metrics` (see `metrics`), `/pods`, `/debug/ledger` (NDJSON; `?since=SEQ`,
//! `?pod=UID|NAMESPACE/NAME`, `?follow=true`), `/debug/state` and `/debug/events`. Must not
//! hold the engine lock while writing a response: it copies what it needs (records are
//! shared `Arc`s) and serialises outside the lock, so a slow client never slows the fold.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::StreamExt;

use crate::core::{pod, Node, Uid};
use crate::engine::Engine;
use crate::ledger::{codec, Record};
use crate::shell::events::EventLog;
use crate::sources::pleg::PlegHealth;

/// What the endpoints read.
#[derive(Clone)]
pub struct HttpState {
    /// The engine (locked briefly to copy state).
    pub engine: Arc<Mutex<Engine>>,
    /// Recent Kubernetes Events.
    pub events: Arc<EventLog>,
    /// PLEG health.
    pub pleg: Arc<PlegHealth>,
    /// Renders `/metrics`.
    pub prometheus: PrometheusHandle,
}

/// The router with every endpoint.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/metrics/probes", get(probe_metrics))
        .route("/pods", get(pods))
        .route("/debug/ledger", get(ledger))
        .route("/debug/state", get(state_json))
        .route("/debug/events", get(events))
        .with_state(state)
}

/// Serves `router` on `addr` until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    state: HttpState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn healthz(State(s): State<HttpState>) -> Response {
    match s.pleg.check() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]pleg failed: {e}\nhealthz check failed\n"),
        )
            .into_response(),
    }
}

/// `/metrics`: what the `metrics` facade recorded, then what the engine keeps itself (fold
/// statistics, pod gauges, the ledger; copied under a short lock), then the process metrics.
async fn metrics(State(s): State<HttpState>) -> Response {
    let mut text = super::exposition::Text(s.prometheus.render());
    if !text.0.is_empty() && !text.0.ends_with('\n') {
        text.0.push('\n');
    }
    {
        let engine = s.engine.lock().expect("engine");
        engine.observer().render(&mut text);
        super::state_metrics::render_node(engine.node(), &mut text);
        super::state_metrics::render_ledger(&engine.ledger().stats(), &mut text);
    }
    super::state_metrics::render_process(&mut text);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text.0,
    )
        .into_response()
}

async fn probe_metrics() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        super::probe_metrics::render(),
    )
        .into_response()
}

fn json(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The desired pods with the node's current status for each (a v1 `PodList`).
pub fn pod_list(node: &Node) -> serde_json::Value {
    let items: Vec<Pod> = node
        .pod_manager
        .iter()
        .map(|(uid, p)| {
            let mut p: Pod = (**p).clone();
            if let Some(v) = node.statuses.get(uid) {
                p.status = Some((*v.status).clone());
            }
            p
        })
        .collect();
    serde_json::json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": items,
    })
}

async fn pods(State(s): State<HttpState>) -> Response {
    let node = s.engine.lock().expect("engine").node().clone();
    json(serde_json::to_vec(&pod_list(&node)).expect("serialisable"))
}

async fn state_json(State(s): State<HttpState>) -> Response {
    let node = s.engine.lock().expect("engine").node().clone();
    json(serde_json::to_vec(&node).expect("serialisable"))
}

async fn events(State(s): State<HttpState>) -> Response {
    json(serde_json::to_vec(&s.events.snapshot()).expect("serialisable"))
}

fn resolve_pod(node: &Node, filter: &str) -> Option<Uid> {
    match filter.split_once('/') {
        Some((ns, name)) => {
            let full = pod::build_full_name(name, ns);
            node.pod_manager
                .iter()
                .find(|(_, p)| pod::full_name(p) == full)
                .map(|(u, _)| u.clone())
                .or_else(|| {
                    node.pod_workers
                        .statuses()
                        .find(|(_, s)| s.fullname == full)
                        .map(|(u, _)| u.clone())
                })
        }
        None => Some(Uid::new(filter)),
    }
}

fn line(r: &Record) -> Bytes {
    let mut s = codec::encode_record(r);
    s.push('\n');
    Bytes::from(s)
}

async fn ledger(State(s): State<HttpState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let since: u64 = match q.get("since").map(|v| v.parse()) {
        None => 0,
        Some(Ok(v)) => v,
        Some(Err(_)) => {
            return (
                StatusCode::BAD_REQUEST,
                "since must be a record seq (a number)\n",
            )
                .into_response()
        }
    };
    let follow = matches!(q.get("follow").map(String::as_str), Some("true" | "1"));
    let (records, follower, pod_uid) = {
        let engine = s.engine.lock().expect("engine");
        let pod_uid = match q.get("pod") {
            Some(f) => match resolve_pod(engine.node(), f) {
                Some(u) => Some(u),
                None => {
                    return (
                        StatusCode::NOT_FOUND,
                        format!("no pod {f:?} is known to this node\n"),
                    )
                        .into_response()
                }
            },
            None => None,
        };
        let records: Vec<Arc<Record>> = engine.ledger().since(since).cloned().collect();
        let follower = follow.then(|| engine.ledger().subscribe());
        (records, follower, pod_uid)
    };
    let last = records
        .last()
        .map(|r| r.seq)
        .unwrap_or(since.saturating_sub(1));
    let matches = move |r: &Record| match &pod_uid {
        Some(u) => r.event.pod_uid().as_ref() == Some(u),
        None => true,
    };
    let head: Vec<Result<Bytes, Infallible>> = records
        .iter()
        .filter(|r| matches(r))
        .map(|r| Ok(line(r)))
        .collect();
    let head = tokio_stream::iter(head);
    let body = match follower {
        None => Body::from_stream(head),
        Some(rx) => {
            let tail = BroadcastStream::new(rx).filter_map(move |item| match item {
                Ok(r) if r.seq > last && matches(&r) => Some(Ok::<Bytes, Infallible>(line(&r))),
                Ok(_) => None,
                Err(tokio_stream::wrappers::errors::BroadcastStreamRecvError::Lagged(n)) => {
                    Some(Ok(Bytes::from(format!(
                        "{{\"lagged\":{n},\"hint\":\"this follower fell behind; reconnect with ?since= the last seq you saw\"}}\n"
                    ))))
                }
            });
            Body::from_stream(head.chain(tail))
        }
    };
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}
