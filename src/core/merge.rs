//! Merge-joins over sorted UID sequences: one comparison per step, no lookups.
//!
//! Owns the walk that housekeeping uses to match desired pods, workers and the runtime
//! cache. Must not allocate.

use std::cmp::Ordering;
use std::iter::Peekable;

use super::uid::Uid;

/// A cursor over an ascending sequence of `(uid, value)` pairs.
pub struct SortedCursor<'a, V, I: Iterator<Item = (&'a Uid, V)>> {
    inner: Peekable<I>,
}

impl<'a, V, I: Iterator<Item = (&'a Uid, V)>> SortedCursor<'a, V, I> {
    /// A cursor at the start of `iter`, which must be ascending by UID.
    pub fn new(iter: I) -> Self {
        SortedCursor {
            inner: iter.peekable(),
        }
    }

    /// Advances past every UID smaller than `uid` and returns the value stored for `uid`,
    /// if the sequence has it. Calls must come with ascending `uid`s.
    pub fn seek(&mut self, uid: &Uid) -> Option<&V> {
        loop {
            let ord = match self.inner.peek() {
                None => return None,
                Some((k, _)) => (*k).cmp(uid),
            };
            match ord {
                Ordering::Less => {
                    self.inner.next();
                }
                Ordering::Equal => return self.inner.peek().map(|(_, v)| v),
                Ordering::Greater => return None,
            }
        }
    }
}
