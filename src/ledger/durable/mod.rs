//! The durable ledger (`--ledger-dir`): NDJSON segments on disk, so the history survives
//! an agent restart.
//!
//! Owns the directory layout, the writer thread (batched fsync, rotation by size at a
//! snapshot, the total-bytes budget), loading the newest snapshot and the tail after it at
//! start-up (a torn last record is reported and dropped, never a failed start), and reading
//! the whole directory back as one replayable ledger. Must not fold: the engine hands it
//! records and snapshots, and folds what it loads.
//!
//! Layout: `segment-<first seq, 20 digits>.ndjson`. Every segment but the very first of a
//! ledger starts with a `Snapshot` line (the state after the previous segment's last
//! record), so deleting the oldest segments for the budget always leaves a replayable
//! directory.

mod load;
mod read;
mod writer;

use std::path::{Path, PathBuf};

pub use load::{load, Loaded, TornTail};
pub use read::open_dir;
pub use writer::{DurableStats, DurableWriter};

/// Settings of the durable ledger. Every bound names its unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableConfig {
    /// The directory.
    pub dir: PathBuf,
    /// Written records are fsynced at least this often (a crash loses at most this much).
    pub fsync_period_ms: u64,
    /// A segment is closed at the first snapshot after its records reach this size (its
    /// leading snapshot not counted).
    pub segment_max_bytes: u64,
    /// The oldest segments are deleted while the directory holds more than this.
    pub dir_max_bytes: u64,
    /// Records queued for the writer; a full queue makes the fold wait for the disk.
    pub queue_records: usize,
}

/// Default fsync period (ms).
pub const DEFAULT_FSYNC_PERIOD_MS: u64 = 100;
/// Default segment size.
pub const DEFAULT_SEGMENT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Default directory budget.
pub const DEFAULT_DIR_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Default writer queue.
pub const DEFAULT_QUEUE_RECORDS: usize = 65_536;

impl DurableConfig {
    /// The defaults for `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> DurableConfig {
        DurableConfig {
            dir: dir.into(),
            fsync_period_ms: DEFAULT_FSYNC_PERIOD_MS,
            segment_max_bytes: DEFAULT_SEGMENT_MAX_BYTES,
            dir_max_bytes: DEFAULT_DIR_MAX_BYTES,
            queue_records: DEFAULT_QUEUE_RECORDS,
        }
    }

    /// Checks the bounds can work together.
    pub fn validate(&self) -> Result<(), String> {
        if self.fsync_period_ms == 0 {
            return Err("--ledger-fsync-period-ms must be at least 1".into());
        }
        if self.segment_max_bytes < 4096 {
            return Err(format!(
                "--ledger-segment-max-bytes = {} must be at least 4096",
                self.segment_max_bytes
            ));
        }
        if self.dir_max_bytes < 2 * self.segment_max_bytes {
            return Err(format!(
                "--ledger-dir-max-bytes = {} must be at least twice --ledger-segment-max-bytes = {}",
                self.dir_max_bytes, self.segment_max_bytes
            ));
        }
        if self.queue_records == 0 {
            return Err("the durable writer queue must hold at least one record".into());
        }
        Ok(())
    }
}

/// The file name of the segment whose first record (or snapshot successor) is `first_seq`.
pub fn segment_name(first_seq: u64) -> String {
    format!("segment-{first_seq:020}.ndjson")
}

/// The first seq encoded in a segment file name.
pub fn segment_first_seq(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("segment-")?.strip_suffix(".ndjson")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The segments in `dir`, oldest first, with their sizes.
pub fn list_segments(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf, u64)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(seq) = name.to_str().and_then(segment_first_seq) else {
            continue;
        };
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        out.push((seq, e.path(), len));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests;
