//! The kubelet's sync methods as decisions (kubelet.go `SyncPod`, `SyncTerminatingPod`,
//! `SyncTerminatingRuntimePod`, `SyncTerminatedPod`, and kuberuntime `SyncPod`/`killPod`).
//!
//! Owns what happens between "the pod worker runs a sync" and "the shell touches the
//! runtime": generating the pod's API status (then `SetPodStatus`), ending a sync whose pod is
//! already terminal (RT-46), computing the runtime plan with CrashLoopBackOff applied
//! (RT-34, BO-02…BO-09), kill plans with their grace periods (RT-39, RT-42, RT-45), the
//! reason cache (GS-07) and the Events the kubelet records for each step. Must stay pure:
//! it fills in the commands the pod workers emitted in this fold and reads only node state.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};

use super::active_deadline;
use super::backoff::{do_backoff, BackoffConfig};
use super::command::{
    Command, ContainerKill, ContainerKind, ContainerStart, EventType, HookFailureKill, KubeEvent,
    ObjectRef, PodKill, RuntimePlan,
};
use super::node::Node;
use super::plan::{self, KillReason};
use super::pod;
use super::pod_status::{self, StatusInputs};
use super::pod_workers::NETWORK_NOT_READY_ERROR;
use super::reason_cache::StartFailure;
use super::runtime_status::{ContainerState, RuntimePodStatus};
use super::soft_admission;
use super::status::StatusUpdate;
use super::status_memo::MemoKey;
use super::timers::TimerKey;
use super::uid::Uid;
use super::update::PodStatusOverride;
use crate::core::command::WorkType;
use crate::core::record::event::{
    ActionOutcome, RuntimeAction, RuntimeActionFinished, SyncFinished, SyncOutcome,
};
use crate::core::record::{Event, Time};

/// The reason the kubelet records for a container start that waits on its backoff.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
/// The reason of a failed image pull (`ErrImagePull`); it starts or doubles the pull backoff.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// The reason of a start refused while the image pull backs off (`ImagePullBackOff`).
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";

/// The image backoff key: `<pod uid>_<image>` (kubelet `EnsureImageExists`).
pub fn image_pull_backoff_key(uid: &Uid, image: &str) -> String {
    // built in place (no formatting machinery): one per container start
    let uid = uid.as_str();
    let mut key = String::with_capacity(uid.len() + 1 + image.len());
    key.push_str(uid);
    key.push('_');
    key.push_str(image);
    key
}

/// The start error of a container whose postStart hook failed (`ErrPostStartHook`).
pub const POST_START_HOOK_ERROR: &str = "PostStartHookError";

/// The kill message (and `Killing` event) of a container whose postStart hook failed.
pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";

/// How the failure of a terminating sync's pod kill starts (the shell's `SyncOutcome`
/// message and the kubelet's `FailedToKillPod` event, RT-43, RT-45).
pub const KILL_POD_ERROR: &str = "error killing pod: ";
/// The Warning event of a cluster-first pod on a node without `--cluster-dns`.
pub const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";

fn event(p: &Pod, event_type: EventType, reason: &str, message: String) -> Command {
    Command::RecordEvent(KubeEvent {
        object: ObjectRef::pod(p),
        event_type,
        reason: reason.into(),
        message,
    })
}

/// `format.Pod`: `name_namespace(uid)`.
fn pod_desc(p: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod::name(p),
        pod::namespace(p),
        pod::uid_str(p)
    )
}

fn spec_container<'a>(p: &'a Pod, name: &str) -> Option<(&'a Container, ContainerKind)> {
    let spec = p.spec.as_ref()?;
    spec.containers
        .iter()
        .find(|c| c.name == name)
        .map(|c| (c, ContainerKind::Regular))
        .or_else(|| {
            spec.init_containers
                .iter()
                .flatten()
                .find(|c| c.name == name)
                .map(|c| (c, ContainerKind::Init))
        })
}

