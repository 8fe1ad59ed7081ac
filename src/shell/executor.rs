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
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::cri_config::{self, NodeContext};
use super::runtime_view;
use super::Report;
use crate::core::command::{
    ContainerKill, ContainerStart, PodKill, SyncPodCommand, SyncTerminatedPodCommand,
    SyncTerminatingPodCommand, SyncTerminatingRuntimePodCommand, WorkType,
};
use crate::core::runtime_status::ContainerState;
use crate::core::{pod, Uid};
use crate::cri::{v1, CriClient, CriError};
use crate::ledger::event::{
    ActionOutcome, RuntimeAction, RuntimeActionFinished, RuntimeStatusObserved, SyncFinished,
    SyncOutcome,
};
use crate::ledger::Event;

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
    /// Resolves `secretKeyRef` env (only when the node talks to an API server).
    secrets: Option<Arc<super::secrets::SecretResolver>>,
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

fn failed(reason: &str, message: String) -> ActionOutcome {
    ActionOutcome::Failed {
        reason: reason.into(),
        message,
    }
}

fn ok(id: Option<String>, detail: Option<String>) -> ActionOutcome {
    ActionOutcome::Ok { id, detail }
}

impl Executor {
    /// An executor over `cri` reporting to `report`.
    pub fn new(cri: CriClient, ctx: NodeContext, report: Report) -> Executor {
        Executor {
            cri,
            ctx: Arc::new(ctx),
            report,
            cancels: Arc::default(),
            secrets: None,
        }
    }

    /// The same executor resolving `secretKeyRef` env through `resolver`.
    pub fn with_secrets(mut self, resolver: super::secrets::SecretResolver) -> Executor {
        self.secrets = Some(Arc::new(resolver));
        self
    }

    /// The CRI client.
    pub fn cri(&self) -> &CriClient {
        &self.cri
    }

