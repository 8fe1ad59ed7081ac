//! The embedded CRI runtime: a CRI `runtime.v1` server on a unix socket that
//! runs each container's `command` + `args` as a plain **host process**.
//!
//! **It isolates nothing.** There are no namespaces, cgroups, images, root
//! filesystems, users or resource limits: a "container" is a process group
//! started by this runtime, running as the runtime's user, on the host's
//! filesystem and network. It exists for development, demos and tests of the
//! agent; production nodes use containerd or CRI-O through the same
//! [`crate::cri::CriClient`].
//!
//! Owns: the CRI server (sandboxes as records, containers as process groups,
//! CRI log files, ExecSync, container events, a stub image store) and the
//! lifetime of every process it starts. Must not: leave a process behind
//! (shutdown and `Drop` kill every process group it started), signal anything
//! it did not start, or pretend to honour what it cannot (empty `command`,
//! remapped mounts without root: rejected with `InvalidArgument`).
//!
//! What a container gets:
//! - argv `command ++ args` (`command` is required: images are not resolved);
//! - the environment `PATH` (the runtime's own, or a standard default),
//!   `HOSTNAME` (sandbox hostname, if set), then `envs`; nothing else of the
//!   runtime's environment is inherited;
//! - working directory `working_dir` (must exist on the host; `/` if empty);
//! - its own process group, stdin `/dev/null`, stdout/stderr written to the
//!   CRI log file `log_directory/log_path` (when both are set);
//! - mounts with `host_path == container_path` are no-ops; any other mount, when the
//!   runtime runs as root, runs the container in a private mount namespace with the host
//!   path bind-mounted at the container path (read-only when `readonly`); without root it
//!   is refused with `InvalidArgument` (see `mounts`).
//!
//! `ExecSync` runs the command with the container's environment and working
//! directory in a process group of its own, which is killed when the command
//! finishes or times out (`DeadlineExceeded`); stdout and stderr are capped at
//! 16 MiB each.
//!
//! Container events (`GetContainerEvents`): CREATED, STARTED, STOPPED and
//! DELETED for containers, each carrying the sandbox status and the statuses
//! of all containers of the sandbox; for sandboxes (with the sandbox id as
//! `container_id`, as containerd does) STARTED on run, STOPPED on stop and
//! DELETED on removal.
//!
//! When the main process exits, the rest of its process group is killed (as
//! when PID 1 of a pid namespace exits). Processes that leave the group
//! (`setsid`) escape this and shutdown; nothing can be done about that here.
//!
//! With [`RuntimeOptions::reap_orphans`] (the default) the runtime makes its
//! whole OS process a child subreaper so that grandchildren of containers are
//! reaped instead of lingering as zombies of PID 1.

mod logs;
mod mounts;
mod process;
mod service;
mod state;
mod stats;

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;

use crate::cri::v1::image_service_server::ImageServiceServer;
use crate::cri::v1::runtime_service_server::RuntimeServiceServer;
use service::{CriServer, Inner};

/// `VersionResponse.runtime_name` of the embedded runtime.
pub const RUNTIME_NAME: &str = "ledgerlet-embedded";

/// Largest request the server accepts.
const MAX_REQUEST_SIZE: usize = 16 * 1024 * 1024;

/// How long shutdown waits for the gRPC server to finish in-flight calls.
const SERVER_STOP_LIMIT: Duration = Duration::from_secs(5);

/// Configuration of the embedded runtime.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Directory owned by the runtime; created if missing. Its usage is what
    /// `ImageFsInfo` reports, and it seeds container ids.
    pub root_dir: PathBuf,
    /// Grace period (SIGTERM → SIGKILL) for containers still running when
    /// their sandbox is stopped. Default 2 s.
    pub sandbox_stop_grace: Duration,
    /// Capacity of the container-event broadcast; a watcher that falls this
    /// far behind is disconnected. Default 1024.
    pub event_capacity: usize,
    /// Become a child subreaper (process-wide!) and reap the orphaned
    /// grandchildren of containers. Default true.
    pub reap_orphans: bool,
    /// Longest time shutdown waits for killed processes to be reaped.
    /// Default 10 s.
    pub shutdown_timeout: Duration,
}

impl RuntimeOptions {
    /// Defaults with the given root directory.
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        Self {
            root_dir: root_dir.into(),
            ..Self::default()
        }
    }
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            root_dir: PathBuf::from("/var/lib/ledgerlet/embedded-runtime"),
            sandbox_stop_grace: Duration::from_secs(2),
            event_capacity: 1024,
            reap_orphans: true,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// Why the embedded runtime could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `--listen` is not `unix:///path` or a bare path.
    #[error("invalid listen address {listen:?}: {reason}")]
    InvalidListen {
        /// The address as given.
        listen: String,
        /// Why it was rejected.
        reason: String,
    },
    /// Another server answers on the socket.
    #[error("socket {0} is in use by a running server")]
    SocketInUse(PathBuf),
    /// Setting up the root dir or socket failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("CRI server on {path} failed: {message}")]
    Server {
        /// The socket path.
        path: PathBuf,
        /// The transport error, with its causes.
        message: String,
    },
    /// Some processes were still not reaped when shutdown gave up.
    #[error("shutdown: processes of the embedded runtime were not all reaped within {0:?}")]
    ShutdownIncomplete(Duration),
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> RuntimeError + 'a {
    move |source| RuntimeError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

