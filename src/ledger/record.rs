//! One immutable ledger entry.
//!
//! Owns `Record` and its canonical JSON form (one NDJSON line, see `codec`). Must not be
//! mutated after append: records are shared behind `Arc` with followers and snapshots.

use super::event::Event;
use super::time::Time;

pub use super::traceparent::TraceParent;

/// One entry of the ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Dense, strictly increasing position in the ledger (first record is 1).
    pub seq: u64,
    /// Wall time of the append: the only clock the core ever sees.
    pub at: Time,
    /// The seq of the record whose fold emitted the command that produced this record
    /// (`None` for external inputs).
    pub cause: Option<u64>,
    /// The trace context of the span that handled the record.
    pub trace: Option<TraceParent>,
    /// What happened.
    pub event: Event,
}
