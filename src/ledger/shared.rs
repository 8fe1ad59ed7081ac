//! Shared objects (`Arc<Pod>`, `Arc<RuntimePodStatus>`, …) across the NDJSON codec.
//!
//! Owns two caches that make a ledger cheap to read and write although the same pod is
//! repeated in many records: decoding interns objects by their exact JSON text (the same
//! text becomes one shared `Arc`, parsed once, as it was shared when recorded), and an
//! export encodes each shared object once (by address, while [`EncodeCache`] is active) and
//! repeats its JSON text. Both are per thread and bounded, so they live here, not with the
//! payload types in the pure core: the ledger's codec reads and writes the payloads that
//! carry shared objects through [`Wire`], [`Payload`] and [`decode_event`]. Must not change
//! a byte of the encoding or a value of the decoding: a cache hit is exactly what a miss
//! would produce, and `Wire` is what the payloads' derived serde would do.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::core::record::event::{Event, EventDecodeError, PodConfigChange, RuntimeStatusObserved};
use crate::core::update::UpdatePod;

/// Interned objects per thread at most (the table is emptied when full).
pub const MAX_INTERNED: usize = 4_096;
/// Encoded objects per export at most (the cache is emptied when full).
pub const MAX_ENCODED: usize = 65_536;

/// Bytes of the start of a text that key the by-prefix index of the intern table.
const PREFIX_BYTES: usize = 256;
/// Texts kept per start in the by-prefix index (the newest).
const PREFIX_WAYS: usize = 4;

#[derive(Clone)]
struct Entry {
    text: Arc<str>,
    value: Arc<dyn Any + Send + Sync>,
}

/// The intern table's keys are already hashes: the map uses them as they are.
type Keyed<V> = HashMap<(TypeId, u64), V, foldhash::fast::RandomState>;

/// Interned objects, by type and text. Two indexes: by the hash of the whole text (a text
/// whose end is known), and by the hash of its first [`PREFIX_BYTES`] (a text that starts
/// the rest of a line: a JSON object that the rest of the line starts with *is* the value
/// there, since an object ends at its closing brace, so a hit needs no scan for the end).
#[derive(Default)]
struct InternTable {
    by_text: Keyed<Entry>,
    by_prefix: Keyed<Vec<Entry>>,
}

impl InternTable {
    fn get<T: Any + Send + Sync>(&self, text: &str) -> Option<Arc<T>> {
        let e = self.by_text.get(&(TypeId::of::<T>(), hash(text)))?;
        if &*e.text == text {
            e.value.clone().downcast::<T>().ok()
        } else {
            None
        }
    }

    /// The interned object of type `T` whose text `rest` starts with, and its length.
    fn get_at<T: Any + Send + Sync>(&self, rest: &str) -> Option<(Arc<T>, usize)> {
        let prefix = rest.as_bytes().get(..PREFIX_BYTES)?;
        let ways = self
            .by_prefix
            .get(&(TypeId::of::<T>(), hash_bytes(prefix)))?;
        let e = ways.iter().find(|e| rest.starts_with(&*e.text))?;
        Some((e.value.clone().downcast::<T>().ok()?, e.text.len()))
    }

    /// Makes `e` the newest text of its start in the by-prefix index.
    fn index_prefix<T: Any>(&mut self, e: &Entry) {
        let Some(prefix) = e.text.as_bytes().get(..PREFIX_BYTES) else {
            return;
        };
        let ways = self
            .by_prefix
            .entry((TypeId::of::<T>(), hash_bytes(prefix)))
            .or_default();
        ways.retain(|w| w.text != e.text);
        if ways.len() == PREFIX_WAYS {
            ways.pop();
        }
        ways.insert(0, e.clone());
    }

    fn insert<T: Any + Send + Sync>(&mut self, text: &str, value: Arc<T>) {
        if self.by_text.len() >= MAX_INTERNED {
            self.by_text.clear();
            self.by_prefix.clear();
        }
        let e = Entry {
            text: text.into(),
            value,
        };
        self.index_prefix::<T>(&e);
        self.by_text.insert((TypeId::of::<T>(), hash(text)), e);
    }
}

