//! Carries out the core's sync commands against the CRI runtime and reports every step.
//!
//! Owns the execution order of a runtime plan (kubelet `SyncPod` RT-34: kill the pod or
//! unwanted containers, remove pruned containers, create the sandbox, start init containers,
//! start regular containers), pod termination (`killPodWithSyncResult`: containers in
//! parallel, then sandboxes, then a check that nothing still runs), and pod inspection. Each
//! CRI step becomes a `RuntimeActionFinished` record and each command ends with exactly one
//! `SyncFinished`. Must not decide anything the core decided: which containers, which grace
//! periods and which order all come from the command.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::cri_config::{self, NodeContext};
use super::hooks::{self, HookOutcome, HookSite};
use super::runtime_view;
use super::Report;
use crate::core::command::{
    ContainerKill, ContainerStart, PodKill, RemovePodContentCommand, SyncPodCommand,
    SyncTerminatedPodCommand, SyncTerminatingPodCommand, SyncTerminatingRuntimePodCommand,
    WorkType,
};
use crate::core::kubelet_sync::KILL_POD_ERROR;
use crate::core::record::event::{
    ActionOutcome, RuntimeAction, RuntimeActionFinished, RuntimeStatusObserved, SyncFinished,
    SyncOutcome,
};
use crate::core::record::Event;
use crate::core::runtime_status::ContainerState;
use crate::core::{pod, Uid};
use crate::cri::{v1, CriClient, CriError};
use crate::observe::describe::{
    RUN_PODSANDBOX_DURATION_SECONDS, RUN_PODSANDBOX_ERRORS_TOTAL, STARTED_CONTAINERS_ERRORS_TOTAL,
    STARTED_CONTAINERS_TOTAL, STARTED_PODS_ERRORS_TOTAL, STARTED_PODS_TOTAL,
};

/// The kubelet's minimum `StopContainer` timeout.
pub const MIN_STOP_TIMEOUT_S: i64 = 2;

/// A cancellation signal for one running sync (the kubelet's `cancelFn`).
#[derive(Clone)]
struct CancelToken(watch::Receiver<bool>);

impl CancelToken {
    async fn cancelled(&mut self) {
        while !*self.0.borrow() {
            if self.0.changed().await.is_err() {
                // the sender is gone: never cancelled
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Running syncs that can be cancelled, by pod and sync id.
type CancelTable = BTreeMap<(Uid, u64), watch::Sender<bool>>;

/// Runs sync commands; cheap to clone.
#[derive(Clone)]
pub struct Executor {
    cri: CriClient,
    ctx: Arc<NodeContext>,
    report: Report,
    cancels: Arc<Mutex<CancelTable>>,
    /// Reads what container env refers to (only when the node talks to an API server).
    env: Option<Arc<super::env::fetch::EnvResolver>>,
    /// Writes projected, configMap, secret and downwardAPI volumes.
    projector: super::projected::Projector,
    /// Resolves `runtimeClassName` to the sandbox's runtime handler.
    runtime_classes: super::runtime_class::RuntimeClasses,
    /// Reads `imagePullSecrets` for image pulls.
    pull_secrets: super::pull_secrets::PullSecrets,
    /// Whether pods get their cgroup under `/kubepods` (`super::pod_cgroups`); not on a
    /// runtime without cgroups (the embedded one).
    pod_cgroups: bool,
    /// The `emptyDir`s with a `sizeLimit` the eviction monitor measures.
    empty_dirs: super::empty_dir_usage::EmptyDirUsage,
    /// How a sync waits for volumes that fail to set up.
    mount_wait: MountWait,
    /// The PLEG, which answers `InspectPod` so that one read serves the worker and its
    /// view; without it (or once it has stopped) the executor reads the pod itself.
    pleg: Option<tokio::sync::mpsc::Sender<crate::sources::pleg::InspectRequest>>,
}

/// How a sync waits for the pod's volumes (kubelet `WaitForAttachAndMount`, while the volume
/// manager retries a failed mount with exponential back-off): a failed attempt is the
/// FailedMount warning, the next comes after `retry_initial`, doubling, until `timeout` has
/// passed or the sync is cancelled; then the sync fails. A pod created with its node already
/// set usually meets this: the node authorizer learns of it a moment after the node does, so
/// its first TokenRequest or Secret read is refused.
#[derive(Clone, Copy, Debug)]
pub struct MountWait {
    pub retry_initial: Duration,
    pub timeout: Duration,
}

impl Default for MountWait {
    fn default() -> Self {
        let c = crate::core::config::CoreConfig::default();
        MountWait {
            retry_initial: Duration::from_millis(c.volume_mount_retry_initial_ms),
            timeout: Duration::from_millis(c.volume_mount_timeout_ms),
        }
    }
}

struct Step<'a> {
    exec: &'a Executor,
    uid: Uid,
    sync_id: u64,
    cause: u64,
}

impl Step<'_> {
    async fn report(&self, action: RuntimeAction, outcome: ActionOutcome, started: Instant) {
        self.exec
            .report
            .send(
                Event::RuntimeActionFinished(RuntimeActionFinished {
                    uid: self.uid.clone(),
                    sync_id: self.sync_id,
                    action,
                    outcome,
                    duration_ms: started.elapsed().as_millis() as u64,
                }),
                Some(self.cause),
            )
            .await;
    }
}

/// Where a plan's containers start: the sandbox, its config, the pod IP and the prepared
/// volumes.
struct StartTarget<'a> {
    sandbox_id: &'a str,
    sandbox_config: &'a v1::PodSandboxConfig,
    pod_ip: &'a str,
    volumes: &'a super::volumes::VolumePaths,
    credentials: &'a super::pull_secrets::PodCredentials,
}

fn failed(reason: &str, message: String) -> ActionOutcome {
    ActionOutcome::Failed {
        reason: reason.into(),
        message,
        detail: None,
    }
}

/// [`failed`] with where it arose (the container and pod spec field), for the ledger.
fn failed_at(reason: &str, message: String, detail: String) -> ActionOutcome {
    ActionOutcome::Failed {
        reason: reason.into(),
        message,
        detail: Some(detail),
    }
}

fn ok(id: Option<String>, detail: Option<String>) -> ActionOutcome {
    ActionOutcome::Ok { id, detail }
}

impl Executor {
    /// An executor over `cri` reporting to `report`.
    pub fn new(cri: CriClient, ctx: NodeContext, report: Report) -> Executor {
        let projector = super::projected::Projector::new(
            None,
            super::redact::Redactor::new(),
            ctx.pods_dir.clone(),
        );
        Executor {
            cri,
            ctx: Arc::new(ctx),
            report,
            cancels: Arc::default(),
            env: None,
            projector,
            runtime_classes: Default::default(),
            pull_secrets: Default::default(),
            pod_cgroups: true,
            empty_dirs: Default::default(),
            mount_wait: MountWait::default(),
            pleg: None,
        }
    }

