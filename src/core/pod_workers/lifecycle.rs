//! The pod worker loop as folds: take a pending update (`startPodSync`), wait for a fresh
//! runtime status, run the sync method as a command, and handle its outcome
//! (`completeSync`, `completeTerminating`, `completeTerminatingRuntimePod`,
//! `completeTerminated`, `completeWork`).
//!
//! Owns the transitions of `WorkerActivity`. Must not run anything: each step emits the
//! command the Go goroutine would have executed and waits for its outcome record.

use super::status::{PodWork, PodWorkerState, WorkerActivity, WorkerQueue};
use super::{
    notify_kill_waiters, Cx, Failure, PodWorkers, BACKOFF_JITTER_FACTOR, NETWORK_NOT_READY_ERROR,
    RESYNC_JITTER_FACTOR,
};
use crate::core::command::{
    Command, EventType, KubeEvent, ObjectRef, SyncPodCommand, SyncTerminatedPodCommand,
    SyncTerminatingPodCommand, SyncTerminatingRuntimePodCommand, WorkType,
};
use crate::core::jitter::jitter_ms;
use crate::core::kubelet_sync::KILL_POD_ERROR;
use crate::core::record::event::{SyncFinished, SyncOutcome};
use crate::core::runtime_status::RuntimePodStatus;
use crate::core::timers::TimerKey;
use crate::core::uid::Uid;
use std::sync::Arc;

impl PodWorkers {
    /// Delivers a signalled update to an idle worker (the goroutine's `for range podUpdates`).
    pub(super) fn pump(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        if status.queue != WorkerQueue::Signaled || !status.activity.is_idle() {
            return;
        }
        status.take_signal();
        self.start_pod_sync(cx, uid);
    }

    /// `startPodSync`: consumes the pending update, decides whether the pod may start, and
    /// runs the work it maps to.
    fn start_pod_sync(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        let Some(options) = status.pending_update.take() else {
            // Queued without work: nothing to do.
            status.settle();
            return;
        };
        let work = PodWork {
            state: status.state(),
            options,
        };

        if status.is_started() {
            status.merge_last_update(&work.options);
            return self.run_work(cx, uid, work);
        }
        // A runtime-only pod that is terminating may "start" so it can be torn down.
        if work.options.running_pod.is_some() && work.state == PodWorkerState::Terminating {
            status.merge_last_update(&work.options);
            return self.run_work(cx, uid, work);
        }
        let Some(pod) = work.options.pod.clone() else {
            // Only a RunningPod and not terminating: cannot ever start (programmer error
            // upstream; unreachable because runtime pods always become terminating).
            status.merge_last_update(&work.options);
            status.settle();
            return;
        };
        let decision = self.allow_pod_start(cx, &pod);
        let status = self.statuses.get_mut(uid).expect("checked above");
        if !decision.can_ever_start {
            // Terminated before it could start: finish without running any sync.
            self.cleanup_unstarted_pod(cx, uid);
            return;
        }
        if !decision.can_start {
            // Put the update back; a later update (or the requeue timer) retries.
            status.pending_update = Some(work.options);
            status.settle();
            return;
        }
        status.start(cx.now);
        status.merge_last_update(&work.options);
        self.run_work(cx, uid, work);
    }

    /// Runs the work: runtime-only pods go straight to their terminating sync; config pods
    /// first need a runtime status newer than the previous sync.
    fn run_work(&mut self, cx: &mut Cx<'_>, uid: &Uid, work: PodWork) {
        if work.options.running_pod.is_some() {
            return self.issue_sync(cx, uid, work, Arc::default());
        }
        let status = self
            .statuses
            .get_mut(uid)
            .expect("running worker has status");
        match cx.runtime.get_newer_than(uid, status.last_sync_seq) {
            Some(Ok(runtime)) => self.issue_sync(cx, uid, work, runtime),
            Some(Err(error)) => self.fail_status_wait(cx, uid, &work, error),
            None => {
                status.activity = WorkerActivity::AwaitingRuntimeStatus { work };
                cx.out.push(Command::InspectPod { uid: uid.clone() });
            }
        }
    }

    /// Folds a `RuntimeStatusObserved` (already in the cache): a worker waiting for it runs.
    pub fn on_runtime_status(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        let WorkerActivity::AwaitingRuntimeStatus { .. } = status.activity else {
            return;
        };
        let Some(result) = cx.runtime.get_newer_than(uid, status.last_sync_seq) else {
            return;
        };
        let WorkerActivity::AwaitingRuntimeStatus { work } = std::mem::take(&mut status.activity)
        else {
            unreachable!("checked above")
        };
        match result {
            Ok(runtime) => self.issue_sync(cx, uid, work, runtime),
            Err(error) => self.fail_status_wait(cx, uid, &work, error),
        }
    }

