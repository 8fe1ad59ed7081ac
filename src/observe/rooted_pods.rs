//! The pods whose trace root span the fold tracer has made, so a pod seen again (a static
//! pod's manifest added back, a pod recreated with its UID) gets no second root.
//!
//! Owns the bound ([`RootedPods::new`]'s capacity) and the order in which pods are forgotten
//! past it (oldest first). A pod is kept as the 64-bit digest its trace id and root span id
//! are derived from (`FoldTracer::pod_root`), so two pods share an entry exactly when they
//! share a trace. Looked up when a source adds, changes or removes a pod, or housekeeping
//! finds an orphan, never per record. Must not do I/O and is never iterated (hash order
//! never shows).

use std::collections::{HashSet, VecDeque};

/// At most `capacity` pods' digests; remembering a new one in a full set forgets the one
/// remembered longest ago.
#[derive(Debug)]
pub struct RootedPods {
    set: HashSet<u64, foldhash::fast::RandomState>,
    /// The digests in the order they were remembered.
    order: VecDeque<u64>,
    capacity: usize,
}

impl RootedPods {
    /// An empty set of at most `capacity` pods (at least one).
    pub fn new(capacity: usize) -> RootedPods {
        RootedPods {
            set: HashSet::default(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Remembers the pod with `digest`: true if it was not remembered already.
    #[inline]
    pub fn insert_new(&mut self, digest: u64) -> bool {
        if self.set.contains(&digest) {
            return false;
        }
        if self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
        self.set.insert(digest);
        self.order.push_back(digest);
        true
    }

    /// Pods remembered.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True if no pod is remembered.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_new_once_and_the_oldest_is_forgotten_past_the_bound() {
        let mut r = RootedPods::new(3);
        assert!(r.is_empty());
        assert!(r.insert_new(10));
        assert!(!r.insert_new(10), "seen again: no second root");
        assert!(r.insert_new(20));
        assert!(r.insert_new(30));
        assert_eq!(r.len(), 3);
        // a fourth forgets the first
        assert!(r.insert_new(40));
        assert_eq!(r.len(), 3);
        assert!(!r.insert_new(20) && !r.insert_new(30) && !r.insert_new(40));
        assert!(r.insert_new(10), "forgotten, so new again");
        assert_eq!(r.len(), 3);
        assert!(r.insert_new(20), "10 came back and pushed 20 out");
    }

    #[test]
    fn the_bound_holds_for_many_pods() {
        let mut r = RootedPods::new(100);
        for d in 0..10_000u64 {
            assert!(r.insert_new(d.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
            assert!(r.len() <= 100);
        }
        assert_eq!((r.len(), r.order.len()), (100, 100));
    }
}