/// kubelet SyncPod for a pod `canRunPod` refuses: Pending unless terminal, the refusal's
/// reason and message, and every waiting container `Blocked`.
fn hold(status: &mut PodStatus, (reason, message): (&str, &str)) {
    if !status.phase.as_deref().is_some_and(pod::is_phase_terminal) {
        status.phase = Some(pod_status::phase::PENDING.into());
    }
    status.reason = Some(reason.into());
    status.message = Some(message.into());
    let statuses = status.init_container_statuses.iter_mut().flatten();
    let statuses = statuses.chain(status.container_statuses.iter_mut().flatten());
    for w in statuses.filter_map(|s| s.state.as_mut()?.waiting.as_mut()) {
        w.reason = Some(soft_admission::BLOCKED.into());
    }
}

/// Applies a kill's status override (the kubelet's `PodStatusFunc`).
fn apply_override(status: &mut PodStatus, o: &PodStatusOverride) {
    let succeeded = status.phase.as_deref() == Some("Succeeded");
    if let Some(phase) = o
        .phase
        .as_ref()
        .filter(|_| !(o.keep_succeeded && succeeded))
    {
        status.phase = Some(phase.clone());
    }
    if let Some(reason) = &o.reason {
        status.reason = Some(reason.clone());
    }
    if let Some(message) = &o.message {
        status.message = Some(message.clone());
    }
    if !o.conditions.is_empty() {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        for c in &o.conditions {
            conditions.retain(|x| x.type_ != c.type_);
            conditions.push(c.clone());
        }
    }
}

impl Node {
    /// The CrashLoopBackOff settings in force.
    pub(super) fn backoff_config(&self) -> BackoffConfig {
        BackoffConfig {
            initial_ms: self.config.crash_loop_backoff_initial_ms,
            max_ms: self.config.crash_loop_backoff_max_ms,
            reset_after_ms: self.config.crash_loop_backoff_reset_ms,
        }
    }

    /// The image pull backoff settings in force (client-go's expiry: idle for 2 × max).
    pub(super) fn image_pull_backoff_config(&self) -> BackoffConfig {
        BackoffConfig {
            initial_ms: self.config.image_pull_backoff_initial_ms,
            max_ms: self.config.image_pull_backoff_max_ms,
            reset_after_ms: self.config.image_pull_backoff_max_ms.saturating_mul(2),
        }
    }

    /// Generates and records the API status of a pod (`generateAPIPodStatus` +
    /// `SetPodStatus`), applying `status_override` last. Returns true if the generated phase
    /// is terminal. A generation whose inputs are those of the one that left the cached version
    /// is skipped (`core::status_memo`).
    pub(super) fn update_api_status(
        &mut self,
        uid: &Uid,
        p: &Arc<Pod>,
        runtime: &Arc<RuntimePodStatus>,
        pod_is_terminal: bool,
        status_override: Option<&PodStatusOverride>,
        now: Time,
    ) -> bool {
        let inputs = (p, runtime, pod_is_terminal);
        self.update_api_status_with(uid, inputs, status_override, None, now)
    }

