//! A hasher for map keys that are already hashes: a 64-bit key is its own hash.
//!
//! Owns only that hasher, for the maps whose keys are digests made by a hash function (the
//! ledger's intern table, the fold tracer's rooted pods): hashing them again buys nothing.
//! Must not be used for keys that are not well mixed (they would pile into few buckets), nor
//! for a map whose iteration order reaches output.

use std::hash::{BuildHasherDefault, Hasher};

/// Hands a `u64` key back as its hash; several `u64`s (a tuple key) are xored together, and
/// other bytes are mixed in, so a key of another shape still hashes.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// Builds [`PrehashedHasher`]s, for `HashMap` and `HashSet`.
pub type BuildPrehashed = BuildHasherDefault<PrehashedHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn a_u64_key_is_its_own_hash_and_other_keys_still_hash() {
        let b = BuildPrehashed::default();
        assert_eq!(b.hash_one(0x1234_5678_9abc_def0u64), 0x1234_5678_9abc_def0);
        assert_ne!(b.hash_one("a"), b.hash_one("b"));
    }
}
