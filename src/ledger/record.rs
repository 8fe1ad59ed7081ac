//! One immutable ledger entry.
//!
//! Owns `Record` and its canonical JSON form (one NDJSON line, see `codec`). Must not be
//! mutated after append: records are shared behind `Arc` with followers and snapshots.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::event::{Event, Payload};
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

/// The fields of a line before its `event` is decoded by `kind`.
#[derive(Deserialize)]
pub(crate) struct WireLine<'a> {
    pub seq: u64,
    pub at: Time,
    #[serde(default)]
    pub cause: Option<u64>,
    #[serde(default)]
    pub trace: Option<TraceParent>,
    #[serde(borrow)]
    pub kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub event: &'a serde_json::value::RawValue,
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Record, D::Error> {
        #[derive(Deserialize)]
        struct Owned {
            seq: u64,
            at: Time,
            #[serde(default)]
            cause: Option<u64>,
            #[serde(default)]
            trace: Option<TraceParent>,
            kind: String,
            event: Box<serde_json::value::RawValue>,
        }
        let o = Owned::deserialize(d)?;
        let event = Event::decode(&o.kind, o.event.get()).map_err(serde::de::Error::custom)?;
        Ok(Record {
            seq: o.seq,
            at: o.at,
            cause: o.cause,
            trace: o.trace,
            event,
        })
    }
}
