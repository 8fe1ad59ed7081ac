//! Pod identity: the `Uid` value type.
//!
//! Owns nothing but the type; cheap to clone (shared string) because the core keys many
//! maps by it. Must not allocate per comparison or depend on hashing.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A pod UID (`metadata.uid`), or the UID of a runtime-only pod found in the container runtime.
///
/// Ordering and equality are exactly those of the text. The first eight bytes are kept
/// inline as a big-endian integer, so comparing two UIDs (the core keys every map by them)
/// usually costs one integer comparison instead of a string comparison.
#[derive(Clone)]
pub struct Uid {
    prefix: u64,
    text: Arc<str>,
}

fn prefix_of(s: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = s.len().min(8);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
    u64::from_be_bytes(b)
}

impl Uid {
    /// A UID from its text.
    pub fn new(s: impl AsRef<str>) -> Uid {
        let s = s.as_ref();
        Uid {
            prefix: prefix_of(s),
            text: Arc::from(s),
        }
    }

    /// The UID as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Uid {
    fn eq(&self, other: &Uid) -> bool {
        self.prefix == other.prefix
            && (Arc::ptr_eq(&self.text, &other.text) || self.text == other.text)
    }
}

impl Eq for Uid {}

impl PartialOrd for Uid {
    fn partial_cmp(&self, other: &Uid) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Uid {
    fn cmp(&self, other: &Uid) -> std::cmp::Ordering {
        // Big-endian prefixes order like the bytes they hold; a tie on the prefix (or a
        // string shorter than 8 bytes, zero-padded) falls back to the full text.
        self.prefix.cmp(&other.prefix).then_with(|| {
            if Arc::ptr_eq(&self.text, &other.text) {
                std::cmp::Ordering::Equal
            } else {
                self.text.cmp(&other.text)
            }
        })
    }
}

impl std::hash::Hash for Uid {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.text.hash(h)
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

// Ord and Eq of `Uid` are those of the text, so maps keyed by `Uid` can be searched by
// `&str` without allocating.
impl std::borrow::Borrow<str> for Uid {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Uid {
        Uid::new(s)
    }
}

impl From<String> for Uid {
    fn from(s: String) -> Uid {
        Uid::new(s)
    }
}

impl Serialize for Uid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Uid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Uid, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Uid::new(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_and_equality_are_those_of_the_text() {
        let samples = [
            "",
            "a",
            "a\u{1}",
            "ab",
            "abcdefgh",
            "abcdefgh0",
            "abcdefgi",
            "b",
            "z",
            "00000000-0000-4000-8000-000000000001",
            "00000000-0000-4000-8000-000000000002",
            "0f0e0d0c-0000-4000-8000-000000000099",
            "\u{ff}",
            "é",
        ];
        for a in samples {
            for b in samples {
                let (ua, ub) = (Uid::new(a), Uid::new(b));
                assert_eq!(ua.cmp(&ub), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(ua == ub, a == b, "{a:?} vs {b:?}");
            }
        }
    }
}
