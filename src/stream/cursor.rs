//! A follower that reads the ledger at its own pace.
//!
//! Owns the read position of one stream: it copies up to a batch of retained records (shared
//! `Arc`s) under a brief engine lock, hands them out, and waits on the ledger's newest seq
//! when caught up. Nothing is buffered per follower beyond one batch, so a slow reader costs
//! the fold nothing; a reader that falls behind retention gets [`Step::Lagged`] with the
//! records it missed and where it resumes. Must not hold the engine lock across an await.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::core::record::Record;
use crate::engine::Engine;

/// Records copied per lock.
pub const BATCH_RECORDS: usize = 512;

/// What the cursor read.
#[derive(Debug)]
pub enum Step {
    /// Records in seq order (never empty).
    Records(Vec<Arc<Record>>),
    /// Records `missed_from..=missed_to` were evicted before this cursor read them; it
    /// continues at `resume_from`.
    Lagged {
        /// First missed seq.
        missed_from: u64,
        /// Last missed seq.
        missed_to: u64,
        /// Where the cursor continues.
        resume_from: u64,
    },
    /// A non-following cursor reached the newest record it was asked for.
    End,
}

/// A read position in the engine's ledger.
pub struct Cursor {
    engine: Arc<Mutex<Engine>>,
    next: u64,
    /// `None` while following; else the last seq to read.
    until: Option<u64>,
    seq: watch::Receiver<u64>,
}

impl Cursor {
    /// A cursor at `since`; 0 means the oldest retained record (with no notice about
    /// older, evicted ones), while an explicit seq older than retention gets
    /// [`Step::Lagged`] first. Without `follow` it stops at the newest record as of now.
    pub fn new(engine: Arc<Mutex<Engine>>, since: u64, follow: bool) -> Cursor {
        let (seq, last, first) = {
            let e = engine.lock().expect("engine");
            let l = e.ledger();
            (l.watch_seq(), l.last_seq(), l.first_seq())
        };
        let next = if since == 0 {
            first.unwrap_or(last + 1)
        } else {
            since
        };
        Cursor {
            engine,
            next,
            until: (!follow).then_some(last),
            seq,
        }
    }

    /// The next seq this cursor will read.
    pub fn position(&self) -> u64 {
        self.next
    }

    fn read(&mut self) -> Option<Step> {
        let e = self.engine.lock().expect("engine");
        let ledger = e.ledger();
        let last = ledger.last_seq();
        let first = ledger.first_seq().unwrap_or(last + 1);
        if self.next < first && self.next <= last {
            let step = Step::Lagged {
                missed_from: self.next,
                missed_to: first - 1,
                resume_from: first,
            };
            self.next = first;
            return Some(step);
        }
        let limit = self.until.unwrap_or(u64::MAX);
        if self.next > limit {
            return Some(Step::End);
        }
        let batch: Vec<Arc<Record>> = ledger
            .since(self.next)
            .take_while(|r| r.seq <= limit)
            .take(BATCH_RECORDS)
            .cloned()
            .collect();
        drop(e);
        match batch.last() {
            Some(r) => {
                self.next = r.seq + 1;
                Some(Step::Records(batch))
            }
            None if self.until.is_some() => Some(Step::End),
            None => None,
        }
    }

    /// The next step; waits for new records when caught up while following. Returns
    /// [`Step::End`] if the ledger's owner went away.
    pub async fn next(&mut self) -> Step {
        loop {
            self.seq.borrow_and_update();
            if let Some(step) = self.read() {
                return step;
            }
            if self.seq.changed().await.is_err() {
                return Step::End;
            }
        }
    }
}
