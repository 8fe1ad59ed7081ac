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

use k8s_openapi::api::core::v1::Pod;

use super::admission::{can_admit_pod, Admission};
use super::command::{Command, EventType, KubeEvent, ObjectRef};
use super::config::PodSource;
use super::node::Node;
use super::pod;
use super::pod_workers::{Cx, PodWorkerState, PodWorkerSync};
use super::timers::TimerKey;
use super::uid::Uid;
use super::update::{UpdatePod, UpdateType};
use crate::ledger::event::{PlegEvent, PlegEventKind, PodRejected, SyncKnownPods};
use crate::ledger::{Event, Time};

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
        pods.filter(|p| {
            let uid = pod::uid(p);
            if self.pod_workers.is_pod_known_terminated(&uid) {
                return false;
            }
            let terminal = pod::has_terminal_phase(p) || self.rejected.contains(&uid);
            !terminal || self.pod_workers.is_pod_termination_requested(&uid)
        })
        .collect()
    }

    /// `HandlePodAdditions` for one pod.
    pub(super) fn handle_pod_addition(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        let existing: Vec<Arc<Pod>> = self.pod_manager.pods().cloned().collect();
        self.pod_manager.upsert(p.clone());
        let pm = self.pod_manager.get_pod_and_mirror_pod(p);
        if pm.was_mirror {
            if let Some(config_pod) = pm.pod {
                out.push(update(UpdateType::Update, config_pod, pm.mirror, now));
            }
            return;
        }
        let uid = pod::uid(p);
        if !self.pod_workers.is_pod_termination_requested(&uid) {
            let active = self.active_pods(existing.iter());
            let active: Vec<&Pod> = active.into_iter().map(|p| &**p).collect();
            if let Admission::Reject { reason, message } = can_admit_pod(&self.config, &active, p) {
                out.push(Command::RecordEvent(KubeEvent {
                    object: ObjectRef::pod(p),
                    event_type: EventType::Warning,
                    reason: reason.clone(),
                    message: message.clone(),
                }));
                out.push(Command::Append(Event::PodRejected(PodRejected {
                    uid,
                    reason,
                    message: format!("Pod was rejected: {message}"),
                })));
                return;
            }
        }
        out.push(update(UpdateType::Create, p.clone(), pm.mirror, now));
    }

    /// `HandlePodUpdates` for one pod (also used for graceful deletions).
    pub(super) fn handle_pod_update(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        self.pod_manager.upsert(p.clone());
        let pm = self.pod_manager.get_pod_and_mirror_pod(p);
        if let Some(config_pod) = pm.pod {
            out.push(update(UpdateType::Update, config_pod, pm.mirror, now));
        }
    }

    /// `HandlePodRemoves` for one pod.
    pub(super) fn handle_pod_removal(&mut self, p: &Arc<Pod>, now: Time, out: &mut Vec<Command>) {
        self.pod_manager.remove(p);
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

    /// `HandlePodReconcile` for one pod: the API status changed; the pod manager takes it.
    pub(super) fn handle_pod_reconcile(&mut self, p: &Arc<Pod>) {
        self.pod_manager.upsert(p.clone());
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

    /// The housekeeping tick: re-arm it and, once sources are ready, reconcile the workers.
    pub(super) fn housekeeping_tick(&mut self, now: Time, out: &mut Vec<Command>) {
        let next = now.plus_ms(self.config.housekeeping_period_ms);
        self.timers.set(TimerKey::Housekeeping, next, out);
        if !self.all_sources_ready() {
            return;
        }
        let desired: Vec<Uid> = self.pod_manager.pods().map(|p| pod::uid(p)).collect();
        out.push(Command::Append(Event::SyncKnownPods(SyncKnownPods {
            desired,
        })));
    }

    /// `HandlePodCleanups` after `SyncKnownPods`: restart reused UIDs, kill terminal deleted
    /// pods unknown to the workers, and kill runtime pods nobody wants.
    pub(super) fn handle_sync_known_pods(
        &mut self,
        e: &SyncKnownPods,
        seq: u64,
        now: Time,
        out: &mut Vec<Command>,
    ) -> BTreeMap<Uid, PodWorkerSync> {
        let desired: BTreeSet<Uid> = e.desired.iter().cloned().collect();
        let report = {
            let mut cx = Cx {
                seq,
                now,
                config: &self.config,
                runtime: &self.runtime,
                timers: &mut self.timers,
                out,
            };
            self.pod_workers.sync_known_pods(&mut cx, &desired)
        };
        let workers = &self.pod_workers;
        let pods = &self.pod_manager;
        self.runtime
            .prune_empty(|uid| workers.status(uid).is_some() || pods.get(uid).is_some());

        // Desired, active pods unknown to the workers start again (UID reuse).
        let all: Vec<Arc<Pod>> = self.pod_manager.pods().cloned().collect();
        for p in self.active_pods(all.iter()) {
            if report.contains_key(&pod::uid(p)) {
                continue;
            }
            let pm = self.pod_manager.get_pod_and_mirror_pod(p);
            if pm.was_mirror {
                continue;
            }
            if let Some(config_pod) = pm.pod {
                out.push(update(UpdateType::Create, config_pod, pm.mirror, now));
            }
        }

        // Terminal, deleted pods the workers never saw (e.g. rejected at admission) are
        // killed so their status can be finalised, unless something of them still runs.
        for p in &all {
            let uid = pod::uid(p);
            if pod::is_deleted(p)
                && pod::has_terminal_phase(p)
                && !report.contains_key(&uid)
                && !self.runtime.get(&uid).is_ok_and(|s| s.has_running())
            {
                out.push(update(UpdateType::Kill, p.clone(), None, now));
            }
        }

        // Pods running in the runtime that no worker owns and no config wants.
        for (uid, entry) in self.runtime.iter() {
            if entry.error.is_some() || !entry.status.has_running() {
                continue;
            }
            if matches!(
                report.get(uid).map(|s| s.state),
                Some(PodWorkerState::Sync | PodWorkerState::Terminating)
            ) {
                continue;
            }
            if self.pod_manager.get(uid).is_none() {
                out.push(Command::Append(Event::UpdatePod(
                    UpdatePod::kill_running_pod(Arc::new(entry.status.running_pod(uid)), 1),
                )));
            }
        }
        report
    }
}
