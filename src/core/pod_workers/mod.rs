//! The pod workers: a port of the kubelet's pod_workers.go as a pure state machine.
//!
//! Owns, per pod UID, the lifecycle sync → terminating → terminated → finished, update
//! coalescing, grace periods, cancellation, static-pod start ordering, `SyncKnownPods` and the
//! query methods other components ask. Where the Go code starts a goroutine, waits on a
//! channel or the pod cache, or enqueues work, this module emits a `Command` (`SyncPod`,
//! `SyncTerminatingPod`, `SyncTerminatingRuntimePod`, `SyncTerminatedPod`, `CancelSync`,
//! `InspectPod`, `SetTimer`) and later folds the outcome (`SyncFinished`,
//! `RuntimeStatusObserved`, `TimerFired`). Must not do I/O, read a clock or iterate a hash
//! map: time is the folded record's `at`.
//!
//! Deliberate differences from upstream, each documented in docs/pod-workers.md:
//! the worker takes a pending update as soon as it is idle (no goroutine scheduling delay);
//! the wait on the pod cache is an `InspectPod` round trip; and every kill waiter is
//! notified (upstream leaks `CompletedCh` for finished, unstarted and runtime-only pods, so
//! `killPodNow` times out with a spurious `ExceededGracePeriod`).

mod grace;
mod known_pods;
mod lifecycle;
pub mod phase_log;
mod queries;
mod static_pods;
pub mod status;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

pub use grace::effective_grace_period;
pub use known_pods::PodWorkerSync;
pub use phase_log::{worker_phase, PhaseChange, PhaseLog, WorkerPhase};
pub use status::{
    Lifecycle, PodSyncStatus, PodWork, PodWorkerState, Termination, WorkerActivity, WorkerQueue,
};

use super::command::{Command, EventType, KubeEvent, ObjectRef};
use super::config::CoreConfig;
use super::pod;
use super::runtime_status::RuntimeCache;
use super::timers::{TimerKey, Timers};
use super::uid::Uid;
use super::uid_map::UidMap;
use super::update::{UpdatePod, UpdateType};
use crate::core::record::event::KillCompleted;
use crate::core::record::{Event, Time};

/// `workerResyncIntervalJitterFactor`.
pub const RESYNC_JITTER_FACTOR: f64 = 0.5;
/// `workerBackOffPeriodJitterFactor`.
pub const BACKOFF_JITTER_FACTOR: f64 = 0.5;
/// The error text that selects the short transient backoff (`NetworkNotReadyErrorMsg`).
pub const NETWORK_NOT_READY_ERROR: &str = "network is not ready";

/// What a pod-worker operation needs from the fold: the record's identity and time, the
/// configuration, the runtime cache, the timers and the command sink.
pub struct Cx<'a> {
    /// Seq of the record being folded.
    pub seq: u64,
    /// `at` of the record being folded: "now".
    pub now: Time,
    /// The configuration in force.
    pub config: &'a CoreConfig,
    /// Desired pods (consulted only to share `Uid` allocations).
    pub pods: &'a super::pod_manager::PodManager,
    /// The runtime cache.
    pub runtime: &'a RuntimeCache,
    /// Armed timers.
    pub timers: &'a mut Timers,
    /// Commands emitted so far.
    pub out: &'a mut Vec<Command>,
}

/// All pod workers of the node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodWorkers {
    /// `SyncKnownPods` ran at least once: every pod has been delivered via `UpdatePod`.
    pods_synced: bool,
    /// Per-UID state.
    statuses: UidMap<PodSyncStatus>,
    /// The started static pod per full name.
    started_static_pods_by_fullname: BTreeMap<String, Uid>,
    /// Static pods waiting to start, per full name, in arrival order.
    waiting_to_start_static_pods_by_fullname: BTreeMap<String, Vec<Uid>>,
    /// The id of the last sync command emitted (or drawn by `next_sync_id`).
    last_sync_id: u64,
    /// The phase changes of the record being folded (not state; see `phase_log`).
    #[serde(skip)]
    phase_log: PhaseLog,
}

