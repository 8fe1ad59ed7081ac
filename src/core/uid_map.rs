//! `UidMap`: a `BTreeMap` keyed by pod UID that knows when its key set last changed.
//!
//! Owns the map and its key-set generation. Housekeeping (`core::housekeeping_memo`)
//! remembers derived answers (which workers have no desired pod, which runtime entries no
//! config wants, …) together with the generations of the maps they were computed from, and
//! reuses them while those generations are unchanged. Must not let the generation reach any
//! output: it is not serialised, it is ignored by `==` and `Debug`, and two maps compare and
//! serialise exactly like the `BTreeMap`s they wrap.
//!
//! A generation is a fresh token (a small allocation, compared by address) made every time
//! the key set changes (a key is inserted that was not there, or a key is removed) and when
//! a map is created or deserialised, so two maps (of any nodes, or the same field after
//! being replaced) carry the same generation only if one is an unmodified clone of the
//! other: equal generations imply equal key sets. Whoever remembers a generation holds the
//! token, so its address cannot be reused meanwhile; no process-wide counter is needed.
//! Reads go through `Deref`; every mutation goes through the methods below, so no key-set
//! change can skip the new token.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::uid::Uid;

/// A key-set generation (see the module doc). Not state: it only ever decides whether a
/// derived answer may be reused, never what the answer is.
#[derive(Clone)]
pub struct Generation(Arc<()>);

impl PartialEq for Generation {
    fn eq(&self, other: &Generation) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Generation {}

impl fmt::Debug for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Generation")
    }
}

fn fresh_generation() -> Generation {
    Generation(Arc::new(()))
}

/// A `BTreeMap<Uid, V>` with a key-set generation (see the module doc).
#[derive(Clone)]
pub struct UidMap<V> {
    map: BTreeMap<Uid, V>,
    generation: Generation,
}

impl<V> Default for UidMap<V> {
    fn default() -> Self {
        UidMap {
            map: BTreeMap::new(),
            generation: fresh_generation(),
        }
    }
}

impl<V> UidMap<V> {
    /// The key-set generation: equal values mean equal key sets (see the module doc).
    pub fn generation(&self) -> Generation {
        self.generation.clone()
    }

    /// Declares that something a derived answer depends on changed although the key set did
    /// not (e.g. a worker's `restart_requested`): the generation moves on.
    pub fn touch(&mut self) {
        self.generation = fresh_generation();
    }

    /// `BTreeMap::insert`; a new key moves the generation on.
    pub fn insert(&mut self, key: Uid, value: V) -> Option<V> {
        let old = self.map.insert(key, value);
        if old.is_none() {
            self.touch();
        }
        old
    }

    /// `BTreeMap::remove`; a removed key moves the generation on.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        Uid: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let old = self.map.remove(key);
        if old.is_some() {
            self.touch();
        }
        old
    }

    /// `BTreeMap::get_mut`: values may change, keys cannot.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        Uid: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.map.get_mut(key)
    }

    /// `BTreeMap::retain`; the generation moves on if anything was removed.
    pub fn retain(&mut self, f: impl FnMut(&Uid, &mut V) -> bool) {
        let before = self.map.len();
        self.map.retain(f);
        if self.map.len() != before {
            self.touch();
        }
    }
}

impl<V> Deref for UidMap<V> {
    type Target = BTreeMap<Uid, V>;

    fn deref(&self) -> &BTreeMap<Uid, V> {
        &self.map
    }
}

impl<'a, V> IntoIterator for &'a UidMap<V> {
    type Item = (&'a Uid, &'a V);
    type IntoIter = std::collections::btree_map::Iter<'a, Uid, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

/// Equal when the maps are: the generation is not state.
impl<V: PartialEq> PartialEq for UidMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl<V: Eq> Eq for UidMap<V> {}

impl<V: fmt::Debug> fmt::Debug for UidMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.map.fmt(f)
    }
}

impl<V: Serialize> Serialize for UidMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.map.serialize(s)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for UidMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(UidMap {
            map: BTreeMap::deserialize(d)?,
            generation: fresh_generation(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_moves_only_when_the_key_set_changes() {
        let mut m: UidMap<u32> = UidMap::default();
        let g0 = m.generation();
        m.insert(Uid::new("a"), 1);
        let g1 = m.generation();
        assert_ne!(g0, g1, "a new key");
        m.insert(Uid::new("a"), 2);
        *m.get_mut("a").expect("present") = 3;
        m.remove("b");
        m.retain(|_, _| true);
        assert_eq!(m.generation(), g1, "values changed, keys did not");
        m.remove("a");
        assert_ne!(m.generation(), g1, "a removed key");
        let g2 = m.generation();
        m.insert(Uid::new("c"), 1);
        m.retain(|_, _| false);
        assert_ne!(m.generation(), g2);
        m.touch();
        assert_ne!(m.generation(), g2);
    }

    #[test]
    fn generations_of_distinct_maps_never_coincide_but_clones_share_theirs() {
        let a: UidMap<u32> = UidMap::default();
        let b: UidMap<u32> = UidMap::default();
        assert_ne!(a.generation(), b.generation());
        let mut c = a.clone();
        assert_eq!(c.generation(), a.generation());
        c.insert(Uid::new("x"), 1);
        let mut d = a.clone();
        d.insert(Uid::new("y"), 1);
        assert_ne!(c.generation(), d.generation());
        let json = serde_json::to_string(&c).expect("serialise");
        assert_eq!(json, r#"{"x":1}"#, "serialised like the BTreeMap");
        let back: UidMap<u32> = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, c, "equal maps compare equal");
        assert_ne!(
            back.generation(),
            c.generation(),
            "a deserialised map is new"
        );
    }
}
