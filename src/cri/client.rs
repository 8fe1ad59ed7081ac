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
    /// The gRPC code of an [`CriError::Rpc`]; `Unavailable` for connection
    /// failures; `InvalidArgument` for a bad endpoint.
    pub fn code(&self) -> Code {
        match self {
            CriError::InvalidEndpoint { .. } => Code::InvalidArgument,
            CriError::Connect { .. } => Code::Unavailable,
            CriError::Rpc { code, .. } => *code,
        }
    }

    /// True when the runtime said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Code::NotFound
    }
}

/// The gRPC service of a CRI method and the kubelet's `operation_type` label for it
/// (`pkg/kubelet/kuberuntime/instrumented_services.go`).
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
        "UpdateContainerResources" => (RT, "update_container"),
        "ReopenContainerLog" => (RT, "reopen_container_log"),
        "ExecSync" => (RT, "exec_sync"),
        "Exec" => (RT, "exec"),
        "Attach" => (RT, "attach"),
        "PortForward" => (RT, "port_forward"),
        "ContainerStats" => (RT, "container_stats"),
        "ListContainerStats" => (RT, "list_container_stats"),
        "PodSandboxStats" => (RT, "podsandbox_stats"),
        "ListPodSandboxStats" => (RT, "list_podsandbox_stats"),
        "UpdateRuntimeConfig" => (RT, "update_runtime_config"),
        "GetContainerEvents" => (RT, "get_container_events"),
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