impl PodWorkers {
    /// A fresh id for a command that is not one of the workers' syncs but reports runtime
    /// actions like one (`RemovePodContent`): never equal to a sync's id.
    pub fn next_sync_id(&mut self) -> u64 {
        self.last_sync_id += 1;
        self.last_sync_id
    }

    /// The status of `uid`, if the workers know it.
    pub fn status(&self, uid: &Uid) -> Option<&PodSyncStatus> {
        self.statuses.get(uid)
    }

    /// The stored `Uid` equal to `uid`, so callers can share one allocation per pod.
    pub fn uid_key<Q>(&self, uid: &Q) -> Option<&Uid>
    where
        Uid: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.statuses.get_key_value(uid).map(|(k, _)| k)
    }

    /// The status of the pod whose UID is `uid`, without allocating a `Uid`.
    pub fn status_by_str(&self, uid: &str) -> Option<&PodSyncStatus> {
        self.statuses.get(uid)
    }

    /// The workers' phase changes made by the fold of the last record.
    pub fn phase_log(&self) -> &PhaseLog {
        &self.phase_log
    }

    /// Empties the phase log (`Node::fold_into`, before each record).
    pub(crate) fn clear_phase_log(&mut self) {
        self.phase_log.clear();
    }

    /// All statuses in UID order.
    pub fn statuses(&self) -> impl Iterator<Item = (&Uid, &PodSyncStatus)> {
        self.statuses.iter()
    }

    /// The generation of the known UIDs and their restart requests (`UidMap::generation`).
    pub fn generation(&self) -> crate::core::uid_map::Generation {
        self.statuses.generation()
    }

    /// The number of known UIDs.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// True if no UID is known.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// True once `SyncKnownPods` has run.
    pub fn pods_synced(&self) -> bool {
        self.pods_synced
    }

    /// The started static pod per full name.
    pub fn started_static_pods(&self) -> &BTreeMap<String, Uid> {
        &self.started_static_pods_by_fullname
    }

    /// Static pods waiting to start per full name.
    pub fn waiting_static_pods(&self) -> &BTreeMap<String, Vec<Uid>> {
        &self.waiting_to_start_static_pods_by_fullname
    }

    /// `UpdatePod`: carries a config change or a termination request to a pod's worker.
    /// `request_seq` is the seq of the `UpdatePod` record (it names a kill's waiters).
    pub fn update_pod(&mut self, cx: &mut Cx<'_>, mut options: UpdatePod, request_seq: u64) {
        // Identify the pod. A runtime-only pod (no config) can only be killed.
        let is_runtime_pod;
        let raw_uid = match (&options.pod, &options.running_pod) {
            (None, Some(running)) => {
                if options.update_type != UpdateType::Kill {
                    return; // "runtime pods can only be killed"
                }
                is_runtime_pod = true;
                running.uid.clone()
            }
            (Some(p), running) => {
                if running.is_some() {
                    // "RunningPod is only valid when Pod is not specified"
                    options.running_pod = None;
                }
                is_runtime_pod = false;
                pod::uid(p)
            }
            (None, None) => return, // malformed: nothing to identify the pod by
        };
        let now = cx.now;

        // One `Uid` allocation per pod, shared by every map and command (comparisons of
        // shared UIDs are a pointer check): the worker's own, else the pod manager's.
        let known = self
            .statuses
            .get_key_value(&raw_uid)
            .map(|(k, _)| k.clone());
        let first_time = known.is_none();
        let uid = match known {
            Some(k) => k,
            None => cx.pods.uid_key(&raw_uid).cloned().unwrap_or(raw_uid),
        };
        if first_time {
            let full_name = match (&options.pod, &options.running_pod) {
                (Some(p), _) => pod::build_full_name(pod::name(p), pod::namespace(p)),
                (None, Some(r)) => pod::build_full_name(&r.name, &r.namespace),
                (None, None) => unreachable!("returned above"),
            };
            let mut status = PodSyncStatus::new(now, full_name);
            // A terminal pod seen for the first time whose runtime state is terminal too
            // finished SyncTerminatingPod in a previous life (kubelet restart): only
            // SyncTerminatedPod remains (kubernetes/kubernetes#105523).
            if let Some(p) = &options.pod {
                if pod::has_terminal_phase(p) {
                    if let Ok(cached) = cx.runtime.get(&uid) {
                        if cached.is_terminal() {
                            status.request_termination(now).acknowledged = true;
                            status.mark_terminated(now);
                        }
                    }
                }
            }
            self.phase_log.note(&uid, None);
            self.statuses.insert(uid.clone(), status);
        }
        let status = self.statuses.get_mut(&uid).expect("inserted above");

        // A runtime pod update uses the most recent config pod if there is one; once
        // observed in the runtime, the pod must be driven to completion.
        let decision_pod: Arc<Pod> = if is_runtime_pod {
            let known = status
                .pending_update
                .as_ref()
                .and_then(|u| u.pod.clone())
                .or_else(|| status.active_update.as_ref().and_then(|u| u.pod.clone()));
            match known {
                Some(p) => {
                    options.pod = Some(p.clone());
                    options.running_pod = None;
                    p
                }
                None => Arc::new(
                    options
                        .running_pod
                        .as_ref()
                        .expect("runtime pod update")
                        .to_api_pod(),
                ),
            }
        } else {
            options.pod.clone().expect("config pod update")
        };

        // A create for a UID that is already terminating: the UID was reused. Restart after
        // termination completes and housekeeping purges the history.
        if !first_time
            && status.is_termination_requested()
            && options.update_type == UpdateType::Create
        {
            let termination = status.termination_mut().expect("termination requested");
            if !termination.restart_requested {
                termination.restart_requested = true;
                // SyncKnownPods' candidates include restart requests (housekeeping memo)
                self.statuses.touch();
            }
            return;
        }

        // Once finished, a UID never re-enters the workers until it is purged.
        if status.is_finished() {
            if is_runtime_pod {
                status.request_termination(now).observed_runtime = true;
            }
            let waiter = wants_notification(&options, request_seq);
            notify_kill_waiters(cx, &uid, waiter.into_iter().collect(), false);
            return;
        }

        // A transition to terminating?
        let mut became_terminating = false;
        if !status.is_termination_requested() {
            let kill = options.update_type == UpdateType::Kill;
            let deleted = is_runtime_pod || pod::is_deleted(&decision_pod);
            let evicted = !deleted
                && !pod::has_terminal_phase(&decision_pod)
                && kill
                && options.kill.as_ref().is_some_and(|k| k.evict);
            became_terminating = deleted || pod::has_terminal_phase(&decision_pod) || kill;
            if became_terminating {
                self.phase_log.note(&uid, Some(status));
                let termination = status.request_termination(now);
                termination.deleted = deleted;
                termination.evicted = evicted;
            }
        }
        if is_runtime_pod {
            // once observed in the runtime, the pod must be driven to completion
            if let Some(termination) = status.termination_mut() {
                termination.observed_runtime = true;
            }
        }

        // Once terminating, every update is a kill and the grace period only shortens.
        let mut grace_shortened = false;
        if status.is_terminated() {
            // Waiting for the worker to finish: a runtime kill from an older cache is noise.
            if is_runtime_pod {
                return;
            }
            let waiter = wants_notification(&options, request_seq);
            notify_kill_waiters(cx, &uid, waiter.into_iter().collect(), false);
            options.kill = None;
        } else if status.is_termination_requested() {
            let kill = options.kill.get_or_insert_with(Default::default);
            if kill.wait_for_completion {
                status.notify_post_terminating.push(request_seq);
                arm_kill_deadline(
                    cx,
                    &uid,
                    &decision_pod,
                    kill.grace_period_override_s,
                    request_seq,
                );
            }
            if let Some(s) = &kill.status_override {
                status.status_post_terminating.push((**s).clone());
            }
            let (grace, shortened) =
                effective_grace_period(status.grace_period_s(), &decision_pod, Some(kill));
            grace_shortened = shortened;
            if let Some(termination) = status.termination_mut() {
                termination.grace_period_s = grace;
            }
            kill.grace_period_override_s = Some(grace);
        } else if options.kill.is_some() {
            // Kill options are not valid outside termination.
            let waiter = wants_notification(&options, request_seq);
            notify_kill_waiters(cx, &uid, waiter.into_iter().collect(), false);
            options.kill = None;
        }

        // Start the worker if there is none; static pods queue for their full name.
        if !status.queue.exists() {
            status.queue = WorkerQueue::Idle;
            if pod::is_static(&decision_pod) {
                self.waiting_to_start_static_pods_by_fullname
                    .entry(status.fullname.clone())
                    .or_default()
                    .push(uid.clone());
            }
        }

        // Keep the oldest start time across coalesced updates.
        if let (Some(pending), Some(start)) = (&status.pending_update, options.start_time) {
            if let Some(prev) = pending.start_time {
                if prev < start {
                    options.start_time = Some(prev);
                }
            }
        }

        status.pending_update = Some(options);
        status.signal();

        if became_terminating || grace_shortened {
            self.cancel_current_sync(cx, &uid);
        }
        self.pump(cx, &uid);
    }

    /// The kubelet's `cancelFn()`: a running sync is asked to stop its cancellable waits; a
    /// worker still waiting for the runtime status abandons the work (as if it had returned
    /// `context.Canceled` before doing anything).
    fn cancel_current_sync(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        match &mut status.activity {
            WorkerActivity::Syncing {
                sync_id, canceled, ..
            } => {
                if !*canceled {
                    *canceled = true;
                    cx.out.push(Command::CancelSync {
                        uid: uid.clone(),
                        sync_id: *sync_id,
                    });
                }
            }
            WorkerActivity::AwaitingRuntimeStatus { .. } => {
                status.activity = WorkerActivity::Idle;
                self.complete_work(cx, uid, false, Some(Failure::Canceled));
            }
            WorkerActivity::Idle => {}
        }
    }
}

