//! From config, PLEG and timer records to pod worker updates (kubelet.go
//! `HandlePodAdditions/Updates/Removes/Reconcile/Syncs`, `syncLoopIteration` and
//! `HandlePodCleanups`).
//!
//! Owns the routing rules, admission of new pods and housekeeping. Every decision here
//! becomes a derived `UpdatePod` (or `SyncKnownPods`) record via `Command::Append`, so the
//! ledger shows why each worker update happened. Must not touch worker state directly
//! except through `PodWorkers`' own operations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::admission::{can_admit_pod, needs_other_pods, sysctls, Admission, NodeView};
use super::command::{Command, EventType, KubeEvent, ObjectRef};
use super::config::PodSource;
use super::empty_dir_eviction;
use super::merge::SortedCursor;
use super::node::Node;
use super::node_shutdown;
use super::pod;
use super::pod_status::qos::pod_qos_class;
use super::pod_workers::{Cx, PodWorkerState};
use super::timers::TimerKey;
use super::uid::Uid;
use super::update::{UpdatePod, UpdateType};
use crate::core::record::event::{
    PlegEvent, PlegEventKind, PodRejected, SyncKnownPods, VolumeUsageObserved,
};
use crate::core::record::{Event, Time};

/// The node's OS before the machine is observed (the only one ledgerlet runs on).
const DEFAULT_OS: &str = "linux";

fn update(
    update_type: UpdateType,
    pod: Arc<Pod>,
    mirror: Option<Arc<Pod>>,
    start: Time,
) -> Command {
    Command::Append(Event::UpdatePod(UpdatePod {
        update_type,
        pod: Some(pod),
        mirror_pod: mirror,
        running_pod: None,
        kill: None,
        start_time: Some(start),
    }))
}

impl Node {
    /// True once every configured source has reported (`sourcesReady.AllReady`).
    pub fn all_sources_ready(&self) -> bool {
        self.config
            .sources
            .iter()
            .all(|s| self.sources_ready.contains(s))
    }

    pub(super) fn source_seen(&mut self, source: PodSource) {
        self.sources_ready.insert(source);
    }

