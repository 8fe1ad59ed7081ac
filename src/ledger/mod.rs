//! The ledger: every input to the node as an immutable, sequenced record.
//!
//! Owns records, their NDJSON codec, retention, snapshots and followers. Must not fold or
//! decide anything: the core folds records, the daemon appends them.

pub mod codec;
pub mod durable;
pub mod event;
pub mod export;
mod fastline;
pub mod filter;
pub mod record;
mod scan;
pub mod shared;
mod size;
pub mod store;
pub mod time;
pub mod traceparent;

pub use codec::{DecodeError, Line, Reader, Snapshot};
pub use event::{Event, SyncOutcome};
pub use record::{Record, TraceParent};
pub use store::{Ledger, LedgerConfig, LedgerStats};
pub use time::Time;