    /// The same executor pulling images with the credentials `secrets` reads.
    pub fn with_pull_secrets(mut self, secrets: super::pull_secrets::PullSecrets) -> Executor {
        self.pull_secrets = secrets;
        self
    }

    /// The same executor resolving `runtimeClassName` through `classes`.
    pub fn with_runtime_classes(
        mut self,
        classes: super::runtime_class::RuntimeClasses,
    ) -> Executor {
        self.runtime_classes = classes;
        self
    }

    /// The same executor writing projected (and configMap, secret, downwardAPI) volumes
    /// with `projector`.
    pub fn with_projector(mut self, projector: super::projected::Projector) -> Executor {
        self.projector = projector;
        self
    }

    /// The same executor registering the pods it syncs with the `emptyDir` usage monitor.
    pub fn with_empty_dir_usage(
        mut self,
        empty_dirs: super::empty_dir_usage::EmptyDirUsage,
    ) -> Executor {
        self.empty_dirs = empty_dirs;
        self
    }

    /// The same executor reading ConfigMaps, Secrets, Services and the Node for container
    /// env through `resolver`.
    pub fn with_env(mut self, resolver: super::env::fetch::EnvResolver) -> Executor {
        self.env = Some(Arc::new(resolver));
        self
    }

    /// Turns the pod cgroups (`super::pod_cgroups`) off for a runtime that does not use
    /// them (the embedded runtime runs plain host processes).
    pub fn set_pod_cgroups(&mut self, enabled: bool) {
        self.pod_cgroups = enabled;
    }

    /// How syncs wait for volumes that fail to set up.
    pub fn with_mount_wait(mut self, wait: MountWait) -> Self {
        self.mount_wait = wait;
        self
    }

    /// The CRI client.
    pub fn cri(&self) -> &CriClient {
        &self.cri
    }

    /// Registers a sync as cancellable: its cancel token and the step its actions report
    /// through.
    fn register(&self, uid: &Uid, sync_id: u64, cause: u64) -> (CancelToken, Step<'_>) {
        let (tx, rx) = watch::channel(false);
        self.cancels
            .lock()
            .expect("cancel table")
            .insert((uid.clone(), sync_id), tx);
        let uid = uid.clone();
        let step = Step {
            exec: self,
            uid,
            sync_id,
            cause,
        };
        (CancelToken(rx), step)
    }

    fn unregister(&self, uid: &Uid, sync_id: u64) {
        self.cancels
            .lock()
            .expect("cancel table")
            .remove(&(uid.clone(), sync_id));
    }

    /// `CancelSync`: cuts the cancellable waits of a running sync short.
    pub fn cancel(&self, uid: &Uid, sync_id: u64) {
        if let Some(tx) = self
            .cancels
            .lock()
            .expect("cancel table")
            .get(&(uid.clone(), sync_id))
        {
            let _ = tx.send(true);
        }
    }

    async fn finish(
        &self,
        uid: &Uid,
        sync_id: u64,
        work: WorkType,
        outcome: SyncOutcome,
        cause: u64,
    ) {
        self.unregister(uid, sync_id);
        self.report
            .send(
                Event::SyncFinished(SyncFinished {
                    uid: uid.clone(),
                    sync_id,
                    work,
                    outcome,
                }),
                Some(cause),
            )
            .await;
    }

    /// The same executor handing `InspectPod` to the PLEG through `requests`.
    pub fn with_pleg_inspections(
        mut self,
        requests: tokio::sync::mpsc::Sender<crate::sources::pleg::InspectRequest>,
    ) -> Executor {
        self.pleg = Some(requests);
        self
    }

    /// `InspectPod`: has the PLEG read the pod's runtime status and report it, and waits
    /// for the answer; reads and reports it itself when there is no PLEG.
    pub async fn inspect(self, uid: Uid, cause: u64) {
        if let Some(pleg) = &self.pleg {
            let (answered, answer) = tokio::sync::oneshot::channel();
            let request = crate::sources::pleg::InspectRequest {
                uid: uid.clone(),
                cause,
                span: tracing::Span::current(),
                answered,
            };
            // a PLEG that stopped before answering (the node shutting down): read here
            if pleg.send(request).await.is_ok() && answer.await.is_ok() {
                return;
            }
        }
        let read = runtime_view::read_pod(&self.cri, &uid, "executor").await;
        // the read began after the record that asked for it was folded
        let event = RuntimeStatusObserved::from_read(uid, read, Some(cause));
        self.report
            .send(Event::RuntimeStatusObserved(event), Some(cause))
            .await;
    }

    /// `SyncPod`: runs the plan. Like the kubelet (which runs the runtime sync under
    /// `context.WithoutCancel`), a cancellation does not interrupt container starts.
    pub async fn sync_pod(self, cmd: SyncPodCommand, cause: u64) {
        let (token, step) = self.register(&cmd.uid, cmd.sync_id, cause);
        self.empty_dirs.watch(&self.ctx.pods_dir, &cmd.pod);
        let outcome = self.run_plan(&step, &cmd, token).await;
        self.finish(&cmd.uid, cmd.sync_id, WorkType::Sync, outcome, cause)
            .await;
    }

