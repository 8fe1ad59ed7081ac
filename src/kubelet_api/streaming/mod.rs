//! `/exec`, `/attach`, `/portForward` and `/run`: a command, an attachment or a port
//! forward in a pod, as the kubelet serves them (`server.go` `getExec`, `getAttach`,
//! `getPortForward`, `getRun`).
//!
//! Owns: the routes (with and without the pod UID in the path), the order of checks and the
//! kubelet's status codes and texts (a bad query 400, an unknown pod 404, no such running
//! container 500, a runtime error by its gRPC code as the kubelet's `streaming.WriteError`),
//! and the bound on open streams. The runtime's streaming server does the protocol work;
//! `proxy` joins the client to it. Must not: authenticate or authorize (the guard in front
//! does, as `nodes/proxy`), be served on the read-only port, log a command (it may hold a
//! secret), or hold the engine lock across an await.

pub mod locate;
pub mod options;
pub mod proxy;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Semaphore;
use tonic::Code;

use crate::cri::{v1, CriClient, CriError};
use crate::kubelet_api::container_logs::NodePods;

use self::locate::PodRef;

/// Streams open at once by default. The kubelet has no bound of its own; containerd's
/// streaming server keeps at most 1000 requests waiting.
pub const DEFAULT_MAX_STREAMS: usize = 1000;

/// What the endpoints reach.
#[derive(Clone)]
pub struct StreamingState {
    /// The pods the node runs (the kubelet's `GetPodByName`).
    pub pods: Arc<dyn NodePods>,
    /// The runtime: its containers, sandboxes and streaming calls.
    pub cri: CriClient,
    /// The node's name (only its own containers are reached).
    pub node_name: String,
    /// One permit per open stream; none left is 429.
    pub streams: Arc<Semaphore>,
}

impl StreamingState {
    /// The state for `node_name`'s pods on `cri`, with [`DEFAULT_MAX_STREAMS`].
    pub fn new(pods: Arc<dyn NodePods>, cri: CriClient, node_name: String) -> Self {
        StreamingState {
            pods,
            cri,
            node_name,
            streams: Arc::new(Semaphore::new(DEFAULT_MAX_STREAMS)),
        }
    }
}

/// The streaming routers, fully stated.
pub fn router(state: StreamingState) -> Router {
    Router::new()
        .route(
            "/exec/{namespace}/{pod}/{container}",
            get(exec_in).post(exec_in),
        )
        .route(
            "/exec/{namespace}/{pod}/{uid}/{container}",
            get(exec_in).post(exec_in),
        )
        .route(
            "/attach/{namespace}/{pod}/{container}",
            get(attach_to).post(attach_to),
        )
        .route(
            "/attach/{namespace}/{pod}/{uid}/{container}",
            get(attach_to).post(attach_to),
        )
        .route(
            "/portForward/{namespace}/{pod}",
            get(forward_ports).post(forward_ports),
        )
        .route(
            "/portForward/{namespace}/{pod}/{uid}",
            get(forward_ports).post(forward_ports),
        )
        .route("/run/{namespace}/{pod}/{container}", post(run_in))
        .route("/run/{namespace}/{pod}/{uid}/{container}", post(run_in))
        .with_state(state)
}

/// The target of a request: namespace, pod, UID (if in the path), container.
struct Target {
    namespace: String,
    pod: String,
    uid: Option<String>,
    container: String,
}

impl Target {
    /// The target of a route's path parameters (`uid` and `container` only where the route
    /// has them).
    fn from_path(mut params: HashMap<String, String>) -> Target {
        let mut take = |k: &str| params.remove(k);
        Target {
            namespace: take("namespace").unwrap_or_default(),
            pod: take("pod").unwrap_or_default(),
            uid: take("uid"),
            container: take("container").unwrap_or_default(),
        }
    }