    /// [`Self::update_api_status`], with the pod `held` (reason, message) when it cannot
    /// run (`canRunPod`).
    fn update_api_status_with(
        &mut self,
        uid: &Uid,
        (p, runtime, pod_is_terminal): (&Arc<Pod>, &Arc<RuntimePodStatus>, bool),
        status_override: Option<&PodStatusOverride>,
        held: Option<(&str, &str)>,
        now: Time,
    ) -> bool {
        let cached = self
            .statuses
            .get(uid)
            .map(|v| (v.version, v.status.clone()));
        // AD-02: past its active deadline the pod is failed (`ShouldEvict`)
        let cached_status = cached.as_ref().map(|(_, s)| &**s);
        let past_deadline = active_deadline::exceeded(p, cached_status, now);
        // a deleted pod's status is recorded anew every time (`SetPodStatus` forces it)
        let memo_applies = status_override.is_none()
            && held.is_none()
            && p.metadata.deletion_timestamp.is_none()
            && !past_deadline;
        let probes_generation = self.probes.generation();
        if let (true, Some((version, status))) = (memo_applies, &cached) {
            let key = MemoKey {
                pod: p,
                runtime,
                start_failures: self.reasons.for_pod(uid),
                probes_generation,
                pod_is_terminal,
            };
            if self.statuses.memo.hit(uid, &key, *version) {
                return status.phase.as_deref().is_some_and(pod::is_phase_terminal);
            }
        }
        let cached = cached.map(|(_, s)| s);
        let mut status = pod_status::generate_api_pod_status(&StatusInputs {
            pod: p,
            runtime,
            cached: cached.as_deref(),
            probes: &self.probes,
            start_failures: self.reasons.for_pod(uid),
            pod_is_terminal,
            is_static: pod::is_static(p),
            now,
            runtime_name: &self.config.runtime_name,
            host_ip: (!self.config.node_ip.is_empty()).then_some(self.config.node_ip.as_str()),
            evict: past_deadline.then_some((active_deadline::REASON, active_deadline::MESSAGE)),
        });
        if let Some(o) = status_override {
            apply_override(&mut status, o);
        }
        if let Some(h) = held {
            hold(&mut status, h);
        }
        let terminal = status.phase.as_deref().is_some_and(pod::is_phase_terminal);
        let outcome = self.set_pod_status(uid, p, status, now);
        // Remembered whether the generation left the cached status as it was or recorded a
        // new one: generating again from the same inputs against the status just recorded
        // gives that status again (the store keeps what it merged and normalised), so the
        // next resync of an unchanged pod skips the generation either way.
        if memo_applies && !matches!(outcome, StatusUpdate::Illegal(_)) {
            if let Some(version) = self.statuses.get(uid).map(|v| v.version) {
                let key = MemoKey {
                    pod: p,
                    runtime,
                    start_failures: self.reasons.for_pod(uid),
                    probes_generation,
                    pod_is_terminal,
                };
                self.statuses.memo.remember(uid, &key, version);
            }
        }
        terminal
    }

    /// The last step of `SyncTerminatingPod` (RT-43): once the kill succeeded, the status of
    /// the stopped pod with its terminal phase (`generateAPIPodStatus(…, podIsTerminal)`),
    /// from the runtime status the shell read after the kill. Skipped while the cache still
    /// shows a running container (SyncTerminatedPod then reports it).
    pub(super) fn report_stopped_pod(&mut self, uid: &Uid, now: Time) {
        let Some(p) = self
            .pod_workers
            .status(uid)
            .and_then(|s| s.last_pod().cloned())
        else {
            return;
        };
        let Ok(runtime) = self.runtime.get(uid) else {
            return;
        };
        if runtime.has_running() {
            return;
        }
        self.update_api_status(uid, &p, &runtime, true, None, now);
    }

    /// SyncPod's network gate: `network is not ready: …` while the last runtime health record
    /// says the network is not ready and `p` does not use the host network. Before the first
    /// record the network counts as ready (the kubelet starts from "network state unknown").
    fn network_not_ready(&self, p: &Pod) -> Option<String> {
        let health = self.node_status.health.as_ref()?;
        let err = health.network_error()?;
        (!pod_status::spec::is_host_network(p)).then(|| format!("{NETWORK_NOT_READY_ERROR}: {err}"))
    }

