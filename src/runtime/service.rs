//! The CRI `RuntimeService` and `ImageService` of the embedded runtime.
//!
//! Owns: CRI semantics (states, idempotency, filters, events, error codes) on
//! top of `state` (records) and `process` (process groups). Must not: block
//! while holding the state lock on anything but spawning a process or opening
//! its log file, or signal a process group it did not record.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{broadcast, mpsc, watch, Mutex};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::logs;
use super::process::{self, ProcessRegistry};
use super::state::{now_ns, ContainerRec, IdGen, ImageRec, SandboxRec, State};
use super::RuntimeOptions;
use crate::cri::v1;
use crate::cri::v1::{ContainerEventType, ContainerState, PodSandboxState};

/// Cap of ExecSync stdout and of stderr, each (CRI: 16 MiB).
pub(crate) const EXEC_OUTPUT_CAP: usize = 16 * 1024 * 1024;

/// How long an exiting container's log pumps may take to drain its pipes.
const LOG_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How long to wait for the orphans of a dead group to be reaped.
const ORPHAN_REAP_LIMIT: Duration = Duration::from_secs(5);

/// Longest grace period honoured (larger values are clamped).
const MAX_GRACE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Default `PATH` for container processes when the runtime has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Shared state of one runtime instance.
pub(crate) struct Inner {
    pub opts: RuntimeOptions,
    pub state: Mutex<State>,
    pub registry: Arc<ProcessRegistry>,
    pub events: broadcast::Sender<v1::ContainerEventResponse>,
    pub shutdown: watch::Sender<bool>,
    pub ids: IdGen,
}

impl Inner {
    pub(crate) fn new(opts: RuntimeOptions) -> Arc<Self> {
        let (events, _) = broadcast::channel(opts.event_capacity.max(1));
        let (shutdown, _) = watch::channel(false);
        Arc::new(Self {
            ids: IdGen::new(&opts.root_dir),
            opts,
            state: Mutex::new(State::default()),
            registry: Arc::new(ProcessRegistry::default()),
            events,
            shutdown,
        })
    }

    fn emit(&self, ev: v1::ContainerEventResponse) {
        // No receivers is fine; slow receivers lag (see get_container_events).
        let _ = self.events.send(ev);
    }

    /// Stops everything: no new processes, event streams end, every process
    /// group gets SIGKILL, and waits (bounded) until all have been reaped.
    pub(crate) async fn shutdown(&self) -> bool {
        self.state.lock().await.shutting_down = true;
        self.shutdown.send_replace(true);
        self.registry.signal_all(libc::SIGKILL);
        self.registry.wait_empty(self.opts.shutdown_timeout).await
    }
}

fn not_found(kind: &str, id: &str) -> Status {
    Status::not_found(format!("{kind} {id:?} not found"))
}

/// `field` of a request, which must be set (`InvalidArgument` naming it if not).
fn required<T>(field: Option<T>, name: &str) -> Result<T, Status> {
    field.ok_or_else(|| Status::invalid_argument(format!("{name} is required")))
}

/// The environment of a container: `PATH` (the runtime's own, or a default),
/// `HOSTNAME` (the sandbox hostname, when set), then the config's `envs`
/// (later entries override earlier ones). Nothing else is inherited.
fn container_env(
    config: &v1::ContainerConfig,
    sandbox: &v1::PodSandboxConfig,
) -> Vec<(String, String)> {
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string());
    let mut env: Vec<(String, String)> = vec![("PATH".into(), path)];
    if !sandbox.hostname.is_empty() {
        env.push(("HOSTNAME".into(), sandbox.hostname.clone()));
    }
    for kv in &config.envs {
        match env.iter_mut().find(|(k, _)| *k == kv.key) {
            Some(slot) => slot.1 = kv.value.clone(),
            None => env.push((kv.key.clone(), kv.value.clone())),
        }
    }
    env
}

/// Checks that the embedded runtime can honour `config` (see module docs).
fn validate_container_config(config: &v1::ContainerConfig) -> Result<(), Status> {
    let name = config.metadata.as_ref().map_or("", |m| m.name.as_str());
    if config.command.is_empty() {
        let image = config.image.as_ref().map_or("", |i| i.image.as_str());
        return Err(Status::invalid_argument(format!(
            "container {name:?}: command is empty, but the embedded runtime does not resolve \
             images, so it cannot use the entrypoint of image {image:?}; set `command` in the \
             container spec"
        )));
    }
    for m in &config.mounts {
        if m.image.as_ref().is_some_and(|i| !i.image.is_empty()) {
            return Err(Status::invalid_argument(format!(
                "container {name:?}: image volume mount at {:?} is not supported by the embedded \
                 runtime (it does not unpack images)",
                m.container_path
            )));
        }
        if m.host_path != m.container_path && !super::mounts::can_remap() {
            return Err(Status::invalid_argument(format!(
                "container {name:?}: mount of host path {:?} at {:?} is not supported: the \
                 embedded runtime runs containers as host processes, and showing a host path \
                 at another path needs a private mount namespace, which needs root (the \
                 runtime runs as uid {}); only a hostPath volume mounted at its own path works \
                 without root",
                m.host_path,
                m.container_path,
                // SAFETY: geteuid has no preconditions
                unsafe { libc::geteuid() }
            )));
        }
        if !Path::new(&m.host_path).exists() {
            return Err(Status::invalid_argument(format!(
                "container {name:?}: mount host path {:?} does not exist",
                m.host_path
            )));
        }
    }
    Ok(())
}

