//! [`CriClient`]: a CRI `runtime.v1` client over a unix socket.
//!
//! Owns: connecting to one CRI endpoint, per-call deadlines, and turning gRPC
//! failures into [`CriError`]s that name the method, the endpoint and the gRPC
//! status. Must not: retry, cache, or interpret results (the agent decides what
//! a `NotFound` from `StopContainer` means, not this client).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::Code;

use tracing::Instrument;

use super::v1;
use super::v1::image_service_client::ImageServiceClient;
use super::v1::runtime_service_client::RuntimeServiceClient;
use crate::observe::describe::{
    RUNTIME_OPERATIONS_DURATION_SECONDS, RUNTIME_OPERATIONS_ERRORS_TOTAL, RUNTIME_OPERATIONS_TOTAL,
};

/// The kubelet's default `--runtime-request-timeout` (2 minutes).
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 120_000;

/// Default time allowed to establish the unix-socket connection.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Largest gRPC message the client accepts (ExecSync may carry up to 16 MiB
/// of stdout plus 16 MiB of stderr).
pub const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// Options for [`CriClient::connect`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CriClientOptions {
    /// Deadline of each unary call, in milliseconds (kubelet:
    /// `runtimeRequestTimeout`). `StopContainer` and `ExecSync` get their own
    /// timeout added on top of this, as the kubelet does.
    pub request_timeout_ms: u64,
    /// Deadline for establishing the connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Deadline of `PullImage`, in milliseconds; `0` means none (the kubelet
    /// puts no fixed deadline on pulls).
    pub image_pull_timeout_ms: u64,
}

impl Default for CriClientOptions {
    fn default() -> Self {
        Self {
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            image_pull_timeout_ms: 0,
        }
    }
}

/// A failure talking to a CRI runtime.
#[derive(Debug, thiserror::Error)]
pub enum CriError {
    /// The endpoint string is not `unix:///path` or a bare path.
    #[error("invalid CRI endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The socket could not be connected to.
    #[error("cannot connect to CRI endpoint {endpoint}: {reason}")]
    Connect {
        /// The endpoint as `unix:///path`.
        endpoint: String,
        /// What went wrong, with its causes.
        reason: String,
    },
    /// An RPC returned a non-OK status (or hit the client-side deadline, which
    /// is reported as `DeadlineExceeded`).
    #[error("CRI {method} on {endpoint} failed: {code:?}: {message}")]
    Rpc {
        /// CRI method name, e.g. `CreateContainer`.
        method: &'static str,
        /// The endpoint as `unix:///path`.
        endpoint: String,
        /// gRPC status code.
        code: Code,
        /// gRPC status message.
        message: String,
    },
}