thread_local! {
    static INTERN: RefCell<InternTable> = RefCell::new(InternTable::default());
    static ENCODE: RefCell<Option<HashMap<usize, Box<RawValue>>>> = const { RefCell::new(None) };
    /// The length of the object the last [`visit_shared_at`] took.
    static CONSUMED: Cell<Option<usize>> = const { Cell::new(None) };
}

const HASH_SEED: u64 = 0x6c65_6467_6572;

/// The intern table's hash of a JSON text (a collision costs a parse, never a wrong value:
/// a hit also compares the text).
fn hash(text: &str) -> u64 {
    hash_bytes(text.as_bytes())
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(HASH_SEED).hash_one(bytes)
}

fn intern<T: DeserializeOwned + Send + Sync + 'static>(
    text: &str,
) -> Result<Arc<T>, serde_json::Error> {
    if let Some(v) = INTERN.with(|m| m.borrow().get::<T>(text)) {
        return Ok(v);
    }
    let v: Arc<T> = Arc::new(serde_json::from_str(text)?);
    INTERN.with(|m| m.borrow_mut().insert(text, v.clone()));
    Ok(v)
}

/// The object of type `T` that `rest` starts with (a JSON object, then anything), and the
/// length of its text.
fn intern_at<T: DeserializeOwned + Send + Sync + 'static>(
    rest: &str,
) -> Result<(Arc<T>, usize), serde_json::Error> {
    if let Some(hit) = INTERN.with(|m| m.borrow().get_at::<T>(rest)) {
        return Ok(hit);
    }
    let end = match rest.as_bytes().first() {
        Some(b'{') => super::scan::nested_end(rest.as_bytes(), 0),
        _ => None,
    }
    .ok_or_else(|| serde_json::Error::custom("expected a JSON object"))?;
    // the end is just after an ASCII `}`: a char boundary
    let text = &rest[..end];
    let found = INTERN.with(|m| {
        let mut m = m.borrow_mut();
        let v = m.get::<T>(text)?;
        let e = m.by_text.get(&(TypeId::of::<T>(), hash(text)))?.clone();
        m.index_prefix::<T>(&e);
        Some(v)
    });
    match found {
        Some(v) => Ok((v, end)),
        None => intern(text).map(|v| (v, end)),
    }
}

/// Empties this thread's intern table (e.g. after loading a large ledger).
pub fn clear_interned() {
    INTERN.with(|m| *m.borrow_mut() = InternTable::default());
}

/// While alive, shared objects serialised on this thread are encoded once each.
pub struct EncodeCache {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl EncodeCache {
    /// Activates the cache for this thread until the guard is dropped.
    pub fn start() -> EncodeCache {
        ENCODE.with(|c| *c.borrow_mut() = Some(HashMap::new()));
        EncodeCache {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for EncodeCache {
    fn drop(&mut self) {
        ENCODE.with(|c| *c.borrow_mut() = None);
    }
}

fn encode<T: Serialize, S: Serializer>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
    let addr = Arc::as_ptr(v) as *const () as usize;
    let cached = ENCODE.with(|c| {
        let mut c = c.borrow_mut();
        let map = c.as_mut()?;
        if let Some(raw) = map.get(&addr) {
            return Some(Ok(raw.clone()));
        }
        let text = match serde_json::to_string(&**v) {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        let raw = RawValue::from_string(text).expect("serde_json output is JSON");
        if map.len() >= MAX_ENCODED {
            map.clear();
        }
        map.insert(addr, raw.clone());
        Some(Ok(raw))
    });
    match cached {
        None => (**v).serialize(s),
        Some(Ok(raw)) => raw.serialize(s),
        Some(Err(e)) => Err(serde::ser::Error::custom(e)),
    }
}

/// serde_json's marker for a raw value (a one-entry map whose value is the JSON text). Any
/// other deserializer (e.g. serde's buffering for flattened or tagged types) calls
/// `visit_newtype_struct` instead, and the object is parsed without interning.
pub(crate) const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// The fast line decoder's marker, in place of [`RAW_TOKEN`]: the value is the rest of the
/// line from the object's first byte, and the visitor reports how much it took.
const REST_TOKEN: &str = "$ledgerlet::shared::rest";

struct ArcVisitor<T>(std::marker::PhantomData<fn() -> T>);

/// The key of a raw value map.
enum RawKey {
    /// The value is the object's JSON text.
    Raw,
    /// The value is the rest of the line from the object's start.
    Rest,
}

impl<'de> Deserialize<'de> for RawKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawKey, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RawKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a raw JSON value")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RawKey, E> {
                match s {
                    RAW_TOKEN => Ok(RawKey::Raw),
                    REST_TOKEN => Ok(RawKey::Rest),
                    _ => Err(E::custom("not a raw JSON value")),
                }
            }
        }
        d.deserialize_identifier(V)
    }
}