    /// The pod cache returned an error: `FailedSync` "error determining status", then the
    /// work ends as a failed sync (retried with backoff).
    fn fail_status_wait(&mut self, cx: &mut Cx<'_>, uid: &Uid, work: &PodWork, error: String) {
        if let Some(pod) = &work.options.pod {
            cx.out.push(Command::RecordEvent(KubeEvent {
                object: ObjectRef::pod(pod),
                event_type: EventType::Warning,
                reason: "FailedSync".into(),
                message: format!("error determining status: {error}"),
            }));
        }
        if let Some(status) = self.statuses.get_mut(uid) {
            status.activity = WorkerActivity::Idle;
            status.last_sync_seq = Some(cx.seq);
        }
        self.complete_work(cx, uid, false, Some(Failure::Error(error)));
    }

    /// Emits the sync command for `work` and marks the worker busy.
    fn issue_sync(
        &mut self,
        cx: &mut Cx<'_>,
        uid: &Uid,
        work: PodWork,
        runtime: Arc<RuntimePodStatus>,
    ) {
        self.last_sync_id += 1;
        let sync_id = self.last_sync_id;
        let work_type = work.work_type();
        let status = self
            .statuses
            .get_mut(uid)
            .expect("running worker has status");
        let options = work.options;
        let command = match work_type {
            WorkType::Terminated => Command::SyncTerminatedPod(SyncTerminatedPodCommand {
                uid: uid.clone(),
                sync_id,
                pod: options.pod.clone().expect("config pod"),
                runtime,
            }),
            WorkType::Terminating | WorkType::TerminatingRuntime => {
                // acknowledgeTerminating: from here on no container will be started.
                if let Some(termination) = status.termination_mut() {
                    termination.acknowledged = true;
                }
                match &options.running_pod {
                    Some(running) => {
                        Command::SyncTerminatingRuntimePod(SyncTerminatingRuntimePodCommand {
                            uid: uid.clone(),
                            sync_id,
                            running_pod: running.clone(),
                            kill: Default::default(),
                        })
                    }
                    None => Command::SyncTerminatingPod(SyncTerminatingPodCommand {
                        uid: uid.clone(),
                        sync_id,
                        pod: options.pod.clone().expect("config pod"),
                        runtime,
                        grace_period_s: options
                            .kill
                            .as_ref()
                            .and_then(|k| k.grace_period_override_s),
                        status_override: status.status_post_terminating.last().cloned(),
                        kill: Default::default(),
                    }),
                }
            }
            WorkType::Sync => Command::SyncPod(SyncPodCommand {
                uid: uid.clone(),
                sync_id,
                update_type: options.update_type,
                pod: options.pod.clone().expect("config pod"),
                mirror_pod: options.mirror_pod.clone(),
                runtime,
                plan: Default::default(),
            }),
        };
        status.activity = WorkerActivity::Syncing {
            sync_id,
            work_type,
            update_type: options.update_type,
            start_time: options.start_time,
            canceled: false,
        };
        cx.out.push(command);
    }

    /// Folds a `SyncFinished`: the outcome of the running sync. A result for any other
    /// sync (stale or unknown) is ignored.
    pub fn on_sync_finished(&mut self, cx: &mut Cx<'_>, finished: &SyncFinished) {
        let uid = &finished.uid;
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        let work_type = match status.activity {
            WorkerActivity::Syncing {
                sync_id, work_type, ..
            } if sync_id == finished.sync_id => work_type,
            _ => return,
        };
        status.activity = WorkerActivity::Idle;
        status.last_sync_seq = Some(cx.seq);

        let mut phase_transition = false;
        let failure = match &finished.outcome {
            SyncOutcome::Canceled => Some(Failure::Canceled),
            SyncOutcome::Failed { message } => {
                let terminating = matches!(
                    work_type,
                    WorkType::Terminating | WorkType::TerminatingRuntime
                );
                if terminating && message.starts_with(KILL_POD_ERROR) {
                    // RT-43, RT-45: Warning FailedToKillPod, and the kill is retried
                    if let Some(object) = status.active_update.as_ref().and_then(pod_ref) {
                        cx.out.push(Command::RecordEvent(KubeEvent {
                            object,
                            event_type: EventType::Warning,
                            reason: "FailedToKillPod".into(),
                            message: message.clone(),
                        }));
                    }
                }
                Some(Failure::Error(message.clone()))
            }
            SyncOutcome::Ok | SyncOutcome::Terminal => {
                match work_type {
                    WorkType::Terminated => {
                        self.complete_terminated(cx, uid);
                        return;
                    }
                    WorkType::TerminatingRuntime => {
                        self.complete_terminating_runtime_pod(cx, uid);
                        return;
                    }
                    WorkType::Terminating => {
                        self.complete_terminating(cx, uid);
                        phase_transition = true;
                    }
                    WorkType::Sync => {
                        if finished.outcome == SyncOutcome::Terminal {
                            self.complete_sync(cx, uid);
                            phase_transition = true;
                        }
                    }
                }
                None
            }
        };
        self.complete_work(cx, uid, phase_transition, failure);
    }