/// `argv` (not empty) with exactly `env`, in `dir`, as the leader of a new process group,
/// stdin `/dev/null`, stdout and stderr piped; not killed on drop (its group is the
/// runtime's to end). The program is looked up here, unless the process gets a mount
/// namespace of its own (`own_namespace`): then the child's execvp looks it up there.
fn process_command(
    argv: &[String],
    env: &[(String, String)],
    dir: &str,
    own_namespace: bool,
) -> tokio::process::Command {
    let program = match own_namespace {
        true => PathBuf::from(&argv[0]),
        false => process::resolve_program(&argv[0], env, Path::new(dir)),
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(env.iter().cloned())
        .current_dir(dir)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    cmd
}

/// Waits until the container record says exited (or its reaper is gone).
async fn wait_exited(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|exited| *exited).await;
}

/// SIGTERM the group, wait up to `grace`, then SIGKILL it and wait for the
/// exit. A zero grace sends SIGKILL at once (containerd's behaviour for
/// `StopContainer` with timeout 0).
async fn stop_group(pgid: i32, mut exited: watch::Receiver<bool>, grace: Duration) {
    if *exited.borrow() {
        return;
    }
    if !grace.is_zero() {
        let _ = process::signal_group(pgid, libc::SIGTERM);
        if tokio::time::timeout(grace.min(MAX_GRACE), wait_exited(&mut exited))
            .await
            .is_ok()
        {
            return;
        }
    }
    if !*exited.borrow() {
        let _ = process::signal_group(pgid, libc::SIGKILL);
    }
    wait_exited(&mut exited).await;
}

fn spawn_capped_reader<R>(
    reader: Option<R>,
    cap: usize,
) -> (Arc<std::sync::Mutex<Vec<u8>>>, Option<JoinHandle<()>>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let buf = Arc::new(std::sync::Mutex::new(Vec::new()));
    let task = reader.map(|mut r| {
        let buf = buf.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match r.read(&mut chunk).await {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut b = buf.lock().unwrap_or_else(|p| p.into_inner());
                        let room = cap.saturating_sub(b.len());
                        b.extend_from_slice(&chunk[..n.min(room)]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        })
    });
    (buf, task)
}

