//! Remembers housekeeping's set differences between the maps keyed by pod UID, so a
//! `SyncKnownPods` on a steady node does not walk every pod to find that nothing differs.
//!
//! Housekeeping (`Node::handle_sync_known_pods`, upstream `HandlePodCleanups`) asks, every
//! 2 s, which workers no config wants (or whose UID was reused), which statuses belong to
//! neither a config pod nor a worker, which config pods have no worker, and which runtime
//! entries no config wants. Each answer depends only on the key sets of the maps involved
//! (and, for the workers, on their `restart_requested` flags), and each of those maps is a
//! [`UidMap`](super::uid_map::UidMap) whose generation changes with its key set. So an
//! answer computed at some generations is still the answer while they are unchanged; only
//! what is done for each UID in it is decided afresh every time.
//!
//! Owns the remembered answers. Must never change an output: an answer is reused only at
//! exactly the generations it was computed at, and equal generations imply equal key sets.
//! The memo is not state: it is not serialised and compares equal to any other memo, so a
//! replay or a restored snapshot (which start without it) reach exactly the same state and
//! commands. `tests/invariants.rs` folds every random history and a busy node with the
//! memo cleared before each record (every answer computed by a full walk) and requires
//! identical commands and state.

use super::uid::Uid;
use super::uid_map::Generation;

/// One remembered answer: the generations it was computed at and the UIDs (ascending).
#[derive(Clone, Debug)]
struct Answer<K, T> {
    at: Option<K>,
    uids: Vec<T>,
}

impl<K, T> Default for Answer<K, T> {
    fn default() -> Self {
        Answer {
            at: None,
            uids: Vec::new(),
        }
    }
}

impl<K: PartialEq, T: Clone> Answer<K, T> {
    /// The answer at generations `at`, computed by `walk` unless it is remembered.
    fn get(&mut self, at: K, hits: &mut u64, walk: impl FnOnce() -> Vec<T>) -> Vec<T> {
        if self.at.as_ref() == Some(&at) {
            *hits += 1;
        } else {
            self.uids = walk();
            self.at = Some(at);
        }
        self.uids.clone()
    }
}

/// Housekeeping's remembered set differences (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct HousekeepingMemo {
    /// `SyncKnownPods`' candidates, at (workers, config pods): every worker with no config
    /// pod (`true`: an orphan) or with a restart requested (`false`).
    known_pods: Answer<(Generation, Generation), (Uid, bool)>,
    /// RemoveOrphanedStatuses left no orphaned status, at (statuses, config pods, workers).
    statuses_clean: Option<(Generation, Generation, Generation)>,
    /// Config pods without a worker, at (config pods, workers).
    without_worker: Answer<(Generation, Generation), Uid>,
    /// Runtime cache entries without a config pod, at (runtime cache, config pods).
    undesired_runtime: Answer<(Generation, Generation), Uid>,
    /// How many walks were skipped (for tests that must know the memo was used).
    hits: u64,
}

/// Not state: any two memos are equal (see the module doc).
impl PartialEq for HousekeepingMemo {
    fn eq(&self, _: &HousekeepingMemo) -> bool {
        true
    }
}

impl HousekeepingMemo {
    /// `SyncKnownPods`' candidates at the generations of the workers and config pods.
    pub fn known_pods(
        &mut self,
        at: (Generation, Generation),
        walk: impl FnOnce() -> Vec<(Uid, bool)>,
    ) -> Vec<(Uid, bool)> {
        self.known_pods.get(at, &mut self.hits, walk)
    }

    /// True if RemoveOrphanedStatuses is known to find nothing at the generations of the
    /// statuses, config pods and workers.
    pub fn statuses_clean(&mut self, at: (Generation, Generation, Generation)) -> bool {
        let clean = self.statuses_clean.as_ref() == Some(&at);
        if clean {
            self.hits += 1;
        }
        clean
    }

    /// Records that no orphaned status is left at these generations.
    pub fn set_statuses_clean(&mut self, at: (Generation, Generation, Generation)) {
        self.statuses_clean = Some(at);
    }

    /// Config pods without a worker at the generations of the config pods and workers.
    pub fn without_worker(
        &mut self,
        at: (Generation, Generation),
        walk: impl FnOnce() -> Vec<Uid>,
    ) -> Vec<Uid> {
        self.without_worker.get(at, &mut self.hits, walk)
    }

    /// Runtime entries without a config pod at the generations of the runtime cache and
    /// config pods.
    pub fn undesired_runtime(
        &mut self,
        at: (Generation, Generation),
        walk: impl FnOnce() -> Vec<Uid>,
    ) -> Vec<Uid> {
        self.undesired_runtime.get(at, &mut self.hits, walk)
    }

    /// Forgets every answer: the next housekeeping walks everything.
    pub fn clear(&mut self) {
        *self = HousekeepingMemo {
            hits: self.hits,
            ..HousekeepingMemo::default()
        };
    }

    /// How many walks were skipped so far.
    pub fn hits(&self) -> u64 {
        self.hits
    }
}
