//! Fast lookups keyed by pod UID for the fold observer, which does them per record: a
//! non-cryptographic hasher (rustc's FxHash) and a bounded cache from a UID's text to the
//! shared [`Uid`] the pod workers hold.
//!
//! Owns only the hash function and the cache. UIDs are not attacker-chosen keys of an
//! unbounded map (the maps are bounded by `MAX_TRACKED_PODS`), so SipHash's flooding
//! resistance buys nothing there and costs more than the lookup. Must not be used for maps
//! whose iteration order reaches output.

use std::hash::{BuildHasherDefault, Hasher};

use crate::core::Uid;

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// rustc's FxHasher: a rotate, xor and multiply per word.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, mut bytes: &[u8]) {
        while bytes.len() >= 8 {
            let (w, rest) = bytes.split_at(8);
            self.add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
            bytes = rest;
        }
        if bytes.len() >= 4 {
            let (w, rest) = bytes.split_at(4);
            self.add(u64::from(u32::from_le_bytes(
                w.try_into().expect("4 bytes"),
            )));
            bytes = rest;
        }
        for b in bytes {
            self.add(u64::from(*b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// Sets of a [`UidCache`] (a power of two); each holds two UIDs.
pub const UID_CACHE_SETS: usize = 2048;
/// The longest UID text a [`UidCache`] keeps (a UUID has 36 characters).
pub const UID_CACHE_MAX_LEN: usize = 37;

/// One cached UID: the shared `Uid`, a tag its user keeps with it, and its text inline
/// (compared without touching the heap), in one cache line.
#[derive(Clone)]
#[repr(C, align(64))]
struct Slot {
    uid: Option<Uid>,
    tag: u16,
    len: u8,
    text: [u8; UID_CACHE_MAX_LEN],
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            uid: None,
            tag: 0,
            len: 0,
            text: [0; UID_CACHE_MAX_LEN],
        }
    }
}

impl Slot {
    #[inline]
    fn holds(&self, text: &[u8]) -> bool {
        usize::from(self.len) == text.len() && self.text[..text.len()] == *text
    }
}

/// A bounded cache from a UID's text to a `Uid` (a pod's `metadata.uid` is text, but maps
/// keyed by `Uid` compare an inline prefix first, which is several times faster than comparing
/// text). Two-way set associative, the text kept inline so a hit reads one cache line; a hit
/// is an exact text match, so a collision only costs a miss. [`UID_CACHE_SETS`] × 2 entries
/// at most; longer texts than [`UID_CACHE_MAX_LEN`] are never cached. Each entry carries a
/// `u16` tag for its user, 0 when the entry is (re)filled.
pub struct UidCache {
    slots: Box<[Slot]>,
}

impl Default for UidCache {
    fn default() -> Self {
        UidCache {
            slots: vec![Slot::default(); 2 * UID_CACHE_SETS].into_boxed_slice(),
        }
    }
}

impl std::fmt::Debug for UidCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.slots.iter().filter(|s| s.uid.is_some()).count();
        f.debug_struct("UidCache").field("used", &used).finish()
    }
}

impl UidCache {
    #[inline]
    fn set(text: &[u8]) -> usize {
        let mut h = FxHasher::default();
        h.write(text);
        // the high bits of a multiplicative hash are the well-mixed ones
        2 * ((h.finish() >> 40) as usize & (UID_CACHE_SETS - 1))
    }

    /// The slot of the cached `Uid` with this text, if there is one.
    #[inline]
    pub fn find(&self, text: &str) -> Option<usize> {
        let bytes = text.as_bytes();
        if bytes.len() > UID_CACHE_MAX_LEN {
            return None;
        }
        let set = Self::set(bytes);
        [set, set + 1]
            .into_iter()
            .find(|i| self.slots[*i].holds(bytes) && self.slots[*i].uid.is_some())
    }

