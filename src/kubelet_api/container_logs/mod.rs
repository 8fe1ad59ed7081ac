//! `GET /containerLogs/{namespace}/{pod}/{container}`: a container's log as the kubelet
//! serves it (`server.go` `getContainerLogs`, `GetKubeletContainerLogs`, `ReadLogs`), with
//! `follow`, `previous`, `tailLines` (and the legacy `tail`), `sinceSeconds`, `sinceTime`,
//! `timestamps` and `limitBytes`.
//!
//! Owns: the router and its state, the order of checks and the status codes: an
//! undecodable query 400, an invalid one 422 (the kubelet's `ValidatePodLogOptions`), an
//! unknown pod or a container not in its spec 404, no readable instance 400. Must not:
//! authenticate or authorize (the kubelet API server in front of it does, as `nodes/proxy`),
//! be served on the unauthenticated read-only port, or hold the engine lock while streaming.

pub mod cri_format;
pub mod flush_each;
pub mod locate;
pub mod options;
pub mod read;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use crate::cri::CriClient;
use crate::engine::Engine;

use self::cri_format::Writer;
use self::locate::Refusal;
use self::options::{LogOptions, QueryError};

/// Where the router finds the pods the node runs.
pub trait NodePods: Send + Sync + 'static {
    /// The pod `namespace/name` the node runs, with the node's current status for it.
    fn pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Option<Pod>>;
}

/// The node's pods as the engine holds them: the desired pod and the status manager's
/// status for it (the kubelet's `GetPodByName` and `statusManager.GetPodStatus`).
pub struct EnginePods(pub Arc<Mutex<Engine>>);

impl NodePods for EnginePods {
    fn pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Option<Pod>> {
        let engine = self.0.lock().expect("engine");
        let node = engine.node();
        let found = node.pod_manager.iter().find(|(_, p)| {
            p.metadata.namespace.as_deref().unwrap_or("default") == namespace
                && p.metadata.name.as_deref() == Some(name)
        });
        let pod = found.map(|(uid, p)| {
            let mut pod = (**p).clone();
            if let Some(v) = node.statuses.get(uid) {
                pod.status = Some((*v.status).clone());
            }
            pod
        });
        drop(engine);
        Box::pin(async move { pod })
    }
}

/// What the endpoint reads.
#[derive(Clone)]
pub struct ContainerLogsState {
    /// The pods the node runs.
    pub pods: Arc<dyn NodePods>,
    /// The runtime (log paths, whether a followed container still runs).
    pub cri: CriClient,
}

impl ContainerLogsState {
    /// The state of the agent: its engine and its runtime.
    pub fn for_engine(engine: Arc<Mutex<Engine>>, cri: CriClient) -> Self {
        ContainerLogsState {
            pods: Arc::new(EnginePods(engine)),
            cri,
        }
    }
}

/// The `/containerLogs` router, fully stated.
pub fn router(state: ContainerLogsState) -> Router {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .with_state(state)
}

fn text(status: StatusCode, body: String) -> Response {
    let mut body = body;
    if !body.ends_with('\n') {
        body.push('\n');
    }
    (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

async fn container_logs(
    State(s): State<ContainerLogsState>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let opts = match LogOptions::from_query(&q) {
        Ok(o) => o,
        Err(e @ QueryError::Undecodable(_)) => return text(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ QueryError::Invalid(_)) => {
            return text(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
    };
    let Some(pod) = s.pods.pod(&namespace, &pod_name).await else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {pod_name:?} does not exist"),
        );
    };
    let id = match locate::container_id(&pod, &container, opts.previous) {
        Ok(id) => id,
        Err(Refusal::NotInSpec(m)) => return text(StatusCode::NOT_FOUND, m),
        Err(Refusal::NoInstance(m)) => return text(StatusCode::BAD_REQUEST, m),
    };
    let log_path = match s.cri.container_status(&id, false).await {
        Ok(r) => r.status.map(|st| st.log_path).unwrap_or_default(),
        Err(e) => {
            tracing::debug!(container_id = %id, error = %e, "ContainerStatus for logs failed");
            String::new()
        }
    };
    if log_path.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            format!("unable to retrieve container logs for {id}"),
        );
    }
    let path = std::path::PathBuf::from(&log_path);
    let tail = opts.tail_lines.map(|n| n as u64);
    let file = match read::open(&path, tail).await {
        Ok(f) => f,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("failed to open log file {log_path:?}: {e}"),
            )
        }
    };
    let writer = Writer::new(
        opts.since(jiff::Timestamp::now()),
        opts.timestamps,
        opts.limit_bytes.map(|n| n as u64),
    );
    let req = read::Request {
        path,
        tail_lines: tail,
        follow: opts.follow,
        writer,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(read::CHANNEL_CHUNKS);
    let cri = s.cri.clone();
    let running = move || {
        let cri = cri.clone();
        let id = id.clone();
        async move {
            let running = crate::cri::v1::ContainerState::ContainerRunning as i32;
            match cri.container_status(&id, false).await {
                Ok(r) => r.status.is_some_and(|st| st.state == running),
                // not found: removed, so not running; other errors: keep following
                Err(e) => !e.is_not_found(),
            }
        }
    };
    tokio::spawn(read::stream(file, req, tx, running));
    let chunks = tokio_stream::wrappers::ReceiverStream::new(rx);
    let body = Body::from_stream(flush_each::FlushEach::new(chunks));
    ([(header::CONTENT_TYPE, "text/plain")], body).into_response()
}