    /// `filterOutInactivePods`: drops pods the workers know are terminated, and terminal
    /// (or rejected) pods that are not actively terminating.
    pub fn active_pods<'a>(&self, pods: impl Iterator<Item = &'a Arc<Pod>>) -> Vec<&'a Arc<Pod>> {
        pods.filter(|p| self.is_active(p)).collect()
    }

    /// Drops the runtime cache entry of `uid` if it says nothing runs and neither a worker
    /// nor the config wants the pod (keeps the cache bounded without scanning it).
    pub(super) fn forget_runtime_if_unowned(&mut self, uid: &Uid) {
        if self.pod_workers.status(uid).is_none() && self.pod_manager.get(uid).is_none() {
            self.runtime.forget_if_empty(uid);
        }
    }

    /// One pod of `filterOutInactivePods`.
    fn is_active(&self, p: &Pod) -> bool {
        let uid = pod::uid_str(p);
        let status = self.pod_workers.status_by_str(uid);
        if status.is_some_and(|s| s.is_terminated()) {
            return false;
        }
        let terminal = pod::has_terminal_phase(p) || self.rejected.contains(uid);
        !terminal || status.is_some_and(|s| s.is_termination_requested())
    }

    /// `canAdmitPod` against the node as the core knows it: the other active pods are
    /// collected only when the verdict depends on them (requests, host ports, or a pod
    /// count that may be at its limit; active pods are a subset of the existing ones).
    fn admit(&self, p: &Pod) -> Admission {
        let machine = self.node_status.machine.as_deref();
        let node_info = machine
            .and_then(|m| m.status.as_ref())
            .and_then(|s| s.node_info.as_ref());
        let kernel = node_info.map_or("", |i| i.kernel_version.as_str());
        // the kubelet's sysctl admit handler runs before its predicate admit handler
        if let Some(verdict) = sysctls::admit(p, &self.config.allowed_unsafe_sysctls, kernel) {
            return verdict;
        }
        let may_be_full = self.pod_manager.len() >= self.config.max_pods as usize;
        let active: Vec<&Pod> = if may_be_full || needs_other_pods(p) {
            self.pod_manager
                .pods()
                .filter(|e| self.is_active(e) && pod::uid_str(e) != pod::uid_str(p))
                .map(|e| &**e)
                .collect()
        } else {
            Vec::new()
        };
        let empty = BTreeMap::new();
        let labels = match (&self.api_node, machine) {
            (Some(api), _) => &api.labels,
            (None, Some(m)) => m.metadata.labels.as_ref().unwrap_or(&empty),
            (None, None) => &empty,
        };
        let name = self.node_status.node_name(&self.config);
        // the machine's allocatable, with the extended resources the API server's Node has
        // in allocatable (`getNodeAnyWay`: an admin advertised them in capacity and the
        // node status derived their allocatable)
        let mut allocatable = machine
            .and_then(|m| m.status.as_ref())
            .and_then(|s| s.allocatable.clone());
        if let (Some(list), Some(api)) = (allocatable.as_mut(), &self.api_node) {
            for (resource, quantity) in &api.extended_allocatable {
                list.entry(resource.clone())
                    .or_insert_with(|| quantity.clone());
            }
        }
        let node = NodeView {
            name: &name,
            labels,
            taints: self.api_node.as_ref().map_or(&[], |n| &n.taints[..]),
            allocatable: allocatable.as_ref(),
            max_pods: self.config.max_pods,
            os: node_info.map_or(DEFAULT_OS, |i| &i.operating_system),
        };
        can_admit_pod(&node, &active, p)
    }

    /// `HandlePodAdditions` for one pod.
    pub(super) fn handle_pod_addition(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        // the kubelet's admit handlers in order: sysctls, the predicates, then the node
        // shutdown manager's (so a pod that fails a check is rejected for that, even while
        // the node shuts down)
        let admission = if self
            .pod_workers
            .status_by_str(pod::uid_str(p))
            .is_some_and(|s| s.is_termination_requested())
        {
            Admission::Admit
        } else {
            match self.admit(p) {
                Admission::Admit if self.shutting_down => Admission::Reject {
                    reason: node_shutdown::REJECT_REASON.into(),
                    message: node_shutdown::REJECT_MESSAGE.into(),
                },
                verdict => verdict,
            }
        };
        let uid = self.canonical_uid(&pod::uid(p));
        self.pod_manager.upsert(uid, p.clone());
        let pm = self.pod_manager.get_pod_and_mirror_pod(p);
        if pm.was_mirror {
            if let Some(config_pod) = pm.pod {
                out.push(update(UpdateType::Update, config_pod, pm.mirror, now));
            }
            return;
        }
        if let Admission::Reject { reason, message } = admission {
            out.push(Command::RecordEvent(KubeEvent {
                object: ObjectRef::pod(p),
                event_type: EventType::Warning,
                reason: reason.clone(),
                message: message.clone(),
            }));
            out.push(Command::Append(Event::PodRejected(PodRejected {
                uid: pod::uid(p),
                reason,
                message: format!("Pod was rejected: {message}"),
            })));
            return;
        }
        out.push(update(UpdateType::Create, p.clone(), pm.mirror, now));
    }

    /// `rejectPod`'s status: the pod counts as terminal from now on, and the status manager
    /// holds it as Failed with the admission's reason (sticky: a later update of the pod
    /// syncs a terminal pod, which starts nothing).
    pub(super) fn on_pod_rejected(&mut self, r: &PodRejected, now: Time) {
        let uid = self.canonical_uid(&r.uid);
        self.rejected.insert(uid.clone());
        let Some(p) = self.pod_manager.get(&uid).cloned() else {
            return;
        };
        let status = PodStatus {
            qos_class: Some(pod_qos_class(&p)),
            phase: Some("Failed".into()),
            reason: Some(r.reason.clone()),
            message: Some(r.message.clone()),
            ..PodStatus::default()
        };
        self.set_pod_status(&uid, &p, status, now);
    }

    /// `HandlePodUpdates` for one pod (also used for graceful deletions).
    pub(super) fn handle_pod_update(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        let uid = self.canonical_uid(&pod::uid(p));
        self.pod_manager.upsert(uid, p.clone());
        let pm = self.pod_manager.get_pod_and_mirror_pod(p);
        if let Some(config_pod) = pm.pod {
            out.push(update(UpdateType::Update, config_pod, pm.mirror, now));
        }
    }

    /// `HandlePodRemoves` for one pod.
    pub(super) fn handle_pod_removal(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        self.pod_manager.remove(p);
        // a far deadline must not keep a timer for a pod that is gone
        let deadline = TimerKey::ActiveDeadline { uid: pod::uid(p) };
        self.timers.disarm(&deadline);
        let pm = self.pod_manager.get_pod_and_mirror_pod(p);
        if pm.was_mirror {
            if let Some(config_pod) = pm.pod {
                out.push(update(UpdateType::Update, config_pod, pm.mirror, now));
            }
            return;
        }
        self.rejected.remove(&pod::uid(p));
        // deletePod: skipped until every source is ready (housekeeping retries it).
        if self.all_sources_ready() {
            out.push(update(UpdateType::Kill, p.clone(), None, now));
        }
    }

    /// `HandlePodReconcile` for one pod: the API status changed; the pod manager takes it,
    /// and a pod whose readiness gates changed its Ready condition is synced at once (GS-17).
    pub(super) fn handle_pod_reconcile(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        let uid = self.canonical_uid(&pod::uid(p));
        self.pod_manager.upsert(uid.clone(), p.clone());
        if crate::core::pod_status::conditions::need_to_reconcile_pod_readiness(p) {
            self.handle_pod_sync(&uid, now, out);
        }
    }

    /// `HandlePodSyncs` for the pod with `uid`, if it is desired.
    pub(super) fn handle_pod_sync(&self, uid: &Uid, now: Time, out: &mut Vec<Command>) {
        let Some(p) = self.pod_manager.get(uid) else {
            return;
        };
        let pm = self.pod_manager.get_pod_and_mirror_pod(p);
        if pm.was_mirror {
            return;
        }
        if let Some(config_pod) = pm.pod {
            out.push(update(UpdateType::Sync, config_pod, pm.mirror, now));
        }
    }

    /// A PLEG event: sync the pod unless the event is not worth it (`isSyncPodWorthy`).
    pub(super) fn handle_pleg_event(&self, e: &PlegEvent, now: Time, out: &mut Vec<Command>) {
        if e.kind != PlegEventKind::ContainerRemoved {
            self.handle_pod_sync(&e.uid, now, out);
        }
    }

    /// A node shutdown: reject new pods from now on and kill every pod, marking it
    /// Failed/`Terminated` with the `DisruptionTarget` condition. With
    /// `shutdown_grace_period_s` set, the kubelet's graceful node shutdown: the non-critical
    /// pods first, each with at most the non-critical budget, then (once they stopped or
    /// their budget ran out) the critical pods with at most theirs. Without it, every pod
    /// with its own grace period. A second shutdown record changes nothing.
    pub(super) fn handle_node_shutdown(&mut self, now: Time, out: &mut Vec<Command>) {
        if self.shutting_down {
            return;
        }
        self.shutting_down = true;
        let pods: Vec<(Uid, Arc<Pod>)> = self
            .pod_manager
            .iter()
            .map(|(u, p)| (u.clone(), p.clone()))
            .collect();
        let Some(budgets) = node_shutdown::Budgets::of(&self.config) else {
            for (_, p) in &pods {
                kill_for_shutdown(p, None, now, out);
            }
            return;
        };
        out.push(Command::RecordEvent(KubeEvent {
            object: ObjectRef::node(&self.node_status.node_name(&self.config)),
            event_type: EventType::Normal,
            reason: node_shutdown::EVENT_REASON.into(),
            message: node_shutdown::EVENT_MESSAGE.into(),
        }));
        let (critical, non_critical): (Vec<_>, Vec<_>) = pods
            .into_iter()
            .partition(|(_, p)| node_shutdown::is_critical(p));
        for (_, p) in &non_critical {
            let grace_s = node_shutdown::kill_grace_s(p, budgets.non_critical_s);
            kill_for_shutdown(p, Some(grace_s), now, out);
        }
        let until = now.plus_ms(budgets.non_critical_s as u64 * 1_000);
        if !non_critical.is_empty() {
            // an empty group is not waited for (the fold's check kills the critical pods now)
            self.timers.set(TimerKey::NodeShutdownGroup, until, out);
        }
        self.shutdown = node_shutdown::Stage::NonCritical {
            waiting_on: non_critical.into_iter().map(|(u, _)| u).collect(),
            critical: critical.into_iter().map(|(u, _)| u).collect(),
            until,
        };
    }

    /// The non-critical group of a graceful shutdown is done when all its pods stopped or
    /// (`budget_over`) its budget ran out: the critical pods are killed then.
    pub(super) fn advance_node_shutdown(
        &mut self,
        budget_over: bool,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let node_shutdown::Stage::NonCritical { waiting_on, .. } = &self.shutdown else {
            return;
        };
        let stopped = waiting_on.iter().all(|u| self.pod_stopped(u));
        if !(budget_over || stopped) {
            return;
        }
        let node_shutdown::Stage::NonCritical { critical, .. } = std::mem::take(&mut self.shutdown)
        else {
            return;
        };
        self.timers.disarm(&TimerKey::NodeShutdownGroup);
        let budget_s = node_shutdown::Budgets::of(&self.config).map_or(0, |b| b.critical_s);
        for uid in &critical {
            if let Some(p) = self.pod_manager.get(uid) {
                let grace_s = node_shutdown::kill_grace_s(p, budget_s);
                kill_for_shutdown(p, Some(grace_s), now, out);
            }
        }
    }

    /// True once the pod cannot have a running container (its worker terminated, or it
    /// never started one).
    fn pod_stopped(&self, uid: &Uid) -> bool {
        self.pod_workers
            .status(uid)
            .is_none_or(|s| s.is_terminated() || (!s.is_started() && !s.observed_runtime()))
    }

    /// True once no pod can have a running container (every worker is terminated).
    pub fn all_pods_stopped(&self) -> bool {
        self.pod_workers
            .statuses()
            .all(|(u, _)| self.pod_stopped(u))
    }

    /// True once the API server has the newest status of every API pod (static pods,
    /// whose status goes to a mirror pod that may not exist, are not waited for).
    pub fn api_statuses_synced(&self) -> bool {
        self.statuses.iter().all(|(u, v)| {
            v.unsynced_since.is_none() || self.pod_manager.get(u).is_none_or(|p| pod::is_static(p))
        })
    }

    /// The housekeeping tick: re-arm it and, once sources are ready, reconcile the workers.
    pub(super) fn housekeeping_tick(&mut self, now: Time, out: &mut Vec<Command>) {
        let next = now.plus_ms(self.config.housekeeping_period_ms);
        self.timers.set(TimerKey::Housekeeping, next, out);
        if !self.all_sources_ready() {
            return;
        }
        out.push(Command::Append(Event::SyncKnownPods(SyncKnownPods {
            desired: None,
        })));
    }

    /// `HandlePodCleanups` after `SyncKnownPods`: restart reused UIDs, kill terminal deleted
    /// pods unknown to the workers, and kill runtime pods nobody wants. Each step is one walk
    /// over sorted maps (pods, workers, runtime cache), so a pass over a busy node costs a
    /// few microseconds per hundred pods; a walk whose maps kept their key sets since the
    /// last pass is not repeated (its answer comes from `core::housekeeping_memo`).
    pub(super) fn handle_sync_known_pods(
        &mut self,
        e: &SyncKnownPods,
        seq: u64,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        // SyncKnownPods' candidates: with the desired set being the config pods, they are
        // a function of the two maps' key sets (core::housekeeping_memo)
        let candidates = match &e.desired {
            Some(explicit) => {
                let sorted: BTreeSet<&Uid> = explicit.iter().collect();
                self.pod_workers.known_pods_candidates(sorted.into_iter())
            }
            None => {
                let at = (self.pod_workers.generation(), self.pod_manager.generation());
                let (workers, pods) = (&self.pod_workers, &self.pod_manager);
                self.housekeeping_memo
                    .known_pods(at, || workers.known_pods_candidates(pods.uids()))
            }
        };
        let forgotten = {
            let mut cx = Cx {
                seq,
                now,
                config: &self.config,
                pods: &self.pod_manager,
                runtime: &self.runtime,
                timers: &mut self.timers,
                out,
            };
            self.pod_workers.sync_known_candidates(&mut cx, candidates)
        };
        for uid in &forgotten {
            self.forget_runtime_if_unowned(uid);
            self.reasons.remove_pod(uid);
        }
        // RemoveOrphanedStatuses: statuses of pods no config wants and no worker tracks
        // (none can appear while the three key sets stay as they were after the last pass)
        let at = (
            self.statuses.generation(),
            self.pod_manager.generation(),
            self.pod_workers.generation(),
        );
        if !self.housekeeping_memo.statuses_clean(at) {
            let orphaned: Vec<Uid> = {
                let mut pods = SortedCursor::new(self.pod_manager.iter());
                let mut workers = SortedCursor::new(self.pod_workers.statuses());
                self.statuses
                    .iter()
                    .map(|(u, _)| u)
                    .filter(|u| pods.seek(u).is_none() && workers.seek(u).is_none())
                    .cloned()
                    .collect()
            };
            for uid in orphaned {
                self.statuses.remove(&uid);
            }
            self.housekeeping_memo.set_statuses_clean((
                self.statuses.generation(),
                self.pod_manager.generation(),
                self.pod_workers.generation(),
            ));
        }
        self.delete_orphaned_mirror_pods(out);
        // backOff.GC()
        let cfg = self.backoff_config();
        self.backoff.gc(&cfg, now);
        let cfg = self.image_pull_backoff_config();
        self.image_pull_backoff.gc(&cfg, now);
        let kept = &self.image_pull_backoff;
        self.image_pull_errors.retain(|key, _| kept.contains(key));
        // probeManager.CleanupPods (upstream runs it before the orphan cleanups; nothing
        // in between reads probe state)
        self.probes_cleanup(out);

        // Desired pods without a worker: active ones start again (UID reuse), terminal
        // deleted ones that nothing runs for are killed so their status can be finalised
        // (e.g. rejected at admission). Creates first, then kills, as upstream.
        let at = (self.pod_manager.generation(), self.pod_workers.generation());
        let (pods, workers) = (&self.pod_manager, &self.pod_workers);
        let without_worker = self.housekeeping_memo.without_worker(at, || {
            let mut workers = SortedCursor::new(workers.statuses());
            pods.uids()
                .filter(|uid| workers.seek(uid).is_none())
                .cloned()
                .collect()
        });
        let mut creates = Vec::new();
        let mut kills = Vec::new();
        for uid in &without_worker {
            let Some(p) = self.pod_manager.get(uid) else {
                continue;
            };
            if pod::is_deleted(p) && pod::has_terminal_phase(p) {
                if !self.runtime.get(uid).is_ok_and(|s| s.has_running()) {
                    kills.push(update(UpdateType::Kill, p.clone(), None, now));
                }
            } else if self.is_active(p) {
                let pm = self.pod_manager.get_pod_and_mirror_pod(p);
                if let Some(config_pod) = pm.pod {
                    creates.push(update(UpdateType::Create, config_pod, pm.mirror, now));
                }
            }
        }
        out.extend(creates);
        out.extend(kills);

        // Pods running in the runtime that no worker is syncing or terminating and no config
        // wants: kill them with a one-second grace period.
        let at = (self.runtime.generation(), self.pod_manager.generation());
        let (runtime, pods) = (&self.runtime, &self.pod_manager);
        let undesired = self.housekeeping_memo.undesired_runtime(at, || {
            let mut pods = SortedCursor::new(pods.iter());
            runtime
                .iter()
                .map(|(uid, _)| uid)
                .filter(|uid| pods.seek(uid).is_none())
                .cloned()
                .collect()
        });
        for uid in &undesired {
            let Some(entry) = self.runtime.entry(uid) else {
                continue;
            };
            let owned = self.pod_workers.status(uid).is_some_and(|s| {
                matches!(
                    s.state(),
                    PodWorkerState::Sync | PodWorkerState::Terminating
                )
            });
            if owned || entry.error.is_some() || !entry.status.has_running() {
                continue;
            }
            out.push(Command::Append(Event::UpdatePod(
                UpdatePod::kill_running_pod(Arc::new(entry.status.running_pod(uid)), 1),
            )));
        }
    }
}

