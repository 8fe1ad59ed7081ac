//! The W3C `traceparent` of a record: which span handled it.
//!
//! Owns the compact in-memory form (25 bytes, no heap) and the text form
//! `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>` used in NDJSON lines and in gRPC
//! metadata. Must not create ids or decide sampling: that is `observe::trace`'s job; the core
//! never reads this value.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A W3C trace context (`traceparent` header value, version `00`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

/// Why a `traceparent` string was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid traceparent {value:?}: {reason} (expected 00-<32 hex>-<16 hex>-<2 hex>)")]
pub struct TraceParentError {
    /// The value (at most 64 characters of it).
    pub value: String,
    /// What is wrong.
    pub reason: &'static str,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn unhex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn decode_hex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (unhex(s[2 * i])? << 4) | unhex(s[2 * i + 1])?;
    }
    Some(out)
}

impl TraceParent {
    /// Length of the text form.
    pub const ENCODED_LEN: usize = 55;
    /// The `sampled` bit of the flags.
    pub const SAMPLED: u8 = 0x01;

    /// A context from ids and the sampled flag. Zero ids are invalid in W3C terms; callers
    /// generate non-zero ids.
    pub fn new(trace_id: u128, span_id: u64, sampled: bool) -> TraceParent {
        TraceParent {
            trace_id: trace_id.to_be_bytes(),
            span_id: span_id.to_be_bytes(),
            flags: if sampled { Self::SAMPLED } else { 0 },
        }
    }

    /// A child's context: the same trace and flags, the span `span_id` (non-zero).
    #[inline]
    pub fn child(&self, span_id: u64) -> TraceParent {
        TraceParent {
            trace_id: self.trace_id,
            span_id: span_id.to_be_bytes(),
            flags: self.flags,
        }
    }

    /// The 128-bit trace id.
    pub fn trace_id(&self) -> u128 {
        u128::from_be_bytes(self.trace_id)
    }

    /// The trace id's bytes (big-endian, as in the text form).
    pub fn trace_id_bytes(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The 64-bit span id.
    pub fn span_id(&self) -> u64 {
        u64::from_be_bytes(self.span_id)
    }

    /// The trace flags byte.
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// True if the span was sampled (exported).
    pub fn sampled(&self) -> bool {
        self.flags & Self::SAMPLED != 0
    }

    /// Parses a `traceparent` value. Versions other than `00` are read by their first four
    /// fields, as the W3C spec asks; `ff`, zero ids and malformed hex are errors.
    pub fn parse(s: &str) -> Result<TraceParent, TraceParentError> {
        let err = |reason| TraceParentError {
            value: s.chars().take(64).collect(),
            reason,
        };
        let b = s.trim().as_bytes();
        if b.len() < Self::ENCODED_LEN {
            return Err(err("too short"));
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return Err(err("fields must be separated by '-'"));
        }
        let version: [u8; 1] = decode_hex(&b[0..2]).ok_or_else(|| err("bad version"))?;
        if version[0] == 0xff {
            return Err(err("version ff is invalid"));
        }
        if version[0] == 0 && b.len() != Self::ENCODED_LEN {
            return Err(err("version 00 has exactly 55 characters"));
        }
        if version[0] != 0 && b.len() > Self::ENCODED_LEN && b[Self::ENCODED_LEN] != b'-' {
            return Err(err("fields must be separated by '-'"));
        }
        let trace_id = decode_hex::<16>(&b[3..35]).ok_or_else(|| err("bad trace id"))?;
        let span_id = decode_hex::<8>(&b[36..52]).ok_or_else(|| err("bad span id"))?;
        let flags: [u8; 1] = decode_hex(&b[53..55]).ok_or_else(|| err("bad flags"))?;
        if trace_id == [0; 16] {
            return Err(err("trace id is all zeros"));
        }
        if span_id == [0; 8] {
            return Err(err("span id is all zeros"));
        }
        Ok(TraceParent {
            trace_id,
            span_id,
            flags: flags[0],
        })
    }

    /// The text form as bytes (no allocation).
    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [b'-'; Self::ENCODED_LEN];
        out[0] = b'0';
        out[1] = b'0';
        for (i, byte) in self.trace_id.iter().enumerate() {
            out[3 + 2 * i] = HEX[(byte >> 4) as usize];
            out[4 + 2 * i] = HEX[(byte & 15) as usize];
        }
        for (i, byte) in self.span_id.iter().enumerate() {
            out[36 + 2 * i] = HEX[(byte >> 4) as usize];
            out[37 + 2 * i] = HEX[(byte & 15) as usize];
        }
        out[53] = HEX[(self.flags >> 4) as usize];
        out[54] = HEX[(self.flags & 15) as usize];
        out
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.encode();
        f.write_str(std::str::from_utf8(&bytes).expect("ascii"))
    }
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceParent({self})")
    }
}

impl FromStr for TraceParent {
    type Err = TraceParentError;
    fn from_str(s: &str) -> Result<TraceParent, TraceParentError> {
        TraceParent::parse(s)
    }
}

impl Serialize for TraceParent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.encode();
        s.serialize_str(std::str::from_utf8(&bytes).expect("ascii"))
    }
}

impl<'de> Deserialize<'de> for TraceParent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TraceParent, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        TraceParent::parse(&s).map_err(|e| serde::de::Error::custom(format!("trace: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W3C_EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn round_trips_the_w3c_example() {
        let t = TraceParent::parse(W3C_EXAMPLE).unwrap();
        assert_eq!(t.trace_id(), 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(t.span_id(), 0x00f067aa0ba902b7);
        assert!(t.sampled());
        assert_eq!(t.to_string(), W3C_EXAMPLE);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, format!("\"{W3C_EXAMPLE}\""));
        assert_eq!(serde_json::from_str::<TraceParent>(&json).unwrap(), t);
        assert_eq!(
            TraceParent::new(t.trace_id(), t.span_id(), false).to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        );
    }

    #[test]
    fn a_child_keeps_the_trace_and_flags_with_its_own_span() {
        let t = TraceParent::parse(W3C_EXAMPLE).unwrap();
        let c = t.child(0x1234);
        assert_eq!(c, TraceParent::new(t.trace_id(), 0x1234, true));
        assert_eq!(c.flags(), t.flags());
        let unsampled = TraceParent::new(7, 8, false).child(9);
        assert_eq!(unsampled, TraceParent::new(7, 9, false));
    }

    #[test]
    fn rejects_malformed_values_naming_the_problem() {
        for (bad, reason) in [
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "too short",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "trace id is all zeros",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "span id is all zeros",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version ff is invalid",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "bad trace id",
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "fields must be separated by '-'",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "version 00 has exactly 55 characters",
            ),
        ] {
            let e = TraceParent::parse(bad).unwrap_err();
            assert_eq!(e.reason, reason, "{bad}");
            assert!(e.to_string().contains("invalid traceparent"));
        }
        // a future version with more fields is read by its first four
        assert!(TraceParent::parse(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
        )
        .is_ok());
    }
}