/// Gives `visitor` (the visitor of a `shared::arc` field, which `deserialize_newtype_struct`
/// with [`RAW_TOKEN`] received) the shared object that starts `rest`; returns it and the
/// length of its JSON text. Any other visitor fails.
pub(crate) fn visit_shared_at<'de, V: serde::de::Visitor<'de>>(
    rest: &'de str,
    visitor: V,
) -> Result<(V::Value, usize), serde_json::Error> {
    struct Rest<'de>(Option<&'de str>, &'de str);
    impl<'de> serde::de::MapAccess<'de> for Rest<'de> {
        type Error = serde_json::Error;
        fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, serde_json::Error> {
            match self.0.take() {
                Some(key) => seed
                    .deserialize(serde::de::value::BorrowedStrDeserializer::new(key))
                    .map(Some),
                None => Ok(None),
            }
        }
        fn next_value_seed<S: serde::de::DeserializeSeed<'de>>(
            &mut self,
            seed: S,
        ) -> Result<S::Value, serde_json::Error> {
            seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(self.1))
        }
    }
    CONSUMED.with(|c| c.set(None));
    let v = visitor.visit_map(Rest(Some(REST_TOKEN), rest))?;
    match CONSUMED.with(Cell::take) {
        Some(n) => Ok((v, n)),
        None => Err(serde_json::Error::custom("not a shared object")),
    }
}

