//! The pods between their first sighting and their start, for the pod start metrics, and
//! how many of them still await their pod worker.
//!
//! Owns the tracked pods and the count of those whose worker has not started, kept equal
//! by construction: a pod's worker is marked started only here, and the count changes with
//! it. Must not observe metrics or read the node: `observe::fold` decides what happened and
//! tells this type.

use std::collections::HashMap;

use crate::core::record::Time;
use crate::core::Uid;

/// A pod between its first sighting and its start: what its start metrics need.
#[derive(Clone, Debug)]
pub struct PodStart {
    /// When ledgerlet first saw it.
    pub first_seen: Time,
    /// Its creation timestamp, when the API server gave it one.
    pub created: Option<Time>,
    /// The status said Running once already (the pod start duration was observed).
    pub running_seen: bool,
    /// The earliest image pull's start.
    pub pull_started: Option<Time>,
    /// The latest image pull's end.
    pub pull_finished: Option<Time>,
}

impl PodStart {
    /// A pod first seen at `first_seen`.
    pub fn new(first_seen: Time, created: Option<Time>) -> PodStart {
        PodStart {
            first_seen,
            created,
            running_seen: false,
            pull_started: None,
            pull_finished: None,
        }
    }
}

/// The tracked pods, each with whether its worker started.
#[derive(Debug, Default)]
pub struct StartingPods {
    pods: HashMap<Uid, (PodStart, bool), foldhash::fast::FixedState>,
    /// Tracked pods whose worker has not started.
    awaiting_worker: usize,
}

impl StartingPods {
    /// Pods tracked.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// True if no pod is tracked.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// True if the pod is tracked.
    pub fn contains(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Tracked pods whose worker has not started: while there are none, a fold's commands
    /// need not be searched for a worker start.
    pub fn awaiting_worker(&self) -> usize {
        self.awaiting_worker
    }

    /// Starts tracking a pod (its worker not started); a pod tracked already is left as it
    /// is.
    pub fn track(&mut self, uid: Uid, start: PodStart) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.pods.entry(uid) {
            e.insert((start, false));
            self.awaiting_worker += 1;
        }
    }

    /// The tracked pod's start, to note its progress.
    pub fn get_mut(&mut self, uid: &str) -> Option<&mut PodStart> {
        self.pods.get_mut(uid).map(|(start, _)| start)
    }

    /// Notes that the pod's worker started: its start if it was tracked and its worker had
    /// not started before (so the caller observes the worker start once).
    pub fn worker_started(&mut self, uid: &str) -> Option<&PodStart> {
        let (start, started) = self.pods.get_mut(uid)?;
        if *started {
            return None;
        }
        *started = true;
        self.awaiting_worker -= 1;
        Some(start)
    }

    /// Stops tracking the pod (started, or gone).
    pub fn forget(&mut self, uid: &str) {
        if let Some((_, false)) = self.pods.remove(uid) {
            self.awaiting_worker -= 1;
        }
    }

    /// Tracked pods whose worker has not started, counted one by one (for tests).
    #[cfg(test)]
    pub fn count_awaiting(&self) -> usize {
        self.pods.values().filter(|(_, started)| !started).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> PodStart {
        PodStart::new(Time::from_unix_nanos(1), None)
    }

    #[test]
    fn the_count_of_pods_awaiting_their_worker_follows_every_change() {
        let mut pods = StartingPods::default();
        let check = |p: &StartingPods| assert_eq!(p.awaiting_worker(), p.count_awaiting());
        pods.track(Uid::new("a"), start());
        pods.track(Uid::new("b"), start());
        pods.track(Uid::new("a"), start());
        check(&pods);
        assert_eq!((pods.len(), pods.awaiting_worker()), (2, 2));
        assert!(pods.worker_started("a").is_some());
        assert!(pods.worker_started("a").is_none(), "a worker starts once");
        assert!(pods.worker_started("unknown").is_none());
        check(&pods);
        assert_eq!(pods.awaiting_worker(), 1);
        pods.forget("a");
        check(&pods);
        assert_eq!(pods.awaiting_worker(), 1, "a's worker had started");
        pods.forget("b");
        pods.forget("b");
        check(&pods);
        assert_eq!((pods.len(), pods.awaiting_worker()), (0, 0));
        assert!(pods.is_empty());
    }
}
