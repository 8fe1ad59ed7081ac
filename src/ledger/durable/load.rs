//! Start-up: the newest snapshot and the records after it, from the durable ledger.
//!
//! Owns choosing the segment to resume from (the newest one that starts with a readable
//! snapshot, or at seq 1), reading its records, and cutting off a torn or unreadable tail
//! so the writer can append after the last good record. Must never fail a start for bad
//! content: what cannot be read is reported, set aside (renamed, never deleted) or
//! truncated away; only I/O errors on the directory itself are errors.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::list_segments;
use crate::core::record::Record;
use crate::ledger::codec::{decode_line, Line, Snapshot};

/// What was cut from the end of the durable ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The file.
    pub segment: PathBuf,
    /// The 1-based line where the damage starts.
    pub line: u64,
    /// Bytes dropped (truncated, or the size of a segment set aside).
    pub bytes_dropped: u64,
    /// What was wrong.
    pub what: String,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} line {}: {} ({} bytes dropped)",
            self.segment.display(),
            self.line,
            self.what,
            self.bytes_dropped
        )
    }
}

/// What start-up found.
#[derive(Debug)]
pub struct Loaded<S> {
    /// The snapshot the records continue (none when they start at seq 1).
    pub snapshot: Option<Snapshot<S>>,
    /// The records after it, dense.
    pub records: Vec<Record>,
    /// Damage found and cut off.
    pub torn: Vec<TornTail>,
    /// The segment the writer appends to, and its length.
    pub current: Option<(PathBuf, u64)>,
}

impl<S> Default for Loaded<S> {
    fn default() -> Self {
        Loaded {
            snapshot: None,
            records: Vec::new(),
            torn: Vec::new(),
            current: None,
        }
    }
}

impl<S> Loaded<S> {
    /// The seq of the last record (or the snapshot's), 0 for an empty ledger.
    pub fn last_seq(&self) -> u64 {
        self.records
            .last()
            .map(|r| r.seq)
            .or(self.snapshot.as_ref().map(|s| s.seq))
            .unwrap_or(0)
    }
}

/// A parsed segment: its start, records, and where good content ends.
struct Parsed<S> {
    snapshot: Option<Snapshot<S>>,
    records: Vec<Record>,
    good_bytes: u64,
    damage: Option<(u64, String)>,
}

fn parse<S: DeserializeOwned>(buf: &[u8]) -> Parsed<S> {
    let mut out = Parsed {
        snapshot: None,
        records: Vec::new(),
        good_bytes: 0,
        damage: None,
    };
    let mut pos = 0usize;
    let mut line_no = 0u64;
    let mut expected: Option<u64> = None;
    while pos < buf.len() {
        line_no += 1;
        let Some(nl) = buf[pos..].iter().position(|b| *b == b'\n') else {
            out.damage = Some((line_no, "the last record is torn (no end of line)".into()));
            break;
        };
        let end = pos + nl;
        let text = match std::str::from_utf8(&buf[pos..end]) {
            Ok(t) => t.trim_end_matches('\r'),
            Err(_) => {
                out.damage = Some((line_no, "the record is not UTF-8".into()));
                break;
            }
        };
        if text.trim().is_empty() {
            pos = end + 1;
            out.good_bytes = pos as u64;
            continue;
        }
        let first = out.snapshot.is_none() && out.records.is_empty();
        match decode_line::<S>(text, line_no) {
            Ok(Line::Snapshot(s)) if first => {
                expected = Some(s.seq + 1);
                out.snapshot = Some(*s);
            }
            Ok(Line::Snapshot(_)) => {
                out.damage = Some((line_no, "a Snapshot after records".into()));
                break;
            }
            Ok(Line::Record(r)) => {
                if let Some(e) = expected {
                    if r.seq != e {
                        out.damage =
                            Some((line_no, format!("seq {} where {e} was expected", r.seq)));
                        break;
                    }
                }
                expected = Some(r.seq + 1);
                out.records.push(r);
            }
            Err(e) => {
                out.damage = Some((line_no, format!("unreadable record: {e}")));
                break;
            }
        }
        pos = end + 1;
        out.good_bytes = pos as u64;
    }
    out
}

fn set_aside(path: &Path) -> PathBuf {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".unusable");
    let aside = PathBuf::from(aside);
    if let Err(e) = std::fs::rename(path, &aside) {
        tracing::error!(path = %path.display(), error = %e, "cannot set an unusable segment aside");
    }
    aside
}

/// Loads the newest snapshot and the records after it from `dir` (created if missing).
pub fn load<S: DeserializeOwned>(dir: &Path) -> io::Result<Loaded<S>> {
    std::fs::create_dir_all(dir)?;
    let segments = list_segments(dir)?;
    let mut loaded = Loaded::default();
    for (first_seq, path, len) in segments.iter().rev() {
        let buf = std::fs::read(path)?;
        let parsed = parse::<S>(&buf);
        let starts_well = match (&parsed.snapshot, parsed.records.first()) {
            (Some(s), _) => s.seq + 1 == *first_seq,
            (None, Some(r)) => r.seq == 1 && *first_seq == 1,
            (None, None) => false,
        };
        if !starts_well {
            let what = match &parsed.damage {
                Some((_, w)) => format!("the segment has no usable start: {w}"),
                None => "the segment does not start with its snapshot".to_string(),
            };
            let aside = set_aside(path);
            loaded.torn.push(TornTail {
                segment: aside,
                line: 1,
                bytes_dropped: *len,
                what,
            });
            continue;
        }
        if let Some((line, what)) = parsed.damage {
            let f = OpenOptions::new().write(true).open(path)?;
            f.set_len(parsed.good_bytes)?;
            f.sync_all()?;
            loaded.torn.push(TornTail {
                segment: path.clone(),
                line,
                bytes_dropped: buf.len() as u64 - parsed.good_bytes,
                what,
            });
        }
        loaded.snapshot = parsed.snapshot;
        loaded.records = parsed.records;
        loaded.current = Some((path.clone(), parsed.good_bytes));
        return Ok(loaded);
    }
    Ok(loaded)
}