/// The JSON text of a raw value: borrowed from the input when the deserializer can lend
/// it (serde_json from a `&str` or slice), copied otherwise.
struct RawText<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for RawText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawText<'de>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawText<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON text")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<RawText<'de>, E> {
                Ok(RawText(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RawText<'de>, E> {
                Ok(RawText(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<RawText<'de>, E> {
                Ok(RawText(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de, T: DeserializeOwned + Send + Sync + 'static> serde::de::Visitor<'de> for ArcVisitor<T> {
    type Value = Arc<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Arc<T>, A::Error> {
        let Some(key) = map.next_key::<RawKey>()? else {
            return Err(A::Error::custom("expected a raw JSON value"));
        };
        let text: RawText<'de> = map.next_value()?;
        match key {
            RawKey::Raw => intern(&text.0).map_err(A::Error::custom),
            RawKey::Rest => {
                let (v, n) = intern_at(&text.0).map_err(A::Error::custom)?;
                CONSUMED.with(|c| c.set(Some(n)));
                Ok(v)
            }
        }
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Arc<T>, D::Error> {
        T::deserialize(d).map(Arc::new)
    }
}

/// An interned `Arc<T>` (as a field, or in an `Option`).
struct Interned<T>(Arc<T>);

impl<'de, T: DeserializeOwned + Send + Sync + 'static> Deserialize<'de> for Interned<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Interned<T>, D::Error> {
        d.deserialize_newtype_struct(RAW_TOKEN, ArcVisitor(std::marker::PhantomData))
            .map(Interned)
    }
}

/// Serialises an `Arc<T>` (once per export while an [`EncodeCache`] is active).
struct Enc<'a, T>(&'a Arc<T>);

impl<T: Serialize> Serialize for Enc<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        encode(self.0, s)
    }
}

/// A field name: one of `self.0`, or `""` for any other.
struct FieldName(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for FieldName {
    type Value = &'static str;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl Visitor<'_> for FieldName {
    type Value = &'static str;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("field identifier")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<&'static str, E> {
        Ok(self.0.iter().find(|f| **f == s).copied().unwrap_or(""))
    }
}

/// A payload that carries shared objects, (de)serialised as its derived impls do (the same
/// fields in the same order, the same errors) but with its shared objects through the
/// encode cache and the intern table. The vocabulary's own serde for these types is plain
/// `Arc<T>` (the same bytes, the same values, nothing shared): the pure core must not reach
/// this module's per-thread tables, so the ledger's codec reads and writes them as `Wire`.
/// The field lists are exhaustive: a field added to a payload does not compile until it is
/// added here. `req`: always written, required; `opt`: an `Option`, written when `Some`;
/// `arc`/`opt_arc`: the same for shared objects.
pub(crate) struct Wire<T>(pub T);

macro_rules! wire {
    ($name:ident { $($field:ident: $how:ident),* $(,)? }) => {
        impl Serialize for Wire<&$name> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let $name { $($field),* } = self.0;
                let mut m = s.serialize_map(None)?;
                $( wire!(@ser $how, m, $field); )*
                m.end()
            }
        }

        impl<'de> Deserialize<'de> for Wire<$name> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Wire<$name>;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str(concat!("struct ", stringify!($name)))
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                        $( let mut $field = None; )*
                        while let Some(key) = map.next_key_seed(FieldName(&[$(stringify!($field)),*]))? {
                            match key {
                                $( stringify!($field) => {
                                    if $field.is_some() {
                                        return Err(A::Error::duplicate_field(stringify!($field)));
                                    }
                                    $field = Some(wire!(@de $how, map));
                                } )*
                                _ => {
                                    map.next_value::<serde::de::IgnoredAny>()?;
                                }
                            }
                        }
                        Ok(Wire($name { $( $field: wire!(@end $how, $field), )* }))
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
    (@ser req, $m:ident, $f:ident) => { $m.serialize_entry(stringify!($f), $f)? };
    (@ser arc, $m:ident, $f:ident) => { $m.serialize_entry(stringify!($f), &Enc($f))? };
    (@ser opt, $m:ident, $f:ident) => {
        if let Some(v) = $f { $m.serialize_entry(stringify!($f), v)? }
    };
    (@ser opt_arc, $m:ident, $f:ident) => {
        if let Some(v) = $f { $m.serialize_entry(stringify!($f), &Enc(v))? }
    };
    (@de req, $map:ident) => { $map.next_value()? };
    (@de opt, $map:ident) => { $map.next_value()? };
    (@de arc, $map:ident) => { $map.next_value::<Interned<_>>()?.0 };
    (@de opt_arc, $map:ident) => { $map.next_value::<Option<Interned<_>>>()?.map(|i| i.0) };
    (@end opt, $f:ident) => { $f.flatten() };
    (@end opt_arc, $f:ident) => { $f.flatten() };
    (@end $how:ident, $f:ident) => {
        match $f {
            Some(v) => v,
            None => return Err(serde::de::Error::missing_field(stringify!($f))),
        }
    };
}

wire!(PodConfigChange {
    source: req,
    pod: arc
});
wire!(UpdatePod {
    update_type: req,
    pod: opt_arc,
    mirror_pod: opt_arc,
    running_pod: opt_arc,
    kill: opt,
    start_time: opt,
});
wire!(RuntimeStatusObserved {
    uid: req,
    status: opt_arc,
    error: opt,
    read_after_seq: opt,
});

/// Serialises an event's payload (the `event` of a line), shared objects through the cache.
pub(crate) struct Payload<'a>(pub &'a Event);

impl Serialize for Payload<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Event::PodAdded(p)
            | Event::PodUpdated(p)
            | Event::PodRemoved(p)
            | Event::PodDeleted(p)
            | Event::PodReconcile(p) => Wire(p).serialize(s),
            Event::UpdatePod(p) => Wire(p).serialize(s),
            Event::RuntimeStatusObserved(p) => Wire(p).serialize(s),
            e => e.serialize_payload(s),
        }
    }
}

/// The payload of a `kind` event from `d`, shared objects interned: what the ledger's
/// decoders use in place of the vocabulary's [`Event::deserialize_payload`].
pub(crate) fn deserialize_payload<'de, D: Deserializer<'de>>(
    kind: &str,
    d: D,
) -> Result<Event, D::Error> {
    let change = |d: D| Wire::<PodConfigChange>::deserialize(d).map(|w| w.0);
    Ok(match kind {
        "PodAdded" => Event::PodAdded(change(d)?),
        "PodUpdated" => Event::PodUpdated(change(d)?),
        "PodRemoved" => Event::PodRemoved(change(d)?),
        "PodDeleted" => Event::PodDeleted(change(d)?),
        "PodReconcile" => Event::PodReconcile(change(d)?),
        "UpdatePod" => Event::UpdatePod(Wire::deserialize(d)?.0),
        "RuntimeStatusObserved" => Event::RuntimeStatusObserved(Wire::deserialize(d)?.0),
        _ => return Event::deserialize_payload(kind, d),
    })
}

