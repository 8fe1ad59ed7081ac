//! The ledger: every input to the node as an immutable, sequenced record.
//!
//! Owns the log of records (their vocabulary is `core::record`), their NDJSON codec,
//! retention, snapshots, followers and the clock records are stamped with. Must not fold or
//! decide anything: the core folds records, the daemon appends them.

pub mod codec;
pub mod durable;
pub mod export;
mod fastline;
pub mod filter;
mod scan;
pub mod shared;
mod size;
pub mod store;

pub use codec::{DecodeError, Line, Reader, Snapshot};
pub use store::{Ledger, LedgerConfig, LedgerStats};

use crate::core::record::Time;

impl Time {
    /// The current system time, for the shell's appends. Defined here, with the ledger that
    /// stamps records, not with `Time` in the core, which must never read a clock.
    pub fn from_system() -> Time {
        use std::time::{SystemTime, UNIX_EPOCH};
        let nanos = |d: std::time::Duration| d.as_nanos().min(i64::MAX as u128) as i64;
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => Time::from_unix_nanos(nanos(d)),
            Err(e) => Time::from_unix_nanos(-nanos(e.duration())),
        }
    }
}
