//! The fast path of the NDJSON decoder: a record line in the shape the encoder writes.
//!
//! Owns reading such a line by hand: the envelope (`seq`, `at`, `cause`, `trace`, `kind`,
//! then `event`), and, for the kinds that carry shared objects (pods, runtime statuses),
//! the payload's top-level fields, so that a shared object already interned is recognised
//! by comparing the line with its text, never scanned or parsed again. Everything else in
//! a payload is parsed by serde_json. Must not decide anything the general decoder would
//! decide differently: on any surprise (escapes in names or strings, an unusual order, a
//! snapshot, an error of any kind) it returns `None` and the general decoder reads the
//! line, and its answer (value or error) is the one that counts.
//!
//! Hand-written for a measured reason: the same lines decoded through serde_json alone ran
//! at about 324,000 lines per CPU-second against this path's 1,620,000 (`cargo bench --bench
//! postmortem`, "decode alone"), which puts replay under its 500,000 records/s floor.

use serde::de::{DeserializeSeed, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::codec::{Line, SNAPSHOT_KIND};
use super::scan;
use super::shared::{deserialize_payload, visit_shared_at, RAW_TOKEN};
use crate::core::command::WorkType;
use crate::core::record::event::{Event, SyncFinished, SyncOutcome, TimerFired};
use crate::core::record::time::Time;
use crate::core::record::{Record, TraceParent};
use crate::core::timers::TimerKey;
use crate::core::Uid;

/// The kinds whose payload has shared objects among its top-level fields.
const SHARED_KINDS: &[&str] = &[
    "PodAdded",
    "PodUpdated",
    "PodRemoved",
    "PodDeleted",
    "PodReconcile",
    "UpdatePod",
    "RuntimeStatusObserved",
];

/// A position in a line.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.pos += 1)
    }

    /// A string without escapes or control characters (`None` for any other): exactly
    /// the text serde_json would decode it to.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.pos;
        let end = scan::plain_string_end(self.bytes(), start)?;
        self.pos = end + 1;
        Some(&self.text[start..end])
    }

    /// A non-negative integer as serde_json reads a `u64` (no sign, fraction, exponent or
    /// leading zero).
    fn u64(&mut self) -> Option<u64> {
        self.ws();
        let b = self.bytes();
        let start = self.pos;
        let mut n: u64 = 0;
        let mut i = start;
        while let Some(d) = b.get(i).map(|c| c.wrapping_sub(b'0')).filter(|d| *d < 10) {
            n = n.checked_mul(10)?.checked_add(u64::from(d))?;
            i += 1;
        }
        if i == start || (i - start > 1 && b[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = b.get(i) {
            return None;
        }
        self.pos = i;
        Some(n)
    }

    /// `null` (true) or nothing consumed (false).
    fn null(&mut self) -> bool {
        self.ws();
        self.lit(b"null").is_some()
    }

    /// Exactly the bytes `lit` (no whitespace skipped).
    #[inline]
    fn lit(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.pos + lit.len();
        (self.bytes().get(self.pos..end)? == lit).then(|| self.pos = end)
    }

    /// A time string, as `Time`'s deserializer reads it.
    fn time(&mut self) -> Option<Time> {
        Time::parse_rfc3339(self.plain_string()?).ok()
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }
}

/// Decodes a record line in the encoder's shape; `None` leaves it to the general decoder.
pub(super) fn decode<S>(text: &str) -> Option<Line<S>> {
    let mut c = Cursor { text, pos: 0 };
    c.lit(b"{\"seq\":")?;
    let seq = c.u64()?;
    c.lit(b",\"at\":")?;
    let at = c.time()?;
    c.lit(b",\"cause\":")?;
    let cause = if c.null() { None } else { Some(c.u64()?) };
    c.lit(b",\"trace\":")?;
    let trace = if c.null() {
        None
    } else {
        Some(TraceParent::parse(c.plain_string()?).ok()?)
    };
    c.lit(b",\"kind\":")?;
    let kind = c.plain_string().filter(|k| *k != SNAPSHOT_KIND)?;
    c.lit(b",\"event\":")?;
    let by_hand = match kind {
        "TimerFired" => timer_fired(&mut c),
        "SyncFinished" => sync_finished(&mut c),
        _ => None,
    };
    let event = match by_hand {
        Some(e) => e,
        None if SHARED_KINDS.contains(&kind) => deserialize_payload(kind, Fields(&mut c)).ok()?,
        None => {
            let (e, n) = Event::decode_prefix(kind, c.rest())?;
            c.pos += n;
            e
        }
    };
    c.lit(b"}")?;
    if c.pos != text.len() {
        return None;
    }
    Some(Line::Record(Record {
        seq,
        at,
        cause,
        trace,
        event,
    }))
}

/// `TimerFired` in the encoder's shape (`{"timer":T[,"uid":U],"generation":N}` for the
/// timers without other fields); `None` (nothing consumed) for anything else.
fn timer_fired(c: &mut Cursor<'_>) -> Option<Event> {
    let mut k = *c;
    k.lit(b"{\"timer\":")?;
    let tag = k.plain_string()?;
    let uid = if tag == "pod_work" || tag == "backoff_expiry" {
        k.lit(b",\"uid\":")?;
        Some(Uid::new(k.plain_string()?))
    } else {
        None
    };
    k.lit(b",\"generation\":")?;
    let generation = k.u64()?;
    k.lit(b"}")?;
    let key = match (tag, uid) {
        ("pod_work", Some(uid)) => TimerKey::PodWork { uid },
        ("backoff_expiry", Some(uid)) => TimerKey::BackoffExpiry { uid },
        ("housekeeping", None) => TimerKey::Housekeeping,
        ("status_sync", None) => TimerKey::StatusSync,
        ("node_status_update", None) => TimerKey::NodeStatusUpdate,
        ("lease_renew", None) => TimerKey::LeaseRenew,
        ("node_register", None) => TimerKey::NodeRegister,
        ("node_shutdown_group", None) => TimerKey::NodeShutdownGroup,
        _ => return None,
    };
    *c = k;
    Some(Event::TimerFired(TimerFired { key, generation }))
}

/// `SyncFinished` in the encoder's shape; `None` (nothing consumed) for anything else.
fn sync_finished(c: &mut Cursor<'_>) -> Option<Event> {
    let mut k = *c;
    k.lit(b"{\"uid\":")?;
    let uid = Uid::new(k.plain_string()?);
    k.lit(b",\"sync_id\":")?;
    let sync_id = k.u64()?;
    k.lit(b",\"work\":")?;
    let work = WorkType::deserialize(StrDe::new(k.plain_string()?)).ok()?;
    k.lit(b",\"outcome\":{\"result\":")?;
    let outcome = match k.plain_string()? {
        "ok" => SyncOutcome::Ok,
        "terminal" => SyncOutcome::Terminal,
        "canceled" => SyncOutcome::Canceled,
        "failed" => {
            k.lit(b",\"message\":")?;
            SyncOutcome::Failed {
                message: k.plain_string()?.to_string(),
            }
        }
        _ => return None,
    };
    k.lit(b"}}")?;
    *c = k;
    Some(Event::SyncFinished(SyncFinished {
        uid,
        sync_id,
        work,
        outcome,
    }))
}

type StrDe<'a> = serde::de::value::BorrowedStrDeserializer<'a, serde_json::Error>;

/// A payload object, read field by field.
struct Fields<'c, 'a>(&'c mut Cursor<'a>);

impl<'de> Deserializer<'de> for Fields<'_, 'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let c = self.0;
        c.eat(b'{')
            .ok_or_else(|| serde_json::Error::custom("expected an object"))?;
        let mut map = FieldMap {
            c,
            first: true,
            closed: false,
        };
        let v = visitor.visit_map(&mut map)?;
        if !map.closed {
            return Err(serde_json::Error::custom(
                "the object was not read to its end",
            ));
        }
        Ok(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

struct FieldMap<'c, 'a> {
    c: &'c mut Cursor<'a>,
    /// No key read yet.
    first: bool,
    /// The closing brace was read.
    closed: bool,
}

impl<'de> MapAccess<'de> for &mut FieldMap<'_, 'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let stop = || serde_json::Error::custom("not a plain object");
        self.c.ws();
        match (self.first, self.c.peek()) {
            (_, Some(b'}')) if !self.closed => {
                self.c.pos += 1;
                self.closed = true;
                return Ok(None);
            }
            (true, _) if !self.closed => {}
            (false, Some(b',')) if !self.closed => self.c.pos += 1,
            _ => return Err(stop()),
        }
        self.first = false;
        let key = self.c.plain_string().ok_or_else(stop)?;
        self.c.eat(b':').ok_or_else(stop)?;
        seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        self.c.ws();
        seed.deserialize(Value(self.c))
    }
}