    /// Completes the sync commands the pod workers emitted in this fold (`out[from..]`).
    pub(super) fn prepare_syncs(&mut self, from: usize, out: &mut Vec<Command>, now: Time) {
        let mut i = from;
        while i < out.len() {
            let mut extra = Vec::new();
            let replace = match &mut out[i] {
                Command::SyncPod(c) => {
                    let uid = c.uid.clone();
                    // probeManager.AddPod before the status is generated, so a running
                    // container whose probes have not run yet counts as not ready
                    self.probes_add_pod(&uid, &c.pod, self.last_seq, now, &mut extra);
                    // SC-07: soft admission (canRunPod) holds a pod that cannot run
                    let refused = soft_admission::can_run_pod(&self.config, &c.pod);
                    let held = refused.as_ref().map(|(r, m)| (*r, m.as_str()));
                    let inputs = (&c.pod, &c.runtime, false);
                    let terminal = self.update_api_status_with(&uid, inputs, None, held, now);
                    // AD-02: sync again when the active deadline passes; past it, the
                    // kubelet's Normal event
                    let cached = self.statuses.get(&uid).map(|v| &*v.status);
                    match active_deadline::deadline(&c.pod, cached) {
                        Some(due) if due <= now => {
                            let (reason, message) =
                                (active_deadline::REASON, active_deadline::MESSAGE);
                            extra.push(event(&c.pod, EventType::Normal, reason, message.into()));
                        }
                        Some(due) if !terminal => {
                            let key = TimerKey::ActiveDeadline { uid: uid.clone() };
                            if self.timers.get(&key).map(|t| t.due) != Some(due) {
                                self.timers.set(key, due, &mut extra);
                            }
                        }
                        _ => {}
                    }
                    if refused.is_some() && !terminal {
                        // whatever runs of a pod that cannot run is stopped
                        let kill = kill_pod_plan(&c.pod, &c.runtime, None, &mut extra);
                        let runs = !kill.containers.is_empty() || !kill.sandbox_ids.is_empty();
                        c.plan = RuntimePlan {
                            kill_pod: runs.then_some(kill),
                            ..Default::default()
                        };
                        None
                    } else if terminal {
                        // RT-46: a terminal pod runs no runtime actions; the sync reports it.
                        Some(Command::Append(Event::SyncFinished(SyncFinished {
                            uid,
                            sync_id: c.sync_id,
                            work: WorkType::Sync,
                            outcome: SyncOutcome::Terminal,
                        })))
                    } else if let Some(message) = self.network_not_ready(&c.pod) {
                        // RT-46: only host-network pods start while the network is not
                        // ready; the worker retries after the short transient backoff
                        let reason = "NetworkNotReady";
                        extra.push(event(&c.pod, EventType::Warning, reason, message.clone()));
                        Some(Command::Append(Event::SyncFinished(SyncFinished {
                            uid,
                            sync_id: c.sync_id,
                            work: WorkType::Sync,
                            outcome: SyncOutcome::Failed { message },
                        })))
                    } else {
                        let p = c.pod.clone();
                        self.sync_mirror_pod(&p, &mut extra);
                        let before = self.reasons.for_pod(&uid).cloned();
                        c.plan = self.runtime_plan(&uid, &c.pod, &c.runtime, now, &mut extra);
                        // The kubelet shows a new back-off only at the next sync; the plan's
                        // decision is known now, so the status shows it now.
                        if self.reasons.for_pod(&uid) != before.as_ref() {
                            self.update_api_status(&uid, &c.pod, &c.runtime, false, None, now);
                        }
                        // UpdatePodStatus: readiness not known yet → probe now
                        self.probes_trigger_readiness(&uid, self.last_seq, now, &mut extra);
                        None
                    }
                }
                Command::SyncTerminatingPod(c) => {
                    let uid = c.uid.clone();
                    self.update_api_status(
                        &uid,
                        &c.pod,
                        &c.runtime,
                        false,
                        c.status_override.as_ref(),
                        now,
                    );
                    // StopLivenessAndStartup; readiness is forced to failure before the kill
                    self.probes_pod_terminating(&uid, &mut extra);
                    c.kill = kill_pod_plan(&c.pod, &c.runtime, c.grace_period_s, &mut extra);
                    None
                }
                Command::SyncTerminatingRuntimePod(c) => {
                    c.kill = PodKill {
                        containers: c
                            .running_pod
                            .containers
                            .iter()
                            .map(|rc| ContainerKill {
                                id: rc.id.clone(),
                                name: rc.name.clone(),
                                // grace 1, raised to the kubelet's minimum of 2 (RT-45)
                                grace_period_s: 2,
                                message: format!("Stopping container {}", rc.name),
                                // no spec, so no hook (upstream restores it from labels)
                                pre_stop_s: None,
                                wait_for: vec![],
                            })
                            .collect(),
                        sandbox_ids: c.running_pod.sandboxes.clone(),
                    };
                    None
                }
                Command::SyncTerminatedPod(c) => {
                    let uid = c.uid.clone();
                    let last_override = None;
                    self.update_api_status(&uid, &c.pod, &c.runtime, true, last_override, now);
                    None
                }
                _ => None,
            };
            if let Some(r) = replace {
                out[i] = r;
            }
            let n = extra.len();
            for (k, e) in extra.into_iter().enumerate() {
                out.insert(i + 1 + k, e);
            }
            i += 1 + n;
        }
    }