    fn pod_ref<'a>(&'a self, node: &'a str) -> PodRef<'a> {
        PodRef {
            node,
            namespace: &self.namespace,
            name: &self.pod,
            uid: self.uid.as_deref(),
        }
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// The kubelet's `streaming.WriteError`: NotFound 404, ResourceExhausted 429 (retry after
/// the token TTL), anything else 500; the body is the error as a Go gRPC client prints it.
fn runtime_error(e: &CriError) -> Response {
    match e.code() {
        Code::NotFound => text(StatusCode::NOT_FOUND, e.grpc_text()),
        Code::ResourceExhausted => too_many(e.grpc_text()),
        _ => text(StatusCode::INTERNAL_SERVER_ERROR, e.grpc_text()),
    }
}

fn too_many(body: String) -> Response {
    let mut r = text(StatusCode::TOO_MANY_REQUESTS, body);
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("60"));
    r
}

fn no_pod() -> Response {
    text(StatusCode::NOT_FOUND, "pod does not exist")
}

/// The pod the request names, or the kubelet's 404.
async fn desired_pod(s: &StreamingState, t: &Target) -> Result<Pod, Response> {
    s.pods.pod(&t.namespace, &t.pod).await.ok_or_else(no_pod)
}

/// The running container's ID, or the response the kubelet gives (`missing` is its text).
async fn running(s: &StreamingState, t: &Target, missing: String) -> Result<String, Response> {
    match locate::running_container(&s.cri, &t.pod_ref(&s.node_name), &t.container).await {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(text(StatusCode::INTERNAL_SERVER_ERROR, missing)),
        Err(e) => Err(runtime_error(&e)),
    }
}

/// A stream permit and the upgrade check, taken before the runtime is asked for a URL (each
/// URL holds a slot in the runtime's request cache until it is used or expires).
fn ready_to_stream(
    s: &StreamingState,
    req: &Request,
) -> Result<tokio::sync::OwnedSemaphorePermit, Box<Response>> {
    if !proxy::is_upgrade_request(req) {
        return Err(Box::new(proxy::failure("Upgrade request required")));
    }
    s.streams.clone().try_acquire_owned().map_err(|_| {
        tracing::warn!(
            limit = DEFAULT_MAX_STREAMS,
            "kubelet API: too many open streams, refusing one"
        );
        Box::new(too_many("too many open streams, try again later".into()))
    })
}

async fn exec_in(
    State(s): State<StreamingState>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    let t = Target::from_path(params);
    let q = options::pairs(req.uri().query());
    let opts = match options::stream_options(&q) {
        Ok(o) => o,
        Err(m) => return text(StatusCode::BAD_REQUEST, m),
    };
    if let Err(r) = desired_pod(&s, &t).await {
        return r;
    }
    let missing = format!("container not found ({:?})", t.container);
    let id = match running(&s, &t, missing).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    let permit = match ready_to_stream(&s, &req) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let call = v1::ExecRequest {
        container_id: id,
        cmd: options::exec_command(&q),
        tty: opts.tty,
        stdin: opts.stdin,
        stdout: opts.stdout,
        stderr: opts.stderr,
    };
    match s.cri.exec(call).await {
        Ok(url) => {
            tracing::info!(namespace = %t.namespace, pod = %t.pod, container = %t.container, "kubelet API: exec stream");
            proxy::proxy_stream(req, &url, permit).await
        }
        Err(e) => runtime_error(&e),
    }
}

/// The `tty` of `container` in the pod's spec (regular, init or ephemeral).
fn spec_tty(pod: &Pod, container: &str) -> Option<bool> {
    let spec = pod.spec.as_ref()?;
    let mut regular = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    regular
        .find(|c| c.name == container)
        .map(|c| c.tty.unwrap_or(false))
        .or_else(|| {
            spec.ephemeral_containers
                .iter()
                .flatten()
                .find(|c| c.name == container)
                .map(|c| c.tty.unwrap_or(false))
        })
}

async fn attach_to(
    State(s): State<StreamingState>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    let t = Target::from_path(params);
    let q = options::pairs(req.uri().query());
    let opts = match options::stream_options(&q) {
        Ok(o) => o,
        Err(m) => return text(StatusCode::BAD_REQUEST, m),
    };
    let pod = match desired_pod(&s, &t).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let full_name = t.pod_ref(&s.node_name).full_name();
    let missing = format!("container {} not found in pod {full_name}", t.container);
    let id = match running(&s, &t, missing.clone()).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    let uid_differs = t
        .uid
        .as_deref()
        .is_some_and(|u| pod.metadata.uid.as_deref() != Some(u));
    if uid_differs {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("pod {full_name} not found"),
        );
    }
    // whether the process runs in a TTY was fixed when it started: the spec says
    let Some(tty) = spec_tty(&pod, &t.container) else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, missing);
    };
    let permit = match ready_to_stream(&s, &req) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let call = v1::AttachRequest {
        container_id: id,
        stdin: opts.stdin,
        tty,
        stdout: opts.stdout,
        stderr: opts.stderr,
    };
    match s.cri.attach(call).await {
        Ok(url) => {
            tracing::info!(namespace = %t.namespace, pod = %t.pod, container = %t.container, "kubelet API: attach stream");
            proxy::proxy_stream(req, &url, permit).await
        }
        Err(e) => runtime_error(&e),
    }
}

