//! Housekeeping's reconciliation of the workers with the desired pods
//! (kubelet `SyncKnownPods` and `removeTerminatedWorker`).
//!
//! Owns purging finished UIDs (bounding what the workers remember), restarting reused UIDs
//! and driving orphaned pods to completion. Must not decide which pods are desired: the
//! caller passes the desired set.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::status::PodWorkerState;
use super::{effective_grace_period, Cx, PodWorkers};
use crate::core::merge::SortedCursor;
use crate::core::pod;
use crate::core::uid::Uid;

/// The summary of one worker returned by `SyncKnownPods` (kubelet `PodWorkerSync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodWorkerSync {
    /// Lifecycle state.
    pub state: PodWorkerState,
    /// Not in the desired set.
    pub orphan: bool,
    /// A config pod spec is known.
    pub has_config: bool,
    /// The config pod is static.
    pub is_static: bool,
}

impl PodWorkers {
    /// `SyncKnownPods`: purges finished workers that are not desired (or whose UID was
    /// reused), starts terminating orphans. `desired` yields the desired UIDs in ascending
    /// order; it is merged with the workers' own sorted map, so a pass costs one walk over
    /// both, without a lookup per pod. Callers must re-add desired pods without a worker.
    /// The kubelet returns a report of the remaining workers; here it is the pure query
    /// `known_pods_report`, which gives the same answer after this call. Returns the UIDs
    /// it forgot.
    pub fn sync_known_pods<'d>(
        &mut self,
        cx: &mut Cx<'_>,
        desired: impl Iterator<Item = &'d Uid>,
    ) -> Vec<Uid> {
        let candidates = self.known_pods_candidates(desired);
        self.sync_known_candidates(cx, candidates)
    }

    /// The workers `SyncKnownPods` acts on, ascending: those not in `desired` (ascending),
    /// flagged `true` (orphans), and those with a restart requested (`false`). A pure
    /// function of the known UIDs, their restart requests and `desired`, so it stays valid
    /// while `generation()` and the desired set are unchanged (`core::housekeeping_memo`).
    pub fn known_pods_candidates<'d>(
        &self,
        desired: impl Iterator<Item = &'d Uid>,
    ) -> Vec<(Uid, bool)> {
        let mut desired = SortedCursor::new(desired.map(|u| (u, ())));
        let mut candidates: Vec<(Uid, bool)> = Vec::new();
        for (uid, status) in &self.statuses {
            let orphan = desired.seek(uid).is_none();
            if orphan || status.restart_requested() {
                candidates.push((uid.clone(), orphan));
            }
        }
        candidates
    }

    /// The rest of `SyncKnownPods` for the `candidates` of `known_pods_candidates`: purges
    /// or drives each one. Returns the UIDs it forgot.
    pub fn sync_known_candidates(
        &mut self,
        cx: &mut Cx<'_>,
        candidates: Vec<(Uid, bool)>,
    ) -> Vec<Uid> {
        self.pods_synced = true;
        let mut forgotten = Vec::new();
        for (uid, orphan) in candidates {
            if self.remove_terminated_worker(cx, &uid, orphan) {
                forgotten.push(uid);
            } else {
                self.pump(cx, &uid);
            }
        }
        forgotten
    }

    /// The kubelet's `SyncKnownPods` report: every worker with its state, whether it is an
    /// orphan (not in `desired`, ascending), and whether a (static) config is known.
    pub fn known_pods_report<'d>(
        &self,
        desired: impl Iterator<Item = &'d Uid>,
    ) -> BTreeMap<Uid, PodWorkerSync> {
        let mut desired = SortedCursor::new(desired.map(|u| (u, ())));
        let mut report = BTreeMap::new();
        for (uid, status) in &self.statuses {
            let orphan = desired.seek(uid).is_none();
            let config = match (&status.active_update, &status.pending_update) {
                (Some(a), _) => a.pod.as_ref(),
                (None, Some(p)) => p.pod.as_ref(),
                (None, None) => None,
            };
            report.insert(
                uid.clone(),
                PodWorkerSync {
                    state: status.state(),
                    orphan,
                    has_config: config.is_some(),
                    is_static: config.is_some_and(|p| pod::is_static(p)),
                },
            );
        }
        report
    }

    /// `removeTerminatedWorker`: forgets a finished UID; for an unfinished orphan, marks it
    /// deleted and drives it towards termination. Returns true if the UID was forgotten.
    pub(super) fn remove_terminated_worker(
        &mut self,
        cx: &mut Cx<'_>,
        uid: &Uid,
        orphaned: bool,
    ) -> bool {
        let Some(status) = self.statuses.get_mut(uid) else {
            return true;
        };
        if !status.is_finished() {
            if !orphaned {
                // still known and not finished: wait
                return false;
            }
            // every orphaned pod is considered deleted
            if let Some(termination) = status.termination_mut() {
                termination.deleted = true;
            }
            if !status.is_started() && !status.observed_runtime() {
                // never started: forget it without any sync (falls through)
            } else if !status.is_termination_requested() {
                // started and running: begin terminating with the last spec's grace period
                self.phase_log.note(uid, Some(status));
                let grace_period_s =
                    match status.active_update.as_ref().and_then(|u| u.pod.as_ref()) {
                        Some(p) => effective_grace_period(0, p, None).0,
                        None => 1,
                    };
                let termination = status.request_termination(cx.now);
                termination.deleted = true;
                termination.grace_period_s = grace_period_s;
                self.requeue_last_pod_update(uid);
                return false;
            } else {
                // already terminating: make sure the worker gets to run again
                self.requeue_last_pod_update(uid);
                return false;
            }
        }
        let Some(status) = self.statuses.remove(uid) else {
            return true;
        };
        self.phase_log.note(uid, Some(&status));
        self.release_static_slot(&status.fullname, uid);
        true
    }
}
