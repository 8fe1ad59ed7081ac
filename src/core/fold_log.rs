//! Logs kept for observers while one record is folded.
//!
//! Owns [`FoldLog`]: a bounded list the core appends to while it folds a record (what changed,
//! noted where it changes), emptied before the next record by `Node::fold_into`. The pod
//! workers' phase log and the status manager's log of new status versions are such logs. An
//! observer reads them after the fold instead of looking things up before and after it.
//!
//! Must not influence the fold: nothing in the core reads a log. A log is not state: it is not
//! serialised and compares equal to any other, so a replay or a restored snapshot reach
//! exactly the same state and commands.

/// The most entries one record's log keeps: far above what one record does (a node-wide pass
/// over more pods than any node runs); later entries of the same fold are not noted
/// (observers then miss them; the fold is unaffected).
pub const MAX_FOLD_LOG_ENTRIES: usize = 65_536;

/// What one fold noted, in the order it happened.
#[derive(Clone, Debug)]
pub struct FoldLog<T>(Vec<T>);

impl<T> Default for FoldLog<T> {
    fn default() -> Self {
        FoldLog(Vec::new())
    }
}

/// Not state: any two logs are equal (see the module doc).
impl<T> PartialEq for FoldLog<T> {
    fn eq(&self, _: &FoldLog<T>) -> bool {
        true
    }
}

impl<T> FoldLog<T> {
    /// Notes `entry` (unless the log is full).
    #[inline]
    pub(crate) fn note(&mut self, entry: T) {
        if self.0.len() < MAX_FOLD_LOG_ENTRIES {
            self.0.push(entry);
        }
    }

    /// Forgets every entry (a new record is about to be folded).
    #[inline]
    pub(crate) fn clear(&mut self) {
        if !self.0.is_empty() {
            self.0.clear();
        }
    }

    /// True if nothing was noted.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries, in the order they were noted.
    #[inline]
    pub fn entries(&self) -> &[T] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_bounded_emptied_and_never_unequal() {
        let mut log = FoldLog::default();
        assert!(log.is_empty());
        log.note("a");
        log.note("b");
        assert_eq!(log.entries(), ["a", "b"]);
        assert_eq!(log, FoldLog::default());
        log.clear();
        assert!(log.is_empty());
        for _ in 0..MAX_FOLD_LOG_ENTRIES + 10 {
            log.note("c");
        }
        assert_eq!(log.entries().len(), MAX_FOLD_LOG_ENTRIES);
    }
}
