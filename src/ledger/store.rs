//! The in-memory, append-only ledger with bounded retention and snapshots.
//!
//! Owns sequence numbers, retention (by record count and by bytes), the snapshots that let a
//! replay start after evicted records, and the broadcast to followers. Must not fold (it
//! stores the state the daemon hands it) and must never block on a follower: a slow
//! follower lags and is told how many records it missed.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

use super::codec::Snapshot;
use super::size::SharedTally;
use crate::core::record::event::Event;
use crate::core::record::time::Time;
use crate::core::record::{Record, TraceParent};

/// Retention and snapshot limits. Every bound names its unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LedgerConfig {
    /// Keep at most this many records.
    pub max_records: usize,
    /// Keep at most this many bytes of records: the heap they hold, shared pod objects
    /// counted once (`size.rs`).
    pub max_bytes: u64,
    /// Take a snapshot of the folded state every this many records.
    pub snapshot_every_records: u64,
    /// Records buffered per follower before it lags.
    pub follower_buffer_records: usize,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            max_records: 200_000,
            max_bytes: 32 * 1024 * 1024,
            snapshot_every_records: 10_000,
            follower_buffer_records: 4_096,
        }
    }
}

/// A retention setting that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ledger configuration: {0}")]
pub struct LedgerConfigError(String);

