//! The NDJSON codec of ARCHITECTURE.md §4: one record (or a leading snapshot) per line.
//!
//! Owns encoding and decoding of lines, and the reader that reports a bad line by number.
//! Must not decide what a line means beyond its schema; folding is the core's job.

use std::io::{self, BufRead, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::event::{Event, EventDecodeError};
use super::record::{Record, WireLine};
use super::time::Time;

/// The `kind` of the snapshot line that may start an export.
pub const SNAPSHOT_KIND: &str = "Snapshot";

/// The folded state as of record `seq` (every record with a larger seq comes after it).
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot<S> {
    /// The seq of the last record folded into `state`.
    pub seq: u64,
    /// The `at` of that record.
    pub at: Time,
    /// The state.
    pub state: S,
}

/// One decoded line.
// A line lives only between the decoder and its consumer, one at a time, and nearly every
// line is a record: boxing the record would cost an allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Line<S> {
    /// A record.
    Record(Record),
    /// A snapshot of the folded state.
    Snapshot(Snapshot<S>),
}

/// Why a line could not be decoded; always names the line (1-based).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The line is not JSON of the line schema.
    #[error("line {line}: {what}")]
    Malformed {
        /// 1-based line number.
        line: u64,
        /// What was wrong.
        what: String,
    },
    /// Reading failed.
    #[error("line {line}: read error: {source}")]
    Io {
        /// The line being read.
        line: u64,
        /// The I/O error.
        source: io::Error,
    },
}

impl DecodeError {
    /// The 1-based line number.
    pub fn line(&self) -> u64 {
        match self {
            DecodeError::Malformed { line, .. } | DecodeError::Io { line, .. } => *line,
        }
    }
}

/// Encodes a record as one line (no trailing newline).
pub fn encode_record(r: &Record) -> String {
    // Serialising our own types to a String cannot fail (no non-string map keys).
    serde_json::to_string(r).unwrap_or_else(|e| panic!("record {} does not serialise: {e}", r.seq))
}

/// Writes a record followed by `\n`.
pub fn write_record(w: &mut impl Write, r: &Record) -> io::Result<()> {
    serde_json::to_writer(&mut *w, r).map_err(io::Error::other)?;
    w.write_all(b"\n")
}

/// Writes a snapshot line followed by `\n`.
pub fn write_snapshot<S: Serialize>(w: &mut impl Write, snap: &Snapshot<S>) -> io::Result<()> {
    #[derive(Serialize)]
    struct SnapLine<'a, S> {
        seq: u64,
        at: Time,
        cause: Option<u64>,
        trace: Option<&'a str>,
        kind: &'static str,
        event: &'a S,
    }
    serde_json::to_writer(
        &mut *w,
        &SnapLine {
            seq: snap.seq,
            at: snap.at,
            cause: None,
            trace: None,
            kind: SNAPSHOT_KIND,
            event: &snap.state,
        },
    )
    .map_err(io::Error::other)?;
    w.write_all(b"\n")
}

/// Decodes one line. `line_no` is only used in errors.
pub fn decode_line<S: DeserializeOwned>(text: &str, line_no: u64) -> Result<Line<S>, DecodeError> {
    let bad = |what: String| DecodeError::Malformed {
        line: line_no,
        what,
    };
    let wire: WireLine<'_> =
        serde_json::from_str(text).map_err(|e| bad(describe_json_error(&e)))?;
    if wire.kind == SNAPSHOT_KIND {
        let state: S = serde_json::from_str(wire.event.get())
            .map_err(|e| bad(format!("bad Snapshot state: {e}")))?;
        return Ok(Line::Snapshot(Snapshot {
            seq: wire.seq,
            at: wire.at,
            state,
        }));
    }
    let event = Event::decode(&wire.kind, wire.event.get()).map_err(|e| match e {
        EventDecodeError::UnknownKind(k) => bad(format!(
            "unknown kind {k:?} (known: Snapshot, {})",
            Event::KINDS.join(", ")
        )),
        other => bad(other.to_string()),
    })?;
    Ok(Line::Record(Record {
        seq: wire.seq,
        at: wire.at,
        cause: wire.cause,
        trace: wire.trace,
        event,
    }))
}

fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => format!("not valid JSON: {e}"),
        Category::Data => format!("not a ledger line: {e}"),
        Category::Io => format!("read error: {e}"),
    }
}

/// Reads lines from `r`, decoding each; blank lines are skipped. Also checks that seqs
/// strictly increase, since a ledger out of order cannot be replayed.
pub struct Reader<R, S> {
    inner: R,
    line_no: u64,
    buf: String,
    last_seq: Option<u64>,
    _state: std::marker::PhantomData<fn() -> S>,
}

impl<R: BufRead, S: DeserializeOwned> Reader<R, S> {
    /// A reader over `inner`.
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            line_no: 0,
            buf: String::new(),
            last_seq: None,
            _state: std::marker::PhantomData,
        }
    }

    /// The number of the last line read (1-based).
    pub fn line_no(&self) -> u64 {
        self.line_no
    }
}

impl<R: BufRead, S: DeserializeOwned> Iterator for Reader<R, S> {
    type Item = Result<Line<S>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            self.line_no += 1;
            match self.inner.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(source) => {
                    return Some(Err(DecodeError::Io {
                        line: self.line_no,
                        source,
                    }))
                }
            }
            let text = self.buf.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let line = decode_line::<S>(text, self.line_no);
            if let Ok(l) = &line {
                let seq = match l {
                    Line::Record(r) => r.seq,
                    Line::Snapshot(s) => s.seq,
                };
                let is_snapshot = matches!(l, Line::Snapshot(_));
                if let Some(prev) = self.last_seq {
                    // A snapshot covers records up to its seq, so the next record is seq+1;
                    // records must strictly increase.
                    if is_snapshot || seq <= prev {
                        return Some(Err(DecodeError::Malformed {
                            line: self.line_no,
                            what: if is_snapshot {
                                "a Snapshot may only be the first line".to_string()
                            } else {
                                format!("seq {seq} does not follow seq {prev}")
                            },
                        }));
                    }
                }
                self.last_seq = Some(seq);
            }
            return Some(line);
        }
    }
}