/// Decodes the `event` object of a line whose `kind` is `kind`, shared objects interned:
/// what the ledger's decoders use in place of the vocabulary's [`Event::decode`].
pub(crate) fn decode_event(kind: &str, text: &str) -> Result<Event, EventDecodeError> {
    let Some(&kind) = Event::KINDS.iter().find(|k| **k == kind) else {
        return Err(EventDecodeError::UnknownKind(
            kind.chars().take(64).collect(),
        ));
    };
    let mut de = serde_json::Deserializer::from_str(text);
    deserialize_payload(kind, &mut de)
        .and_then(|e| de.end().map(|()| e))
        .map_err(|e| EventDecodeError::Payload {
            kind,
            error: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Obj {
        name: String,
        n: u32,
    }

    /// The vocabulary's plain serde, and the ledger's `Wire` form.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        a: Arc<Obj>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        b: Option<Arc<Obj>>,
    }

    wire!(Holder { a: arc, b: opt_arc });

    fn wire(text: &str) -> Result<Holder, serde_json::Error> {
        serde_json::from_str::<Wire<Holder>>(text).map(|w| w.0)
    }

    #[test]
    fn the_same_text_decodes_to_one_shared_object_and_values_are_unchanged() {
        let text = r#"{"a":{"name":"x","n":1},"b":{"name":"x","n":1}}"#;
        let h = wire(text).unwrap();
        assert!(Arc::ptr_eq(&h.a, h.b.as_ref().unwrap()));
        assert_eq!(h, serde_json::from_str::<Holder>(text).unwrap());
        let h2 = wire(r#"{"a":{"name":"x","n":2}}"#).unwrap();
        assert_eq!(h2.a.n, 2);
        assert_eq!(h2.b, None);
        // through serde_json::Value as well
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let h3 = serde_json::from_value::<Wire<Holder>>(v).unwrap().0;
        assert_eq!(h3, h);
        // a type mismatch is still an error
        assert!(wire(r#"{"a":{"name":1}}"#).is_err());
        assert!(wire(r#"{"a":{"name":"x","n":1},"b":7}"#).is_err());
        // a missing or repeated field is the derived impl's error (its array form, which
        // the encoder never writes, is not read)
        for bad in [
            r#"{"b":null}"#,
            r#"{"a":{"name":"x","n":1},"a":{"name":"x","n":1}}"#,
            r#"{"a":{"name":"x","n":1},"b":null,"b":null}"#,
        ] {
            let plain = serde_json::from_str::<Holder>(bad).map_err(|e| e.to_string());
            assert_eq!(wire(bad).map_err(|e| e.to_string()), plain, "{bad}");
        }
        // unknown fields are skipped, as the derived impl does
        assert_eq!(wire(r#"{"x":[1],"a":{"name":"x","n":1}}"#).unwrap().a.n, 1);
        // inside serde's buffering (flatten, internally tagged) it still decodes
        #[derive(Deserialize)]
        #[serde(tag = "t")]
        enum Tagged {
            H(Wire<Holder>),
        }
        let Tagged::H(Wire(h4)) =
            serde_json::from_str(r#"{"t":"H","a":{"name":"y","n":3},"b":null}"#).unwrap();
        assert_eq!(h4.a.n, 3);
        assert_eq!(h4.b, None);
    }

    #[test]
    fn encoding_with_the_cache_gives_the_same_bytes() {
        let shared = Arc::new(Obj {
            name: "p\"q".into(),
            n: 7,
        });
        let h = Holder {
            a: shared.clone(),
            b: Some(shared),
        };
        let plain = serde_json::to_string(&h).unwrap();
        assert_eq!(plain, serde_json::to_string(&Wire(&h)).unwrap());
        let cached = {
            let _c = EncodeCache::start();
            let first = serde_json::to_string(&Wire(&h)).unwrap();
            assert_eq!(first, serde_json::to_string(&Wire(&h)).unwrap());
            first
        };
        assert_eq!(plain, cached);
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            serde_json::from_str::<serde_json::Value>(&plain).unwrap()
        );
    }
}