/// A client for one CRI runtime (RuntimeService + ImageService) on a unix
/// socket. Cheap to clone; clones share one HTTP/2 connection.
#[derive(Clone, Debug)]
pub struct CriClient {
    endpoint: String,
    runtime: RuntimeServiceClient<Channel>,
    image: ImageServiceClient<Channel>,
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
        match std::fs::metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CriError::Connect {
                    endpoint: shown,
                    reason: "socket file does not exist (is the container runtime running?)".into(),
                })
            }
            Err(e) => {
                return Err(CriError::Connect {
                    endpoint: shown,
                    reason: format!("cannot stat socket: {e}"),
                })
            }
        }

        // The URI is only used for the :authority header; the connector below
        // ignores it and dials the socket.
        let ep = Endpoint::from_static("http://localhost")
            .connect_timeout(Duration::from_millis(options.connect_timeout_ms.max(1)));
        let sock: std::sync::Arc<Path> = path.into();
        let connector = tower::service_fn(move |_: Uri| {
            let sock = sock.clone();
            async move { UnixStream::connect(&*sock).await.map(TokioIo::new) }
        });
        let connect = ep.connect_with_connector(connector);
        let channel = match tokio::time::timeout(
            Duration::from_millis(options.connect_timeout_ms.max(1)),
            connect,
        )
        .await
        {
            Ok(Ok(ch)) => ch,
            Ok(Err(e)) => {
                return Err(CriError::Connect {
                    endpoint: shown,
                    reason: crate::error_chain::error_chain(&e),
                })
            }
            Err(_) => {
                return Err(CriError::Connect {
                    endpoint: shown,
                    reason: format!("timed out after {} ms", options.connect_timeout_ms),
                })
            }
        };
        Ok(Self {
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_SIZE),
            image: ImageServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE),
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
            .map_err(|s| CriError::Rpc {
                method,
                endpoint: self.endpoint.clone(),
                code: s.code(),
                message: s.message().to_string(),
            })
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

    // ----- RuntimeService -------------------------------------------------

    /// `Version`: runtime name, version and API version.
    pub async fn version(&self) -> Result<v1::VersionResponse, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::VersionRequest {
            version: "0.1.0".into(),
        };
        self.call("Version", self.default_deadline(), req, |r| async move {
            c.version(r).await
        })
        .await
    }

    /// `Status`: runtime conditions (RuntimeReady, NetworkReady, ...).
    pub async fn status(&self, verbose: bool) -> Result<v1::StatusResponse, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::StatusRequest { verbose };
        self.call("Status", self.default_deadline(), req, |r| async move {
            c.status(r).await
        })
        .await
    }

    /// `UpdateRuntimeConfig` with the node's pod CIDRs (comma-separated), as the kubelet's
    /// `UpdatePodCIDR` does.
    pub async fn update_runtime_config(&self, pod_cidr: &str) -> Result<(), CriError> {
        let mut c = self.runtime.clone();
        let req = v1::UpdateRuntimeConfigRequest {
            runtime_config: Some(v1::RuntimeConfig {
                network_config: Some(v1::NetworkConfig {
                    pod_cidr: pod_cidr.to_string(),
                }),
            }),
        };
        self.call(
            "UpdateRuntimeConfig",
            self.default_deadline(),
            req,
            |r| async move { c.update_runtime_config(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `RunPodSandbox`: returns the new sandbox id.
    pub async fn run_pod_sandbox(
        &self,
        config: v1::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: runtime_handler.to_string(),
        };
        self.call(
            "RunPodSandbox",
            self.default_deadline(),
            req,
            |r| async move { c.run_pod_sandbox(r).await },
        )
        .await
        .map(|r| r.pod_sandbox_id)
    }

    /// `StopPodSandbox`.
    pub async fn stop_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<(), CriError> {
        let mut c = self.runtime.clone();
        let req = v1::StopPodSandboxRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
        };
        self.call(
            "StopPodSandbox",
            self.default_deadline(),
            req,
            |r| async move { c.stop_pod_sandbox(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `RemovePodSandbox`.
    pub async fn remove_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<(), CriError> {
        let mut c = self.runtime.clone();
        let req = v1::RemovePodSandboxRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
        };
        self.call(
            "RemovePodSandbox",
            self.default_deadline(),
            req,
            |r| async move { c.remove_pod_sandbox(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `PodSandboxStatus`.
    pub async fn pod_sandbox_status(
        &self,
        pod_sandbox_id: &str,
        verbose: bool,
    ) -> Result<v1::PodSandboxStatusResponse, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::PodSandboxStatusRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
            verbose,
        };
        self.call(
            "PodSandboxStatus",
            self.default_deadline(),
            req,
            |r| async move { c.pod_sandbox_status(r).await },
        )
        .await
    }

    /// `ListPodSandbox`.
    pub async fn list_pod_sandbox(
        &self,
        filter: Option<v1::PodSandboxFilter>,
    ) -> Result<Vec<v1::PodSandbox>, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::ListPodSandboxRequest { filter };
        self.call(
            "ListPodSandbox",
            self.default_deadline(),
            req,
            |r| async move { c.list_pod_sandbox(r).await },
        )
        .await
        .map(|r| r.items)
    }

    /// `CreateContainer`: returns the new container id.
    pub async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: v1::ContainerConfig,
        sandbox_config: v1::PodSandboxConfig,
    ) -> Result<String, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::CreateContainerRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        };
        self.call(
            "CreateContainer",
            self.default_deadline(),
            req,
            |r| async move { c.create_container(r).await },
        )
        .await
        .map(|r| r.container_id)
    }

    /// `StartContainer`.
    pub async fn start_container(&self, container_id: &str) -> Result<(), CriError> {
        let mut c = self.runtime.clone();
        let req = v1::StartContainerRequest {
            container_id: container_id.to_string(),
        };
        self.call(
            "StartContainer",
            self.default_deadline(),
            req,
            |r| async move { c.start_container(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `StopContainer` with a grace period of `timeout_secs` (0 = kill now).
    /// The call deadline is `request_timeout + timeout_secs`, as in the kubelet.
    pub async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), CriError> {
        let mut c = self.runtime.clone();
        let req = v1::StopContainerRequest {
            container_id: container_id.to_string(),
            timeout: timeout_secs,
        };
        self.call(
            "StopContainer",
            self.deadline_plus_secs(timeout_secs),
            req,
            |r| async move { c.stop_container(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `RemoveContainer`.
    pub async fn remove_container(&self, container_id: &str) -> Result<(), CriError> {
        let mut c = self.runtime.clone();
        let req = v1::RemoveContainerRequest {
            container_id: container_id.to_string(),
        };
        self.call(
            "RemoveContainer",
            self.default_deadline(),
            req,
            |r| async move { c.remove_container(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `ListContainers`.
    pub async fn list_containers(
        &self,
        filter: Option<v1::ContainerFilter>,
    ) -> Result<Vec<v1::Container>, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::ListContainersRequest { filter };
        self.call(
            "ListContainers",
            self.default_deadline(),
            req,
            |r| async move { c.list_containers(r).await },
        )
        .await
        .map(|r| r.containers)
    }

    /// `ContainerStatus`.
    pub async fn container_status(
        &self,
        container_id: &str,
        verbose: bool,
    ) -> Result<v1::ContainerStatusResponse, CriError> {
        let mut c = self.runtime.clone();
        let req = v1::ContainerStatusRequest {
            container_id: container_id.to_string(),
            verbose,
        };
        self.call(
            "ContainerStatus",
            self.default_deadline(),
            req,
            |r| async move { c.container_status(r).await },
        )
        .await
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
        let mut c = self.runtime.clone();
        let deadline = if timeout_secs > 0 {
            self.deadline_plus_secs(timeout_secs)
        } else {
            None
        };
        let req = v1::ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd,
            timeout: timeout_secs,
        };
        self.call("ExecSync", deadline, req, |r| async move {
            c.exec_sync(r).await
        })
        .await
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
        let res = match tokio::time::timeout(d, fut).await {
            Ok(r) => r,
            Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                "stream not established within {} ms (client deadline)",
                d.as_millis()
            ))),
        };
        res.map(tonic::Response::into_inner)
            .map_err(|s| CriError::Rpc {
                method: "GetContainerEvents",
                endpoint: self.endpoint.clone(),
                code: s.code(),
                message: s.message().to_string(),
            })
    }

    // ----- ImageService ---------------------------------------------------

    /// `ListImages`.
    pub async fn list_images(
        &self,
        filter: Option<v1::ImageFilter>,
    ) -> Result<Vec<v1::Image>, CriError> {
        let mut c = self.image.clone();
        let req = v1::ListImagesRequest { filter };
        self.call("ListImages", self.default_deadline(), req, |r| async move {
            c.list_images(r).await
        })
        .await
        .map(|r| r.images)
    }

    /// `ImageStatus`; `image` is `None` in the response when not present.
    pub async fn image_status(
        &self,
        image: v1::ImageSpec,
        verbose: bool,
    ) -> Result<v1::ImageStatusResponse, CriError> {
        let mut c = self.image.clone();
        let req = v1::ImageStatusRequest {
            image: Some(image),
            verbose,
        };
        self.call(
            "ImageStatus",
            self.default_deadline(),
            req,
            |r| async move { c.image_status(r).await },
        )
        .await
    }

    /// `PullImage`: returns the image ref. Deadline: `image_pull_timeout_ms`
    /// (none when 0).
    pub async fn pull_image(
        &self,
        image: v1::ImageSpec,
        auth: Option<v1::AuthConfig>,
        sandbox_config: Option<v1::PodSandboxConfig>,
    ) -> Result<String, CriError> {
        let mut c = self.image.clone();
        let deadline = match self.options.image_pull_timeout_ms {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        };
        let req = v1::PullImageRequest {
            image: Some(image),
            auth,
            sandbox_config,
        };
        self.call("PullImage", deadline, req, |r| async move {
            c.pull_image(r).await
        })
        .await
        .map(|r| r.image_ref)
    }

    /// `RemoveImage`.
    pub async fn remove_image(&self, image: v1::ImageSpec) -> Result<(), CriError> {
        let mut c = self.image.clone();
        let req = v1::RemoveImageRequest { image: Some(image) };
        self.call(
            "RemoveImage",
            self.default_deadline(),
            req,
            |r| async move { c.remove_image(r).await },
        )
        .await
        .map(|_| ())
    }

    /// `ImageFsInfo`.
    pub async fn image_fs_info(&self) -> Result<v1::ImageFsInfoResponse, CriError> {
        let mut c = self.image.clone();
        self.call(
            "ImageFsInfo",
            self.default_deadline(),
            v1::ImageFsInfoRequest {},
            |r| async move { c.image_fs_info(r).await },
        )
        .await
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