impl CriError {
    /// What the runtime said, as the kubelet shows it in a container's waiting message
    /// (the gRPC status message alone); the whole error for a failure that is not the
    /// runtime's answer.
    pub fn runtime_message(&self) -> String {
        match self {
            CriError::Rpc { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

impl CriError {
    /// The gRPC code of an [`CriError::Rpc`]; `Unavailable` for connection
    /// failures; `InvalidArgument` for a bad endpoint.
    pub fn code(&self) -> Code {
        match self {
            CriError::InvalidEndpoint { .. } => Code::InvalidArgument,
            CriError::Connect { .. } => Code::Unavailable,
            CriError::Rpc { code, .. } => *code,
        }
    }

    /// The error as a Go gRPC client prints it (`rpc error: code = Unknown desc = …`), the
    /// text the kubelet puts in its sync results and Events.
    pub fn grpc_text(&self) -> String {
        format!(
            "rpc error: code = {:?} desc = {}",
            self.code(),
            self.status_message()
        )
    }

    /// The gRPC status message alone (`status.Message()`), the text the kubelet puts in a
    /// container's waiting message and `Error:` event for a failed create or start.
    pub fn status_message(&self) -> String {
        match self {
            CriError::Rpc { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }

    /// True when the runtime said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Code::NotFound
    }
}

/// The gRPC service of a CRI method this client calls and the kubelet's `operation_type`
/// label for it (`pkg/kubelet/kuberuntime/instrumented_services.go`).
pub fn operation(method: &str) -> (&'static str, &'static str) {
    const RT: &str = "runtime.v1.RuntimeService";
    const IMG: &str = "runtime.v1.ImageService";
    match method {
        "Version" => (RT, "version"),
        "Status" => (RT, "status"),
        "RunPodSandbox" => (RT, "run_podsandbox"),
        "StopPodSandbox" => (RT, "stop_podsandbox"),
        "RemovePodSandbox" => (RT, "remove_podsandbox"),
        "PodSandboxStatus" => (RT, "podsandbox_status"),
        "ListPodSandbox" => (RT, "list_podsandbox"),
        "CreateContainer" => (RT, "create_container"),
        "StartContainer" => (RT, "start_container"),
        "StopContainer" => (RT, "stop_container"),
        "RemoveContainer" => (RT, "remove_container"),
        "ListContainers" => (RT, "list_containers"),
        "ContainerStatus" => (RT, "container_status"),
        "ExecSync" => (RT, "exec_sync"),
        "Exec" => (RT, "exec"),
        "Attach" => (RT, "attach"),
        "PortForward" => (RT, "port_forward"),
        "UpdateRuntimeConfig" => (RT, "update_runtime_config"),
        "ReopenContainerLog" => (RT, "reopen_container_log"),
        "ListImages" => (IMG, "list_images"),
        "ImageStatus" => (IMG, "image_status"),
        "PullImage" => (IMG, "pull_image"),
        "RemoveImage" => (IMG, "remove_image"),
        "ImageFsInfo" => (IMG, "image_fs_info"),
        _ => (RT, "unknown"),
    }
}

/// Parses `unix:///path`, `unix:/path` or a bare path into a socket path.
pub(crate) fn parse_unix_endpoint(endpoint: &str) -> Result<PathBuf, String> {
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if let Some(rest) = endpoint.strip_prefix("unix:") {
        rest
    } else if endpoint.contains("://") {
        return Err("only unix sockets are supported (unix:///path/to.sock or a bare path)".into());
    } else {
        endpoint
    };
    if path.is_empty() {
        return Err("empty socket path".into());
    }
    Ok(PathBuf::from(path))
}

/// Calls `$method` (the CRI name `$name`) on the `$service` client through [`CriClient::call`],
/// with the request timeout as deadline unless one is given.
macro_rules! rpc {
    ($self:ident, $service:ident . $method:ident, $name:literal, $req:expr) => {
        rpc!(
            $self,
            $service.$method,
            $name,
            $req,
            $self.default_deadline()
        )
    };
    ($self:ident, $service:ident . $method:ident, $name:literal, $req:expr, $deadline:expr) => {{
        let mut c = $self.$service.clone();
        $self
            .call(
                $name,
                $deadline,
                $req,
                |r| async move { c.$method(r).await },
            )
            .await
    }};
}

/// A client for one CRI runtime (RuntimeService + ImageService) on a unix
/// socket. Cheap to clone; clones share one HTTP/2 connection.
#[derive(Clone, Debug)]
pub struct CriClient {
    endpoint: String,
    runtime: RuntimeServiceClient<Channel>,
    image: ImageServiceClient<Channel>,
    /// containerd's event service on the same socket (other runtimes answer Unimplemented).
    events: super::containerd_events::events_client::EventsClient<Channel>,
    options: CriClientOptions,
}

impl CriClient {
    /// Connects to `endpoint` (`unix:///path/to.sock`, `unix:/path` or a bare
    /// path). Fails fast with [`CriError::Connect`] when the socket file is
    /// missing or nobody listens on it; never waits longer than
    /// `connect_timeout_ms`.
    pub async fn connect(endpoint: &str, options: CriClientOptions) -> Result<Self, CriError> {
        let path = parse_unix_endpoint(endpoint).map_err(|reason| CriError::InvalidEndpoint {
            endpoint: endpoint.to_string(),
            reason,
        })?;
        let shown = format!("unix://{}", path.display());
        let failed = |reason: String| CriError::Connect {
            endpoint: shown.clone(),
            reason,
        };
        match std::fs::metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let reason = "socket file does not exist (is the container runtime running?)";
                return Err(failed(reason.into()));
            }
            Err(e) => return Err(failed(format!("cannot stat socket: {e}"))),
        }

        // The URI is only used for the :authority header; the connector below
        // ignores it and dials the socket.
        let timeout = Duration::from_millis(options.connect_timeout_ms.max(1));
        let ep = Endpoint::from_static("http://localhost").connect_timeout(timeout);
        let sock: std::sync::Arc<Path> = path.into();
        let connector = tower::service_fn(move |_: Uri| {
            let sock = sock.clone();
            async move { UnixStream::connect(&*sock).await.map(TokioIo::new) }
        });
        let channel =
            match tokio::time::timeout(timeout, ep.connect_with_connector(connector)).await {
                Ok(Ok(ch)) => ch,
                Ok(Err(e)) => return Err(failed(crate::error_chain::error_chain(&e))),
                Err(_) => {
                    let reason = format!("timed out after {} ms", options.connect_timeout_ms);
                    return Err(failed(reason));
                }
            };
        Ok(Self {
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_SIZE),
            image: ImageServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_SIZE),
            events: super::containerd_events::events_client::EventsClient::new(channel),
            endpoint: shown,
            options,
        })
    }

    /// The endpoint as `unix:///path`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The options this client was built with.
    pub fn options(&self) -> &CriClientOptions {
        &self.options
    }

    fn default_deadline(&self) -> Option<Duration> {
        Some(Duration::from_millis(self.options.request_timeout_ms))
    }

    fn deadline_plus_secs(&self, secs: i64) -> Option<Duration> {
        let base = Duration::from_millis(self.options.request_timeout_ms);
        Some(base + Duration::from_secs(secs.max(0) as u64))
    }

    async fn call<Req, Resp, F, Fut>(
        &self,
        method: &'static str,
        deadline: Option<Duration>,
        msg: Req,
        f: F,
    ) -> Result<Resp, CriError>
    where
        F: FnOnce(tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let (service, operation) = operation(method);
        // a span only inside a traced command (the PLEG's relists and health checks would
        // otherwise start a trace each, every second)
        let span = if crate::observe::context::current().is_some() {
            tracing::info_span!(
                "cri",
                otel.name = %format_args!("{service}/{method}"),
                otel.kind = "client",
                rpc.system = "grpc",
                rpc.service = service,
                rpc.method = method,
                rpc.grpc.status_code = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
            )
        } else {
            tracing::Span::none()
        };
        let mut req = tonic::Request::new(msg);
        crate::observe::context::inject(&span, &mut req);
        let started = std::time::Instant::now();
        let result = self
            .call_with_deadline(deadline, req, f)
            .instrument(span.clone())
            .await;
        let elapsed = started.elapsed().as_secs_f64();
        metrics::counter!(RUNTIME_OPERATIONS_TOTAL, "operation_type" => operation).increment(1);
        metrics::histogram!(RUNTIME_OPERATIONS_DURATION_SECONDS, "operation_type" => operation)
            .record(elapsed);
        let code = match &result {
            Ok(_) => Code::Ok,
            Err(s) => s.code(),
        };
        if code != Code::Ok {
            metrics::counter!(RUNTIME_OPERATIONS_ERRORS_TOTAL, "operation_type" => operation)
                .increment(1);
            span.record("otel.status_code", "error");
        }
        span.record("rpc.grpc.status_code", code as i64);
        result
            .map(tonic::Response::into_inner)
            .map_err(|s| self.rpc_error(method, s))
    }

    async fn call_with_deadline<Req, Resp, F, Fut>(
        &self,
        deadline: Option<Duration>,
        mut req: tonic::Request<Req>,
        f: F,
    ) -> Result<tonic::Response<Resp>, tonic::Status>
    where
        F: FnOnce(tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        match deadline {
            Some(d) => {
                let expired = || {
                    tonic::Status::deadline_exceeded(format!(
                        "no response within {} ms (client deadline)",
                        d.as_millis()
                    ))
                };
                // The grpc-timeout header tells the server; tonic's channel
                // also enforces it locally, but reports that as `Cancelled`
                // ("Timeout expired"). Either way the caller sees
                // `DeadlineExceeded`, as a grpc-go client (the kubelet) would.
                req.set_timeout(d);
                let started = tokio::time::Instant::now();
                match tokio::time::timeout(d, f(req)).await {
                    Ok(Err(s)) if s.code() == Code::Cancelled && started.elapsed() >= d => {
                        Err(expired())
                    }
                    Ok(r) => r,
                    Err(_) => Err(expired()),
                }
            }
            None => f(req).await,
        }
    }

    /// The `CriError` of a failed `method`.
    fn rpc_error(&self, method: &'static str, s: tonic::Status) -> CriError {
        CriError::Rpc {
            method,
            endpoint: self.endpoint.clone(),
            code: s.code(),
            message: s.message().to_string(),
        }
    }

    // ----- RuntimeService -------------------------------------------------

    /// `Version`: runtime name, version and API version.
    pub async fn version(&self) -> Result<v1::VersionResponse, CriError> {
        let version = "0.1.0".into();
        rpc!(
            self,
            runtime.version,
            "Version",
            v1::VersionRequest { version }
        )
    }

    /// `Status`: runtime conditions (RuntimeReady, NetworkReady, ...).
    pub async fn status(&self, verbose: bool) -> Result<v1::StatusResponse, CriError> {
        rpc!(
            self,
            runtime.status,
            "Status",
            v1::StatusRequest { verbose }
        )
    }

    /// `UpdateRuntimeConfig` with the node's pod CIDRs (comma-separated), as the kubelet's
    /// `UpdatePodCIDR` does.
    pub async fn update_runtime_config(&self, pod_cidr: &str) -> Result<(), CriError> {
        let network_config = Some(v1::NetworkConfig {
            pod_cidr: pod_cidr.to_string(),
        });
        let runtime_config = Some(v1::RuntimeConfig { network_config });
        let req = v1::UpdateRuntimeConfigRequest { runtime_config };
        rpc!(
            self,
            runtime.update_runtime_config,
            "UpdateRuntimeConfig",
            req
        )
        .map(drop)
    }

    /// `RunPodSandbox`: returns the new sandbox id.
    pub async fn run_pod_sandbox(
        &self,
        config: v1::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String, CriError> {
        let req = v1::RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: runtime_handler.to_string(),
        };
        rpc!(self, runtime.run_pod_sandbox, "RunPodSandbox", req).map(|r| r.pod_sandbox_id)
    }

    /// `StopPodSandbox`.
    pub async fn stop_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<(), CriError> {
        let pod_sandbox_id = pod_sandbox_id.to_string();
        let req = v1::StopPodSandboxRequest { pod_sandbox_id };
        rpc!(self, runtime.stop_pod_sandbox, "StopPodSandbox", req).map(drop)
    }

    /// `RemovePodSandbox`.
    pub async fn remove_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<(), CriError> {
        let pod_sandbox_id = pod_sandbox_id.to_string();
        let req = v1::RemovePodSandboxRequest { pod_sandbox_id };
        rpc!(self, runtime.remove_pod_sandbox, "RemovePodSandbox", req).map(drop)
    }

    /// `PodSandboxStatus`.
    pub async fn pod_sandbox_status(
        &self,
        pod_sandbox_id: &str,
        verbose: bool,
    ) -> Result<v1::PodSandboxStatusResponse, CriError> {
        let pod_sandbox_id = pod_sandbox_id.to_string();
        let req = v1::PodSandboxStatusRequest {
            pod_sandbox_id,
            verbose,
        };
        rpc!(self, runtime.pod_sandbox_status, "PodSandboxStatus", req)
    }

    /// `ListPodSandbox`.
    pub async fn list_pod_sandbox(
        &self,
        filter: Option<v1::PodSandboxFilter>,
    ) -> Result<Vec<v1::PodSandbox>, CriError> {
        let req = v1::ListPodSandboxRequest { filter };
        rpc!(self, runtime.list_pod_sandbox, "ListPodSandbox", req).map(|r| r.items)
    }

    /// `CreateContainer`: returns the new container id.
    pub async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: v1::ContainerConfig,
        sandbox_config: v1::PodSandboxConfig,
    ) -> Result<String, CriError> {
        let req = v1::CreateContainerRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        };
        rpc!(self, runtime.create_container, "CreateContainer", req).map(|r| r.container_id)
    }

    /// `StartContainer`.
    pub async fn start_container(&self, container_id: &str) -> Result<(), CriError> {
        let container_id = container_id.to_string();
        let req = v1::StartContainerRequest { container_id };
        rpc!(self, runtime.start_container, "StartContainer", req).map(drop)
    }

    /// `StopContainer` with a grace period of `timeout_secs` (0 = kill now).
    /// The call deadline is `request_timeout + timeout_secs`, as in the kubelet.
    pub async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), CriError> {
        let req = v1::StopContainerRequest {
            container_id: container_id.to_string(),
            timeout: timeout_secs,
        };
        let deadline = self.deadline_plus_secs(timeout_secs);
        rpc!(self, runtime.stop_container, "StopContainer", req, deadline).map(drop)
    }

    /// `RemoveContainer`.
    pub async fn remove_container(&self, container_id: &str) -> Result<(), CriError> {
        let container_id = container_id.to_string();
        let req = v1::RemoveContainerRequest { container_id };
        rpc!(self, runtime.remove_container, "RemoveContainer", req).map(drop)
    }

    /// `ListContainers`.
    pub async fn list_containers(
        &self,
        filter: Option<v1::ContainerFilter>,
    ) -> Result<Vec<v1::Container>, CriError> {
        let req = v1::ListContainersRequest { filter };
        rpc!(self, runtime.list_containers, "ListContainers", req).map(|r| r.containers)
    }

    /// `ContainerStatus`.
    pub async fn container_status(
        &self,
        container_id: &str,
        verbose: bool,
    ) -> Result<v1::ContainerStatusResponse, CriError> {
        let container_id = container_id.to_string();
        let req = v1::ContainerStatusRequest {
            container_id,
            verbose,
        };
        rpc!(self, runtime.container_status, "ContainerStatus", req)
    }

    /// `ExecSync`: runs `cmd` in the container, `timeout_secs` 0 = no limit.
    /// The call deadline is `request_timeout + timeout_secs` (none when
    /// `timeout_secs` is 0), as in the kubelet. A runtime-side timeout comes
    /// back as [`CriError::Rpc`] with `Code::DeadlineExceeded`.
    pub async fn exec_sync(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        timeout_secs: i64,
    ) -> Result<v1::ExecSyncResponse, CriError> {
        let deadline = self
            .deadline_plus_secs(timeout_secs)
            .filter(|_| timeout_secs > 0);
        let req = v1::ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd,
            timeout: timeout_secs,
        };
        rpc!(self, runtime.exec_sync, "ExecSync", req, deadline)
    }

    /// `Exec`: the URL of the runtime's streaming server where `req`'s command will run.
    pub async fn exec(&self, req: v1::ExecRequest) -> Result<String, CriError> {
        rpc!(self, runtime.exec, "Exec", req).map(|r| r.url)
    }

    /// `Attach`: the URL of the runtime's streaming server attached to the container's
    /// process.
    pub async fn attach(&self, req: v1::AttachRequest) -> Result<String, CriError> {
        rpc!(self, runtime.attach, "Attach", req).map(|r| r.url)
    }

    /// `PortForward`: the URL of the runtime's streaming server forwarding into the sandbox's
    /// network namespace.
    pub async fn port_forward(&self, req: v1::PortForwardRequest) -> Result<String, CriError> {
        rpc!(self, runtime.port_forward, "PortForward", req).map(|r| r.url)
    }

    /// `GetContainerEvents`: opens the server stream. Establishing it is bound
    /// by the request timeout; the stream itself has no deadline. Items are
    /// raw `tonic::Status` errors; a runtime that drops a lagging watcher ends
    /// the stream, after which the caller should relist and resubscribe.
    pub async fn get_container_events(
        &self,
    ) -> Result<tonic::Streaming<v1::ContainerEventResponse>, CriError> {
        let mut c = self.runtime.clone();
        let d = Duration::from_millis(self.options.request_timeout_ms);
        let fut = c.get_container_events(tonic::Request::new(v1::GetEventsRequest {}));
        let res = tokio::time::timeout(d, fut).await.unwrap_or_else(|_| {
            Err(tonic::Status::deadline_exceeded(format!(
                "stream not established within {} ms (client deadline)",
                d.as_millis()
            )))
        });
        res.map(tonic::Response::into_inner)
            .map_err(|s| self.rpc_error("GetContainerEvents", s))
    }

    /// containerd's `Subscribe` to task deletes in the CRI plugin's namespace (`k8s.io`):
    /// what the PLEG listens to when the runtime has no `GetContainerEvents`. containerd
    /// 1.6's CRI plugin deletes an exited container's task before it shows the exit, so the
    /// delete, not the exit, is when an inspection can see it. A runtime that is not containerd answers `Unimplemented`. The
    /// call returns when the first event comes: run it on a task of its own.
    pub async fn subscribe_task_deletes(
        &self,
    ) -> Result<tonic::Streaming<super::containerd_events::Envelope>, CriError> {
        // no deadline: containerd sends the response headers with the first event, which
        // may be a long time coming
        let mut c = self.events.clone();
        let req = super::containerd_events::SubscribeRequest {
            filters: vec![r#"namespace=="k8s.io",topic=="/tasks/delete""#.to_string()],
        };
        c.subscribe(tonic::Request::new(req))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.rpc_error("Subscribe", s))
    }

    /// `ReopenContainerLog` (helper E, log rotation): asks the runtime to write the
    /// container's output to a fresh file at its log path after the old one was renamed.
    pub async fn reopen_container_log(&self, container_id: &str) -> Result<(), CriError> {
        let container_id = container_id.to_string();
        let req = v1::ReopenContainerLogRequest { container_id };
        rpc!(
            self,
            runtime.reopen_container_log,
            "ReopenContainerLog",
            req
        )
        .map(drop)
    }

    // ----- RuntimeService: stats (helper F: /stats/summary) -----------------

    /// `ListContainerStats`: the cumulative CPU, memory and writable-layer usage of the
    /// running containers that `filter` selects.
    pub async fn list_container_stats(
        &self,
        filter: Option<v1::ContainerStatsFilter>,
    ) -> Result<Vec<v1::ContainerStats>, CriError> {
        let req = v1::ListContainerStatsRequest { filter };
        rpc!(
            self,
            runtime.list_container_stats,
            "ListContainerStats",
            req
        )
        .map(|r| r.stats)
    }

    /// `ListPodSandboxStats`: the usage of the pod sandboxes that `filter` selects (their
    /// pod cgroup, network and processes).
    pub async fn list_pod_sandbox_stats(
        &self,
        filter: Option<v1::PodSandboxStatsFilter>,
    ) -> Result<Vec<v1::PodSandboxStats>, CriError> {
        let req = v1::ListPodSandboxStatsRequest { filter };
        rpc!(
            self,
            runtime.list_pod_sandbox_stats,
            "ListPodSandboxStats",
            req
        )
        .map(|r| r.stats)
    }

    // ----- ImageService ---------------------------------------------------

    /// `ListImages`.
    pub async fn list_images(
        &self,
        filter: Option<v1::ImageFilter>,
    ) -> Result<Vec<v1::Image>, CriError> {
        let req = v1::ListImagesRequest { filter };
        rpc!(self, image.list_images, "ListImages", req).map(|r| r.images)
    }

    /// `ImageStatus`; `image` is `None` in the response when not present.
    pub async fn image_status(
        &self,
        image: v1::ImageSpec,
        verbose: bool,
    ) -> Result<v1::ImageStatusResponse, CriError> {
        let image = Some(image);
        let req = v1::ImageStatusRequest { image, verbose };
        rpc!(self, image.image_status, "ImageStatus", req)
    }

    /// `PullImage`: returns the image ref. Deadline: `image_pull_timeout_ms`
    /// (none when 0).
    pub async fn pull_image(
        &self,
        image: v1::ImageSpec,
        auth: Option<v1::AuthConfig>,
        sandbox_config: Option<v1::PodSandboxConfig>,
    ) -> Result<String, CriError> {
        let deadline = match self.options.image_pull_timeout_ms {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        };
        let req = v1::PullImageRequest {
            image: Some(image),
            auth,
            sandbox_config,
        };
        rpc!(self, image.pull_image, "PullImage", req, deadline).map(|r| r.image_ref)
    }

    /// `RemoveImage`.
    pub async fn remove_image(&self, image: v1::ImageSpec) -> Result<(), CriError> {
        let req = v1::RemoveImageRequest { image: Some(image) };
        rpc!(self, image.remove_image, "RemoveImage", req).map(drop)
    }

    /// `ImageFsInfo`.
    pub async fn image_fs_info(&self) -> Result<v1::ImageFsInfoResponse, CriError> {
        rpc!(
            self,
            image.image_fs_info,
            "ImageFsInfo",
            v1::ImageFsInfoRequest {}
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_forms_parse_to_socket_paths() {
        assert_eq!(
            parse_unix_endpoint("unix:///run/x.sock").unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert_eq!(
            parse_unix_endpoint("unix:/run/x.sock").unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert_eq!(
            parse_unix_endpoint("/run/x.sock").unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert!(parse_unix_endpoint("tcp://127.0.0.1:1").is_err());
        assert!(parse_unix_endpoint("unix://").is_err());
    }

    #[test]
    fn rpc_error_names_method_endpoint_and_code() {
        let e = CriError::Rpc {
            method: "CreateContainer",
            endpoint: "unix:///x.sock".into(),
            code: Code::InvalidArgument,
            message: "bad".into(),
        };
        assert_eq!(
            e.to_string(),
            "CRI CreateContainer on unix:///x.sock failed: InvalidArgument: bad"
        );
    }
}