async fn bind_socket(path: &Path) -> Result<UnixListener, RuntimeError> {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_socket() => {
            if UnixStream::connect(path).await.is_ok() {
                return Err(RuntimeError::SocketInUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(io_err("removing stale socket", path))?;
        }
        Ok(_) => {
            let exists = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
            return Err(io_err("refusing to replace non-socket file", path)(exists));
        }
        Err(_) => {}
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_err("creating socket directory", parent))?;
    }
    let listener = UnixListener::bind(path).map_err(io_err("binding socket", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(io_err("setting socket permissions", path))?;
    Ok(listener)
}

/// A running embedded runtime (in-process). Stop it with
/// [`EmbeddedRuntime::shutdown`]; dropping it without that still SIGKILLs
/// every process group it started and removes the socket, but cannot wait
/// for the processes to be reaped.
pub struct EmbeddedRuntime {
    inner: Arc<Inner>,
    socket: PathBuf,
    server: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    stop_server: Option<oneshot::Sender<()>>,
    done: bool,
}

impl EmbeddedRuntime {
    /// Creates `options.root_dir`, binds `listen` (`unix:///path` or a bare
    /// path; a stale socket file is replaced, a live one is an error) and
    /// starts serving CRI on it in a background task.
    pub async fn start(listen: &str, options: RuntimeOptions) -> Result<Self, RuntimeError> {
        let socket = crate::cri::parse_unix_endpoint(listen).map_err(|reason| {
            RuntimeError::InvalidListen {
                listen: listen.to_string(),
                reason,
            }
        })?;
        std::fs::create_dir_all(&options.root_dir)
            .map_err(io_err("creating root dir", &options.root_dir))?;
        let listener = bind_socket(&socket).await?;
        let mut options = options;
        if options.reap_orphans {
            if let Err(e) = process::become_subreaper() {
                tracing::warn!(error = %e, "cannot become child subreaper; orphaned container processes are left to PID 1");
                options.reap_orphans = false;
            }
        }
        let inner = Inner::new(options);
        let svc = CriServer {
            inner: inner.clone(),
        };
        let runtime_svc =
            RuntimeServiceServer::new(svc.clone()).max_decoding_message_size(MAX_REQUEST_SIZE);
        let image_svc = ImageServiceServer::new(svc).max_decoding_message_size(MAX_REQUEST_SIZE);
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .layer(crate::observe::grpc::ServerTraceLayer)
                .add_service(runtime_svc)
                .add_service(image_svc)
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                    let _ = stop_rx.await;
                }),
        );
        tracing::info!(socket = %socket.display(), "embedded CRI runtime listening (host processes, no isolation)");
        Ok(Self {
            inner,
            socket,
            server: Some(server),
            stop_server: Some(stop_tx),
            done: false,
        })
    }

    /// The endpoint for [`crate::cri::CriClient::connect`]: `unix:///path`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The socket path.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Resolves if the gRPC server stops by itself (it only does on error).
    async fn server_stopped(&mut self) -> Result<(), RuntimeError> {
        let Some(server) = self.server.as_mut() else {
            return std::future::pending().await;
        };
        let res = server.await;
        self.server = None;
        self.server_result(res)
    }

    fn server_result(
        &self,
        res: Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>,
    ) -> Result<(), RuntimeError> {
        let message = match res {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => crate::error_chain::error_chain(&e),
            Err(e) => e.to_string(),
        };
        Err(RuntimeError::Server {
            path: self.socket.clone(),
            message,
        })
    }

    /// Stops the runtime: refuses new work, ends event streams, SIGKILLs
    /// every process group it started and waits (up to
    /// `shutdown_timeout`) until they are reaped, stops the gRPC server and
    /// removes the socket file.
    pub async fn shutdown(mut self) -> Result<(), RuntimeError> {
        self.done = true;
        let reaped = self.inner.shutdown().await;
        if let Some(tx) = self.stop_server.take() {
            let _ = tx.send(());
        }
        let mut result = Ok(());
        if let Some(mut server) = self.server.take() {
            match tokio::time::timeout(SERVER_STOP_LIMIT, &mut server).await {
                Ok(res) => result = self.server_result(res),
                Err(_) => {
                    tracing::warn!("CRI server did not stop in time; aborting it");
                    server.abort();
                }
            }
        }
        let _ = std::fs::remove_file(&self.socket);
        if !reaped {
            return Err(RuntimeError::ShutdownIncomplete(
                self.inner.opts.shutdown_timeout,
            ));
        }
        tracing::info!(socket = %self.socket.display(), "embedded CRI runtime stopped");
        result
    }
}

impl Drop for EmbeddedRuntime {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Best effort without an async context: kill everything now; the
        // reaper tasks (or tokio's orphan queue) reap them.
        if let Ok(mut st) = self.inner.state.try_lock() {
            st.shutting_down = true;
        }
        self.inner.shutdown.send_replace(true);
        self.inner.registry.signal_all(libc::SIGKILL);
        if let Some(tx) = self.stop_server.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Runs the embedded runtime on `listen` until `shutdown` resolves, then
/// shuts it down (see [`EmbeddedRuntime::shutdown`]). This is what
/// `ledgerlet runtime serve --listen unix:///PATH` calls.
pub async fn serve(
    listen: &str,
    options: RuntimeOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RuntimeError> {
    let mut rt = EmbeddedRuntime::start(listen, options).await?;
    let server_failed = tokio::select! {
        _ = shutdown => None,
        res = rt.server_stopped() => Some(res),
    };
    let stopped = rt.shutdown().await;
    match server_failed {
        Some(Err(e)) => Err(e),
        _ => stopped,
    }
}