    /// kuberuntime `SyncPod` steps 1–8 as a plan, with CrashLoopBackOff applied to every
    /// container about to start.
    fn runtime_plan(
        &mut self,
        uid: &Uid,
        p: &Arc<Pod>,
        runtime: &RuntimePodStatus,
        now: Time,
        extra: &mut Vec<Command>,
    ) -> RuntimePlan {
        let actions = plan::compute_pod_actions(p, runtime, &self.probes);
        let mut out = RuntimePlan {
            sandbox_id: actions.sandbox_id.clone(),
            ..RuntimePlan::default()
        };
        if actions.kill_pod {
            if actions.create_sandbox && !actions.sandbox_id.is_empty() {
                extra.push(event(
                    p,
                    EventType::Normal,
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.".into(),
                ));
            }
            out.kill_pod = Some(kill_pod_plan(p, runtime, None, extra));
            if actions.create_sandbox {
                // purge init containers: a new sandbox starts initialisation over
                out.remove_containers = runtime
                    .containers
                    .iter()
                    .filter(|c| {
                        c.state != ContainerState::Running
                            && spec_container(p, &c.name)
                                .is_some_and(|(_, k)| k == ContainerKind::Init)
                    })
                    .map(|c| c.id.clone())
                    .collect();
            }
        } else {
            for (id, k) in &actions.containers_to_kill {
                let spec = spec_container(p, &k.name).map(|(c, _)| c);
                let base = plan::kill_grace_base_s(p, spec, &k.reason, None);
                let running = runtime
                    .containers
                    .iter()
                    .any(|c| &c.id == id && c.state == ContainerState::Running);
                extra.push(event(p, EventType::Normal, "Killing", k.message.clone()));
                out.kill_containers.push(ContainerKill {
                    id: id.clone(),
                    name: k.name.clone(),
                    grace_period_s: plan::stop_timeout_s(base),
                    message: k.message.clone(),
                    pre_stop_s: pre_stop_budget(spec, base, running),
                    wait_for: vec![],
                });
            }
        }
        if out.remove_containers.is_empty() {
            out.remove_containers = plan::removable_containers(runtime);
        }
        if actions.create_sandbox {
            out.create_sandbox = Some(actions.attempt);
        }
        let cfg = self.backoff_config();
        let image_cfg = self.image_pull_backoff_config();
        let spec = p.spec.as_ref();
        let mut earliest_expiry: Option<Time> = None;
        let mut starts = |kind: ContainerKind,
                          indices: &[usize],
                          containers: &[Container],
                          node: &mut Node,
                          stop_at_backoff: bool|
         -> Vec<ContainerStart> {
            let mut v = Vec::new();
            for &index in indices {
                let Some(c) = containers.get(index) else {
                    continue;
                };
                if let Some(b) = do_backoff(&mut node.backoff, &cfg, p, c, runtime, now) {
                    let message = b.message.clone();
                    extra.push(event(
                        p,
                        EventType::Warning,
                        "BackOff",
                        format!(
                            "Back-off restarting failed container {} in pod {}",
                            c.name,
                            pod_desc(p)
                        ),
                    ));
                    node.reasons.set(
                        uid,
                        &c.name,
                        StartFailure {
                            reason: CRASH_LOOP_BACK_OFF.into(),
                            message,
                        },
                    );
                    earliest_expiry =
                        Some(earliest_expiry.map_or(b.expires_at, |e| e.min(b.expires_at)));
                    let sidecar = c.restart_policy.as_deref() == Some("Always");
                    if stop_at_backoff && !sidecar {
                        break;
                    }
                    continue;
                }
                let image = c.image.clone().unwrap_or_default();
                let key = image_pull_backoff_key(uid, &image);
                let image_pull_backoff = node
                    .image_pull_backoff
                    .is_in_backoff_since_update(&image_cfg, &key, now)
                    .then(|| match node.image_pull_errors.get(&key) {
                        // the pull's own error, as the kubelet wraps it (1.33+)
                        Some(e) => format!("Back-off pulling image {image:?}: {e}"),
                        None => format!("Back-off pulling image {image:?}"),
                    });
                let post_start = c.lifecycle.as_ref().is_some_and(|l| l.post_start.is_some());
                let post_start_failure_kill = post_start.then(|| {
                    let base = plan::kill_grace_base_s(p, Some(c), &KillReason::Other, None);
                    HookFailureKill {
                        grace_period_s: plan::stop_timeout_s(base),
                        pre_stop_s: pre_stop_budget(Some(c), base, true),
                    }
                });
                v.push(ContainerStart {
                    kind,
                    index,
                    name: c.name.clone(),
                    restart_count: plan::next_restart_count(runtime, &c.name),
                    hash: plan::container_hash(c),
                    image_pull_backoff,
                    post_start_failure_kill,
                    target_container_id: None,
                });
            }
            v
        };
        // ephemeral containers first (kubelet SyncPod step 5), each in the PID namespace of
        // its target's newest instance
        let ephemeral_specs = spec.and_then(|s| s.ephemeral_containers.as_deref());
        let ephemerals = pod::ephemeral_containers(p);
        out.start_ephemeral = starts(
            ContainerKind::Ephemeral,
            &actions.ephemeral_containers_to_start,
            &ephemerals,
            self,
            false,
        );
        for s in &mut out.start_ephemeral {
            let target = ephemeral_specs
                .and_then(|e| e.get(s.index))
                .and_then(|e| e.target_container_name.as_deref());
            s.target_container_id = target.and_then(|t| {
                let newest = runtime.containers.iter().find(|c| c.name == t);
                newest.map(|c| c.id.clone())
            });
        }
        let inits = spec
            .and_then(|s| s.init_containers.as_deref())
            .unwrap_or_default();
        let containers = spec.map_or(&[][..], |s| s.containers.as_slice());
        out.start_init = starts(
            ContainerKind::Init,
            &actions.init_containers_to_start,
            inits,
            self,
            true,
        );
        out.start = starts(
            ContainerKind::Regular,
            &actions.containers_to_start,
            containers,
            self,
            false,
        );
        if let Some(at) = earliest_expiry {
            let key = TimerKey::BackoffExpiry { uid: uid.clone() };
            let already = self
                .timers
                .get(&key)
                .is_some_and(|t| t.due <= at && t.due > now);
            if !already {
                self.timers.set(key, at, extra);
            }
        }
        out
    }

