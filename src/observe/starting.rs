//! A map keyed by pod UID that answers "not here" for most UIDs without hashing them: the
//! fold observer's pods between their first sighting and their start, looked up for records
//! about every pod while any pod is starting.
//!
//! Owns the map and a counting filter over each UID's first eight bytes (random in a UUID):
//! a UID whose filter count is zero is not in the map, so a record about a pod that started
//! long ago costs one load instead of hashing its 36 bytes and probing the map. Must not
//! decide what is kept (the observer does).

use crate::core::Uid;

use super::fasthash::UidHashMap;

/// Filter counters (a power of two; 16 KiB, so the filter stays in the L1/L2 cache).
const FILTER_LEN: usize = 4096;

/// The filter counter of a UID.
#[inline]
fn slot(uid: &str) -> usize {
    let b = uid.as_bytes();
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    // multiplicative hashing of the first eight bytes: the top bits mix all of them
    (u64::from_le_bytes(w).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - 12)) as usize
}

/// A map by pod UID with a counting filter in front of it.
pub struct FilteredUidMap<V> {
    map: UidHashMap<Uid, V>,
    filter: Box<[u32]>,
}

impl<V> Default for FilteredUidMap<V> {
    fn default() -> Self {
        FilteredUidMap {
            map: UidHashMap::default(),
            filter: vec![0; FILTER_LEN].into_boxed_slice(),
        }
    }
}

impl<V> FilteredUidMap<V> {
    /// Entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if there is no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// True if `uid` has an entry.
    #[inline]
    pub fn contains_key(&self, uid: &str) -> bool {
        self.filter[slot(uid)] != 0 && self.map.contains_key(uid)
    }

    /// The entry of `uid`.
    #[inline]
    pub fn get_mut(&mut self, uid: &str) -> Option<&mut V> {
        if self.filter[slot(uid)] == 0 {
            return None;
        }
        self.map.get_mut(uid)
    }

    /// Adds or replaces the entry of `uid`.
    pub fn insert(&mut self, uid: Uid, value: V) {
        let s = slot(uid.as_str());
        if self.map.insert(uid, value).is_none() {
            self.filter[s] += 1;
        }
    }

    /// Removes the entry of `uid`, if any.
    #[inline]
    pub fn remove(&mut self, uid: &str) -> Option<V> {
        let s = slot(uid);
        if self.filter[s] == 0 {
            return None;
        }
        let v = self.map.remove(uid)?;
        self.filter[s] -= 1;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_never_hides_an_entry_and_forgets_removed_ones() {
        let mut m = FilteredUidMap::default();
        // more UIDs than counters, so counters are shared
        let uids: Vec<String> = (0..10_000)
            .map(|i| format!("{:08x}-0000-4000-8000-{i:012x}", i * 7919))
            .collect();
        for (i, u) in uids.iter().enumerate() {
            m.insert(Uid::new(u), i);
        }
        m.insert(Uid::new(&uids[3]), 3);
        assert_eq!(m.len(), uids.len());
        for (i, u) in uids.iter().enumerate() {
            assert_eq!(m.get_mut(u).copied(), Some(i), "{u}");
        }
        for u in uids.iter().step_by(2) {
            assert!(m.remove(u).is_some());
            assert!(m.remove(u).is_none());
        }
        for (i, u) in uids.iter().enumerate() {
            assert_eq!(m.contains_key(u), i % 2 == 1, "{u}");
        }
        for u in uids.iter().skip(1).step_by(2) {
            assert!(m.remove(u).is_some());
        }
        assert!(m.is_empty());
        assert!(m.filter.iter().all(|c| *c == 0));
        assert!(m.get_mut("").is_none());
        m.insert(Uid::new(""), 1);
        assert_eq!(m.get_mut("").copied(), Some(1));
    }
}
