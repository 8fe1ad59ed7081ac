//! Fast lookups keyed by pod UID for the fold observer, which does them per record: a hasher
//! that reads a UID's first and last eight bytes and its length, not all 36 bytes.
//!
//! Owns the hash function and [`UidKey`] (those bytes held inline, which the hash is made
//! of). UIDs are not attacker-chosen keys of an unbounded map (the
//! API server assigns them, and the maps are bounded by `MAX_TRACKED_PODS`), so SipHash's
//! flooding resistance buys nothing there and costs more than the lookup. A UUID (or a
//! static pod's 32-hex-digit hash) has 64 random bits in those 16 bytes; UIDs that differ
//! only in their middle bytes share a bucket and are told apart by comparing their text, so
//! they are slower to find, never confused. Must not be used for maps whose iteration order
//! reaches output.

use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by UID (or its text) with [`UidHasher`].
pub type UidHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<UidHasher>>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// Hashes text by its first and last eight bytes and its length (a `Uid` hashes as its
/// text, so a map keyed by `Uid` is looked up by `&str`).
#[derive(Clone, Copy, Debug, Default)]
pub struct UidHasher {
    hash: u64,
}

impl UidHasher {
    /// rustc's FxHash step: a rotate, xor and multiply.
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }

    /// Adds the words a text is hashed by (its [`UidKey`]).
    #[inline]
    fn add_key(&mut self, k: &UidKey) {
        self.add(k.head);
        self.add(k.tail);
        self.add(k.len);
    }
}

#[inline]
fn load8(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

impl Hasher for UidHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.add_key(&UidKey::of_bytes(bytes));
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

    /// The state through MurmurHash3's finalizer: the map takes its bucket from the low bits
    /// and its tag from the high ones, and a multiply alone leaves the low bits depending on
    /// the low bytes (the first characters) only.
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A pod's key where a lookup must not read the UID's text out of line: its first and last
/// eight bytes and its length, held inline (24 bytes). Two UIDs with the same key are the
/// same pod to whoever uses it: UIDs whose first and last eight bytes and length agree and
/// whose middles differ. A UUID has 64 random bits in those 16 bytes, so among the 16,384
/// pods the fold tracer remembers two share a key with a probability of about 10⁻¹¹; use it
/// only where that mistake is harmless (a span joining another pod's trace), never for state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UidKey {
    head: u64,
    tail: u64,
    len: u64,
}

impl UidKey {
    /// The key of a UID's text.
    #[inline]
    pub fn of(uid: &str) -> UidKey {
        UidKey::of_bytes(uid.as_bytes())
    }

    /// 64 bits mixed from the key and `seed`: the same key and seed always give the same
    /// value, other seeds values that look independent of it (ids derived from a pod's UID,
    /// not secrets).
    #[inline]
    pub fn digest(&self, seed: u64) -> u64 {
        let mut h = UidHasher { hash: seed };
        h.add_key(self);
        h.finish()
    }

    /// The key of text given as bytes (what [`UidHasher`] hashes).
    #[inline]
    fn of_bytes(b: &[u8]) -> UidKey {
        let n = b.len();
        if n >= 8 {
            UidKey {
                head: load8(&b[..8]),
                tail: load8(&b[n - 8..]),
                len: n as u64,
            }
        } else {
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(b);
            UidKey {
                head: u64::from_le_bytes(w),
                tail: 0,
                len: n as u64,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Uid;

    #[test]
    fn a_uid_is_found_by_its_text() {
        let mut m: UidHashMap<Uid, u32> = UidHashMap::default();
        for i in 0..1000u32 {
            m.insert(Uid::new(format!("uid-{i}")), i);
        }
        for i in 0..1000u32 {
            assert_eq!(m.get(format!("uid-{i}").as_str()), Some(&i));
        }
        assert_eq!(m.get("uid-1000"), None);
    }

    #[test]
    fn uids_that_differ_only_in_the_middle_are_told_apart() {
        // same first and last eight bytes and length: one hash, distinct keys
        let uids: Vec<String> = (0..300)
            .map(|i| format!("aaaaaaaa-{i:04}-4000-8000-bbbbbbbbbbbb"))
            .collect();
        let mut m: UidHashMap<Uid, usize> = UidHashMap::default();
        for (i, u) in uids.iter().enumerate() {
            m.insert(Uid::new(u), i);
        }
        assert_eq!(m.len(), uids.len());
        for (i, u) in uids.iter().enumerate() {
            assert_eq!(m.get(u.as_str()), Some(&i));
        }
        assert_eq!(m.get("aaaaaaaa-9999-4000-8000-bbbbbbbbbbbb"), None);
    }

    #[test]
    fn a_uid_key_holds_the_ends_and_the_length() {
        let a = "0b9c8a1e-5f7d-4c3e-9a2b-1c2d3e4f5a6b";
        assert_eq!(UidKey::of(a), UidKey::of(String::from(a).as_str()));
        assert_ne!(
            UidKey::of(a),
            UidKey::of("1b9c8a1e-5f7d-4c3e-9a2b-1c2d3e4f5a6b")
        );
        assert_ne!(
            UidKey::of(a),
            UidKey::of("0b9c8a1e-5f7d-4c3e-9a2b-1c2d3e4f5a6c")
        );
        assert_ne!(
            UidKey::of(a),
            UidKey::of("0b9c8a1e-5f7d-4c3e-9a2b-01c2d3e4f5a6b")
        );
        // short UIDs are held whole
        assert_ne!(UidKey::of("pod-1"), UidKey::of("pod-2"));
        assert_ne!(UidKey::of("pod"), UidKey::of("pod\0"));
        assert_ne!(UidKey::of("pod-1-x"), UidKey::of("pod-1-y"));
        assert_ne!(UidKey::of("static-pod-01"), UidKey::of("static-pod-02"));
        // the documented limit: a difference only in the middle of a long UID is not seen
        assert_eq!(
            UidKey::of("0b9c8a1e-5f7d-4c3e-9a2b-1c2d3e4f5a6b"),
            UidKey::of("0b9c8a1e-0000-4c3e-9a2b-1c2d3e4f5a6b")
        );
    }

    #[test]
    fn uuids_spread_over_the_buckets() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<UidHasher>::default();
        let buckets = 1024usize;
        let mut counts = vec![0u32; buckets];
        for i in 0..(8 * buckets as u64) {
            let u = crate::sim::scenarios::uuid_v4(i);
            counts[(b.hash_one(u.as_str()) as usize) & (buckets - 1)] += 1;
        }
        // 8 per bucket on average; a hash that kept only the first characters would pile
        // them into a few dozen buckets
        let max = counts.iter().copied().max().unwrap_or(0);
        let empty = counts.iter().filter(|c| **c == 0).count();
        assert!(max <= 24, "fullest bucket holds {max}");
        assert!(empty <= buckets / 100, "{empty} empty buckets");
    }
}