    /// Folds a `RuntimeActionFinished`: the reason cache and the kubelet's Events.
    pub(super) fn handle_runtime_action(
        &mut self,
        a: &RuntimeActionFinished,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let Some(p) = self.pod_manager.get(&a.uid).cloned().or_else(|| {
            self.pod_workers
                .status(&a.uid)
                .and_then(|s| s.last_pod().cloned())
        }) else {
            return;
        };
        match (&a.action, &a.outcome) {
            (RuntimeAction::PullingImage { image, .. }, _) => {
                out.push(event(
                    &p,
                    EventType::Normal,
                    "Pulling",
                    format!("Pulling image {image:?}"),
                ));
            }
            (RuntimeAction::PullImage { image, .. }, ActionOutcome::Ok { detail, .. }) => {
                let msg = detail
                    .clone()
                    .unwrap_or_else(|| format!("Successfully pulled image {image:?}"));
                out.push(event(&p, EventType::Normal, "Pulled", msg));
            }
            (RuntimeAction::CreateContainer { container, .. }, ActionOutcome::Ok { .. }) => {
                out.push(event(
                    &p,
                    EventType::Normal,
                    "Created",
                    format!("Created container {container}"),
                ));
            }
            (RuntimeAction::StartContainer { container, .. }, ActionOutcome::Ok { .. }) => {
                self.reasons.clear(&a.uid, container);
                out.push(event(
                    &p,
                    EventType::Normal,
                    "Started",
                    format!("Started container {container}"),
                ));
            }
            (
                RuntimeAction::PullImage { container, image },
                ActionOutcome::Failed {
                    reason, message, ..
                },
            ) if reason == ERR_IMAGE_PULL || reason == IMAGE_PULL_BACK_OFF => {
                // kubelet imagePuller: a failed pull starts or doubles the backoff of this
                // pod's image; a start refused by the backoff leaves it as it is
                let failed_pull = reason == ERR_IMAGE_PULL;
                if failed_pull {
                    let cfg = self.image_pull_backoff_config();
                    let key = image_pull_backoff_key(&a.uid, image);
                    self.image_pull_backoff.next(&cfg, &key, now, now);
                    self.image_pull_errors
                        .insert(key, format!("{ERR_IMAGE_PULL}: {message}"));
                }
                self.reasons.set(
                    &a.uid,
                    container,
                    StartFailure {
                        reason: reason.clone(),
                        message: message.clone(),
                    },
                );
                if failed_pull {
                    let text = format!("Failed to pull image {image:?}: {message}");
                    out.push(event(&p, EventType::Warning, "Failed", text));
                } else {
                    // the event does not carry the pull's error the status message wraps
                    let plain = message
                        .find("\": ")
                        .map_or(message.as_str(), |i| &message[..=i]);
                    out.push(event(&p, EventType::Normal, "BackOff", plain.to_string()));
                }
                out.push(event(
                    &p,
                    EventType::Warning,
                    "Failed",
                    format!("Error: {reason}"),
                ));
            }
            (
                RuntimeAction::PullImage { container, .. }
                | RuntimeAction::CreateContainer { container, .. }
                | RuntimeAction::StartContainer { container, .. },
                ActionOutcome::Failed {
                    reason, message, ..
                },
            ) => {
                self.reasons.set(
                    &a.uid,
                    container,
                    StartFailure {
                        reason: reason.clone(),
                        message: message.clone(),
                    },
                );
                out.push(event(
                    &p,
                    EventType::Warning,
                    "Failed",
                    format!("Error: {message}"),
                ));
            }
            (RuntimeAction::PodConfigWarning { reason, message }, _) => {
                // the kubelet records MissingClusterDNS on the node too, without the
                // pod's prefix (`pod: "name_ns(uid)". `)
                if reason == MISSING_CLUSTER_DNS && !self.config.node_name.is_empty() {
                    let name = self.config.node_name.clone();
                    let node_message = message
                        .split_once("\". ")
                        .map_or(message.as_str(), |(_, rest)| rest);
                    out.push(Command::RecordEvent(KubeEvent {
                        // the kubelet's nodeRef uses the node name as its UID
                        object: ObjectRef {
                            kind: "Node".into(),
                            namespace: String::new(),
                            name: name.clone(),
                            uid: name,
                        },
                        event_type: EventType::Warning,
                        reason: reason.clone(),
                        message: node_message.to_string(),
                    }));
                }
                out.push(event(&p, EventType::Warning, reason, message.clone()));
            }
            (RuntimeAction::CreateSandbox { .. }, ActionOutcome::Failed { message, .. }) => {
                out.push(event(
                    &p,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    message.clone(),
                ));
            }
            (
                RuntimeAction::PostStartHook { container, .. },
                ActionOutcome::Failed { message, .. },
            ) => {
                // RT-37: the start failed with ErrPostStartHook (its message stays in the
                // reason cache, not in the Event), and the shell kills the container now
                self.reasons.set(
                    &a.uid,
                    container,
                    StartFailure {
                        reason: POST_START_HOOK_ERROR.into(),
                        message: message.clone(),
                    },
                );
                out.push(event(
                    &p,
                    EventType::Warning,
                    "FailedPostStartHook",
                    "PostStartHook failed".into(),
                ));
                out.push(event(
                    &p,
                    EventType::Normal,
                    "Killing",
                    FAILED_POST_START_HOOK.into(),
                ));
            }
            (RuntimeAction::PreStopHook { .. }, ActionOutcome::Failed { .. }) => {
                // RT-40: the kill goes on; the hook's output is not in the Event
                out.push(event(
                    &p,
                    EventType::Warning,
                    "FailedPreStopHook",
                    "PreStopHook failed".into(),
                ));
            }
            (RuntimeAction::KillContainer { name, .. }, ActionOutcome::Failed { message, .. }) => {
                out.push(event(
                    &p,
                    EventType::Warning,
                    "FailedKillPod",
                    format!("error killing container {name}: {message}"),
                ));
            }
            _ => {}
        }
    }
}