    async fn run_plan(
        &self,
        step: &Step<'_>,
        cmd: &SyncPodCommand,
        token: CancelToken,
    ) -> SyncOutcome {
        let plan = &cmd.plan;
        let p = &cmd.pod;
        let mut errors: Vec<String> = Vec::new();
        let old_ip = cmd.runtime.ips.first().cloned().unwrap_or_default();
        let site = HookSite {
            cri: &self.cri,
            pod: p,
            pod_ip: &old_ip,
        };
        // 1. kill the pod, or the containers that must go; the first failure aborts
        if let Some(kill) = &plan.kill_pod {
            if let Err(e) = self.kill_pod(step, kill, Some(&site)).await {
                return SyncOutcome::Failed { message: e };
            }
        } else {
            for k in &plan.kill_containers {
                if let Err(e) = self.kill_container(step, k, Some(&site), None).await {
                    return SyncOutcome::Failed { message: e };
                }
            }
        }
        // 2. remove pruned containers (failures are not fatal)
        for id in &plan.remove_containers {
            self.remove_container(step, id).await;
        }
        // the pod's volumes before its sandbox and containers (kubelet SyncPod's
        // WaitForAttachAndMount): a volume that cannot be set up (projected, configMap,
        // secret, downwardAPI, emptyDir or hostPath) is the kubelet's FailedMount warning,
        // nothing is created, and the next sync tries again
        let starts_nothing =
            plan.start_ephemeral.is_empty() && plan.start_init.is_empty() && plan.start.is_empty();
        let volumes = if starts_nothing {
            // nothing to mount, but the volumes follow the pod's latest labels/annotations
            self.projector.update_pod(p).await;
            Default::default()
        } else {
            match self.wait_for_volumes(step, p, token).await {
                Ok(paths) => paths,
                Err(Some(message)) => return SyncOutcome::Failed { message },
                // the pod is being terminated: the termination goes on at once
                Err(None) => return SyncOutcome::Canceled,
            }
        };
        // 3. the sandbox
        let mut sandbox_id = plan.sandbox_id.clone();
        let mut attempt = cmd
            .runtime
            .sandboxes
            .iter()
            .find(|s| s.id == sandbox_id)
            .map_or(0, |s| s.attempt);
        let mut pod_ip = cmd.runtime.ips.first().cloned().unwrap_or_default();
        let starts = !starts_nothing;
        if let Some(a) = plan.create_sandbox {
            attempt = a;
        }
        // the sandbox's configuration, formed once for a new sandbox and the containers'
        // creation (kubelet generatePodSandboxConfig); a failure fails the sync
        let sandbox_config = if plan.create_sandbox.is_some() || starts {
            self.sandbox_config(step, p, attempt).await
        } else {
            Ok(cri_config::sandbox_config(&self.ctx, p, attempt))
        };
        if let Some(a) = plan.create_sandbox {
            metrics::counter!(STARTED_PODS_TOTAL).increment(1);
            let started = Instant::now();
            let run = match &sandbox_config {
                Err(e) => Err(e.clone()),
                Ok(config) => self.run_sandbox(p, config.clone()).await,
            };
            let action = RuntimeAction::CreateSandbox { attempt: a };
            match run {
                Ok(id) => {
                    sandbox_id = id.clone();
                    if let Ok(st) = self.cri.pod_sandbox_status(&id, false).await {
                        if let Some(ip) = st.status.and_then(|s| s.network).map(|n| n.ip) {
                            pod_ip = ip;
                        }
                    }
                    step.report(action, ok(Some(id), None), started).await;
                }
                Err(e) => {
                    metrics::counter!(STARTED_PODS_ERRORS_TOTAL).increment(1);
                    let msg = format!("Failed to create pod sandbox: {e}");
                    let outcome = failed("CreatePodSandboxError", msg.clone());
                    step.report(action, outcome, started).await;
                    return SyncOutcome::Failed { message: msg };
                }
            }
        }
        if sandbox_id.is_empty() && starts {
            return SyncOutcome::Failed {
                message: format!(
                    "no sandbox to start containers of pod {}/{} in",
                    pod::namespace(p),
                    pod::name(p)
                ),
            };
        }
        let sandbox_config = match sandbox_config {
            Ok(config) => config,
            Err(e) => {
                return SyncOutcome::Failed {
                    message: format!("GeneratePodSandboxConfig failed: {e}"),
                }
            }
        };
        // the pod's pull credentials (kubelet getPullSecretsForPod)
        let credentials = if starts {
            self.pull_credentials(step, p).await
        } else {
            Default::default()
        };
        let target = StartTarget {
            sandbox_id: &sandbox_id,
            sandbox_config: &sandbox_config,
            pod_ip: &pod_ip,
            volumes: &volumes,
            credentials: &credentials,
        };
        // 4. ephemeral containers (`kubectl debug`): a failure is recorded, the rest go on
        for s in &plan.start_ephemeral {
            if let Err(e) = self.start_container(step, p, &target, s).await {
                errors.push(e);
            }
        }
        // 5. init containers in order: a failure stops here (a sidecar failure does not)
        for s in &plan.start_init {
            if let Err(e) = self.start_container(step, p, &target, s).await {
                let sidecar = cri_config::spec_container(p, s)
                    .is_some_and(|c| c.restart_policy.as_deref() == Some("Always"));
                errors.push(e);
                if !sidecar {
                    return SyncOutcome::Failed {
                        message: errors.join("; "),
                    };
                }
            }
        }
        // 6. regular containers: failures are recorded and the others still start
        for s in &plan.start {
            if let Err(e) = self.start_container(step, p, &target, s).await {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            SyncOutcome::Ok
        } else {
            SyncOutcome::Failed {
                message: errors.join("; "),
            }
        }
    }

    /// `generatePodSandboxConfig` with the pod's hostname (`GetNodenameForKernel`), DNS
    /// (`GetPodDNS`) and port mappings (`MakePortMappings`); the warnings forming the DNS raised are reported for the pod's Warning
    /// events.
    async fn sandbox_config(
        &self,
        step: &Step<'_>,
        p: &Pod,
        attempt: u32,
    ) -> Result<v1::PodSandboxConfig, String> {
        let mut config = cri_config::sandbox_config(&self.ctx, p, attempt);
        if !config.hostname.is_empty() {
            // a pod with its own UTS namespace: the kubelet's hostname rules
            config.hostname = super::etc_hosts::kernel_hostname(p, &self.ctx.dns.cluster_domain)?;
        }
        let dns = super::dns::for_pod(&self.ctx.dns, p)?;
        for w in dns.warnings {
            let action = RuntimeAction::PodConfigWarning {
                reason: w.reason.into(),
                message: w.message,
            };
            step.report(action, ok(None, None), Instant::now()).await;
        }
        config.dns_config = Some(dns.config);
        config.port_mappings = super::ports::port_mappings(p);
        Ok(config)
    }

    /// The pod's `imagePullSecrets`; a secret that cannot be read is reported for the
    /// kubelet's `FailedToRetrieveImagePullSecret` warning and the pulls go on without it.
    async fn pull_credentials(
        &self,
        step: &Step<'_>,
        p: &Pod,
    ) -> super::pull_secrets::PodCredentials {
        let credentials = self.pull_secrets.for_pod(p).await;
        if let Some(message) = credentials.missing_warning() {
            let action = RuntimeAction::PodConfigWarning {
                reason: "FailedToRetrieveImagePullSecret".into(),
                message,
            };
            step.report(action, ok(None, None), Instant::now()).await;
        }
        credentials
    }

    /// `createPodSandbox`: the log directory, the runtime handler of the pod's
    /// RuntimeClass, then `RunPodSandbox`.
    async fn run_sandbox(&self, p: &Pod, config: v1::PodSandboxConfig) -> Result<String, String> {
        // the pod's cgroup with its limits (kubelet SyncPod: EnsureExists), then its logs
        if self.pod_cgroups {
            super::pod_cgroups::ensure(p)?;
        }
        std::fs::create_dir_all(&config.log_directory)
            .map_err(|e| format!("cannot create log directory {}: {e}", config.log_directory))?;
        let handler = self.runtime_classes.handler(p).await?;
        let started = Instant::now();
        let run = self.cri.run_pod_sandbox(config, &handler).await;
        metrics::histogram!(RUN_PODSANDBOX_DURATION_SECONDS, "runtime_handler" => handler.clone())
            .record(started.elapsed().as_secs_f64());
        if run.is_err() {
            metrics::counter!(RUN_PODSANDBOX_ERRORS_TOTAL, "runtime_handler" => handler)
                .increment(1);
        }
        run.map_err(|e| e.to_string())
    }

    /// The kubelet-managed files of a container (`makeMounts`): its termination-message
    /// file and the pod's `/etc/hosts`, on runtimes that mount them.
    fn managed_mounts(
        &self,
        p: &Pod,
        c: &k8s_openapi::api::core::v1::Container,
        s: &ContainerStart,
        pod_ip: &str,
    ) -> Result<Vec<v1::Mount>, String> {
        if !self.ctx.managed_files {
            return Ok(Vec::new());
        }
        let pods_dir = &self.ctx.pods_dir;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!("{}-{nanos:x}", s.restart_count);
        let ips: Vec<String> = Some(pod_ip.to_string())
            .filter(|ip| !ip.is_empty())
            .into_iter()
            .collect();
        let domain = &self.ctx.dns.cluster_domain;
        Ok(super::termination_message::mount(pods_dir, p, c, &id)?
            .into_iter()
            .chain(super::etc_hosts::mount(pods_dir, domain, p, c, &ips)?)
            .collect())
    }

    async fn start_container(
        &self,
        step: &Step<'_>,
        p: &Pod,
        target: &StartTarget<'_>,
        s: &ContainerStart,
    ) -> Result<(), String> {
        let who = format!(
            "container {} of pod {}/{}",
            s.name,
            pod::namespace(p),
            pod::name(p)
        );
        let Some(c) = cri_config::spec_container(p, s) else {
            return Err(format!("{who} is not in the pod spec"));
        };
        let image = c.image.clone().unwrap_or_default();
        let container_type = s.kind.metric_label();
        metrics::counter!(STARTED_CONTAINERS_TOTAL, "container_type" => container_type)
            .increment(1);
        let result = self
            .create_and_start(step, p, target, s, &c, &image, &who)
            .await;
        if let Err((code, _)) = &result {
            metrics::counter!(
                STARTED_CONTAINERS_ERRORS_TOTAL,
                "container_type" => container_type,
                "code" => *code
            )
            .increment(1);
        }
        result.map_err(|(_, message)| message)
    }

    /// Pull, create and start one container; errors carry the kubelet's reason.
    #[allow(clippy::too_many_arguments)]
    async fn create_and_start(
        &self,
        step: &Step<'_>,
        p: &Pod,
        target: &StartTarget<'_>,
        s: &ContainerStart,
        c: &k8s_openapi::api::core::v1::Container,
        image: &str,
        who: &str,
    ) -> Result<(), (&'static str, String)> {
        let StartTarget {
            sandbox_id,
            sandbox_config,
            pod_ip,
            ..
        } = *target;
        let image = image.to_string();
        // image, per imagePullPolicy
        let started = Instant::now();
        let pull = self
            .ensure_image(
                step,
                c,
                &image,
                s.image_pull_backoff.as_deref(),
                target.credentials,
            )
            .await;
        let outcome = match &pull {
            Ok(detail) => ok(None, Some(detail.clone())),
            Err((reason, msg)) => failed(reason, msg.clone()),
        };
        let container = s.name.clone();
        let action = RuntimeAction::PullImage { container, image };
        step.report(action, outcome, started).await;
        if let Err((reason, message)) = pull {
            return Err((reason_code(reason), message));
        }
        // create
        let started = Instant::now();
        // what the env refers to, the volumes, then the configuration
        let config = async {
            let sources = match &self.env {
                Some(r) => r.fetch(p, c).await?,
                None => super::env::EnvSources::default(),
            };
            self.verify_run_as_non_root(p, c).await?;
            let mut config =
                cri_config::container_config(&self.ctx, p, s, pod_ip, target.volumes, &sources)?;
            config.mounts.extend(self.managed_mounts(p, c, s, pod_ip)?);
            Ok::<_, cri_config::ConfigError>(config)
        }
        .await;
        // the outcome has the kubelet's message (what the status and the event show) and
        // where it arose; the error returned names the container
        let (create, outcome) = match config {
            Err(e) => {
                let detail = match &e.field {
                    Some(field) => format!("{who}, {field}"),
                    None => who.to_string(),
                };
                let reason = "CreateContainerConfigError";
                (
                    Err((reason, format!("{who}: {e}"))),
                    failed_at(reason, e.message, detail),
                )
            }
            Ok(config) => {
                let log_dir = std::path::Path::new(&sandbox_config.log_directory).join(&s.name);
                let _ = std::fs::create_dir_all(&log_dir);
                let created = self
                    .cri
                    .create_container(sandbox_id, config, sandbox_config.clone())
                    .await;
                match created {
                    Ok(id) => (Ok(id.clone()), ok(Some(id), None)),
                    Err(e) => {
                        let reason = "CreateContainerError";
                        (
                            Err((reason, format!("{who}: {e}"))),
                            failed_at(reason, e.status_message(), who.to_string()),
                        )
                    }
                }
            }
        };
        let (container, kind) = (s.name.clone(), s.kind);
        step.report(
            RuntimeAction::CreateContainer { container, kind },
            outcome,
            started,
        )
        .await;
        let id = create?;
        // start
        let started = Instant::now();
        let action = RuntimeAction::StartContainer {
            container: s.name.clone(),
            kind: s.kind,
            id: id.clone(),
        };
        match self.cri.start_container(&id).await {
            Ok(()) => {
                step.report(action, ok(Some(id.clone()), None), started)
                    .await;
                self.post_start(step, p, c, s, &id, pod_ip)
                    .await
                    .map_err(|msg| ("PostStartHookError", msg))
            }
            Err(e) => {
                let reason = "RunContainerError";
                let outcome = failed_at(reason, e.status_message(), who.to_string());
                step.report(action, outcome, started).await;
                Err((reason, format!("{who}: {e}")))
            }
        }
    }

    /// `verifyRunAsNonRoot`, asking the runtime for the image's user (CRI `ImageStatus`)
    /// only when the container must not run as root and names no `runAsUser`.
    async fn verify_run_as_non_root(
        &self,
        p: &Pod,
        c: &k8s_openapi::api::core::v1::Container,
    ) -> Result<(), cri_config::ConfigError> {
        use super::security_context as sc;
        let (mut uid, mut name) = (None, String::new());
        if sc::needs_image_user(p, c) {
            let image = c.image.clone().unwrap_or_default();
            let spec = v1::ImageSpec {
                image: image.clone(),
                user_specified_image: image.clone(),
                ..Default::default()
            };
            let status = self.cri.image_status(spec, false).await;
            let status =
                status.map_err(|e| format!("cannot get the user of image {image:?}: {e}"))?;
            (uid, name) = sc::image_user(status.image.as_ref());
        }
        sc::verify_run_as_non_root(p, c, uid, &name)
    }

    /// Step 4 of `startContainer`: the postStart hook. A failure is reported, the container
    /// is killed (message `FailedPostStartHook`, with its preStop hook) and the start fails
    /// (RT-37). The hook may take at most the CRI request timeout (upstream: no limit).
    async fn post_start(
        &self,
        step: &Step<'_>,
        p: &Pod,
        c: &k8s_openapi::api::core::v1::Container,
        s: &ContainerStart,
        id: &str,
        pod_ip: &str,
    ) -> Result<(), String> {
        let (Some(handler), Some(kill)) = (
            c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()),
            s.post_start_failure_kill,
        ) else {
            return Ok(());
        };
        let started = Instant::now();
        let site = HookSite {
            cri: &self.cri,
            pod: p,
            pod_ip,
        };
        let limit = std::time::Duration::from_millis(self.cri.options().request_timeout_ms);
        let failure = match hooks::run(&site, c, id, handler, limit).await {
            HookOutcome::Done => None,
            HookOutcome::Failed(msg) => Some(msg),
            HookOutcome::NotFinished => Some(format!(
                "PostStart hook of container {:?} did not finish within {} s",
                c.name,
                limit.as_secs()
            )),
        };
        let action = RuntimeAction::PostStartHook {
            container: s.name.clone(),
            id: id.to_string(),
        };
        let Some(msg) = failure else {
            step.report(action, ok(None, None), started).await;
            return Ok(());
        };
        step.report(action, failed("PostStartHookError", msg.clone()), started)
            .await;
        let k = ContainerKill {
            id: id.to_string(),
            name: s.name.clone(),
            grace_period_s: kill.grace_period_s,
            message: crate::core::kubelet_sync::FAILED_POST_START_HOOK.into(),
            pre_stop_s: kill.pre_stop_s,
            wait_for: vec![],
        };
        if let Err(e) = self.kill_container(step, &k, Some(&site), None).await {
            tracing::warn!(error = %e, "killing a container whose postStart hook failed");
        }
        Err(msg)
    }

