//! The log of the statuses given a new version while one record is folded.
//!
//! Owns [`RecordedLog`]: when the status manager records a new version of a pod's status
//! (`StatusStore::set_pod_status` and the paths through it), it notes the pod's UID.
//! `Node::fold_into` empties the log before each record, so after a fold it names exactly the
//! pods whose status that fold changed. An observer (pod start metrics) reads it instead of
//! looking a pod's status up after every record about it (most records change no status,
//! and then the log is empty).
//!
//! Must not influence the fold: nothing in the core reads the log. It is not state: it is
//! not serialised and compares equal to any other log, so a replay or a restored snapshot
//! reach exactly the same state and commands.

use crate::core::uid::Uid;

/// The most status changes one record's log holds; later ones in the same fold are not noted
/// (a bound, far above what one record does: a status pass over every pod of a full node).
pub const MAX_RECORDED_STATUSES: usize = 65_536;

/// The pods whose status got a new version in the record being folded.
#[derive(Clone, Debug, Default)]
pub struct RecordedLog(Vec<Uid>);

/// Not state: any two logs are equal (see the module doc).
impl PartialEq for RecordedLog {
    fn eq(&self, _: &RecordedLog) -> bool {
        true
    }
}

impl RecordedLog {
    /// Notes that `uid`'s status got a new version.
    pub(crate) fn note(&mut self, uid: &Uid) {
        if self.0.len() < MAX_RECORDED_STATUSES {
            self.0.push(uid.clone());
        }
    }

    /// Empties the log (before each record).
    pub(crate) fn clear(&mut self) {
        if !self.0.is_empty() {
            self.0.clear();
        }
    }

    /// True if no status changed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pods whose status changed, in the order they changed (a pod may appear twice).
    pub fn uids(&self) -> &[Uid] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_bounded_emptied_and_never_unequal() {
        let mut log = RecordedLog::default();
        assert!(log.is_empty());
        log.note(&Uid::new("a"));
        log.note(&Uid::new("b"));
        assert_eq!(log.uids(), [Uid::new("a"), Uid::new("b")]);
        assert_eq!(log, RecordedLog::default());
        log.clear();
        assert!(log.is_empty());
        for _ in 0..MAX_RECORDED_STATUSES + 10 {
            log.note(&Uid::new("c"));
        }
        assert_eq!(log.uids().len(), MAX_RECORDED_STATUSES);
    }
}