/// RT-39: how long a kill may spend in the container's preStop hook: the whole unclamped
/// grace period, if the container has a preStop hook, runs, and the grace is above 0.
fn pre_stop_budget(spec: Option<&Container>, base_s: i64, running: bool) -> Option<i64> {
    spec.and_then(|c| c.lifecycle.as_ref())
        .and_then(|l| l.pre_stop.as_ref())?;
    (running && base_s > 0).then_some(base_s)
}

/// `killPodWithSyncResult` as a plan: every running or created container with its grace
/// period (RT-39: deletion grace, else spec, overridden by the worker's grace; at least 2 s)
/// and, with sidecars, its turn (RT-42), then every sandbox of the pod, ready or not (RT-42:
/// `ConvertPodStatusToRunningPod` keeps them all).
fn kill_pod_plan(
    p: &Pod,
    runtime: &RuntimePodStatus,
    override_s: Option<i64>,
    extra: &mut Vec<Command>,
) -> PodKill {
    let running: Vec<&str> = runtime
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.name.as_str())
        .collect();
    let mut turns = plan::termination_prerequisites(p, &running);
    let mut containers = Vec::new();
    for c in &runtime.containers {
        if !matches!(
            c.state,
            ContainerState::Running | ContainerState::Created | ContainerState::Unknown
        ) {
            continue;
        }
        let spec = spec_container(p, &c.name).map(|(s, _)| s);
        let base = plan::kill_grace_base_s(p, spec, &KillReason::PodKilled, override_s);
        let message = format!("Stopping container {}", c.name);
        let running = c.state == ContainerState::Running;
        if running {
            extra.push(event(p, EventType::Normal, "Killing", message.clone()));
        }
        containers.push(ContainerKill {
            id: c.id.clone(),
            name: c.name.clone(),
            grace_period_s: plan::stop_timeout_s(base),
            message,
            pre_stop_s: pre_stop_budget(spec, base, running),
            // the kubelet waits only with time left (`gracePeriod > 0`)
            wait_for: match base > 0 && running {
                true => turns.remove(&c.name).unwrap_or_default(),
                false => vec![],
            },
        });
    }
    PodKill {
        containers,
        sandbox_ids: runtime.sandbox_ids(),
    }
}