    /// RT-39: the preStop hook of a kill, for at most `budget_s`; returns the whole seconds
    /// it took (subtracted from the grace period).
    async fn pre_stop(
        &self,
        step: &Step<'_>,
        k: &ContainerKill,
        site: &HookSite<'_>,
        budget_s: i64,
    ) -> i64 {
        let Some(c) = cri_config::container_named(site.pod, &k.name) else {
            return 0;
        };
        let Some(handler) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) else {
            return 0;
        };
        let started = Instant::now();
        let budget = std::time::Duration::from_secs(budget_s.max(0) as u64);
        let outcome = match hooks::run(site, c, &k.id, handler, budget).await {
            HookOutcome::Done => ok(None, None),
            HookOutcome::Failed(msg) => failed("PreStopHookError", msg),
            HookOutcome::NotFinished => ok(
                None,
                Some(format!(
                    "not completed within the grace period ({budget_s} s)"
                )),
            ),
        };
        let elapsed_s = started.elapsed().as_secs() as i64;
        step.report(
            RuntimeAction::PreStopHook {
                name: k.name.clone(),
                id: k.id.clone(),
            },
            outcome,
            started,
        )
        .await;
        elapsed_s
    }

    /// The kubelet's `EnsureImageExists`: Always pulls, IfNotPresent pulls when missing,
    /// Never fails when missing; a pull while the core says the pod's image backs off fails
    /// with `ImagePullBackOff` without asking the runtime. Returns the `Pulled`/`already
    /// present` detail.
    async fn ensure_image(
        &self,
        step: &Step<'_>,
        c: &k8s_openapi::api::core::v1::Container,
        image: &str,
        backoff: Option<&str>,
        credentials: &super::pull_secrets::PodCredentials,
    ) -> Result<String, (&'static str, String)> {
        if image.is_empty() {
            return Err((
                "InvalidImageName",
                format!("container {}: image is empty", c.name),
            ));
        }
        let policy = c.image_pull_policy.clone().unwrap_or_else(|| {
            if image.ends_with(":latest")
                || !image.rsplit('/').next().unwrap_or(image).contains(':')
            {
                "Always".into()
            } else {
                "IfNotPresent".into()
            }
        });
        let spec = v1::ImageSpec {
            image: image.to_string(),
            user_specified_image: image.to_string(),
            ..Default::default()
        };
        let status = self.cri.image_status(spec.clone(), false).await;
        let inspect = |e| {
            (
                "ImageInspectError",
                format!("Failed to inspect image {image:?}: {e}"),
            )
        };
        let present = status.map_err(inspect)?.image.is_some();
        match policy.as_str() {
            "Never" | "IfNotPresent" if present => Ok(format!(
                "Container image {image:?} already present on machine"
            )),
            "Never" => Err((
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
            )),
            _ if backoff.is_some() => {
                Err(("ImagePullBackOff", backoff.unwrap_or_default().to_string()))
            }
            _ => {
                let started = Instant::now();
                step.report(
                    RuntimeAction::PullingImage {
                        container: c.name.clone(),
                        image: image.to_string(),
                    },
                    ok(None, None),
                    started,
                )
                .await;
                match self.pull(spec, credentials).await {
                    Ok(r) => Ok(format!(
                        "Successfully pulled image {image:?} in {:?} (image ref {r})",
                        started.elapsed()
                    )),
                    // the runtime's own words, as the kubelet's waiting message; the core
                    // words the event (`Failed to pull image "…": …`)
                    Err(e) => Err(("ErrImagePull", e)),
                }
            }
        }
    }