/// One field's value: a shared object is taken by the intern table from the line itself;
/// anything else is parsed by serde_json from its span.
struct Value<'c, 'a>(&'c mut Cursor<'a>);

impl<'de> Value<'_, 'de> {
    fn json<T>(
        self,
        f: impl FnOnce(
            &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
        ) -> serde_json::Result<T>,
    ) -> serde_json::Result<T> {
        let c = self.0;
        let end = scan::value_end(c.bytes(), c.pos)
            .ok_or_else(|| serde_json::Error::custom("unterminated value"))?;
        let mut de = serde_json::Deserializer::from_str(&c.text[c.pos..end]);
        let v = f(&mut de)?;
        de.end()?;
        c.pos = end;
        Ok(v)
    }
}

macro_rules! forward_to_json {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.json(|de| de.$method(visitor))
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Value<'_, 'de> {
    type Error = serde_json::Error;

    forward_to_json! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_bytes deserialize_byte_buf
        deserialize_unit deserialize_seq deserialize_map deserialize_identifier
        deserialize_ignored_any
    }

    // A string without escapes is its own text, and a plain integer its own value: handed
    // over as serde_json would (borrowed strings, `visit_u64`), without a serde_json pass.

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let mut k = *self.0;
        match k.plain_string() {
            Some(s) => {
                *self.0 = k;
                visitor.visit_borrowed_str(s)
            }
            None => self.json(|de| de.deserialize_str(visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        // serde_json's `deserialize_string` is its `deserialize_str`
        self.deserialize_str(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let mut k = *self.0;
        match k.u64() {
            Some(n) => {
                *self.0 = k;
                visitor.visit_u64(n)
            }
            None => self.json(|de| de.deserialize_u64(visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        // as serde_json: `null` is none, anything else is some (read by this deserializer,
        // so a shared object inside an option is still recognised)
        if self.0.null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        if name == RAW_TOKEN && self.0.peek() == Some(b'{') {
            let c = self.0;
            let (v, n) = visit_shared_at(c.rest(), visitor)?;
            c.pos += n;
            return Ok(v);
        }
        self.json(|de| de.deserialize_newtype_struct(name, visitor))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.json(|de| de.deserialize_unit_struct(name, visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.json(|de| de.deserialize_tuple(len, visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.json(|de| de.deserialize_tuple_struct(name, len, visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.json(|de| de.deserialize_struct(name, fields, visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        // a unit variant written as a plain string
        let mut k = *self.0;
        match k.plain_string() {
            Some(s) => {
                *self.0 = k;
                visitor.visit_enum(StrDe::new(s))
            }
            None => self.json(|de| de.deserialize_enum(name, variants, visitor)),
        }
    }
}
