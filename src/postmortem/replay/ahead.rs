//! The decoding side of a replay: a second thread reads and decodes the NDJSON ledger and
//! hands records to the folding thread in batches, so the folding thread only folds.
//!
//! Owns that thread and its two channels: batches of decoded records (bounded: at most
//! [`AHEAD_BATCHES`] batches of [`BATCH_RECORDS`] ahead of the fold) and the batches the
//! fold is done with, which come back to be emptied and refilled (records are dropped on
//! the thread that allocated them, and a batch's memory is reused). It also keeps the
//! replay's [`KillLog`], which reads records in order but needs no folded state. Must not
//! fold, and must stop where the fold stops (`until`), so both see the same records.

use std::io::BufRead;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

use crate::core::record::Record;
use crate::core::Node;
use crate::ledger::{DecodeError, Line, Reader, Snapshot};
use crate::postmortem::restarts::KillLog;

use super::Until;

/// Records per batch handed to the folding thread.
pub const BATCH_RECORDS: usize = 512;
/// Batches the decoder may be ahead of the fold.
pub const AHEAD_BATCHES: usize = 8;

/// Records with their 1-based line numbers, in ledger order.
pub type Batch = Vec<(u64, Record)>;

/// What the decoding thread hands over, in file order.
pub enum Decoded {
    /// The leading snapshot (only ever first).
    Snapshot(Box<Snapshot<Node>>),
    /// The next records.
    Records(Batch),
    /// The line that could not be decoded; nothing follows.
    Failed(DecodeError),
}

/// True when replay stops before `r` (it is after `until`).
pub fn stops_before(until: Option<Until>, r: &Record) -> bool {
    match until {
        Some(Until::Seq(s)) => r.seq > s,
        Some(Until::Time(t)) => r.at > t,
        None => false,
    }
}

/// The decoding thread, seen from the folding thread.
pub struct DecodeAhead<'scope> {
    batches: Receiver<Decoded>,
    done: SyncSender<Batch>,
    thread: ScopedJoinHandle<'scope, KillLog>,
}

impl<'scope> DecodeAhead<'scope> {
    /// Starts decoding `input` on a thread of `scope`. It stops after the first record
    /// `until` excludes (the fold checks that record's seq before it stops), at the end of
    /// the input, at a bad line, or when this side is dropped or finished.
    pub fn spawn<'env>(
        scope: &'scope Scope<'scope, 'env>,
        input: impl BufRead + Send + 'scope,
        until: Option<Until>,
    ) -> DecodeAhead<'scope> {
        let (tx, batches) = sync_channel::<Decoded>(AHEAD_BATCHES);
        // room for every batch in flight, so giving one back never blocks the fold
        let (done, done_rx) = sync_channel::<Batch>(AHEAD_BATCHES + 2);
        let thread = scope.spawn(move || decode(input, until, tx, done_rx));
        DecodeAhead {
            batches,
            done,
            thread,
        }
    }

    /// The next decoded lines; `None` at the end.
    pub fn recv(&self) -> Option<Decoded> {
        self.batches.recv().ok()
    }

    /// Gives a batch back to be emptied (on the decoding thread) and reused.
    pub fn give_back(&self, batch: Batch) {
        // full or gone: the batch is dropped here instead
        let _ = self.done.try_send(batch);
    }

    /// Stops the decoder (if it is still going) and returns the kill log of the records
    /// it decoded up to where replay stops.
    pub fn finish(self) -> KillLog {
        drop(self.batches);
        drop(self.done);
        match self.thread.join() {
            Ok(kills) => kills,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

fn decode(
    input: impl BufRead,
    until: Option<Until>,
    tx: SyncSender<Decoded>,
    done: Receiver<Batch>,
) -> KillLog {
    let mut kills = KillLog::default();
    let mut reader: Reader<_, Node> = Reader::new(input);
    let fresh = || match done.try_recv() {
        Ok(mut b) => {
            b.clear();
            b
        }
        Err(_) => Vec::with_capacity(BATCH_RECORDS),
    };
    let mut batch = fresh();
    // hands `batch` over (if it holds anything), replacing it by `next`; false when the
    // folding side is gone
    let send = |batch: &mut Batch, next: Batch| {
        batch.is_empty()
            || tx
                .send(Decoded::Records(std::mem::replace(batch, next)))
                .is_ok()
    };
    while let Some(line) = reader.next() {
        match line {
            Ok(Line::Record(r)) => {
                let stop = stops_before(until, &r);
                if !stop {
                    kills.observe(&r);
                }
                batch.push((reader.line_no(), r));
                if stop {
                    break;
                }
                if batch.len() == BATCH_RECORDS && !send(&mut batch, fresh()) {
                    return kills;
                }
            }
            Ok(Line::Snapshot(s)) => {
                if !send(&mut batch, Vec::new()) || tx.send(Decoded::Snapshot(s)).is_err() {
                    return kills;
                }
            }
            Err(e) => {
                if send(&mut batch, Vec::new()) {
                    let _ = tx.send(Decoded::Failed(e));
                }
                return kills;
            }
        }
    }
    send(&mut batch, Vec::new());
    kills
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::codec::write_record;
    use crate::postmortem::replay::{replay, Until};

    #[test]
    fn replay_in_batches_stops_where_asked_and_keeps_the_kill_log_of_what_it_folded() {
        let sim = crate::sim::scenarios::busy_node(40, 1_200_000);
        let records: Vec<_> = sim.engine().ledger().since(0).cloned().collect();
        assert!(records.len() > 3 * BATCH_RECORDS, "{}", records.len());
        let mut text = Vec::new();
        for r in &records {
            write_record(&mut text, r).unwrap();
        }
        // a stop inside a batch, on a batch boundary, before the first record, past the end
        let mid = records[records.len() / 2].seq;
        for until in [
            Some(Until::Seq(mid)),
            Some(Until::Seq(BATCH_RECORDS as u64)),
            Some(Until::Seq(0)),
            Some(Until::Time(records[records.len() / 3].at)),
            None,
        ] {
            let got = replay(&text[..], until).unwrap();
            let mut node = Node::default();
            let mut kills = KillLog::default();
            let mut folded = 0;
            for r in records.iter().take_while(|r| !stops_before(until, r)) {
                crate::core::fold(&mut node, r);
                kills.observe(r);
                folded += 1;
            }
            assert_eq!(got.records_folded, folded, "{until:?}");
            assert_eq!(got.node, node, "{until:?}");
            assert_eq!(
                format!("{:?}", got.kills),
                format!("{kills:?}"),
                "{until:?}"
            );
        }
    }

    #[test]
    fn a_bad_line_after_good_batches_is_reported_by_its_number() {
        let sim = crate::sim::scenarios::busy_node(20, 200_000);
        let mut text = Vec::new();
        let mut n = 0;
        for r in sim.engine().ledger().since(0).take(2 * BATCH_RECORDS + 5) {
            write_record(&mut text, r).unwrap();
            n += 1;
        }
        text.extend_from_slice(b"{\"seq\":\n");
        let err = replay(&text[..], None)
            .err()
            .expect("a bad line fails the replay");
        assert_eq!(err.line(), n + 1);
        // a stop before the bad line never reaches it
        assert!(replay(&text[..], Some(Until::Seq(5))).is_ok());
    }
}
