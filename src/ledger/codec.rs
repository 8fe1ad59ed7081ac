//! The NDJSON codec of ARCHITECTURE.md §4: one record (or a leading snapshot) per line.
//!
//! Owns encoding and decoding of lines, and the reader that reports a bad line by number.
//! Must not decide what a line means beyond its schema; folding is the core's job.

use std::borrow::Cow;
use std::io::{self, BufRead, Write};
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::shared::{decode_event, Payload};
use crate::core::record::event::{Event, EventDecodeError};
use crate::core::record::time::Time;
use crate::core::record::{Record, TraceParent};

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
///
/// Nearly every line is a record, so the record is inline (no allocation per line) and the
/// snapshot, at most one per file and often large, is boxed: a line moves cheaply from the
/// decoder to its consumer.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Line<S> {
    /// A record.
    Record(Record),
    /// A snapshot of the folded state.
    Snapshot(Box<Snapshot<S>>),
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

/// A record's line: the envelope, then its payload (shared objects through the encode cache).
impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("at", &self.at)?;
        m.serialize_entry("cause", &self.cause)?;
        m.serialize_entry("trace", &self.trace)?;
        m.serialize_entry("kind", self.event.kind())?;
        m.serialize_entry("event", &Payload(&self.event))?;
        m.end()
    }
}

/// The fields of a line before its `event` is decoded by `kind`; the `event` is raw JSON,
/// borrowed from the line (`&RawValue`) or owned (`Box<RawValue>`: any deserializer).
#[derive(Deserialize)]
struct WireLine<'a, E> {
    seq: u64,
    at: Time,
    #[serde(default)]
    cause: Option<u64>,
    #[serde(default)]
    trace: Option<TraceParent>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    event: E,
}

impl<E> WireLine<'_, E> {
    /// The line's record, with its decoded `event`.
    fn record(self, event: Event) -> Record {
        Record {
            seq: self.seq,
            at: self.at,
            cause: self.cause,
            trace: self.trace,
            event,
        }
    }
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Record, D::Error> {
        let wire = WireLine::<Box<RawValue>>::deserialize(d)?;
        let event = decode_event(&wire.kind, wire.event.get()).map_err(serde::de::Error::custom)?;
        Ok(wire.record(event))
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
    // A record in the encoder's own shape is read by hand (`fastline`); other valid lines
    // in one serde pass; anything else, and every error, by the two-pass path below, which
    // defines the result: the faster paths are only ever the same answer sooner.
    if let Some(line) = super::fastline::decode(text) {
        return Ok(line);
    }
    match decode_one_pass(text) {
        Ok(line) => Ok(line),
        Err(()) => decode_line_two_pass(text, line_no),
    }
}

fn decode_line_two_pass<S: DeserializeOwned>(
    text: &str,
    line_no: u64,
) -> Result<Line<S>, DecodeError> {
    let bad = |what: String| DecodeError::Malformed {
        line: line_no,
        what,
    };
    let wire: WireLine<'_, &RawValue> =
        serde_json::from_str(text).map_err(|e| bad(describe_json_error(&e)))?;
    if wire.kind == SNAPSHOT_KIND {
        let state: S = serde_json::from_str(wire.event.get())
            .map_err(|e| bad(format!("bad Snapshot state: {e}")))?;
        return Ok(Line::Snapshot(Box::new(Snapshot {
            seq: wire.seq,
            at: wire.at,
            state,
        })));
    }
    let event = decode_event(&wire.kind, wire.event.get()).map_err(|e| match e {
        EventDecodeError::UnknownKind(k) => bad(format!(
            "unknown kind {k:?} (known: Snapshot, {})",
            Event::KINDS.join(", ")
        )),
        other => bad(other.to_string()),
    })?;
    Ok(Line::Record(wire.record(event)))
}

/// The line decoded in a single pass: the payload is decoded by `kind` as soon as the
/// parser reaches it, instead of being skipped once as raw JSON and parsed again. `Err`
/// means "not decoded here" (any error, an unusual shape): the caller decodes again.
fn decode_one_pass<S: DeserializeOwned>(text: &str) -> Result<Line<S>, ()> {
    let mut de = serde_json::Deserializer::from_str(text);
    let line = serde::Deserializer::deserialize_map(&mut de, LineVisitor::<S>(PhantomData))
        .map_err(|_| ())?;
    de.end().map_err(|_| ())?;
    Ok(line)
}