    /// kubelet `PullImage`: without credentials for the image, one pull without; else each
    /// matching credential in turn until one works (the errors of all, if none does).
    async fn pull(
        &self,
        spec: v1::ImageSpec,
        credentials: &super::pull_secrets::PodCredentials,
    ) -> Result<String, String> {
        let auths = credentials.lookup(&spec.image)?;
        if auths.is_empty() {
            return self
                .cri
                .pull_image(spec, None, None)
                .await
                .map_err(|e| e.runtime_message());
        }
        let mut errors = Vec::new();
        for auth in auths {
            match self.cri.pull_image(spec.clone(), Some(auth), None).await {
                Ok(r) => return Ok(r),
                Err(e) => errors.push(e.runtime_message()),
            }
        }
        Err(if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        })
    }

    /// `killContainer`: the preStop hook within the grace period (when the plan gives it
    /// a budget and `site` has the pod), then its turn in a whole-pod kill (`turns`, RT-42)
    /// within what is left, then `StopContainer` with what is left of the grace period, at
    /// least 2 s. Its own turn ends when `StopContainer` returns, however it went.
    async fn kill_container(
        &self,
        step: &Step<'_>,
        k: &ContainerKill,
        site: Option<&HookSite<'_>>,
        turns: Option<&Turns>,
    ) -> Result<(), String> {
        let mut left_s = k.grace_period_s;
        if let (Some(budget), Some(site)) = (k.pre_stop_s, site) {
            left_s = budget - self.pre_stop(step, k, site, budget).await;
        }
        if let Some(turns) = turns.filter(|_| !k.wait_for.is_empty() && left_s > 0) {
            let waited = Instant::now();
            turns.wait(&k.wait_for, left_s).await;
            left_s -= waited.elapsed().as_secs() as i64;
        }
        let result = self
            .stop_container(step, k, left_s.max(MIN_STOP_TIMEOUT_S))
            .await;
        if let Some(turns) = turns {
            turns.done(&k.name);
        }
        result
    }

    /// `StopContainer` with `timeout_s`, reported as a `KillContainer` action.
    async fn stop_container(
        &self,
        step: &Step<'_>,
        k: &ContainerKill,
        timeout: i64,
    ) -> Result<(), String> {
        let started = Instant::now();
        let action = RuntimeAction::KillContainer {
            id: k.id.clone(),
            name: k.name.clone(),
            message: k.message.clone(),
        };
        let (outcome, result) = match self.cri.stop_container(&k.id, timeout).await {
            Ok(()) => (ok(None, None), Ok(())),
            Err(e) if e.is_not_found() => (ok(None, Some("already gone".into())), Ok(())),
            Err(e) => {
                let msg = sync_result_error("KillContainer", &k.name, "KillContainerError", &e);
                (failed("KillContainerError", msg.clone()), Err(msg))
            }
        };
        step.report(action, outcome, started).await;
        result
    }

    async fn remove_container(&self, step: &Step<'_>, id: &str) {
        let started = Instant::now();
        let outcome = match self.cri.remove_container(id).await {
            Ok(()) => ok(None, None),
            Err(e) if e.is_not_found() => ok(None, Some("already gone".into())),
            Err(e) => failed("RemoveContainerError", e.to_string()),
        };
        step.report(
            RuntimeAction::RemoveContainer { id: id.to_string() },
            outcome,
            started,
        )
        .await;
    }

    /// `killPodWithSyncResult`: every container in parallel, then every sandbox.
    async fn kill_pod(
        &self,
        step: &Step<'_>,
        kill: &PodKill,
        site: Option<&HookSite<'_>>,
    ) -> Result<(), String> {
        // only a pod with sidecars has containers that wait for others
        let ordered = kill.containers.iter().any(|k| !k.wait_for.is_empty());
        let turns = ordered.then(|| Turns::new(kill));
        let results = futures::future::join_all(
            kill.containers
                .iter()
                .map(|k| self.kill_container(step, k, site, turns.as_ref())),
        )
        .await;
        let mut errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        for id in &kill.sandbox_ids {
            let started = Instant::now();
            let action = RuntimeAction::StopSandbox { id: id.clone() };
            let outcome = match self.cri.stop_pod_sandbox(id).await {
                Err(e) if !e.is_not_found() => {
                    let msg = sync_result_error("KillPodSandbox", id, "KillPodSandboxError", &e);
                    errors.push(msg.clone());
                    failed("KillPodSandboxError", msg)
                }
                _ => ok(None, None),
            };
            step.report(action, outcome, started).await;
        }
        match errors.len() {
            0 => Ok(()),
            // utilerrors.NewAggregate: one error as itself, several in brackets
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }

    /// Kills the pod, then checks that nothing of it still runs; anything found running (a
    /// container started after the plan was made) is stopped with the minimum grace.
    async fn terminate(
        &self,
        step: &Step<'_>,
        kill: &PodKill,
        site: Option<&HookSite<'_>>,
    ) -> SyncOutcome {
        if let Err(e) = self.kill_pod(step, kill, site).await {
            return SyncOutcome::Failed {
                message: format!("{KILL_POD_ERROR}{e}"),
            };
        }
        for round in 0..2 {
            let read_after = self.report.folded_seq();
            let status = match runtime_view::pod_status(&self.cri, &step.uid).await {
                Ok(s) => s,
                Err(e) => {
                    return SyncOutcome::Failed {
                        message: format!("error checking the pod after killing it: {e}"),
                    }
                }
            };
            let running: Vec<&crate::core::runtime_status::ContainerStatus> = status
                .containers
                .iter()
                .filter(|c| c.state == ContainerState::Running)
                .collect();
            let ready_sandboxes: Vec<String> = status
                .sandboxes
                .iter()
                .filter(|s| s.state == crate::core::runtime_status::SandboxState::SandboxReady)
                .map(|s| s.id.clone())
                .collect();
            if running.is_empty() && ready_sandboxes.is_empty() {
                // the stopped pod, with its exit codes, for its terminal status (RT-43); an
                // observation like a relist's (no command asked for it)
                let event = RuntimeStatusObserved::from_read(
                    step.uid.clone(),
                    Ok(status),
                    Some(read_after),
                );
                self.report
                    .send(Event::RuntimeStatusObserved(event), None)
                    .await;
                return SyncOutcome::Ok;
            }
            if round == 1 {
                let names: Vec<String> = running.iter().map(|c| c.name.clone()).collect();
                return SyncOutcome::Failed {
                    message: format!(
                        "detected running containers after a successful KillPod, CRI violation: {names:?}"
                    ),
                };
            }
            let extra = PodKill {
                containers: running
                    .iter()
                    .map(|c| ContainerKill {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        grace_period_s: MIN_STOP_TIMEOUT_S,
                        message: format!("Stopping container {}", c.name),
                        pre_stop_s: None,
                        wait_for: vec![],
                    })
                    .collect(),
                sandbox_ids: ready_sandboxes,
            };
            if let Err(e) = self.kill_pod(step, &extra, None).await {
                return SyncOutcome::Failed {
                    message: format!("{KILL_POD_ERROR}{e}"),
                };
            }
        }
        SyncOutcome::Ok
    }

    /// Sets up the pod's volumes, trying again after a failure as [`MountWait`] says; each
    /// failed attempt is a FailedMount warning. The error of the last attempt when the wait
    /// ends without them, `None` when the sync was cancelled.
    async fn wait_for_volumes(
        &self,
        step: &Step<'_>,
        p: &Pod,
        mut token: CancelToken,
    ) -> Result<super::volumes::VolumePaths, Option<String>> {
        let deadline = Instant::now() + self.mount_wait.timeout;
        let mut delay = self.mount_wait.retry_initial;
        loop {
            let prepared = match self.projector.prepare(p).await {
                Ok(_) => super::volumes::prepare(&self.ctx.pods_dir, p),
                Err(e) => Err(e),
            };
            let e = match prepared {
                Ok(paths) => return Ok(paths),
                Err(e) => e,
            };
            let action = RuntimeAction::PodConfigWarning {
                reason: "FailedMount".into(),
                message: e.event_message(),
            };
            step.report(action, ok(None, None), Instant::now()).await;
            if Instant::now() + delay > deadline {
                return Err(Some(e.detail));
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = token.cancelled() => return Err(None),
            }
            delay = delay.saturating_mul(2);
        }
    }

    /// `SyncTerminatingPod`: stop everything within the grace period. A cancellation (the
    /// grace period was shortened) returns `Canceled` at once so the shorter kill can run.
    pub async fn sync_terminating_pod(self, cmd: SyncTerminatingPodCommand, cause: u64) {
        let (mut token, step) = self.register(&cmd.uid, cmd.sync_id, cause);
        let pod_ip = cmd.runtime.ips.first().cloned().unwrap_or_default();
        let site = HookSite {
            cri: &self.cri,
            pod: &cmd.pod,
            pod_ip: &pod_ip,
        };
        // a cancellation also cuts a running preStop hook short (the shorter kill runs it
        // again with what is left)
        let outcome = tokio::select! {
            o = self.terminate(&step, &cmd.kill, Some(&site)) => o,
            _ = token.cancelled() => SyncOutcome::Canceled,
        };
        self.finish(&cmd.uid, cmd.sync_id, WorkType::Terminating, outcome, cause)
            .await;
    }

    /// `SyncTerminatingRuntimePod`: stop a pod no config wants.
    pub async fn sync_terminating_runtime_pod(
        self,
        cmd: SyncTerminatingRuntimePodCommand,
        cause: u64,
    ) {
        let (mut token, step) = self.register(&cmd.uid, cmd.sync_id, cause);
        let outcome = tokio::select! {
            o = self.terminate(&step, &cmd.kill, None) => o,
            _ = token.cancelled() => SyncOutcome::Canceled,
        };
        if outcome == SyncOutcome::Ok {
            // an orphaned pod's volumes (no SyncTerminatedPod follows)
            let _ = self.remove_volumes(&cmd.uid);
        }
        self.finish(
            &cmd.uid,
            cmd.sync_id,
            WorkType::TerminatingRuntime,
            outcome,
            cause,
        )
        .await;
    }

    /// `SyncTerminatedPod`: remove the pod's cgroup and volumes (its containers and
    /// sandboxes are `RemovePodContent`'s, after this sync: RT-44).
    pub async fn sync_terminated_pod(self, cmd: SyncTerminatedPodCommand, cause: u64) {
        let (_token, _step) = self.register(&cmd.uid, cmd.sync_id, cause);
        let mut outcome = SyncOutcome::Ok;
        // its cgroup (a failure is logged: the pod is terminated all the same)
        let cgroup = if self.pod_cgroups {
            super::pod_cgroups::remove(cmd.uid.as_str())
        } else {
            Ok(())
        };
        if let Err(e) = cgroup {
            tracing::warn!(uid = %cmd.uid.as_str(), error = %e, "cannot remove the pod's cgroup");
        }
        // the kubelet tears a terminated pod's volumes down (emptyDir contents go with it)
        if let Err(e) = self.remove_volumes(&cmd.uid) {
            if outcome == SyncOutcome::Ok {
                outcome = SyncOutcome::Failed {
                    message: format!("error tearing down the pod's volumes: {e}"),
                };
            }
        }
        self.finish(&cmd.uid, cmd.sync_id, WorkType::Terminated, outcome, cause)
            .await;
    }

    /// `RemovePodContent`: removes the finished pod's containers at once, then its sandboxes
    /// (logs stay on disk), each a reported action; what is left after a failure is removed
    /// when the core looks again.
    pub async fn remove_pod_content(self, cmd: RemovePodContentCommand, cause: u64) {
        let step = Step {
            exec: &self,
            uid: cmd.uid.clone(),
            sync_id: cmd.removal_id,
            cause,
        };
        futures::future::join_all(
            cmd.containers
                .iter()
                .map(|id| self.remove_container(&step, id)),
        )
        .await;
        for id in &cmd.sandboxes {
            let started = Instant::now();
            let o = match self.cri.remove_pod_sandbox(id).await {
                Err(e) if !e.is_not_found() => failed("RemovePodSandboxError", e.to_string()),
                _ => ok(None, None),
            };
            step.report(RuntimeAction::RemoveSandbox { id: id.clone() }, o, started)
                .await;
        }
    }

    /// Tears the pod's volumes down (its projected volumes are no longer refreshed).
    fn remove_volumes(&self, uid: &Uid) -> Result<(), String> {
        self.projector.forget_pod(uid.as_str());
        self.empty_dirs.forget(uid.as_str());
        let removed = super::volumes::remove_pod(&self.ctx.pods_dir, uid.as_str());
        if let Err(e) = &removed {
            tracing::warn!(uid = %uid.as_str(), error = %e, "cannot remove the pod's volumes");
        }
        removed
    }
}

