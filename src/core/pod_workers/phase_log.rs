//! The pod workers' lifecycle phases, and the log of the phase changes made while one
//! record is folded.
//!
//! Owns [`WorkerPhase`] (a worker's place in its life: none, sync, terminating, terminated,
//! finished) and [`PhaseLog`]: before the pod workers change a worker's phase (create it,
//! ask it to terminate, mark it terminated or finished, forget it), they note the worker's
//! UID, its phase and when it entered that phase. `Node::fold_into` empties the log before
//! each record, so after a fold it holds exactly that fold's changes. An observer reads it
//! instead of looking every worker up before and after every fold (most folds change no
//! phase, and then the log is empty).
//!
//! Must not influence the fold: nothing in the core reads the log. It is not state: it is
//! not serialised and compares equal to any other log, so a replay or a restored snapshot
//! reach exactly the same state and commands.

use crate::core::fold_log::FoldLog;
use crate::core::record::Time;
use crate::core::uid::Uid;

use super::status::{PodSyncStatus, PodWorkerState};

/// A pod worker's lifecycle phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkerPhase {
    /// No worker for the UID.
    None,
    /// The worker syncs the pod (`SyncPod`).
    Sync,
    /// Termination was requested; containers are being stopped.
    Terminating,
    /// Every container is stopped; the terminated work (`SyncTerminatedPod`) remains.
    Terminated,
    /// `SyncTerminatedPod` completed: the worker is done until its UID is purged.
    Finished,
}

impl WorkerPhase {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerPhase::None => "none",
            WorkerPhase::Sync => "sync",
            WorkerPhase::Terminating => "terminating",
            WorkerPhase::Terminated => "terminated",
            WorkerPhase::Finished => "finished",
        }
    }
}

/// The phase of a worker's status (`None`: no worker) and when it entered it.
pub fn worker_phase(status: Option<&PodSyncStatus>) -> (WorkerPhase, Option<Time>) {
    match status {
        None => (WorkerPhase::None, None),
        Some(s) if s.is_finished() => (WorkerPhase::Finished, s.terminated_at()),
        Some(s) => match s.state() {
            PodWorkerState::Sync => (WorkerPhase::Sync, Some(s.synced_at)),
            PodWorkerState::Terminating => (WorkerPhase::Terminating, s.terminating_at()),
            PodWorkerState::Terminated => (WorkerPhase::Terminated, s.terminated_at()),
        },
    }
}

/// A worker's phase just before the pod workers changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseChange {
    /// The pod (the workers' shared `Uid`).
    pub uid: Uid,
    /// The phase it was in.
    pub from: WorkerPhase,
    /// When it entered `from`, if known.
    pub entered: Option<Time>,
}

/// The phase changes of the record being folded (see the module doc and `core::fold_log`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseLog(FoldLog<PhaseChange>);

impl PhaseLog {
    /// Notes that `uid`'s worker, now `status`, is about to change phase.
    pub(super) fn note(&mut self, uid: &Uid, status: Option<&PodSyncStatus>) {
        let (from, entered) = worker_phase(status);
        self.0.note(PhaseChange {
            uid: uid.clone(),
            from,
            entered,
        });
    }

    /// Forgets every change (a new record is about to be folded).
    #[inline]
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// True if no phase changed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first change of `uid`'s worker: its phase before this fold.
    pub fn first_for(&self, uid: &str) -> Option<&PhaseChange> {
        self.0.entries().iter().find(|c| c.uid.as_str() == uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{fold, Node};
    use std::collections::BTreeMap;

    fn phases(node: &Node) -> BTreeMap<String, WorkerPhase> {
        node.pod_workers
            .statuses()
            .map(|(u, s)| (u.as_str().to_string(), worker_phase(Some(s)).0))
            .collect()
    }

    /// Every worker whose phase a fold changed is in that fold's log, first with the phase it
    /// had before the fold. (The busy node's seven minutes never purge a finished worker, so
    /// `finished → none` is not among the transitions it checks.)
    #[test]
    fn the_log_names_every_worker_a_fold_moved_with_its_phase_before() {
        let sim = crate::sim::scenarios::busy_node(40, 7 * 60 * 1000);
        let mut node = Node::default();
        let mut moved = 0;
        let mut seen: std::collections::BTreeSet<(WorkerPhase, WorkerPhase)> = Default::default();
        for r in sim.engine().ledger().since(0) {
            let before = phases(&node);
            let _ = fold(&mut node, r);
            let after = phases(&node);
            let log = node.pod_workers.phase_log();
            let uids: std::collections::BTreeSet<&String> =
                before.keys().chain(after.keys()).collect();
            for uid in uids {
                let from = before.get(uid).copied().unwrap_or(WorkerPhase::None);
                let to = after.get(uid).copied().unwrap_or(WorkerPhase::None);
                let first = log.first_for(uid);
                if from != to {
                    moved += 1;
                    seen.insert((from, to));
                    let first = first.unwrap_or_else(|| {
                        panic!("record {} moved {uid} {from:?} -> {to:?} unlogged", r.seq)
                    });
                    assert_eq!(first.from, from, "record {}: {uid}", r.seq);
                }
            }
        }
        assert!(moved >= 40, "{moved}"); // at least every pod's worker started
        for t in [
            (WorkerPhase::None, WorkerPhase::Sync),
            (WorkerPhase::Sync, WorkerPhase::Terminating),
            (WorkerPhase::Terminating, WorkerPhase::Terminated),
            (WorkerPhase::Terminated, WorkerPhase::Finished),
        ] {
            assert!(seen.contains(&t), "{t:?} never happened: {seen:?}");
        }
    }

    #[test]
    fn a_log_is_not_state() {
        let mut a = PhaseLog::default();
        a.note(&Uid::new("x"), None);
        assert!(a == PhaseLog::default());
        a.clear();
        assert!(a.is_empty());
    }
}