/// The fields of a line, by name.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Seq,
    At,
    Cause,
    Trace,
    Kind,
    Event,
    #[serde(other)]
    Other,
}

/// The `event` of a line, decoded when it was reached.
enum Body<'de, S> {
    Snapshot(Box<S>),
    Event(Event),
    /// Reached before `kind`: decoded afterwards.
    Raw(&'de RawValue),
}

struct LineVisitor<S>(PhantomData<fn() -> S>);

/// Decodes the payload of `kind` in place (an unknown kind is an error).
struct PayloadSeed<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for PayloadSeed<'_> {
    type Value = Event;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Event, D::Error> {
        super::shared::deserialize_payload(self.0, d)
    }
}

impl<'de, S: DeserializeOwned> Visitor<'de> for LineVisitor<S> {
    type Value = Line<S>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ledger line")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line<S>, A::Error> {
        use serde::de::Error as _;
        let mut seq: Option<u64> = None;
        let mut at: Option<Time> = None;
        let mut cause: Option<Option<u64>> = None;
        let mut trace: Option<Option<TraceParent>> = None;
        let mut kind: Option<Cow<'de, str>> = None;
        let mut body: Option<Body<'de, S>> = None;
        fn once<T, E: serde::de::Error>(slot: &Option<T>, name: &'static str) -> Result<(), E> {
            match slot {
                Some(_) => Err(E::duplicate_field(name)),
                None => Ok(()),
            }
        }
        // a field's value, unless the field came before
        macro_rules! set {
            ($slot:ident) => {{
                once(&$slot, stringify!($slot))?;
                $slot = Some(map.next_value()?);
            }};
        }
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Seq => set!(seq),
                Field::At => set!(at),
                Field::Cause => set!(cause),
                Field::Trace => set!(trace),
                Field::Kind => set!(kind),
                Field::Event => {
                    once(&body, "event")?;
                    body = Some(match kind.as_deref() {
                        Some(SNAPSHOT_KIND) => Body::Snapshot(map.next_value()?),
                        Some(k) => Body::Event(map.next_value_seed(PayloadSeed(k))?),
                        None => Body::Raw(map.next_value()?),
                    });
                }
                Field::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let missing = |name| A::Error::missing_field(name);
        let seq = seq.ok_or_else(|| missing("seq"))?;
        let at = at.ok_or_else(|| missing("at"))?;
        let kind = kind.ok_or_else(|| missing("kind"))?;
        let body = body.ok_or_else(|| missing("event"))?;
        let event = match body {
            Body::Snapshot(state) => {
                return Ok(Line::Snapshot(Box::new(Snapshot {
                    seq,
                    at,
                    state: *state,
                })))
            }
            Body::Event(e) => e,
            Body::Raw(raw) if kind == SNAPSHOT_KIND => {
                let state = serde_json::from_str(raw.get()).map_err(A::Error::custom)?;
                return Ok(Line::Snapshot(Box::new(Snapshot { seq, at, state })));
            }
            Body::Raw(raw) => decode_event(&kind, raw.get()).map_err(A::Error::custom)?,
        };
        Ok(Line::Record(Record {
            seq,
            at,
            cause: cause.flatten(),
            trace: trace.flatten(),
            event,
        }))
    }
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
///
/// A line is decoded where it lies in `r`'s buffer; only a line that straddles two fills of
/// the buffer is copied (into a buffer the reader reuses).
pub struct Reader<R, S> {
    inner: R,
    line_no: u64,
    /// The start of a line that straddles the end of `inner`'s buffer.
    partial: Vec<u8>,
    last_seq: Option<u64>,
    done: bool,
    _state: std::marker::PhantomData<fn() -> S>,
}

