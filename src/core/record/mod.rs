//! The record vocabulary: what the ledger records and the core folds.
//!
//! Owns `Record` (one ledger entry), `Event` and its payloads, `Time` and `TraceParent`.
//! It is in the core, not the ledger, because its payloads are core types (updates, runtime
//! statuses, timers, config): the ledger depends on the core, never the other way. Must not
//! read a clock or keep caches: its serde is plain, and the ledger owns the NDJSON line, the
//! intern table and encode cache (`ledger::shared`) and the clock (`Time::from_system`).
//! Records must not be mutated after append: they are shared behind `Arc`.

pub mod event;
pub mod time;
pub mod traceparent;

pub use event::{Event, SyncOutcome};
pub use time::Time;
pub use traceparent::TraceParent;

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