    /// `completeSync`: SyncPod found the pod terminal; terminate it next.
    fn complete_sync(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        if !status.is_termination_requested() {
            self.phase_log.note(uid, Some(status));
        }
        status.request_termination(cx.now).acknowledged = true;
        self.requeue_last_pod_update(uid);
    }

    /// `completeTerminating`: every container is stopped; kill waiters are released and the
    /// terminated work runs next.
    fn complete_terminating(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        self.phase_log.note(uid, Some(status));
        status.mark_terminated(cx.now);
        let waiters = std::mem::take(&mut status.notify_post_terminating);
        status.status_post_terminating.clear();
        notify_kill_waiters(cx, uid, waiters, false);
        self.requeue_last_pod_update(uid);
    }

    /// `completeTerminatingRuntimePod`: a runtime-only pod is stopped; it was never desired,
    /// so its status is dropped entirely.
    fn complete_terminating_runtime_pod(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(mut status) = self.statuses.remove(uid) else {
            return;
        };
        self.phase_log.note(uid, Some(&status));
        status.queue = WorkerQueue::Absent;
        let waiters = std::mem::take(&mut status.notify_post_terminating);
        notify_kill_waiters(cx, uid, waiters, false);
        self.release_static_slot(&status.fullname, uid);
    }

    /// `completeTerminated`: the pod is finished; the worker stops.
    fn complete_terminated(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        self.phase_log.note(uid, Some(status));
        status.mark_finished(cx.now);
        let fullname = status.fullname.clone();
        self.release_static_slot(&fullname, uid);
    }

    /// `cleanupUnstartedPod`: terminated before it could start; finished without a sync.
    pub(super) fn cleanup_unstarted_pod(&mut self, cx: &mut Cx<'_>, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        self.phase_log.note(uid, Some(status));
        status.mark_finished(cx.now);
        let waiters = std::mem::take(&mut status.notify_post_terminating);
        let fullname = status.fullname.clone();
        notify_kill_waiters(cx, uid, waiters, false);
        self.release_static_slot(&fullname, uid);
    }

    pub(super) fn release_static_slot(&mut self, fullname: &str, uid: &Uid) {
        if self.started_static_pods_by_fullname.get(fullname) == Some(uid) {
            self.started_static_pods_by_fullname.remove(fullname);
        }
    }

    /// `completeWork`: requeue per the outcome, then run a pending update or go idle.
    pub(super) fn complete_work(
        &mut self,
        cx: &mut Cx<'_>,
        uid: &Uid,
        phase_transition: bool,
        failure: Option<Failure>,
    ) {
        let delay_ms = if phase_transition {
            0
        } else {
            match &failure {
                None => jitter_ms(
                    cx.config.resync_interval_ms,
                    RESYNC_JITTER_FACTOR,
                    cx.seq,
                    uid,
                ),
                Some(Failure::Error(e)) if e.contains(NETWORK_NOT_READY_ERROR) => jitter_ms(
                    cx.config.network_not_ready_backoff_ms,
                    BACKOFF_JITTER_FACTOR,
                    cx.seq,
                    uid,
                ),
                Some(_) => jitter_ms(
                    cx.config.sync_error_backoff_ms,
                    BACKOFF_JITTER_FACTOR,
                    cx.seq,
                    uid,
                ),
            }
        };
        cx.timers.set(
            TimerKey::PodWork { uid: uid.clone() },
            cx.now.plus_ms(delay_ms),
            cx.out,
        );
        if let Some(status) = self.statuses.get_mut(uid) {
            if status.pending_update.is_some() {
                status.signal();
            } else {
                status.settle();
            }
        }
        self.pump(cx, uid);
    }

    /// `requeueLastPodUpdate`: replays the active update if nothing is pending.
    pub(super) fn requeue_last_pod_update(&mut self, uid: &Uid) {
        let Some(status) = self.statuses.get_mut(uid) else {
            return;
        };
        if status.pending_update.is_some() {
            return;
        }
        let Some(active) = status.active_update.clone() else {
            return;
        };
        status.pending_update = Some(active);
        status.signal();
    }
}

/// The object an event about `update`'s pod is recorded on: the config pod, else the
/// runtime-only pod's identity.
fn pod_ref(update: &crate::core::update::UpdatePod) -> Option<ObjectRef> {
    match (&update.pod, &update.running_pod) {
        (Some(p), _) => Some(ObjectRef::pod(p)),
        (None, Some(r)) => Some(ObjectRef::pod(&r.to_api_pod())),
        (None, None) => None,
    }
}