impl<R: BufRead, S: DeserializeOwned> Reader<R, S> {
    /// A reader over `inner`.
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            line_no: 0,
            partial: Vec::new(),
            last_seq: None,
            done: false,
            _state: std::marker::PhantomData,
        }
    }

    /// The number of the last line read (1-based).
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// Decodes the next non-blank line, `None` at the end.
    fn next_line(&mut self) -> Option<Result<Line<S>, DecodeError>> {
        if self.done {
            return None;
        }
        self.line_no += 1;
        loop {
            let buf = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    self.done = true;
                    return Some(Err(DecodeError::Io {
                        line: self.line_no,
                        source,
                    }));
                }
            };
            if buf.is_empty() {
                // the end: a last line without a newline, or nothing
                self.done = true;
                if self.partial.is_empty() {
                    return None;
                }
                let line = decode_bytes::<S>(&self.partial, self.line_no);
                self.partial.clear();
                return line;
            }
            let Some(nl) = memchr::memchr(b'\n', buf) else {
                self.partial.extend_from_slice(buf);
                let n = buf.len();
                self.inner.consume(n);
                continue;
            };
            let line = if self.partial.is_empty() {
                let line = decode_bytes::<S>(&buf[..nl], self.line_no);
                self.inner.consume(nl + 1);
                line
            } else {
                self.partial.extend_from_slice(&buf[..nl]);
                self.inner.consume(nl + 1);
                let line = decode_bytes::<S>(&self.partial, self.line_no);
                self.partial.clear();
                line
            };
            match line {
                Some(l) => return Some(l),
                // a blank line: the next one
                None => self.line_no += 1,
            }
        }
    }
}

/// Decodes one line without its `\n`; `None` for a blank line.
fn decode_bytes<S: DeserializeOwned>(
    bytes: &[u8],
    line_no: u64,
) -> Option<Result<Line<S>, DecodeError>> {
    let Ok(text) = simdutf8::basic::from_utf8(bytes) else {
        return Some(Err(DecodeError::Io {
            line: line_no,
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ),
        }));
    };
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return None;
    }
    Some(decode_line::<S>(text, line_no))
}

impl<R: BufRead, S: DeserializeOwned> Iterator for Reader<R, S> {
    type Item = Result<Line<S>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let line = self.next_line()?;
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
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Node;
    use k8s_openapi::api::core::v1::Pod;

    const EXAMPLE: &str = include_str!("../../examples/ledgers/static-pods.ndjson");

    fn two_pass(text: &str) -> Result<Line<Node>, String> {
        decode_line_two_pass::<Node>(text, 7).map_err(|e| e.to_string())
    }

