//! Shared objects (`Arc<Pod>`, `Arc<RuntimePodStatus>`, …) across the NDJSON codec.
//!
//! Owns two caches that make a ledger cheap to read and write although the same pod is
//! repeated in many records: decoding interns objects by their exact JSON text (the same
//! text becomes one shared `Arc`, parsed once, as it was shared when recorded), and an
//! export encodes each shared object once (by address, while [`EncodeCache`] is active) and
//! repeats its JSON text. Both are per thread and bounded. Must not change a byte of the
//! encoding or a value of the decoding: a cache hit is exactly what a miss would produce.
//!
//! Kept for measured bounds: the export floor of `cargo bench --bench postmortem` (a million
//! records in ≤ 2 s) is met with the encode cache, and its replay floor with interning, which
//! also keeps decoded records sharing their pods as the ledger's byte budget (shared objects
//! counted once, `ledger::size`) and the fold's status memo (pods compared by address) expect.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// Interned objects per thread at most (the table is emptied when full).
pub const MAX_INTERNED: usize = 4_096;
/// Encoded objects per export at most (the cache is emptied when full).
pub const MAX_ENCODED: usize = 65_536;

type ByText = HashMap<Box<str>, Arc<dyn Any + Send + Sync>, foldhash::fast::RandomState>;

thread_local! {
    /// Per type, objects by their JSON text, and how many in all.
    static INTERN: RefCell<(HashMap<TypeId, ByText>, usize)> = RefCell::default();
    static ENCODE: RefCell<Option<HashMap<usize, Box<RawValue>>>> = const { RefCell::new(None) };
}

fn intern<T: DeserializeOwned + Send + Sync + 'static>(
    text: &str,
) -> Result<Arc<T>, serde_json::Error> {
    let hit = INTERN.with(|m| {
        let m = m.borrow();
        m.0.get(&TypeId::of::<T>())?
            .get(text)?
            .clone()
            .downcast::<T>()
            .ok()
    });
    if let Some(v) = hit {
        return Ok(v);
    }
    let v: Arc<T> = Arc::new(serde_json::from_str(text)?);
    INTERN.with(|m| {
        let (by_type, len) = &mut *m.borrow_mut();
        if *len >= MAX_INTERNED {
            by_type.clear();
            *len = 0;
        }
        by_type
            .entry(TypeId::of::<T>())
            .or_default()
            .insert(text.into(), v.clone());
        *len += 1;
    });
    Ok(v)
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
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

struct ArcVisitor<T>(std::marker::PhantomData<fn() -> T>);

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
        // the one key is serde_json's token
        let Some(serde::de::IgnoredAny) = map.next_key()? else {
            return Err(A::Error::custom("expected a raw JSON value"));
        };
        let text: RawText<'de> = map.next_value()?;
        intern(&text.0).map_err(A::Error::custom)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Arc<T>, D::Error> {
        T::deserialize(d).map(Arc::new)
    }
}

fn deserialize_arc<'de, T, D>(d: D) -> Result<Arc<T>, D::Error>
where
    T: DeserializeOwned + Send + Sync + 'static,
    D: Deserializer<'de>,
{
    d.deserialize_newtype_struct(RAW_TOKEN, ArcVisitor(std::marker::PhantomData))
}

/// `#[serde(with = "…::shared::arc")]` for `Arc<T>` fields.
pub mod arc {
    use super::*;

    /// Serialises `v` (once per export while an [`EncodeCache`] is active).
    pub fn serialize<T: Serialize, S: Serializer>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
        encode(v, s)
    }

    /// Deserialises an interned `Arc<T>`.
    pub fn deserialize<'de, T, D>(d: D) -> Result<Arc<T>, D::Error>
    where
        T: DeserializeOwned + Send + Sync + 'static,
        D: Deserializer<'de>,
    {
        deserialize_arc(d)
    }
}

/// `#[serde(with = "…::shared::opt_arc")]` for `Option<Arc<T>>` fields.
pub mod opt_arc {
    use super::*;

    /// Serialises `v` (once per export while an [`EncodeCache`] is active).
    pub fn serialize<T: Serialize, S: Serializer>(
        v: &Option<Arc<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.serialize_some(&Wrap(a)),
            None => s.serialize_none(),
        }
    }

    struct Wrap<'a, T>(&'a Arc<T>);
    impl<T: Serialize> Serialize for Wrap<'_, T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            encode(self.0, s)
        }
    }

    struct OptVisitor<T>(std::marker::PhantomData<fn() -> T>);

    impl<'de, T: DeserializeOwned + Send + Sync + 'static> serde::de::Visitor<'de> for OptVisitor<T> {
        type Value = Option<Arc<T>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object or null")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            deserialize_arc(d).map(Some)
        }
    }

    /// Deserialises an interned `Option<Arc<T>>`.
    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<Arc<T>>, D::Error>
    where
        T: DeserializeOwned + Send + Sync + 'static,
        D: Deserializer<'de>,
    {
        d.deserialize_option(OptVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Obj {
        name: String,
        n: u32,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "arc")]
        a: Arc<Obj>,
        #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_arc")]
        b: Option<Arc<Obj>>,
    }

    #[test]
    fn the_same_text_decodes_to_one_shared_object_and_values_are_unchanged() {
        let text = r#"{"a":{"name":"x","n":1},"b":{"name":"x","n":1}}"#;
        let h: Holder = serde_json::from_str(text).unwrap();
        assert!(Arc::ptr_eq(&h.a, h.b.as_ref().unwrap()));
        let h2: Holder = serde_json::from_str(r#"{"a":{"name":"x","n":2}}"#).unwrap();
        assert_eq!(h2.a.n, 2);
        assert_eq!(h2.b, None);
        // through serde_json::Value as well
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let h3: Holder = serde_json::from_value(v).unwrap();
        assert_eq!(h3, h);
        // a type mismatch is still an error
        assert!(serde_json::from_str::<Holder>(r#"{"a":{"name":1}}"#).is_err());
        // inside serde's buffering (flatten, internally tagged) it still decodes
        #[derive(Debug, Deserialize)]
        #[serde(tag = "t")]
        enum Tagged {
            H(Holder),
        }
        let Tagged::H(h4) =
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
        let cached = {
            let _c = EncodeCache::start();
            let first = serde_json::to_string(&h).unwrap();
            assert_eq!(first, serde_json::to_string(&h).unwrap());
            first
        };
        assert_eq!(plain, cached);
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            serde_json::from_str::<serde_json::Value>(&plain).unwrap()
        );
    }
}