    fn register(&self, uid: &Uid, sync_id: u64) -> CancelToken {
        let (tx, rx) = watch::channel(false);
        self.cancels
            .lock()
            .expect("cancel table")
            .insert((uid.clone(), sync_id), tx);
        CancelToken(rx)
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

    /// `InspectPod`: reads the pod's runtime status and reports it.
    pub async fn inspect(&self, uid: Uid, cause: u64) {
        let event = match runtime_view::pod_status(&self.cri, &uid).await {
            Ok(s) if s.is_empty() => RuntimeStatusObserved {
                uid,
                status: None,
                error: None,
            },
            Ok(s) => RuntimeStatusObserved {
                uid,
                status: Some(Arc::new(s)),
                error: None,
            },
            Err(e) => RuntimeStatusObserved {
                uid,
                status: None,
                error: Some(e.to_string()),
            },
        };
        self.report
            .send(Event::RuntimeStatusObserved(event), Some(cause))
            .await;
    }

    /// `SyncPod`: runs the plan. Like the kubelet (which runs the runtime sync under
    /// `context.WithoutCancel`), a cancellation does not interrupt container starts.
    pub async fn sync_pod(&self, cmd: SyncPodCommand, cause: u64) {
        let _token = self.register(&cmd.uid, cmd.sync_id);
        let step = Step {
            exec: self,
            uid: cmd.uid.clone(),
            sync_id: cmd.sync_id,
            cause,
        };
        let outcome = self.run_plan(&step, &cmd).await;
        self.finish(&cmd.uid, cmd.sync_id, WorkType::Sync, outcome, cause)
            .await;
    }

    async fn run_plan(&self, step: &Step<'_>, cmd: &SyncPodCommand) -> SyncOutcome {
        let plan = &cmd.plan;
        let p = &cmd.pod;
        let mut errors: Vec<String> = Vec::new();
        // 1. kill the pod, or the containers that must go; the first failure aborts
        if let Some(kill) = &plan.kill_pod {
            if let Err(e) = self.kill_pod(step, kill).await {
                return SyncOutcome::Failed { message: e };
            }
        } else {
            for k in &plan.kill_containers {
                if let Err(e) = self.kill_container(step, k).await {
                    return SyncOutcome::Failed { message: e };
                }
            }
        }
        // 2. remove pruned containers (failures are not fatal)
        for id in &plan.remove_containers {
            self.remove_container(step, id).await;
        }
        // 3. the sandbox
        let mut sandbox_id = plan.sandbox_id.clone();
        let mut attempt = cmd
            .runtime
            .sandboxes
            .iter()
            .find(|s| s.id == sandbox_id)
            .map_or(0, |s| s.attempt);
        let mut pod_ip = cmd.runtime.ips.first().cloned().unwrap_or_default();
        if let Some(a) = plan.create_sandbox {
            attempt = a;
            let started = Instant::now();
            let config = cri_config::sandbox_config(&self.ctx, p, a);
            if let Err(e) = std::fs::create_dir_all(&config.log_directory) {
                let msg = format!(
                    "Failed to create pod sandbox: cannot create log directory {}: {e}",
                    config.log_directory
                );
                step.report(
                    RuntimeAction::CreateSandbox { attempt: a },
                    failed("CreatePodSandboxError", msg.clone()),
                    started,
                )
                .await;
                return SyncOutcome::Failed { message: msg };
            }
            match self.cri.run_pod_sandbox(config, "").await {
                Ok(id) => {
                    sandbox_id = id.clone();
                    if let Ok(st) = self.cri.pod_sandbox_status(&id, false).await {
                        if let Some(ip) = st.status.and_then(|s| s.network).map(|n| n.ip) {
                            pod_ip = ip;
                        }
                    }
                    step.report(
                        RuntimeAction::CreateSandbox { attempt: a },
                        ok(Some(id), None),
                        started,
                    )
                    .await;
                }
                Err(e) => {
                    let msg = format!("Failed to create pod sandbox: {e}");
                    step.report(
                        RuntimeAction::CreateSandbox { attempt: a },
                        failed("CreatePodSandboxError", msg.clone()),
                        started,
                    )
                    .await;
                    return SyncOutcome::Failed { message: msg };
                }
            }
        }
        if sandbox_id.is_empty() && !(plan.start_init.is_empty() && plan.start.is_empty()) {
            return SyncOutcome::Failed {
                message: format!(
                    "no sandbox to start containers of pod {}/{} in",
                    pod::namespace(p),
                    pod::name(p)
                ),
            };
        }
        let sandbox_config = cri_config::sandbox_config(&self.ctx, p, attempt);
        // 4. init containers in order: a failure stops here (a sidecar failure does not)
        for s in &plan.start_init {
            if let Err(e) = self
                .start_container(step, p, &sandbox_id, &sandbox_config, s, &pod_ip)
                .await
            {
                let sidecar = cri_config::spec_container(p, s)
                    .and_then(|c| c.restart_policy.as_deref())
                    == Some("Always");
                errors.push(e);
                if !sidecar {
                    return SyncOutcome::Failed {
                        message: errors.join("; "),
                    };
                }
            }
        }
        // 5. regular containers: failures are recorded and the others still start
        for s in &plan.start {
            if let Err(e) = self
                .start_container(step, p, &sandbox_id, &sandbox_config, s, &pod_ip)
                .await
            {
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

    async fn start_container(
        &self,
        step: &Step<'_>,
        p: &Pod,
        sandbox_id: &str,
        sandbox_config: &v1::PodSandboxConfig,
        s: &ContainerStart,
        pod_ip: &str,
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
        // image, per imagePullPolicy
        let started = Instant::now();
        let pull = self.ensure_image(c, &image).await;
        let pulled = pull.is_ok();
        let outcome = match pull {
            Ok(detail) => ok(None, Some(detail)),
            Err((reason, msg)) => failed(reason, msg),
        };
        step.report(
            RuntimeAction::PullImage {
                container: s.name.clone(),
                image: image.clone(),
            },
            outcome.clone(),
            started,
        )
        .await;
        if !pulled {
            let ActionOutcome::Failed { message, .. } = outcome else {
                unreachable!()
            };
            return Err(message);
        }
        // create
        let started = Instant::now();
        let secrets = match &self.secrets {
            Some(r) => r.resolve(p, c).await.map(Some),
            None => Ok(None),
        };
        let config = secrets.map_err(cri_config::ConfigError).and_then(|values| {
            cri_config::container_config_with_secrets(&self.ctx, p, s, pod_ip, values.as_ref())
        });
        let create = match config {
            Err(e) => Err(("CreateContainerConfigError", format!("{who}: {e}"))),
            Ok(config) => {
                let log_dir = std::path::Path::new(&sandbox_config.log_directory).join(&s.name);
                let _ = std::fs::create_dir_all(&log_dir);
                self.cri
                    .create_container(sandbox_id, config, sandbox_config.clone())
                    .await
                    .map_err(|e| ("CreateContainerError", format!("{who}: {e}")))
            }
        };
        let id = match create {
            Ok(id) => {
                step.report(
                    RuntimeAction::CreateContainer {
                        container: s.name.clone(),
                        kind: s.kind,
                    },
                    ok(Some(id.clone()), None),
                    started,
                )
                .await;
                id
            }
            Err((reason, msg)) => {
                step.report(
                    RuntimeAction::CreateContainer {
                        container: s.name.clone(),
                        kind: s.kind,
                    },
                    failed(reason, msg.clone()),
                    started,
                )
                .await;
                return Err(msg);
            }
        };
        // start
        let started = Instant::now();
        let action = RuntimeAction::StartContainer {
            container: s.name.clone(),
            kind: s.kind,
            id: id.clone(),
        };
        match self.cri.start_container(&id).await {
            Ok(()) => {
                step.report(action, ok(Some(id), None), started).await;
                Ok(())
            }
            Err(e) => {
                let msg = format!("{who}: {e}");
                step.report(action, failed("RunContainerError", msg.clone()), started)
                    .await;
                Err(msg)
            }
        }
    }

    /// The kubelet's `EnsureImageExists`: Always pulls, IfNotPresent pulls when missing,
    /// Never fails when missing. Returns the `Pulled`/`already present` detail.
    async fn ensure_image(
        &self,
        c: &k8s_openapi::api::core::v1::Container,
        image: &str,
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
        let present = match self.cri.image_status(spec.clone(), false).await {
            Ok(r) => r.image.is_some(),
            Err(e) => {
                return Err((
                    "ImageInspectError",
                    format!("Failed to inspect image {image:?}: {e}"),
                ))
            }
        };
        match policy.as_str() {
            "Never" if present => Ok(format!(
                "Container image {image:?} already present on machine"
            )),
            "Never" => Err((
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
            )),
            "IfNotPresent" if present => Ok(format!(
                "Container image {image:?} already present on machine"
            )),
            _ => {
                let started = Instant::now();
                match self.cri.pull_image(spec, None, None).await {
                    Ok(r) => Ok(format!(
                        "Successfully pulled image {image:?} in {:?} (image ref {r})",
                        started.elapsed()
                    )),
                    Err(e) => Err((
                        "ErrImagePull",
                        format!("Failed to pull image {image:?}: {e}"),
                    )),
                }
            }
        }
    }

    async fn kill_container(&self, step: &Step<'_>, k: &ContainerKill) -> Result<(), String> {
        let started = Instant::now();
        let timeout = k.grace_period_s.max(MIN_STOP_TIMEOUT_S);
        let action = RuntimeAction::KillContainer {
            id: k.id.clone(),
            name: k.name.clone(),
        };
        match self.cri.stop_container(&k.id, timeout).await {
            Ok(()) => {
                step.report(action, ok(None, None), started).await;
                Ok(())
            }
            Err(e) if e.is_not_found() => {
                step.report(action, ok(None, Some("already gone".into())), started)
                    .await;
                Ok(())
            }
            Err(e) => {
                let msg = format!("failed to kill container {} ({}): {e}", k.name, k.id);
                step.report(action, failed("KillContainerError", msg.clone()), started)
                    .await;
                Err(msg)
            }
        }
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
    async fn kill_pod(&self, step: &Step<'_>, kill: &PodKill) -> Result<(), String> {
        let results =
            futures_join_all(kill.containers.iter().map(|k| self.kill_container(step, k))).await;
        let mut errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        for id in &kill.sandbox_ids {
            let started = Instant::now();
            let action = RuntimeAction::StopSandbox { id: id.clone() };
            match self.cri.stop_pod_sandbox(id).await {
                Ok(()) => step.report(action, ok(None, None), started).await,
                Err(e) if e.is_not_found() => step.report(action, ok(None, None), started).await,
                Err(e) => {
                    let msg = format!("failed to stop sandbox {id}: {e}");
                    step.report(action, failed("KillPodSandboxError", msg.clone()), started)
                        .await;
                    errors.push(msg);
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Kills the pod, then checks that nothing of it still runs; anything found running (a
    /// container started after the plan was made) is stopped with the minimum grace.
    async fn terminate(&self, step: &Step<'_>, kill: &PodKill) -> SyncOutcome {
        if let Err(e) = self.kill_pod(step, kill).await {
            return SyncOutcome::Failed {
                message: format!("error killing pod: {e}"),
            };
        }
        for round in 0..2 {
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
                    })
                    .collect(),
                sandbox_ids: ready_sandboxes,
            };
            if let Err(e) = self.kill_pod(step, &extra).await {
                return SyncOutcome::Failed {
                    message: format!("error killing pod: {e}"),
                };
            }
        }
        SyncOutcome::Ok
    }

    /// `SyncTerminatingPod`: stop everything within the grace period. A cancellation (the
    /// grace period was shortened) returns `Canceled` at once so the shorter kill can run.
    pub async fn sync_terminating_pod(&self, cmd: SyncTerminatingPodCommand, cause: u64) {
        let mut token = self.register(&cmd.uid, cmd.sync_id);
        let step = Step {
            exec: self,
            uid: cmd.uid.clone(),
            sync_id: cmd.sync_id,
            cause,
        };
        let outcome = tokio::select! {
            o = self.terminate(&step, &cmd.kill) => o,
            _ = token.cancelled() => SyncOutcome::Canceled,
        };
        self.finish(&cmd.uid, cmd.sync_id, WorkType::Terminating, outcome, cause)
            .await;
    }

    /// `SyncTerminatingRuntimePod`: stop a pod no config wants.
    pub async fn sync_terminating_runtime_pod(
        &self,
        cmd: SyncTerminatingRuntimePodCommand,
        cause: u64,
    ) {
        let mut token = self.register(&cmd.uid, cmd.sync_id);
        let step = Step {
            exec: self,
            uid: cmd.uid.clone(),
            sync_id: cmd.sync_id,
            cause,
        };
        let outcome = tokio::select! {
            o = self.terminate(&step, &cmd.kill) => o,
            _ = token.cancelled() => SyncOutcome::Canceled,
        };
        self.finish(
            &cmd.uid,
            cmd.sync_id,
            WorkType::TerminatingRuntime,
            outcome,
            cause,
        )
        .await;
    }

    /// `SyncTerminatedPod`: for a deleted or evicted pod, remove its containers and
    /// sandboxes (logs stay on disk).
    pub async fn sync_terminated_pod(&self, cmd: SyncTerminatedPodCommand, cause: u64) {
        let _token = self.register(&cmd.uid, cmd.sync_id);
        let step = Step {
            exec: self,
            uid: cmd.uid.clone(),
            sync_id: cmd.sync_id,
            cause,
        };
        let mut outcome = SyncOutcome::Ok;
        if cmd.remove_runtime {
            match runtime_view::pod_status(&self.cri, &cmd.uid).await {
                Ok(status) => {
                    for c in &status.containers {
                        self.remove_container(&step, &c.id).await;
                    }
                    for s in &status.sandboxes {
                        let started = Instant::now();
                        let o = match self.cri.remove_pod_sandbox(&s.id).await {
                            Ok(()) => ok(None, None),
                            Err(e) if e.is_not_found() => ok(None, None),
                            Err(e) => failed("RemovePodSandboxError", e.to_string()),
                        };
                        step.report(
                            RuntimeAction::RemoveSandbox { id: s.id.clone() },
                            o,
                            started,
                        )
                        .await;
                    }
                }
                Err(e) => {
                    outcome = SyncOutcome::Failed {
                        message: format!("error reading the pod before removing it: {e}"),
                    }
                }
            }
        }
        self.finish(&cmd.uid, cmd.sync_id, WorkType::Terminated, outcome, cause)
            .await;
    }

    /// Removes containers the core no longer needs (dead instances beyond the newest).
    pub async fn remove_containers(&self, ids: Vec<String>) -> Result<(), CriError> {
        for id in ids {
            match self.cri.remove_container(&id).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Runs futures concurrently on the current task and collects their outputs in order.
async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let futs: Vec<_> = futs.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = (0..futs.len()).map(|_| None).collect();
    let mut pending: Vec<(usize, std::pin::Pin<Box<F>>)> = futs.into_iter().enumerate().collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|(i, f)| match f.as_mut().poll(cx) {
            std::task::Poll::Ready(o) => {
                outputs[*i] = Some(o);
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_all_keeps_order_and_runs_concurrently() {
        let started = Instant::now();
        let out = futures_join_all((0..5u64).map(|i| async move {
            tokio::time::sleep(std::time::Duration::from_millis(100 - i * 10)).await;
            i
        }))
        .await;
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
        assert!(started.elapsed() < std::time::Duration::from_millis(300));
    }
}
