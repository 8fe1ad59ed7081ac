//! Pod identity: the `Uid` value type.
//!
//! Owns nothing but the type; cheap to clone (shared string) because the core keys many
//! maps by it. Must not allocate per comparison or depend on hashing.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A pod UID (`metadata.uid`), or the UID of a runtime-only pod found in the container runtime.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uid(Arc<str>);

impl Uid {
    /// A UID from its text.
    pub fn new(s: impl AsRef<str>) -> Uid {
        Uid(Arc::from(s.as_ref()))
    }

    /// The UID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Uid {
        Uid::new(s)
    }
}

impl From<String> for Uid {
    fn from(s: String) -> Uid {
        Uid(Arc::from(s))
    }
}

impl Serialize for Uid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Uid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Uid, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Uid::new(s))
    }
}