impl LedgerConfig {
    /// Checks that the bounds leave room for at least two snapshot intervals.
    pub fn validate(&self) -> Result<(), LedgerConfigError> {
        if self.max_records < 2 {
            return Err(LedgerConfigError(format!(
                "max_records = {} must be at least 2",
                self.max_records
            )));
        }
        if self.snapshot_every_records == 0
            || self.snapshot_every_records > (self.max_records / 2) as u64
        {
            return Err(LedgerConfigError(format!(
                "snapshot_every_records = {} must be between 1 and max_records / 2 = {}",
                self.snapshot_every_records,
                self.max_records / 2
            )));
        }
        if self.max_bytes < 64 * 1024 {
            return Err(LedgerConfigError(format!(
                "max_bytes = {} must be at least 65536",
                self.max_bytes
            )));
        }
        if self.follower_buffer_records == 0 {
            return Err(LedgerConfigError(
                "follower_buffer_records must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Counters describing the ledger (exported as metrics by the shell).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LedgerStats {
    /// Records retained.
    pub retained_records: usize,
    /// Bytes retained (records plus shared objects, each counted once).
    pub retained_bytes: u64,
    /// Records evicted since start.
    pub evicted_records: u64,
    /// Snapshots retained.
    pub snapshots: usize,
    /// Seq of the oldest retained record.
    pub first_seq: Option<u64>,
    /// Seq of the newest record.
    pub last_seq: u64,
}

/// A replay starting point: the snapshot (if one is needed) and the records after it.
pub type ReplayBase<S> = (Option<Arc<Snapshot<Arc<S>>>>, Vec<Arc<Record>>);

/// The ledger. `S` is the folded state stored in snapshots.
pub struct Ledger<S> {
    config: LedgerConfig,
    records: VecDeque<(Arc<Record>, u32)>,
    own_bytes: u64,
    shared: SharedTally,
    last_seq: u64,
    last_at: Time,
    evicted: u64,
    snapshots: VecDeque<Arc<Snapshot<Arc<S>>>>,
    records_since_snapshot: u64,
    followers: broadcast::Sender<Arc<Record>>,
    /// The newest seq, for cursor followers (`stream`) that read the ledger at their pace.
    seq_tx: watch::Sender<u64>,
    /// The seq of the snapshot a resumed ledger starts from (0: the ledger starts at seq 1).
    base_seq: u64,
}

impl<S> Ledger<S> {
    /// An empty ledger whose first record will get seq `last_seq + 1`.
    pub fn new(config: LedgerConfig, last_seq: u64) -> Self {
        let (followers, _) = broadcast::channel(config.follower_buffer_records.max(1));
        Ledger {
            config,
            records: VecDeque::new(),
            own_bytes: 0,
            shared: SharedTally::default(),
            last_seq,
            last_at: Time::ZERO,
            evicted: 0,
            snapshots: VecDeque::new(),
            records_since_snapshot: 0,
            followers,
            seq_tx: watch::Sender::new(last_seq),
            base_seq: 0,
        }
    }

    /// A ledger that continues a loaded history: `snapshot` (the state after its seq, if the
    /// history does not start at seq 1) and the dense `records` after it. Retention applies
    /// as if they had been appended; the next append gets the seq after the last of them.
    pub fn resume(
        config: LedgerConfig,
        snapshot: Option<Snapshot<Arc<S>>>,
        records: Vec<Arc<Record>>,
    ) -> Self {
        let base = snapshot.as_ref().map_or(0, |s| s.seq);
        let mut ledger = Ledger::new(config, base);
        ledger.base_seq = base;
        if let Some(s) = snapshot {
            ledger.last_at = s.at;
            ledger.snapshots.push_back(Arc::new(s));
        }
        for r in records {
            debug_assert_eq!(r.seq, ledger.last_seq + 1, "resumed records are dense");
            ledger.last_seq = r.seq;
            ledger.last_at = ledger.last_at.max(r.at);
            let own = ledger.shared.retain(&r);
            ledger.own_bytes += own;
            ledger
                .records
                .push_back((r, own.min(u64::from(u32::MAX)) as u32));
            ledger.records_since_snapshot += 1;
            ledger.evict();
        }
        ledger
    }

    /// The limits in force.
    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    /// Appends an event, assigning the next seq. `at` is clamped so it never goes backwards
    /// (a wall clock stepped back must not reorder the ledger's time).
    pub fn append(
        &mut self,
        at: Time,
        cause: Option<u64>,
        trace: Option<TraceParent>,
        event: Event,
    ) -> Arc<Record> {
        self.last_seq += 1;
        let at = at.max(self.last_at);
        self.last_at = at;
        let record = Arc::new(Record {
            seq: self.last_seq,
            at,
            cause,
            trace,
            event,
        });
        let own = self.shared.retain(&record);
        self.own_bytes += own;
        self.records
            .push_back((record.clone(), own.min(u64::from(u32::MAX)) as u32));
        self.records_since_snapshot += 1;
        if self.followers.receiver_count() > 0 {
            // Never blocks; a lagging follower sees `RecvError::Lagged`.
            let _ = self.followers.send(record.clone());
        }
        self.evict();
        if self.seq_tx.receiver_count() > 0 {
            self.seq_tx.send_replace(self.last_seq);
        }
        record
    }

    /// True when the daemon should hand over the state folded up to `last_seq`: the snapshot
    /// interval passed, or the bounds are exceeded and nothing more can be evicted without one.
    pub fn wants_snapshot(&self) -> bool {
        self.records_since_snapshot >= self.config.snapshot_every_records
            || (self.over_bounds() && !self.can_evict_front())
    }

    /// Stores the state folded up to the newest record, then evicts what it makes evictable.
    pub fn store_snapshot(&mut self, state: Arc<S>) {
        self.snapshots.push_back(Arc::new(Snapshot {
            seq: self.last_seq,
            at: self.last_at,
            state,
        }));
        self.records_since_snapshot = 0;
        self.evict();
    }

    fn retained_bytes(&self) -> u64 {
        self.own_bytes + self.shared.bytes()
    }

    fn over_bounds(&self) -> bool {
        self.records.len() > self.config.max_records
            || self.retained_bytes() > self.config.max_bytes
    }

    /// The front record may go if a snapshot covers it (so replay can still start after it).
    fn can_evict_front(&self) -> bool {
        match (self.records.front(), self.snapshots.back()) {
            (Some((r, _)), Some(s)) => s.seq >= r.seq,
            _ => false,
        }
    }

    fn evict(&mut self) {
        while self.over_bounds() && self.can_evict_front() {
            if let Some((r, own)) = self.records.pop_front() {
                self.own_bytes -= u64::from(own);
                self.shared.release(&r);
                self.evicted += 1;
            }
        }
        // Keep only snapshots a replay can start from: those covering every evicted record.
        let first = self.first_seq().unwrap_or(self.last_seq + 1);
        while self.snapshots.len() > 1 && self.snapshots[0].seq + 1 < first {
            self.snapshots.pop_front();
        }
    }

    /// Seq of the oldest retained record.
    pub fn first_seq(&self) -> Option<u64> {
        self.records.front().map(|(r, _)| r.seq)
    }

    /// Seq of the newest record (0 if none yet).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Retained records with seq ≥ `since`, oldest first.
    pub fn since(&self, since: u64) -> impl Iterator<Item = &Arc<Record>> + '_ {
        let start = match self.first_seq() {
            Some(first) if since > first => (since - first) as usize,
            _ => 0,
        };
        self.records
            .range(start.min(self.records.len())..)
            .map(|(r, _)| r)
    }

    /// Where a replay of the retained history starts: the oldest snapshot from which every
    /// later record is retained (or `None` if the ledger still holds everything since seq 1
    /// and no snapshot is needed), and the records after it.
    pub fn replay_base(&self) -> ReplayBase<S> {
        if self.evicted == 0 && self.base_seq == 0 {
            return (None, self.since(0).cloned().collect());
        }
        let first = self.first_seq().unwrap_or(self.last_seq + 1);
        let snap = self.snapshots.iter().find(|s| s.seq + 1 >= first).cloned();
        let from = snap.as_ref().map_or(first, |s| s.seq + 1);
        (snap, self.since(from).cloned().collect())
    }

    /// Retained snapshots, oldest first.
    pub fn snapshots(&self) -> impl Iterator<Item = &Arc<Snapshot<Arc<S>>>> + '_ {
        self.snapshots.iter()
    }

    /// A new follower receiving every record appended from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Record>> {
        self.followers.subscribe()
    }

    /// The newest seq, updated on every append while someone watches (a cursor follower
    /// waits on it, then reads the records itself).
    pub fn watch_seq(&self) -> watch::Receiver<u64> {
        self.seq_tx.send_replace(self.last_seq);
        self.seq_tx.subscribe()
    }

    /// Counters for metrics and `/debug/state`.
    pub fn stats(&self) -> LedgerStats {
        LedgerStats {
            retained_records: self.records.len(),
            retained_bytes: self.retained_bytes(),
            evicted_records: self.evicted,
            snapshots: self.snapshots.len(),
            first_seq: self.first_seq(),
            last_seq: self.last_seq,
        }
    }
}
