//! A map that remembers at most a fixed number of keys, forgetting the oldest inserted first.
//!
//! Owns the bound and the insertion order, for the places that remember what they have seen
//! (secret values to redact, Kubernetes events to correlate)
//! and must not grow without limit. Must not do I/O; iteration is in key order (a
//! `BTreeMap`), never in hash order.

use std::borrow::Borrow;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

/// A `BTreeMap` of at most `capacity` entries; inserting a new key into a full map forgets
/// the key inserted longest ago.
#[derive(Clone, Debug)]
pub struct BoundedMap<K, V> {
    map: BTreeMap<K, V>,
    /// The keys in the order they were first inserted.
    order: VecDeque<K>,
    capacity: usize,
}

impl<K: Ord + Clone, V> BoundedMap<K, V> {
    /// An empty map of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> BoundedMap<K, V> {
        BoundedMap {
            map: BTreeMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Sets `key` to `value`. A key already present keeps its place in the order; a new key
    /// into a full map first forgets the oldest one, which is returned.
    pub fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        if let Some(v) = self.map.get_mut(&key) {
            *v = value;
            return None;
        }
        let forgotten = self.forget_oldest_if_full();
        self.order.push_back(key.clone());
        self.map.insert(key, value);
        forgotten
    }

    /// Remembers `key` with `value` if it is not remembered yet (a new key into a full map
    /// first forgets the oldest one); true if it was new. A remembered key keeps its value and
    /// its place. While the map has room this searches it once.
    pub fn insert_new(&mut self, key: K, value: V) -> bool {
        if self.map.len() >= self.capacity && !self.map.contains_key(&key) {
            self.forget_oldest_if_full();
        }
        match self.map.entry(key) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                self.order.push_back(v.key().clone());
                v.insert(value);
                true
            }
        }
    }

    /// Makes room for one new key: in a full map, forgets the oldest one and returns it.
    fn forget_oldest_if_full(&mut self) -> Option<(K, V)> {
        if self.map.len() < self.capacity {
            return None;
        }
        let oldest = self.order.pop_front()?;
        self.map.remove_entry(&oldest)
    }

    /// True if `key` is remembered.
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.map.contains_key(key)
    }

    /// The value of `key`, to change.
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.map.get_mut(key)
    }

    /// Entries remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The entries, in key order.
    pub fn as_map(&self) -> &BTreeMap<K, V> {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_map_forgets_the_oldest_key_and_a_key_set_again_keeps_its_place() {
        let mut m = BoundedMap::new(2);
        assert_eq!(m.insert("a", 1), None);
        assert_eq!(m.insert("b", 2), None);
        // setting "a" again changes its value, not its age
        assert_eq!(m.insert("a", 10), None);
        assert_eq!(m.insert("c", 3), Some(("a", 10)));
        assert_eq!(m.len(), 2);
        assert!(!m.contains_key("a"));
        assert_eq!(m.get_mut("b"), Some(&mut 2));
        assert_eq!(m.insert("d", 4), Some(("b", 2)));
        assert_eq!(
            m.as_map().iter().collect::<Vec<_>>(),
            vec![(&"c", &3), (&"d", &4)]
        );
    }

    #[test]
    fn insert_new_remembers_a_key_once_and_forgets_the_oldest_when_full() {
        let mut m = BoundedMap::new(2);
        assert!(m.insert_new("a", 1));
        assert!(m.insert_new("b", 2));
        // a remembered key keeps its value and its age
        assert!(!m.insert_new("a", 10));
        assert!(!m.insert_new("b", 20));
        assert!(m.insert_new("c", 3));
        assert!(!m.contains_key("a"));
        assert!(!m.insert_new("c", 30));
        assert!(m.insert_new("d", 4));
        assert_eq!(
            m.as_map().iter().collect::<Vec<_>>(),
            vec![(&"c", &3), (&"d", &4)]
        );
        // the same order as `insert`: "a" and "b" were forgotten first
        let mut n = BoundedMap::new(2);
        for k in ["a", "b", "a", "c", "c", "d"] {
            n.insert_new(k, ());
        }
        assert_eq!(n.as_map().keys().collect::<Vec<_>>(), vec![&"c", &"d"]);
    }

    #[test]
    fn capacity_is_at_least_one() {
        let mut m = BoundedMap::new(0);
        assert_eq!(m.insert(1, ()), None);
        assert_eq!(m.insert(2, ()), Some((1, ())));
        assert_eq!(m.len(), 1);
    }
}