fn take_buf(buf: &Arc<std::sync::Mutex<Vec<u8>>>) -> Vec<u8> {
    std::mem::take(&mut *buf.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Sum of allocated bytes and count of inodes under `root` (not following
/// symlinks, not crossing into unreadable directories).
fn disk_usage(root: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut bytes = 0u64;
    let mut inodes = 0u64;
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        bytes = bytes.saturating_add(md.blocks().saturating_mul(512));
        inodes += 1;
        if md.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    (bytes, inodes)
}

/// The gRPC service object (both CRI services share it).
#[derive(Clone)]
pub(crate) struct CriServer {
    pub inner: Arc<Inner>,
}

impl CriServer {
    /// The state, locked, unless shutdown began (`Unavailable`: no new process after that).
    async fn lock_live(&self) -> Result<tokio::sync::MutexGuard<'_, State>, Status> {
        let st = self.inner.state.lock().await;
        if st.shutting_down {
            return Err(Status::unavailable("the embedded runtime is shutting down"));
        }
        Ok(st)
    }

    /// Stops the running containers of sandbox `id`, each with `grace`, and waits for them.
    async fn stop_containers_of(&self, id: &str, grace: Duration) {
        let running: Vec<_> = {
            let st = self.inner.state.lock().await;
            st.containers
                .values()
                .filter(|c| c.sandbox_id == id && c.state == ContainerState::ContainerRunning)
                .filter_map(|c| Some((c.pgid?, c.exited.clone()?)))
                .collect()
        };
        let mut set = tokio::task::JoinSet::new();
        for (pgid, rx) in running {
            set.spawn(stop_group(pgid, rx, grace));
        }
        while set.join_next().await.is_some() {}
    }

    /// `None` for an unknown container; else its process group and exit watch while it
    /// runs.
    async fn running_container(&self, id: &str) -> Option<Option<(i32, watch::Receiver<bool>)>> {
        let st = self.inner.state.lock().await;
        let c = st.containers.get(id)?;
        Some(match (c.state, c.pgid, &c.exited) {
            (ContainerState::ContainerRunning, Some(pgid), Some(rx)) => Some((pgid, rx.clone())),
            _ => None,
        })
    }

    /// Records a failed start: the container goes to EXITED with exit code 128
    /// and reason `StartError` (containerd's convention).
    fn fail_start(&self, st: &mut State, id: &str, message: String) -> Status {
        if let Some(c) = st.containers.get_mut(id) {
            c.state = ContainerState::ContainerExited;
            c.finished_at = now_ns();
            c.exit_code = 128;
            c.reason = "StartError".into();
            c.message = message.clone();
            let sid = c.sandbox_id.clone();
            self.inner
                .emit(st.event(id, &sid, ContainerEventType::ContainerStoppedEvent));
        }
        Status::unknown(message)
    }

    fn subscribe_events(&self) -> ReceiverStream<Result<v1::ContainerEventResponse, Status>> {
        let mut events = self.inner.events.subscribe();
        let mut shutdown = self.inner.shutdown.subscribe();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    _ = shutdown.wait_for(|s| *s) => break,
                    _ = tx.closed() => break,
                    next = events.recv() => next,
                };
                match next {
                    Ok(ev) => {
                        tokio::select! {
                            _ = shutdown.wait_for(|s| *s) => break,
                            sent = tx.send(Ok(ev)) => if sent.is_err() { break },
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let _ = tx.try_send(Err(Status::resource_exhausted(format!(
                            "container event watcher fell {n} events behind and was dropped; \
                             relist and watch again"
                        ))));
                        break;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        ReceiverStream::new(rx)
    }
}

/// Waits for a container's main process, then ends the container: kills the
/// rest of its process group (as the end of PID 1 ends a pid namespace),
/// drains its logs, records the exit and emits CONTAINER_STOPPED.
async fn reap_container(
    inner: Arc<Inner>,
    id: String,
    mut child: tokio::process::Child,
    pgid: i32,
    pumps: Vec<JoinHandle<()>>,
    exited: watch::Sender<bool>,
) {
    let code = match child.wait().await {
        Ok(status) => process::exit_code(status),
        Err(e) => {
            tracing::warn!(container_id = %id, error = %e, "waiting for container process failed");
            255
        }
    };
    let _ = process::signal_group(pgid, libc::SIGKILL);
    for mut p in pumps {
        if tokio::time::timeout(LOG_DRAIN_LIMIT, &mut p).await.is_err() {
            tracing::warn!(container_id = %id, "container output still open after exit; log may be incomplete");
        }
    }
    {
        let mut st = inner.state.lock().await;
        let mut sandbox_id = None;
        if let Some(c) = st.containers.get_mut(&id) {
            c.state = ContainerState::ContainerExited;
            c.finished_at = now_ns();
            c.exit_code = code;
            c.reason = if code == 0 { "Completed" } else { "Error" }.into();
            c.pgid = None;
            for g in &c.exec_groups {
                let _ = process::signal_group(*g, libc::SIGKILL);
            }
            sandbox_id = Some(c.sandbox_id.clone());
        }
        if let Some(sid) = sandbox_id {
            inner.emit(st.event(&id, &sid, ContainerEventType::ContainerStoppedEvent));
        }
    }
    tracing::info!(container_id = %id, exit_code = code, "container exited");
    let _ = exited.send(true);
    if inner.opts.reap_orphans && !process::reap_group_members(pgid, ORPHAN_REAP_LIMIT).await {
        tracing::warn!(container_id = %id, pgid, "processes of the container's group outlived it");
    }
    inner.registry.remove(pgid);
}

#[tonic::async_trait]
impl v1::runtime_service_server::RuntimeService for CriServer {
    async fn version(
        &self,
        _request: Request<v1::VersionRequest>,
    ) -> Result<Response<v1::VersionResponse>, Status> {
        Ok(Response::new(v1::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: super::RUNTIME_NAME.into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            runtime_api_version: "v1".into(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        request: Request<v1::RunPodSandboxRequest>,
    ) -> Result<Response<v1::RunPodSandboxResponse>, Status> {
        let req = request.into_inner();
        let config = required(req.config, "RunPodSandbox: config")?;
        let meta = required(config.metadata.clone(), "RunPodSandbox: config.metadata")?;
        let name = SandboxRec::reserved_name(&meta);
        let mut st = self.lock_live().await?;
        if let Some(other) = st.sandboxes.values().find(|s| {
            s.metadata()
                .is_some_and(|m| SandboxRec::reserved_name(&m) == name)
        }) {
            return Err(Status::already_exists(format!(
                "pod sandbox name {name:?} is reserved for {}",
                other.id
            )));
        }
        let id = self.inner.ids.next();
        st.sandboxes.insert(
            id.clone(),
            SandboxRec {
                id: id.clone(),
                config,
                runtime_handler: req.runtime_handler,
                state: PodSandboxState::SandboxReady,
                created_at: now_ns(),
            },
        );
        self.inner
            .emit(st.event(&id, &id, ContainerEventType::ContainerStartedEvent));
        tracing::info!(sandbox_id = %id, name = %name, "pod sandbox ready");
        Ok(Response::new(v1::RunPodSandboxResponse {
            pod_sandbox_id: id,
        }))
    }

    async fn stop_pod_sandbox(
        &self,
        request: Request<v1::StopPodSandboxRequest>,
    ) -> Result<Response<v1::StopPodSandboxResponse>, Status> {
        let id = &request.into_inner().pod_sandbox_id;
        let grace = self.inner.opts.sandbox_stop_grace;
        self.stop_containers_of(id, grace).await;
        let mut st = self.inner.state.lock().await;
        if let Some(s) = st.sandboxes.get_mut(id) {
            if s.state == PodSandboxState::SandboxReady {
                s.state = PodSandboxState::SandboxNotready;
                self.inner
                    .emit(st.event(id, id, ContainerEventType::ContainerStoppedEvent));
            }
        }
        Ok(Response::new(v1::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        request: Request<v1::RemovePodSandboxRequest>,
    ) -> Result<Response<v1::RemovePodSandboxResponse>, Status> {
        let id = &request.into_inner().pod_sandbox_id;
        self.stop_containers_of(id, Duration::ZERO).await;
        let mut st = self.inner.state.lock().await;
        let ids: Vec<String> = st
            .containers
            .values()
            .filter(|c| c.sandbox_id == *id)
            .map(|c| c.id.clone())
            .collect();
        for cid in ids {
            if let Some(c) = st.containers.remove(&cid) {
                // Started after we looked: kill it; its reaper finishes the job.
                if let Some(pgid) = c.pgid {
                    let _ = process::signal_group(pgid, libc::SIGKILL);
                }
                self.inner
                    .emit(st.event(&cid, id, ContainerEventType::ContainerDeletedEvent));
            }
        }
        if let Some(mut s) = st.sandboxes.remove(id) {
            s.state = PodSandboxState::SandboxNotready;
            self.inner.emit(v1::ContainerEventResponse {
                container_id: id.to_string(),
                container_event_type: ContainerEventType::ContainerDeletedEvent as i32,
                created_at: now_ns(),
                pod_sandbox_status: Some(s.status()),
                containers_statuses: vec![],
            });
        }
        Ok(Response::new(v1::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        request: Request<v1::PodSandboxStatusRequest>,
    ) -> Result<Response<v1::PodSandboxStatusResponse>, Status> {
        let id = request.into_inner().pod_sandbox_id;
        let st = self.inner.state.lock().await;
        let s = st
            .sandboxes
            .get(&id)
            .ok_or_else(|| not_found("pod sandbox", &id))?;
        Ok(Response::new(v1::PodSandboxStatusResponse {
            status: Some(s.status()),
            info: HashMap::new(),
            containers_statuses: st.container_statuses_of(&id),
            timestamp: now_ns(),
        }))
    }

    async fn list_pod_sandbox(
        &self,
        request: Request<v1::ListPodSandboxRequest>,
    ) -> Result<Response<v1::ListPodSandboxResponse>, Status> {
        let filter = request.into_inner().filter.unwrap_or_default();
        let st = self.inner.state.lock().await;
        let items = st.sandboxes.values().filter(|s| s.matches(&filter));
        let items = oldest_first(items, |s| (s.created_at, &s.id), SandboxRec::summary);
        Ok(Response::new(v1::ListPodSandboxResponse { items }))
    }

    async fn create_container(
        &self,
        request: Request<v1::CreateContainerRequest>,
    ) -> Result<Response<v1::CreateContainerResponse>, Status> {
        let req = request.into_inner();
        let config = required(req.config, "CreateContainer: config")?;
        let meta = required(config.metadata.clone(), "CreateContainer: config.metadata")?;
        validate_container_config(&config)?;
        let mut st = self.lock_live().await?;
        let sandbox = st
            .sandboxes
            .get(&req.pod_sandbox_id)
            .ok_or_else(|| not_found("pod sandbox", &req.pod_sandbox_id))?;
        if sandbox.state != PodSandboxState::SandboxReady {
            return Err(Status::failed_precondition(format!(
                "pod sandbox {:?} is not ready",
                req.pod_sandbox_id
            )));
        }
        if let Some(other) = st.containers.values().find(|c| {
            c.sandbox_id == req.pod_sandbox_id
                && c.config
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.name == meta.name && m.attempt == meta.attempt)
        }) {
            return Err(Status::already_exists(format!(
                "container name {:?} attempt {} is reserved for {}",
                meta.name, meta.attempt, other.id
            )));
        }
        let log_dir = sandbox.config.log_directory.trim_end_matches('/');
        let log_path = if log_dir.is_empty() || config.log_path.is_empty() {
            String::new()
        } else {
            format!("{log_dir}/{}", config.log_path.trim_start_matches('/'))
        };
        let env = container_env(&config, &sandbox.config);
        let working_dir = match config.working_dir.as_str() {
            "" => "/".to_string(),
            dir => dir.to_string(),
        };
        let id = self.inner.ids.next();
        let sandbox_id = req.pod_sandbox_id.clone();
        st.containers.insert(
            id.clone(),
            ContainerRec {
                id: id.clone(),
                sandbox_id: sandbox_id.clone(),
                config,
                log_path,
                env,
                working_dir,
                state: ContainerState::ContainerCreated,
                created_at: now_ns(),
                ..ContainerRec::default()
            },
        );
        self.inner
            .emit(st.event(&id, &sandbox_id, ContainerEventType::ContainerCreatedEvent));
        Ok(Response::new(v1::CreateContainerResponse {
            container_id: id,
        }))
    }

    async fn start_container(
        &self,
        request: Request<v1::StartContainerRequest>,
    ) -> Result<Response<v1::StartContainerResponse>, Status> {
        let id = &request.into_inner().container_id;
        let mut st = self.lock_live().await?;
        let c = st
            .containers
            .get(id)
            .ok_or_else(|| not_found("container", id))?;
        if c.state != ContainerState::ContainerCreated {
            return Err(Status::failed_precondition(format!(
                "container {id:?} ({}) is in {} state",
                c.name(),
                c.state.as_str_name()
            )));
        }
        let ready = st
            .sandboxes
            .get(&c.sandbox_id)
            .is_some_and(|s| s.state == PodSandboxState::SandboxReady);
        if !ready {
            return Err(Status::failed_precondition(format!(
                "pod sandbox {:?} of container {id:?} is not ready",
                c.sandbox_id
            )));
        }
        let name = c.name().to_string();
        let argv: Vec<String> = c
            .config
            .command
            .iter()
            .chain(c.config.args.iter())
            .cloned()
            .collect();
        // what can fail before the process runs, each failure recorded as a StartError
        let started = async {
            if !Path::new(&c.working_dir).is_dir() {
                let dir = &c.working_dir;
                return Err(format!(
                    "working directory {dir:?} does not exist on the host"
                ));
            }
            let log = match c.log_path.as_str() {
                "" => None,
                path => Some(
                    logs::open_log(Path::new(path))
                        .await
                        .map_err(|e| format!("cannot open log file {path:?}: {e}"))?,
                ),
            };
            let plan = super::mounts::MountPlan::new(&c.config.mounts)?;
            let mut cmd = process_command(&argv, &c.env, &c.working_dir, plan.is_some());
            if let Some(plan) = plan {
                // SAFETY: the hook only makes system calls on memory prepared before the fork
                unsafe {
                    cmd.pre_exec(move || plan.apply_in_child());
                }
            }
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot run {:?}: {e}", argv[0]))?;
            Ok::<_, String>((child, log))
        };
        let (mut child, log) = match started.await {
            Ok(started) => started,
            Err(e) => {
                let msg = format!("failed to start container {name:?}: {e}");
                return Err(self.fail_start(&mut st, id, msg));
            }
        };
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        self.inner.registry.add(pgid);
        let mut pumps = Vec::new();
        if let Some(out) = child.stdout.take() {
            pumps.push(tokio::spawn(logs::pump(
                out,
                "stdout",
                log.clone(),
                id.to_string(),
            )));
        }
        let log_for_reopen = log.clone();
        if let Some(err) = child.stderr.take() {
            pumps.push(tokio::spawn(logs::pump(err, "stderr", log, id.to_string())));
        }
        let (exit_tx, exit_rx) = watch::channel(false);
        let sandbox_id = {
            let c = st
                .containers
                .get_mut(id)
                .expect("checked above under the same lock");
            c.state = ContainerState::ContainerRunning;
            c.started_at = now_ns();
            c.pgid = Some(pgid);
            c.exited = Some(exit_rx);
            c.log = log_for_reopen;
            c.sandbox_id.clone()
        };
        self.inner
            .emit(st.event(id, &sandbox_id, ContainerEventType::ContainerStartedEvent));
        tracing::info!(container_id = %id, name = %name, pid = pgid, "container started");
        tokio::spawn(reap_container(
            self.inner.clone(),
            id.to_string(),
            child,
            pgid,
            pumps,
            exit_tx,
        ));
        Ok(Response::new(v1::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        request: Request<v1::StopContainerRequest>,
    ) -> Result<Response<v1::StopContainerResponse>, Status> {
        let req = request.into_inner();
        let target = self.running_container(&req.container_id).await;
        if let Some((pgid, rx)) = target.ok_or_else(|| not_found("container", &req.container_id))? {
            let grace = Duration::from_secs(req.timeout.max(0) as u64).min(MAX_GRACE);
            stop_group(pgid, rx, grace).await;
        }
        Ok(Response::new(v1::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        request: Request<v1::RemoveContainerRequest>,
    ) -> Result<Response<v1::RemoveContainerResponse>, Status> {
        let id = &request.into_inner().container_id;
        if let Some(Some((pgid, rx))) = self.running_container(id).await {
            stop_group(pgid, rx, Duration::ZERO).await;
        }
        let mut st = self.inner.state.lock().await;
        if let Some(c) = st.containers.remove(id) {
            if let Some(pgid) = c.pgid {
                let _ = process::signal_group(pgid, libc::SIGKILL);
            }
            self.inner
                .emit(st.event(id, &c.sandbox_id, ContainerEventType::ContainerDeletedEvent));
        }
        Ok(Response::new(v1::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        request: Request<v1::ListContainersRequest>,
    ) -> Result<Response<v1::ListContainersResponse>, Status> {
        let filter = request.into_inner().filter.unwrap_or_default();
        let st = self.inner.state.lock().await;
        let items = st.containers.values().filter(|c| c.matches(&filter));
        let containers = oldest_first(items, |c| (c.created_at, &c.id), ContainerRec::summary);
        Ok(Response::new(v1::ListContainersResponse { containers }))
    }

    async fn container_status(
        &self,
        request: Request<v1::ContainerStatusRequest>,
    ) -> Result<Response<v1::ContainerStatusResponse>, Status> {
        let req = request.into_inner();
        let st = self.inner.state.lock().await;
        let c = st
            .containers
            .get(&req.container_id)
            .ok_or_else(|| not_found("container", &req.container_id))?;
        let mut info = HashMap::new();
        if req.verbose {
            let pid = c.pgid.unwrap_or(0);
            info.insert(
                "info".to_string(),
                format!("{{\"pid\":{pid},\"sandboxID\":\"{}\"}}", c.sandbox_id),
            );
        }
        Ok(Response::new(v1::ContainerStatusResponse {
            status: Some(c.status()),
            info,
        }))
    }

    /// Reopens the log file at the container's log path (after the agent renamed the old
    /// one away): the output pumps write to the new file from their next line. A container
    /// that is not running is refused and no file is created, as the CRI asks.
    async fn reopen_container_log(
        &self,
        request: Request<v1::ReopenContainerLogRequest>,
    ) -> Result<Response<v1::ReopenContainerLogResponse>, Status> {
        let req = request.into_inner();
        let (path, shared) = {
            let st = self.inner.state.lock().await;
            let c = st
                .containers
                .get(&req.container_id)
                .ok_or_else(|| not_found("container", &req.container_id))?;
            if c.state != ContainerState::ContainerRunning {
                return Err(Status::failed_precondition(format!(
                    "ReopenContainerLog: container {:?} is not running (state {})",
                    req.container_id,
                    c.state.as_str_name()
                )));
            }
            match &c.log {
                Some(log) => (c.log_path.clone(), log.clone()),
                None => {
                    return Err(Status::failed_precondition(format!(
                        "ReopenContainerLog: container {:?} has no log file",
                        req.container_id
                    )))
                }
            }
        };
        let fresh = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await
            .map_err(|e| {
                Status::internal(format!("ReopenContainerLog: cannot open {path:?}: {e}"))
            })?;
        *shared.lock().await = fresh;
        Ok(Response::new(v1::ReopenContainerLogResponse {}))
    }

    /// Refused: the embedded runtime has no streaming server (it would have to speak the
    /// SPDY and WebSocket remote-command protocols). `ExecSync`, and so the kubelet API's
    /// `/run`, works; `kubectl exec` needs containerd.
    async fn exec(
        &self,
        _request: Request<v1::ExecRequest>,
    ) -> Result<Response<v1::ExecResponse>, Status> {
        Err(no_streaming("Exec"))
    }

    /// Refused, as [`Self::exec`].
    async fn attach(
        &self,
        _request: Request<v1::AttachRequest>,
    ) -> Result<Response<v1::AttachResponse>, Status> {
        Err(no_streaming("Attach"))
    }

    /// Refused, as [`Self::exec`].
    async fn port_forward(
        &self,
        _request: Request<v1::PortForwardRequest>,
    ) -> Result<Response<v1::PortForwardResponse>, Status> {
        Err(no_streaming("PortForward"))
    }

    async fn exec_sync(
        &self,
        request: Request<v1::ExecSyncRequest>,
    ) -> Result<Response<v1::ExecSyncResponse>, Status> {
        let req = request.into_inner();
        if req.cmd.is_empty() {
            return Err(Status::invalid_argument("ExecSync: cmd must not be empty"));
        }
        let (mut child, pgid) = {
            let mut st = self.lock_live().await?;
            let c = st
                .containers
                .get_mut(&req.container_id)
                .ok_or_else(|| not_found("container", &req.container_id))?;
            if c.state != ContainerState::ContainerRunning {
                return Err(Status::failed_precondition(format!(
                    "container {:?} is not running (state {})",
                    req.container_id,
                    c.state.as_str_name()
                )));
            }
            // a container in a mount namespace of its own: the command runs (and the child's
            // execvp looks it up) in it too
            let ns = c
                .pgid
                .and_then(|pid| super::mounts::namespace_of(pid, &c.config.mounts));
            let mut cmd = process_command(&req.cmd, &c.env, &c.working_dir, ns.is_some());
            if let Some(ns) = ns {
                // SAFETY: the hook only makes one system call on a descriptor opened before
                // the fork
                unsafe {
                    cmd.pre_exec(move || super::mounts::enter(&ns));
                }
            }
            let child = cmd.spawn().map_err(|e| {
                Status::unknown(format!(
                    "ExecSync in container {:?}: cannot run {:?}: {e}",
                    req.container_id, req.cmd[0]
                ))
            })?;
            let pgid = child.id().map(|p| p as i32).unwrap_or(0);
            self.inner.registry.add(pgid);
            c.exec_groups.insert(pgid);
            (child, pgid)
        };

        // Run to completion in its own task, so that cleanup happens even if
        // the client goes away and this RPC future is dropped.
        let inner = self.inner.clone();
        let container_id = req.container_id.clone();
        let timeout = req.timeout;
        let task = tokio::spawn(async move {
            let (out_buf, out_task) = spawn_capped_reader(child.stdout.take(), EXEC_OUTPUT_CAP);
            let (err_buf, err_task) = spawn_capped_reader(child.stderr.take(), EXEC_OUTPUT_CAP);
            let waited = if timeout > 0 {
                let limit = Duration::from_secs(timeout as u64).min(MAX_GRACE);
                tokio::time::timeout(limit, child.wait()).await.ok()
            } else {
                Some(child.wait().await)
            };
            let timed_out = waited.is_none();
            // Whatever the command left behind in its group goes with it.
            let _ = process::signal_group(pgid, libc::SIGKILL);
            let status = match waited {
                Some(s) => s,
                None => child.wait().await,
            };
            for t in [out_task, err_task].into_iter().flatten() {
                let _ = tokio::time::timeout(LOG_DRAIN_LIMIT, t).await;
            }
            if let Some(c) = inner.state.lock().await.containers.get_mut(&container_id) {
                c.exec_groups.remove(&pgid);
            }
            if inner.opts.reap_orphans {
                process::reap_group_members(pgid, ORPHAN_REAP_LIMIT).await;
            }
            inner.registry.remove(pgid);
            (timed_out, status, take_buf(&out_buf), take_buf(&err_buf))
        });
        let (timed_out, status, stdout, stderr) = task
            .await
            .map_err(|e| Status::internal(format!("ExecSync task failed: {e}")))?;
        if timed_out {
            return Err(Status::deadline_exceeded(format!(
                "command {:?} timed out after {}s",
                req.cmd.join(" "),
                req.timeout
            )));
        }
        let status = status.map_err(|e| Status::unknown(format!("ExecSync wait failed: {e}")))?;
        Ok(Response::new(v1::ExecSyncResponse {
            stdout,
            stderr,
            exit_code: process::exit_code(status),
        }))
    }

    /// The embedded runtime runs every pod in the host's network namespace, so a pod CIDR
    /// has nothing to configure: it is checked (a malformed one is `InvalidArgument`, naming
    /// it) and acknowledged, as a runtime without a CNI template does.
    async fn update_runtime_config(
        &self,
        request: Request<v1::UpdateRuntimeConfigRequest>,
    ) -> Result<Response<v1::UpdateRuntimeConfigResponse>, Status> {
        let cidr = request
            .into_inner()
            .runtime_config
            .and_then(|c| c.network_config)
            .map(|n| n.pod_cidr)
            .unwrap_or_default();
        for part in cidr.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if !is_cidr(part) {
                return Err(Status::invalid_argument(format!(
                    "UpdateRuntimeConfig: runtime_config.network_config.pod_cidr: {part:?} is not an IP prefix (e.g. 10.244.0.0/24)"
                )));
            }
        }
        if !cidr.is_empty() {
            tracing::info!(pod_cidr = %cidr, "pod CIDR noted; embedded pods use the host network");
        }
        Ok(Response::new(v1::UpdateRuntimeConfigResponse {}))
    }

    async fn status(
        &self,
        _request: Request<v1::StatusRequest>,
    ) -> Result<Response<v1::StatusResponse>, Status> {
        let cond = |t: &str| v1::RuntimeCondition {
            r#type: t.to_string(),
            status: true,
            reason: String::new(),
            message: String::new(),
        };
        Ok(Response::new(v1::StatusResponse {
            status: Some(v1::RuntimeStatus {
                conditions: vec![cond("RuntimeReady"), cond("NetworkReady")],
            }),
            info: HashMap::new(),
            runtime_handlers: vec![v1::RuntimeHandler {
                name: String::new(),
                features: Some(v1::RuntimeHandlerFeatures::default()),
            }],
            features: Some(v1::RuntimeFeatures::default()),
        }))
    }

    type GetContainerEventsStream = ReceiverStream<Result<v1::ContainerEventResponse, Status>>;

    async fn get_container_events(
        &self,
        _request: Request<v1::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        Ok(Response::new(self.subscribe_events()))
    }

    // Stats (helper F): the CPU and memory of each running container's process group, from
    // /proc (see `stats`); a sandbox's are its containers' together.
    async fn list_container_stats(
        &self,
        request: Request<v1::ListContainerStatsRequest>,
    ) -> Result<Response<v1::ListContainerStatsResponse>, Status> {
        let f = request.into_inner().filter.unwrap_or_default();
        let filter = v1::ContainerFilter {
            id: f.id,
            pod_sandbox_id: f.pod_sandbox_id,
            label_selector: f.label_selector,
            state: Some(v1::ContainerStateValue {
                state: ContainerState::ContainerRunning as i32,
            }),
        };
        let running: Vec<(v1::Container, Option<i32>)> = {
            let st = self.inner.state.lock().await;
            st.containers
                .values()
                .filter(|c| c.matches(&filter))
                .map(|c| (c.summary(), c.pgid))
                .collect()
        };
        let stats = container_stats(&running);
        Ok(Response::new(v1::ListContainerStatsResponse { stats }))
    }

    async fn list_pod_sandbox_stats(
        &self,
        request: Request<v1::ListPodSandboxStatsRequest>,
    ) -> Result<Response<v1::ListPodSandboxStatsResponse>, Status> {
        let f = request.into_inner().filter.unwrap_or_default();
        let filter = v1::PodSandboxFilter {
            id: f.id,
            label_selector: f.label_selector,
            state: Some(v1::PodSandboxStateValue {
                state: PodSandboxState::SandboxReady as i32,
            }),
        };
        let (sandboxes, running) = {
            let st = self.inner.state.lock().await;
            let sandboxes: Vec<v1::PodSandbox> = st
                .sandboxes
                .values()
                .filter(|s| s.matches(&filter))
                .map(SandboxRec::summary)
                .collect();
            let running: Vec<(v1::Container, Option<i32>)> = st
                .containers
                .values()
                .filter(|c| {
                    c.state == ContainerState::ContainerRunning
                        && sandboxes.iter().any(|s| s.id == c.sandbox_id)
                })
                .map(|c| (c.summary(), c.pgid))
                .collect();
            (sandboxes, running)
        };
        let containers = container_stats(&running);
        let now = now_ns();
        let stats = sandboxes
            .into_iter()
            .map(|s| {
                let mine: Vec<v1::ContainerStats> = containers
                    .iter()
                    .zip(&running)
                    .filter(|(_, (c, _))| c.pod_sandbox_id == s.id)
                    .map(|(st, _)| st.clone())
                    .collect();
                let total = |f: &dyn Fn(&v1::ContainerStats) -> Option<u64>| {
                    mine.iter().filter_map(f).sum::<u64>()
                };
                let val = |value| Some(v1::UInt64Value { value });
                let cpu_ns =
                    total(&|c| Some(c.cpu.as_ref()?.usage_core_nano_seconds.as_ref()?.value));
                let rss = total(&|c| Some(c.memory.as_ref()?.working_set_bytes.as_ref()?.value));
                v1::PodSandboxStats {
                    attributes: Some(v1::PodSandboxAttributes {
                        id: s.id.clone(),
                        metadata: s.metadata.clone(),
                        labels: s.labels.clone(),
                        annotations: s.annotations.clone(),
                    }),
                    linux: Some(v1::LinuxPodSandboxStats {
                        cpu: Some(v1::CpuUsage {
                            timestamp: now,
                            usage_core_nano_seconds: val(cpu_ns),
                            ..Default::default()
                        }),
                        memory: Some(v1::MemoryUsage {
                            timestamp: now,
                            working_set_bytes: val(rss),
                            usage_bytes: val(rss),
                            rss_bytes: val(rss),
                            ..Default::default()
                        }),
                        containers: mine,
                        ..Default::default()
                    }),
                    windows: None,
                }
            })
            .collect();
        Ok(Response::new(v1::ListPodSandboxStatsResponse { stats }))
    }
}

#[tonic::async_trait]
impl v1::image_service_server::ImageService for CriServer {
    async fn list_images(
        &self,
        request: Request<v1::ListImagesRequest>,
    ) -> Result<Response<v1::ListImagesResponse>, Status> {
        let wanted = image_ref(request.into_inner().filter.and_then(|f| f.image));
        let st = self.inner.state.lock().await;
        let images = st
            .images
            .values()
            .filter(|i| wanted.is_empty() || i.reference == wanted)
            .map(ImageRec::to_image)
            .collect();
        Ok(Response::new(v1::ListImagesResponse { images }))
    }

    async fn image_status(
        &self,
        request: Request<v1::ImageStatusRequest>,
    ) -> Result<Response<v1::ImageStatusResponse>, Status> {
        let reference = image_ref(request.into_inner().image);
        let st = self.inner.state.lock().await;
        Ok(Response::new(v1::ImageStatusResponse {
            image: st.images.get(&reference).map(ImageRec::to_image),
            info: HashMap::new(),
        }))
    }

    async fn pull_image(
        &self,
        request: Request<v1::PullImageRequest>,
    ) -> Result<Response<v1::PullImageResponse>, Status> {
        let spec = request.into_inner().image.unwrap_or_default();
        if spec.image.is_empty() {
            return Err(Status::invalid_argument(
                "PullImage: image.image is required",
            ));
        }
        let reference = spec.image.clone();
        let mut st = self.inner.state.lock().await;
        st.images.insert(
            reference.clone(),
            ImageRec {
                reference: reference.clone(),
                spec,
            },
        );
        Ok(Response::new(v1::PullImageResponse {
            image_ref: reference,
        }))
    }

    async fn remove_image(
        &self,
        request: Request<v1::RemoveImageRequest>,
    ) -> Result<Response<v1::RemoveImageResponse>, Status> {
        let reference = image_ref(request.into_inner().image);
        self.inner.state.lock().await.images.remove(&reference);
        Ok(Response::new(v1::RemoveImageResponse {}))
    }

    async fn image_fs_info(
        &self,
        _request: Request<v1::ImageFsInfoRequest>,
    ) -> Result<Response<v1::ImageFsInfoResponse>, Status> {
        let root = self.inner.opts.root_dir.clone();
        let dir = root.clone();
        let (bytes, inodes) = tokio::task::spawn_blocking(move || disk_usage(&dir))
            .await
            .map_err(|e| Status::internal(format!("ImageFsInfo failed: {e}")))?;
        Ok(Response::new(v1::ImageFsInfoResponse {
            image_filesystems: vec![v1::FilesystemUsage {
                timestamp: now_ns(),
                fs_id: Some(v1::FilesystemIdentifier {
                    mountpoint: root.display().to_string(),
                }),
                used_bytes: Some(v1::UInt64Value { value: bytes }),
                inodes_used: Some(v1::UInt64Value { value: inodes }),
            }],
            container_filesystems: vec![],
        }))
    }
}

/// `recs` oldest first (by creation time, then id), each as `summary` shows it: the order
/// of the CRI's list calls.
fn oldest_first<'a, R: 'a, T>(
    recs: impl Iterator<Item = &'a R>,
    key: impl Fn(&'a R) -> (i64, &'a String),
    summary: impl Fn(&'a R) -> T,
) -> Vec<T> {
    let mut recs: Vec<&'a R> = recs.collect();
    recs.sort_by_key(|&r| key(r));
    recs.into_iter().map(summary).collect()
}

/// The reference of an image spec ("" without one).
fn image_ref(spec: Option<v1::ImageSpec>) -> String {
    spec.map(|i| i.image).unwrap_or_default()
}

/// `ADDRESS/PREFIX` with a prefix no longer than the address.
fn is_cidr(s: &str) -> bool {
    let Some((addr, prefix)) = s.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix <= 32,
        Ok(std::net::IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

/// The stats of `running` containers (with their process groups), in the same order.
fn container_stats(running: &[(v1::Container, Option<i32>)]) -> Vec<v1::ContainerStats> {
    let pgids: Vec<i32> = running.iter().filter_map(|(_, g)| *g).collect();
    let usage = super::stats::usage_of_groups(&pgids);
    let now = now_ns();
    let val = |value| Some(v1::UInt64Value { value });
    running
        .iter()
        .map(|(c, pgid)| {
            let u = pgid
                .and_then(|g| usage.get(&g))
                .copied()
                .unwrap_or_default();
            v1::ContainerStats {
                attributes: Some(v1::ContainerAttributes {
                    id: c.id.clone(),
                    metadata: c.metadata.clone(),
                    labels: c.labels.clone(),
                    annotations: c.annotations.clone(),
                }),
                cpu: Some(v1::CpuUsage {
                    timestamp: now,
                    usage_core_nano_seconds: val(u.cpu_ns),
                    ..Default::default()
                }),
                memory: Some(v1::MemoryUsage {
                    timestamp: now,
                    working_set_bytes: val(u.rss_bytes),
                    usage_bytes: val(u.rss_bytes),
                    rss_bytes: val(u.rss_bytes),
                    page_faults: val(u.page_faults),
                    major_page_faults: val(u.major_page_faults),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect()
}

/// The refusal of a streaming call (`Exec`, `Attach`, `PortForward`).
fn no_streaming(method: &str) -> Status {
    Status::unimplemented(format!(
        "{method}: the embedded runtime has no streaming server; exec, attach and \
         port-forward need a CRI runtime such as containerd (--container-runtime-endpoint)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(command: &[&str], mounts: Vec<v1::Mount>) -> v1::ContainerConfig {
        v1::ContainerConfig {
            metadata: Some(v1::ContainerMetadata {
                name: "app".into(),
                attempt: 0,
            }),
            command: command.iter().map(|s| s.to_string()).collect(),
            mounts,
            ..Default::default()
        }
    }

    #[test]
    fn env_starts_from_path_and_hostname_and_config_overrides() {
        let mut c = config(&["true"], vec![]);
        c.envs = [("A", "1"), ("HOSTNAME", "mine")]
            .map(|(key, value)| v1::KeyValue {
                key: key.into(),
                value: value.into(),
            })
            .to_vec();
        let sb = v1::PodSandboxConfig {
            hostname: "pod".into(),
            ..Default::default()
        };
        let env = container_env(&c, &sb);
        assert_eq!(env[0].0, "PATH");
        assert!(env.contains(&("HOSTNAME".into(), "mine".into())));
        assert!(env.contains(&("A".into(), "1".into())));
        assert_eq!(env.len(), 3);
    }

    #[test]
    fn identity_mounts_of_existing_paths_are_accepted() {
        let m = v1::Mount {
            host_path: "/tmp".into(),
            container_path: "/tmp".into(),
            ..Default::default()
        };
        assert!(validate_container_config(&config(&["true"], vec![m])).is_ok());
    }
}
