//! Removing a finished pod's containers and sandboxes (RT-44): the part of the kubelet's
//! container GC that ledgerlet needs, done once the pod is finished instead of by a periodic
//! collector.
//!
//! Owns which pods' content may go (`ShouldPodContentBeRemoved`), the `RemovePodContent`
//! command after `SyncTerminatedPod` with what the runtime last showed of the pod, and
//! trying again while the runtime still has some of it. Must not hold up
//! the pod's final status or its API delete: the removal runs beside them.

use super::command::{Command, RemovePodContentCommand};
use super::node::Node;
use super::record::Time;
use super::timers::TimerKey;
use super::uid::Uid;

impl Node {
    /// `ShouldPodContentBeRemoved`, without waiting for a container GC: the pod is deleted or
    /// evicted, or no config source wants it any more (a removed static pod). A terminated
    /// pod still in config keeps its containers, and so its logs.
    pub(super) fn pod_content_removable(&self, uid: &Uid) -> bool {
        self.pod_workers
            .status(uid)
            .is_some_and(|s| s.is_deleted() || s.is_evicted())
            || self.pod_manager.get(uid).is_none()
    }

    /// The pod just finished (`SyncTerminatedPod` completed): remove its content if it may
    /// go, and look again after the sync error back-off.
    pub(super) fn on_pod_finished(&mut self, uid: &Uid, now: Time, out: &mut Vec<Command>) {
        if self.pod_content_removable(uid) {
            self.emit_pod_content_removal(uid, now, out);
        }
    }

    /// The look-again timer fired: while the runtime (as last read) still has something of
    /// the finished pod, the removal failed or has not been seen yet; try again. A removal
    /// of what is already gone is harmless (not found counts as removed).
    pub(super) fn on_pod_content_removal_timer(
        &mut self,
        uid: &Uid,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        if self.pod_workers.should_pod_be_finished(uid) && self.pod_content_removable(uid) {
            self.emit_pod_content_removal(uid, now, out);
        }
    }

    /// Removes what the runtime last showed of the pod (nothing to do when it showed
    /// nothing), and arms the look-again timer.
    fn emit_pod_content_removal(&mut self, uid: &Uid, now: Time, out: &mut Vec<Command>) {
        let Some(entry) = self.runtime.entry(uid).filter(|e| !e.status.is_empty()) else {
            return;
        };
        let containers = entry.status.container_ids();
        let sandboxes = entry.status.sandbox_ids();
        out.push(Command::RemovePodContent(RemovePodContentCommand {
            uid: uid.clone(),
            removal_id: self.pod_workers.next_sync_id(),
            containers,
            sandboxes,
        }));
        let due = now.plus_ms(self.config.sync_error_backoff_ms);
        let key = TimerKey::PodContentRemoval { uid: uid.clone() };
        self.timers.set(key, due, out);
    }
}