/// The `code` label of `kubelet_started_containers_errors_total` for a failure reason.
fn reason_code(reason: &str) -> &'static str {
    match reason {
        "InvalidImageName" => "InvalidImageName",
        "ImageInspectError" => "ImageInspectError",
        "ErrImageNeverPull" => "ErrImageNeverPull",
        "ErrImagePull" => "ErrImagePull",
        _ => "Unknown",
    }
}

/// RT-42: the containers of one whole-pod kill that have stopped, for those that wait for
/// their turn (the kubelet's `terminationOrdering`). A name outside the kill never blocks.
struct Turns(BTreeMap<String, watch::Sender<bool>>);

impl Turns {
    fn new(kill: &PodKill) -> Turns {
        let names = kill.containers.iter().map(|k| k.name.clone());
        Turns(names.map(|n| (n, watch::channel(false).0)).collect())
    }

    /// Waits until every container in `names` has stopped, for at most `limit_s` seconds.
    async fn wait(&self, names: &[String], limit_s: i64) {
        let all = names.iter().filter_map(|n| self.0.get(n)).map(|tx| {
            let mut rx = tx.subscribe();
            async move { rx.wait_for(|stopped| *stopped).await.map(|_| ()) }
        });
        let limit = std::time::Duration::from_secs(limit_s.max(0) as u64);
        let _ = tokio::time::timeout(limit, futures::future::join_all(all)).await;
    }

    /// Marks `name` stopped.
    fn done(&self, name: &str) {
        if let Some(tx) = self.0.get(name) {
            tx.send_replace(true);
        }
    }
}

/// A failed step as the kubelet's `PodSyncResult.Error` words it:
/// `failed to "KillPodSandbox" for "ID" with KillPodSandboxError: "rpc error: …"`.
fn sync_result_error(action: &str, target: &str, error: &str, e: &CriError) -> String {
    format!(
        "failed to {action:?} for {target:?} with {error}: {:?}",
        e.grpc_text()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_all_keeps_order_and_runs_concurrently() {
        let started = Instant::now();
        let out = futures::future::join_all((0..5u64).map(|i| async move {
            tokio::time::sleep(std::time::Duration::from_millis(100 - i * 10)).await;
            i
        }))
        .await;
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
        assert!(started.elapsed() < std::time::Duration::from_millis(300));
    }
}