    /// The slot of the cached `Uid` with this text, else `miss()` is asked and its answer
    /// remembered (`None` when it has none, or the text is too long to cache).
    #[inline]
    pub fn find_or(&mut self, text: &str, miss: impl FnOnce() -> Option<Uid>) -> Option<usize> {
        let bytes = text.as_bytes();
        if bytes.len() > UID_CACHE_MAX_LEN {
            return None;
        }
        let set = Self::set(bytes);
        for i in [set, set + 1] {
            if self.slots[i].holds(bytes) && self.slots[i].uid.is_some() {
                return Some(i);
            }
        }
        self.fill(set, bytes, miss)
    }

    #[cold]
    #[inline(never)]
    fn fill(
        &mut self,
        set: usize,
        bytes: &[u8],
        miss: impl FnOnce() -> Option<Uid>,
    ) -> Option<usize> {
        let found = miss()?;
        debug_assert_eq!(found.as_str().as_bytes(), bytes);
        // the newest entry goes first; the older one moves to the second way
        self.slots.swap(set, set + 1);
        let slot = &mut self.slots[set];
        slot.len = bytes.len() as u8;
        slot.text[..bytes.len()].copy_from_slice(bytes);
        slot.uid = Some(found);
        slot.tag = 0;
        Some(set)
    }

    /// The `Uid` in a slot [`UidCache::find_or`] returned.
    #[inline]
    pub fn at(&self, slot: usize) -> &Uid {
        self.slots[slot].uid.as_ref().expect("a filled slot")
    }

    /// The tag of a slot.
    #[inline]
    pub fn tag(&self, slot: usize) -> u16 {
        self.slots[slot].tag
    }

    /// Sets the tag of a slot.
    #[inline]
    pub fn set_tag(&mut self, slot: usize, tag: u16) {
        self.slots[slot].tag = tag;
    }

    /// Sets every tag to 0.
    pub fn clear_tags(&mut self) {
        for s in self.slots.iter_mut() {
            s.tag = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uid_cache_answers_by_text_and_asks_only_on_a_miss() {
        let mut c = UidCache::default();
        let asked = std::cell::Cell::new(0);
        let ask = |t: &str| {
            asked.set(asked.get() + 1);
            Some(Uid::new(t))
        };
        let get = |c: &mut UidCache, t: &str, miss: &dyn Fn() -> Option<Uid>| {
            c.find_or(t, miss).map(|i| c.at(i).as_str().to_string())
        };
        for i in 0..3 * UID_CACHE_SETS {
            let t = format!("uid-{i}");
            assert_eq!(get(&mut c, &t, &|| ask(&t)), Some(t.clone()));
        }
        let misses = asked.get();
        assert_eq!(misses, 3 * UID_CACHE_SETS);
        // the latest texts are still there (only set collisions evict, oldest first)
        let t = format!("uid-{}", 3 * UID_CACHE_SETS - 1);
        assert_eq!(get(&mut c, &t, &|| ask(&t)), Some(t.clone()));
        assert_eq!(asked.get(), misses);
        // a miss that finds nothing is not remembered
        assert!(get(&mut c, "nope", &|| None).is_none());
        assert!(c.find("nope").is_none());
        // tags stay with their entry until it is refilled
        let i = c.find(&t).expect("cached");
        c.set_tag(i, 7);
        assert_eq!(c.tag(c.find(&t).unwrap()), 7);
        c.clear_tags();
        assert_eq!(c.tag(i), 0);
        assert!(c.slots.iter().all(|s| !s.holds(b"nope")));
        assert_eq!(c.slots.len(), 2 * UID_CACHE_SETS);
        // a text too long to cache is not looked for (the caller compares text instead)
        let long = "x".repeat(UID_CACHE_MAX_LEN + 1);
        let before = asked.get();
        assert!(c.find_or(&long, || ask(&long)).is_none());
        assert_eq!(asked.get(), before);
    }

    #[test]
    fn a_uid_is_found_by_its_text() {
        let mut m: FxHashMap<Uid, u32> = FxHashMap::default();
        for i in 0..1000u32 {
            m.insert(Uid::new(format!("uid-{i}")), i);
        }
        for i in 0..1000u32 {
            assert_eq!(m.get(format!("uid-{i}").as_str()), Some(&i));
        }
        assert_eq!(m.get("uid-1000"), None);
    }
}