/// Appends the kill of a pod by the node shutdown: `grace_s` overrides its grace period
/// when set, and its status ends as [`node_shutdown::status_override`] says.
impl Node {
    /// An `emptyDir` measured above its `sizeLimit` (`emptyDirLimitEviction`): the pod is
    /// evicted at once (grace 0, so the pod workers' minimum) with the eviction status and a
    /// Warning `Evicted` event, unless it is gone, already being stopped, or critical.
    pub(super) fn handle_volume_usage(
        &mut self,
        usage: &VolumeUsageObserved,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let Some(p) = self.pod_manager.get(&usage.uid).cloned() else {
            return;
        };
        if self.pod_workers.is_pod_termination_requested(&usage.uid) {
            return;
        }
        let Some(message) = empty_dir_eviction::verdict(&p, usage) else {
            return;
        };
        out.push(Command::RecordEvent(KubeEvent {
            object: ObjectRef::pod(&p),
            event_type: EventType::Warning,
            reason: empty_dir_eviction::REASON.into(),
            message: message.clone(),
        }));
        let mut u = UpdatePod::for_pod(UpdateType::Kill, p);
        u.start_time = Some(now);
        u.kill = Some(super::update::KillPodOptions {
            grace_period_override_s: Some(0),
            status_override: Some(Box::new(empty_dir_eviction::status_override(&message))),
            ..Default::default()
        });
        out.push(Command::Append(Event::UpdatePod(u)));
    }
}

fn kill_for_shutdown(p: &Arc<Pod>, grace_s: Option<i64>, now: Time, out: &mut Vec<Command>) {
    let mut u = UpdatePod::for_pod(UpdateType::Kill, p.clone());
    u.start_time = Some(now);
    u.kill = Some(super::update::KillPodOptions {
        grace_period_override_s: grace_s,
        status_override: Some(Box::new(node_shutdown::status_override())),
        ..Default::default()
    });
    out.push(Command::Append(Event::UpdatePod(u)));
}