async fn forward_ports(
    State(s): State<StreamingState>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    let t = Target::from_path(params);
    let q = options::pairs(req.uri().query());
    let ports = match options::port_forward_ports(&q, proxy::is_websocket_request(&req)) {
        Ok(p) => p,
        Err(m) => return text(StatusCode::BAD_REQUEST, m),
    };
    let pod = match desired_pod(&s, &t).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if t.uid.as_deref().is_some_and(|u| u != uid) {
        return text(StatusCode::NOT_FOUND, "pod not found");
    }
    // the desired pod's sandbox, not an older one of the same name
    let by_uid = Target {
        uid: Some(uid),
        ..t
    };
    let sandbox = match locate::ready_sandbox(&s.cri, &by_uid.pod_ref(&s.node_name)).await {
        Ok(Some(id)) => id,
        Ok(None) => {
            let full_name = by_uid.pod_ref(&s.node_name).full_name();
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("pod not found ({full_name:?})"),
            );
        }
        Err(e) => return runtime_error(&e),
    };
    let permit = match ready_to_stream(&s, &req) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let call = v1::PortForwardRequest {
        pod_sandbox_id: sandbox,
        port: ports,
    };
    match s.cri.port_forward(call).await {
        Ok(url) => {
            tracing::info!(namespace = %by_uid.namespace, pod = %by_uid.pod, "kubelet API: port-forward stream");
            proxy::proxy_stream(req, &url, permit).await
        }
        Err(e) => runtime_error(&e),
    }
}

/// `/run`: the command through `ExecSync` without a time limit, stdout then stderr as the
/// body (the kubelet's `RunInContainer`); a non-zero exit is a 500 naming the code.
async fn run_in(
    State(s): State<StreamingState>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    let t = Target::from_path(params);
    if let Err(r) = desired_pod(&s, &t).await {
        return r;
    }
    let missing = format!("container not found ({:?})", t.container);
    let id = match running(&s, &t, missing).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    let cmd = options::run_command(&options::pairs(req.uri().query()));
    match s.cri.exec_sync(&id, cmd.clone(), 0).await {
        Ok(out) if out.exit_code == 0 => {
            let mut body = out.stdout;
            body.extend_from_slice(&out.stderr);
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Ok(out) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "command '{}' exited with {}: {}",
                cmd.join(" "),
                out.exit_code,
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.grpc_text()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_takes_the_tty_of_the_container_in_the_spec() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "a", "tty": true}, {"name": "b"}],
                "initContainers": [{"name": "i", "tty": true}],
                "ephemeralContainers": [{"name": "e", "tty": true}]
            }
        }))
        .unwrap();
        assert_eq!(spec_tty(&pod, "a"), Some(true));
        assert_eq!(spec_tty(&pod, "b"), Some(false));
        assert_eq!(spec_tty(&pod, "i"), Some(true));
        assert_eq!(spec_tty(&pod, "e"), Some(true));
        assert_eq!(spec_tty(&pod, "x"), None);
    }
}