/// Why a sync did not succeed (the Go `err`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// `context.Canceled`.
    Canceled,
    /// Any other error.
    Error(String),
}

fn wants_notification(options: &UpdatePod, request_seq: u64) -> Option<u64> {
    options
        .kill
        .as_ref()
        .filter(|k| k.wait_for_completion)
        .map(|_| request_seq)
}

/// Tells kill waiters that the kill completed (or timed out).
pub(crate) fn notify_kill_waiters(cx: &mut Cx<'_>, uid: &Uid, requests: Vec<u64>, timed_out: bool) {
    if requests.is_empty() {
        return;
    }
    cx.out
        .push(Command::Append(Event::KillCompleted(KillCompleted {
            uid: uid.clone(),
            requests,
            timed_out,
        })));
}

/// `killPodNow`'s deadline: max(10 s, 1.5 × grace), grace being the override or the spec's.
fn arm_kill_deadline(cx: &mut Cx<'_>, uid: &Uid, pod: &Pod, override_s: Option<i64>, request: u64) {
    let grace_s = override_s
        .or_else(|| pod::termination_grace_period_s(pod))
        .unwrap_or(0)
        .max(0);
    let timeout_ms = ((grace_s + grace_s / 2) as u64 * 1000).max(cx.config.kill_wait_min_ms);
    cx.timers.set(
        TimerKey::KillDeadline {
            uid: uid.clone(),
            request,
        },
        cx.now.plus_ms(timeout_ms),
        cx.out,
    );
}

impl PodWorkers {
    /// Folds a `KillDeadline` timer: if the kill is still pending, the waiter gets the
    /// `ExceededGracePeriod` warning and a timed-out completion.
    pub fn on_kill_deadline(&mut self, cx: &mut Cx<'_>, uid: &Uid, request: u64) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        let Some(pos) = status
            .notify_post_terminating
            .iter()
            .position(|r| *r == request)
        else {
            return;
        };
        status.notify_post_terminating.remove(pos);
        let object = status
            .last_pod()
            .map(|p| ObjectRef::pod(p))
            .unwrap_or_else(|| ObjectRef {
                kind: "Pod".into(),
                namespace: String::new(),
                name: status.fullname.clone(),
                uid: uid.to_string(),
            });
        cx.out.push(Command::RecordEvent(KubeEvent {
            object,
            event_type: EventType::Warning,
            reason: "ExceededGracePeriod".into(),
            message: "Container runtime did not kill the pod within specified grace period.".into(),
        }));
        notify_kill_waiters(cx, uid, vec![request], true);
    }
}
