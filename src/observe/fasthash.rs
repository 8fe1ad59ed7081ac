//! Fast lookups keyed by pod UID for the fold observer, which does them per record: a
//! non-cryptographic hasher (rustc's FxHash).
//!
//! Owns only the hash function. UIDs are not attacker-chosen keys of an
//! unbounded map (the maps are bounded by `MAX_TRACKED_PODS`), so SipHash's flooding
//! resistance buys nothing there and costs more than the lookup. Must not be used for maps
//! whose iteration order reaches output.

use std::hash::{BuildHasherDefault, Hasher};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Uid;

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
