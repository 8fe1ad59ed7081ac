//! The node's HTTP server (the kubelet's read-only port, plus ledgerlet's debug endpoints).
//!
//! Owns `/healthz`, `/metrics` (see `observe::metrics`), `/metrics/probes`, `/pods`, `/debug/ledger`
//! (NDJSON; `?since=SEQ`, `?pod=UID|NAMESPACE/NAME`, `?kind=K1,K2`, `?follow=true`),
//! `/debug/state` and `/debug/events`; `/stats/summary` and `/metrics/resource` are
//! `shell::stats`'s router, mounted here as the kubelet's read-only port serves them. The same
//! router is served, behind authentication and authorization, on the kubelet API's secure port
//! (`kubelet_api::routes`). Must not hold the engine lock while writing a response: it copies
//! what it needs (records are shared `Arc`s) and serialises outside the lock, so a slow client
//! never slows the fold.

use std::collections::HashMap;
use std::convert::Infallible;
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

use crate::core::record::Record;
use crate::core::Node;
use crate::engine::Engine;
use crate::ledger::codec;
use crate::shell::events::EventLog;
use crate::sources::pleg::PlegHealth;
use crate::stream::cursor::{Cursor, Step};

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
    /// `/stats/summary` and `/metrics/resource`.
    pub stats: crate::shell::stats::StatsState,
}

/// Where the read-only port listens for `--address`: that address when it is a loopback one,
/// else the loopback address of its family. The port is unauthenticated, so nothing off the
/// host may reach it (the kubelet binds it to `--address`; ledgerlet keeps it local).
pub fn read_only_address(address: std::net::IpAddr) -> std::net::IpAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    match address {
        a if a.is_loopback() => a,
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

/// The router with every endpoint.
pub fn router(state: HttpState) -> Router {
    let stats = crate::shell::stats::router(state.stats.clone());
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/metrics/probes", get(probe_metrics))
        .route("/pods", get(pods))
        .route("/debug/ledger", get(ledger))
        .route("/debug/state", get(state_json))
        .route("/debug/events", get(events))
        .with_state(state)
        .merge(stats)
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

/// `/metrics`: the gauges read from state (pods and the ledger, under a short lock) and the
/// process metrics are set, then everything the `metrics` facade recorded is rendered.
async fn metrics(State(s): State<HttpState>) -> Response {
    {
        let engine = s.engine.lock().expect("engine");
        crate::observe::state_metrics::set_node(engine.node());
        crate::observe::state_metrics::set_ledger(&engine.ledger().stats());
    }
    crate::observe::metrics::collect_process();
    prometheus_text(crate::observe::metrics::render(&s.prometheus))
}

async fn probe_metrics() -> Response {
    prometheus_text(crate::observe::probe_metrics::render())
}

fn prometheus_text(body: String) -> Response {
    let text = "text/plain; version=0.0.4; charset=utf-8";
    ([(header::CONTENT_TYPE, text)], body).into_response()
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
    let kinds: Vec<String> = q
        .get("kind")
        .map(|k| k.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let pod_arg = q.get("pod").cloned().unwrap_or_default();
    // a NAMESPACE/NAME must be known to the node (a UID is taken as given)
    if let Some((ns, name)) = pod_arg.split_once('/') {
        let engine = s.engine.lock().expect("engine");
        let known = !crate::stream::server::uids_named(engine.node(), ns, name).is_empty();
        drop(engine);
        if !known {
            return (
                StatusCode::NOT_FOUND,
                format!("no pod {pod_arg:?} is known to this node\n"),
            )
                .into_response();
        }
    }
    let mut filter = match crate::stream::server::request_filter(&s.engine, &pod_arg, kinds) {
        Ok(f) => f,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    // A cursor reads the ledger at this client's pace: the fold never waits for it, and if
    // it falls behind retention it gets a `lagged` line saying what it missed and where it
    // continues.
    let mut cursor = Cursor::new(s.engine.clone(), since, follow);
    let body = async_stream(move |tx| async move {
        loop {
            let chunk = match cursor.next().await {
                Step::End => return,
                Step::Lagged {
                    missed_from,
                    missed_to,
                    resume_from,
                } => Bytes::from(format!(
                    "{{\"lagged\":{{\"missed_from\":{missed_from},\"missed_to\":{missed_to},\"resume_from\":{resume_from}}},\"hint\":\"records {missed_from}..={missed_to} were evicted before this follower read them; it continues at seq {resume_from}\"}}\n"
                )),
                Step::Records(batch) => {
                    let mut out = Vec::new();
                    for r in batch.iter().filter(|r| filter.matches(r)) {
                        out.extend_from_slice(&line(r));
                    }
                    if out.is_empty() {
                        continue;
                    }
                    Bytes::from(out)
                }
            };
            if tx.send(Ok::<Bytes, Infallible>(chunk)).await.is_err() {
                return;
            }
        }
    });
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

/// A body fed by a task through a small bounded channel (the task waits on a slow client;
/// nothing else does).
fn async_stream<F, Fut>(f: F) -> Body
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(f(tx));
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_only_port_stays_on_loopback_whatever_the_address() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(read_only_address(ip("0.0.0.0")), ip("127.0.0.1"));
        assert_eq!(read_only_address(ip("10.1.2.3")), ip("127.0.0.1"));
        assert_eq!(read_only_address(ip("127.0.0.2")), ip("127.0.0.2"));
        assert_eq!(read_only_address(ip("::")), ip("::1"));
        assert_eq!(read_only_address(ip("::1")), ip("::1"));
    }
}
