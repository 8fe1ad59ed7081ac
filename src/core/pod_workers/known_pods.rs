//! Housekeeping's reconciliation of the workers with the desired pods
//! (kubelet `SyncKnownPods` and `removeTerminatedWorker`).
//!
//! Owns purging finished UIDs (bounding what the workers remember), restarting reused UIDs
//! and driving orphaned pods to completion. Must not decide which pods are desired: the
//! caller passes the desired set.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::status::PodWorkerState;
use super::{effective_grace_period, Cx, PodWorkers};
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
    /// reused), starts terminating orphans, and reports every remaining worker. Callers must
    /// re-add desired pods missing from the report with a `Create`.
    pub fn sync_known_pods(
        &mut self,
        cx: &mut Cx<'_>,
        desired: &BTreeSet<Uid>,
    ) -> BTreeMap<Uid, PodWorkerSync> {
        self.pods_synced = true;
        let mut report = BTreeMap::new();
        let uids: Vec<Uid> = self.statuses.keys().cloned().collect();
        for uid in uids {
            let orphan = !desired.contains(&uid);
            let restart = self.statuses[&uid].restart_requested;
            if (restart || orphan) && self.remove_terminated_worker(cx, &uid, orphan) {
                continue;
            }
            let Some(status) = self.statuses.get(&uid) else {
                continue;
            };
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
            self.pump(cx, &uid);
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
        if !status.finished {
            if !orphaned {
                // still known and not finished: wait
                return false;
            }
            // every orphaned pod is considered deleted
            status.deleted = true;
            if !status.is_started() && !status.observed_runtime {
                // never started: forget it without any sync (falls through)
            } else if !status.is_termination_requested() {
                // started and running: begin terminating with the last spec's grace period
                status.terminating_at = Some(cx.now);
                status.grace_period_s =
                    match status.active_update.as_ref().and_then(|u| u.pod.as_ref()) {
                        Some(p) => effective_grace_period(status.grace_period_s, p, None).0,
                        None => 1,
                    };
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
        self.release_static_slot(&status.fullname, uid);
        true
    }
}