    #[test]
    fn one_pass_decodes_exactly_what_two_passes_decode() {
        let mut n = 0;
        for text in EXAMPLE.lines() {
            let one = decode_one_pass::<Node>(text).expect("the encoder's shape is one pass");
            assert_eq!(Ok(one), two_pass(text), "{text}");
            let fast = super::super::fastline::decode::<Node>(text).expect("and read by hand");
            assert_eq!(Ok(fast), two_pass(text), "{text}");
            n += 1;
        }
        assert!(n > 10);
        // other shapes: the event before its kind, unknown fields, spaces, a snapshot
        let kind_last = r#"{ "event" : {"source":"file"}, "seq":1, "at":"2026-01-01T00:00:00Z", "extra": [1, {"x": null}], "kind":"SourceReady" }"#;
        let snapshot = {
            let mut out = Vec::new();
            write_snapshot(
                &mut out,
                &Snapshot {
                    seq: 3,
                    at: Time::from_unix_secs(9),
                    state: 42u64,
                },
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            decode_line::<Node>(kind_last, 1).map_err(|e| e.to_string()),
            two_pass(kind_last)
        );
        assert!(matches!(
            decode_line::<u64>(snapshot.trim_end(), 1),
            Ok(Line::Snapshot(s)) if s.state == 42 && s.seq == 3
        ));
    }

    #[test]
    fn a_busy_ledger_reads_back_exactly_and_shares_what_it_shared() {
        let sim = crate::sim::scenarios::busy_node(30, 300_000);
        let records: Vec<_> = sim.engine().ledger().since(0).cloned().collect();
        let mut text = Vec::new();
        for r in &records {
            write_record(&mut text, r).unwrap();
        }
        let text = String::from_utf8(text).unwrap();
        let mut pods: std::collections::BTreeMap<String, std::sync::Arc<Pod>> = Default::default();
        let (mut shared, mut fast) = (0, 0);
        for (line, (want, r)) in text.lines().zip(&records).enumerate() {
            let got = decode_line::<Node>(want, line as u64 + 1).unwrap();
            assert_eq!(got, Line::Record((**r).clone()), "line {}", line + 1);
            assert_eq!(Ok(got.clone()), two_pass(want));
            fast += usize::from(super::super::fastline::decode::<Node>(want).is_some());
            // the ledger's payload encoding is the vocabulary's plain one, byte for byte
            let payload = serde_json::to_string(&Payload(&r.event)).unwrap();
            let plain = format!(r#"{{"kind":"{}","event":{payload}}}"#, r.event.kind());
            assert_eq!(serde_json::to_string(&r.event).unwrap(), plain);
            // the same pod text decodes to the same object
            if let Line::Record(Record {
                event: Event::UpdatePod(u),
                ..
            }) = &got
            {
                if let Some(p) = &u.pod {
                    let text = serde_json::to_string(&**p).unwrap();
                    if let Some(seen) = pods.insert(text, p.clone()) {
                        shared += usize::from(std::sync::Arc::ptr_eq(&seen, p));
                    }
                }
            }
        }
        assert_eq!(fast, records.len(), "every line takes the fast path");
        assert!(shared > 100, "{shared} pods shared");
    }

    #[test]
    fn payloads_read_by_hand_are_what_serde_reads() {
        use crate::core::command::WorkType;
        use crate::core::probes::ProbeType;
        use crate::core::record::event::{SyncFinished, SyncOutcome, TimerFired};
        use crate::core::timers::TimerKey;
        use crate::core::Uid;
        let uid = || Uid::new("c2181359-4726-4b09-abc6-8cb5ba9b7870");
        let mut events: Vec<Event> = [
            TimerKey::PodWork { uid: uid() },
            TimerKey::BackoffExpiry { uid: uid() },
            TimerKey::Housekeeping,
            TimerKey::StatusSync,
            TimerKey::NodeStatusUpdate,
            TimerKey::LeaseRenew,
            TimerKey::NodeRegister,
            TimerKey::NodeShutdownGroup,
            TimerKey::KillDeadline {
                uid: uid(),
                request: 3,
            },
            TimerKey::Probe {
                uid: uid(),
                container: "c".into(),
                probe: ProbeType::Liveness,
            },
            TimerKey::PodWork {
                uid: Uid::new("with \"quotes\""),
            },
            TimerKey::ActiveDeadline { uid: uid() },
        ]
        .into_iter()
        .map(|key| {
            Event::TimerFired(TimerFired {
                key,
                generation: u64::MAX,
            })
        })
        .collect();
        for work in [
            WorkType::Sync,
            WorkType::Terminating,
            WorkType::TerminatingRuntime,
            WorkType::Terminated,
        ] {
            for outcome in [
                SyncOutcome::Ok,
                SyncOutcome::Terminal,
                SyncOutcome::Canceled,
                SyncOutcome::Failed {
                    message: "simulated failure 1 of 1".into(),
                },
                SyncOutcome::Failed {
                    message: "tab\tted".into(),
                },
            ] {
                events.push(Event::SyncFinished(SyncFinished {
                    uid: uid(),
                    sync_id: 0,
                    work,
                    outcome,
                }));
            }
        }
        for event in events {
            let text = encode_record(&Record {
                seq: 1,
                at: Time::from_unix_nanos(1_767_225_600_034_000_000),
                cause: Some(5),
                trace: None,
                event,
            });
            assert_eq!(
                Ok(decode_line::<Node>(&text, 7).unwrap()),
                two_pass(&text),
                "{text}"
            );
            // escapes inside a payload leave its hand reading, not the fast path
            let fast = super::super::fastline::decode::<Node>(&text);
            assert_eq!(fast.ok_or_else(String::new), two_pass(&text), "{text}");
        }
    }

    #[test]
    fn damaged_lines_decode_as_the_two_pass_decoder_says_and_never_panic() {
        // one line of each kind the busy node writes (shared pods and statuses among them)
        let sim = crate::sim::scenarios::busy_node(5, 120_000);
        let mut seen = std::collections::BTreeSet::new();
        let mut lines: Vec<String> = EXAMPLE.lines().take(8).map(String::from).collect();
        for r in sim.engine().ledger().since(0) {
            if seen.insert(r.event.kind()) || seen.len() < 3 {
                lines.push(encode_record(r));
            }
        }
        // the same pods were interned on this thread already: hits and misses both
        for l in &lines {
            decode_line::<Node>(l, 1).unwrap();
        }
        let mut checked = 0;
        for line in &lines {
            let b = line.as_bytes();
            for at in (0..b.len()).step_by(3) {
                for (i, with) in [
                    &b"\""[..],
                    b"\\",
                    b"}",
                    b",",
                    b"0",
                    b" ",
                    "é".as_bytes(),
                    b"",
                ]
                .iter()
                .enumerate()
                {
                    let mut damaged = b[..at].to_vec();
                    damaged.extend_from_slice(with);
                    // replace one byte, or (the empty replacement) cut the line there
                    if i + 1 < 8 {
                        damaged.extend_from_slice(&b[(at + 1).min(b.len())..]);
                    }
                    let Ok(text) = std::str::from_utf8(&damaged) else {
                        continue;
                    };
                    let got = decode_line::<Node>(text, 7).map_err(|e| e.to_string());
                    assert_eq!(got, two_pass(text), "{text}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn every_bad_line_gets_the_two_pass_error() {
        let good = EXAMPLE.lines().nth(1).unwrap();
        let bad = [
            good.replacen("\"seq\":2", "\"seq\":2,\"seq\":3", 1),
            good.replacen(r#""kind":"PodAdded""#, r#""kind":"PodAdded","kind":"X""#, 1),
            good.replacen("\"source\":\"file\"", "\"source\":\"nowhere\"", 1),
            good.replacen("\"kind\":\"PodAdded\"", "\"kind\":\"Nope\"", 1),
            good.replacen("\"at\":\"2026", "\"at\":\"1026x", 1),
            format!("{good} x"),
            format!("[{good}]"),
            good[..good.len() - 1].to_string(),
            r#"{"seq":1,"at":"2026-01-01T00:00:00Z","kind":"SourceReady"}"#.to_string(),
        ];
        for text in bad {
            let err = decode_line::<Node>(&text, 7).map(|_| ()).unwrap_err();
            assert_eq!(Err(err.to_string()), two_pass(&text).map(|_| ()), "{text}");
            assert_eq!(err.line(), 7);
        }
    }

    fn read_with_capacity(text: &[u8], capacity: usize) -> Vec<Result<u64, String>> {
        Reader::<_, Node>::new(std::io::BufReader::with_capacity(capacity, text))
            .map(|l| match l {
                Ok(Line::Record(r)) => Ok(r.seq),
                Ok(Line::Snapshot(s)) => Ok(s.seq),
                Err(e) => Err(e.to_string()),
            })
            .collect()
    }

    #[test]
    fn lines_split_across_reads_blank_lines_and_a_missing_last_newline_read_the_same() {
        let lines: Vec<&str> = EXAMPLE.lines().take(6).collect();
        let text = format!(
            "{}\r\n\n  \n{}\n{}\r\n{}\n\n{}\n{}",
            lines[0], lines[1], lines[2], lines[3], lines[4], lines[5]
        );
        let want: Vec<Result<u64, String>> = (1..=6).map(Ok).collect();
        for capacity in [1, 7, 64, 333, 1 << 16] {
            assert_eq!(
                read_with_capacity(text.as_bytes(), capacity),
                want,
                "{capacity}"
            );
        }
        // line numbers count blank lines; a bad line after a straddling one is named
        let bad = format!("{}\n\n{}\n{{oops\n", lines[0], lines[1]);
        for capacity in [5, 1 << 16] {
            let got = read_with_capacity(bad.as_bytes(), capacity);
            assert_eq!(got[..2], [Ok(1), Ok(2)]);
            let err = got[2].as_ref().unwrap_err();
            assert!(err.starts_with("line 4: not valid JSON"), "{err}");
        }
        // a line that is not UTF-8 is an error naming it, not a panic
        let mut bytes = format!("{}\n", lines[0]).into_bytes();
        bytes.extend_from_slice(b"{\"seq\":2,\xff}\n");
        let got = read_with_capacity(&bytes, 1 << 16);
        assert_eq!(got[0], Ok(1));
        let err = got[1].as_ref().unwrap_err();
        assert!(err.starts_with("line 2: read error"), "{err}");
    }
}
