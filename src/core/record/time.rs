//! Wall-clock instants as they appear in the ledger.
//!
//! Owns the `Time` value type (nanoseconds since the Unix epoch, UTC) and its RFC 3339
//! text form with nine fractional digits, which is the `at` field of every NDJSON line.
//! It must not read a clock: `Time::from_system` is defined by the ledger, for the shell's
//! append path, never the core.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant in UTC with nanosecond resolution, as nanoseconds since 1970-01-01T00:00:00Z.
///
/// `Time::ZERO` stands for "not set" where the kubelet uses Go's zero `time.Time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(i64);

const NANOS_PER_SEC: i64 = 1_000_000_000;

impl Time {
    /// The Unix epoch.
    pub const ZERO: Time = Time(0);

    /// An instant from nanoseconds since the Unix epoch.
    pub const fn from_unix_nanos(nanos: i64) -> Time {
        Time(nanos)
    }

    /// An instant from whole seconds since the Unix epoch.
    pub const fn from_unix_secs(secs: i64) -> Time {
        Time(secs * NANOS_PER_SEC)
    }

    /// Nanoseconds since the Unix epoch.
    pub const fn unix_nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds since the Unix epoch (rounded towards negative infinity).
    pub const fn unix_secs(self) -> i64 {
        self.0.div_euclid(NANOS_PER_SEC)
    }

    /// `self + ms` milliseconds, saturating.
    pub const fn plus_ms(self, ms: u64) -> Time {
        let add = if ms > (i64::MAX / 1_000_000) as u64 {
            i64::MAX
        } else {
            ms as i64 * 1_000_000
        };
        Time(self.0.saturating_add(add))
    }

    /// `self + d`, saturating.
    pub fn plus(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(d.as_nanos().min(i64::MAX as u128) as i64),
        )
    }

    /// The duration from `earlier` to `self`, or zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        if self.0 <= earlier.0 {
            Duration::ZERO
        } else {
            Duration::from_nanos((self.0 - earlier.0) as u64)
        }
    }

    /// The instant truncated to whole seconds (the API server's RFC 3339 precision).
    pub const fn truncated_to_secs(self) -> Time {
        Time(self.0.div_euclid(NANOS_PER_SEC) * NANOS_PER_SEC)
    }

    /// RFC 3339 with exactly nine fractional digits and `Z`, e.g.
    /// `2026-11-22T10:00:00.000000001Z`. Fixed width so lines diff cleanly.
    pub fn to_rfc3339_nanos(self) -> String {
        self.to_string()
    }

    /// RFC 3339 in whole seconds, e.g. `2026-11-22T10:00:00Z` (Kubernetes `metav1.Time`).
    pub fn to_rfc3339_secs(self) -> String {
        format!("{:.0}", self.timestamp())
    }

    /// As a `jiff` timestamp (every `i64` of nanoseconds is one: 1677 to 2262).
    fn timestamp(self) -> jiff::Timestamp {
        jiff::Timestamp::from_nanosecond(i128::from(self.0)).expect("within jiff's range")
    }

    /// Parses RFC 3339: `YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|±HH:MM)`, fraction of 1–9
    /// digits. `jiff` reads the value; it accepts more spellings than RFC 3339 (basic format,
    /// `±HHMM` offsets, annotations), so the shape is checked first.
    pub fn parse_rfc3339(s: &str) -> Result<Time, TimeParseError> {
        let err = |what: String| TimeParseError {
            input: s.chars().take(64).collect(),
            what,
        };
        if !is_rfc3339(s.as_bytes()) {
            return Err(err(
                "not YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM) with a 1 to 9 digit fraction".into(),
            ));
        }
        let ts: jiff::Timestamp = s.parse().map_err(|e: jiff::Error| err(e.to_string()))?;
        i64::try_from(ts.as_nanosecond())
            .map(Time)
            .map_err(|_| err("instant out of range".into()))
    }
}

/// The shape of an RFC 3339 `date-time`, digits and separators only (no ranges).
fn is_rfc3339(b: &[u8]) -> bool {
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, ok: &[u8]| b.get(i).is_some_and(|c| ok.contains(c));
    if !(digits(0..4)
        && at(4, b"-")
        && digits(5..7)
        && at(7, b"-")
        && digits(8..10)
        && at(10, b"Tt ")
        && digits(11..13)
        && at(13, b":")
        && digits(14..16)
        && at(16, b":")
        && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if at(i, b".") {
        let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&n) {
            return false;
        }
        i += 1 + n;
    }
    match b.len() - i {
        1 => at(i, b"Zz"),
        6 => at(i, b"+-") && digits(i + 1..i + 3) && at(i + 3, b":") && digits(i + 4..i + 6),
        _ => false,
    }
}

/// Why a timestamp could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RFC 3339 timestamp {input:?}: {what}")]
pub struct TimeParseError {
    input: String,
    what: String,
}

/// RFC 3339 with nine fractional digits and `Z`.
impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}", self.timestamp())
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Time;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Time, E> {
                Time::parse_rfc3339(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instant formats to text that parses back to it.
    fn assert_round_trips(nanos: &[i64]) {
        for &n in nanos {
            let t = Time::from_unix_nanos(n);
            assert_eq!(Time::parse_rfc3339(&t.to_rfc3339_nanos()), Ok(t), "{n}");
        }
    }

    #[test]
    fn formats_with_nine_fraction_digits() {
        let t = Time::from_unix_nanos(1_795_000_000_000_000_123);
        assert_eq!(t.to_rfc3339_nanos(), "2026-11-18T11:06:40.000000123Z");
        assert_eq!(t.to_rfc3339_secs(), "2026-11-18T11:06:40Z");
        let zero = Time::ZERO.to_rfc3339_nanos();
        assert_eq!(zero, "1970-01-01T00:00:00.000000000Z");
    }

    #[test]
    fn parses_what_it_formats_and_offsets() {
        assert_round_trips(&[0, 1, 999_999_999, 1_795_000_000_123_456_789, -1]);
        let offset = Time::parse_rfc3339("1970-01-01T01:00:00.5+01:00");
        assert_eq!(offset, Ok(Time::from_unix_nanos(500_000_000)));
        let leap_day = Time::parse_rfc3339("2024-02-29T00:00:00Z");
        assert_eq!(leap_day.map(|t| t.unix_secs()), Ok(1_709_164_800));
    }

    #[test]
    fn every_time_formats_as_thirty_bytes_and_serialises_as_its_text() {
        for n in [
            0i64,
            1,
            -1,
            999_999_999,
            1_767_225_600_034_000_000,
            4_102_444_799_999_999_999,
            -1_000_000_000_000_000_001,
            i64::MAX,
            i64::MIN,
        ] {
            let t = Time::from_unix_nanos(n);
            // i64 nanoseconds reach from 1677 to 2262: always four-digit years
            let text = t.to_rfc3339_nanos();
            assert_eq!(text.len(), 30, "{text}");
            assert!(text.ends_with('Z') && text.as_bytes()[19] == b'.', "{text}");
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.to_rfc3339_nanos()));
            assert_eq!(serde_json::from_str::<Time>(&json).unwrap(), t);
        }
        for (n, want) in [
            (i64::MAX, "2262-04-11T23:47:16.854775807Z"),
            (i64::MIN, "1677-09-21T00:12:43.145224192Z"),
        ] {
            assert_eq!(Time::from_unix_nanos(n).to_rfc3339_nanos(), want);
        }
    }

    #[test]
    fn the_nine_digit_form_parses_to_its_instant_and_range_errors_are_rejected() {
        assert_round_trips(&[
            0,
            -1,
            1,
            951_782_400_000_000_000,   // 2000-02-29
            1_709_164_800_123_456_789, // 2024-02-29
            4_102_444_799_999_999_999, // 2099-12-31T23:59:59.999999999
            i64::MAX,
            i64::MIN,
        ]);
        for bad in [
            "2023-02-29T00:00:00.000000000Z",
            "2024-01-01T24:00:00.000000000Z",
            "2024-00-01T00:00:00.000000000Z",
            "2024-01-32T00:00:00.000000000Z",
            "2024-01-01T00:00:00.00000000aZ",
            "9999-12-31T23:59:59.999999999Z",
            "0000-01-01T00:00:00.000000000Z",
        ] {
            assert!(Time::parse_rfc3339(bad).is_err(), "{bad}");
        }
        // RFC 3339 allows a lower-case `t` and `z`, and a leap second
        for good in [
            "2024-01-01T00:00:60.000000000Z",
            "2024-01-01t00:00:00.000000000Z",
            "2024-01-01T00:00:00.000000000z",
        ] {
            assert!(Time::parse_rfc3339(good).is_ok(), "{good}");
        }
        let lower = Time::parse_rfc3339("2024-01-01t00:00:00.000000000z");
        assert_eq!(lower, Time::parse_rfc3339("2024-01-01T00:00:00Z"));
    }

    #[test]
    fn rejects_malformed_timestamps_with_a_reason() {
        for bad in [
            "",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00.1234567890Z",
            "2024-01-01 00:00:00+0100",
            // what jiff alone would accept
            "20240101T000000Z",
            "2024-01-01T00:00:00+01",
            "2024-01-01T00:00:00Z[UTC]",
            "2024-01-01T00:00Z",
            "+002024-01-01T00:00:00Z",
            "2024-01-01T00:00:00,5Z",
            "2024-01-01T00:00:00+01:00:00",
            "2024-01-01T00:00:00.123456789+01:00[Europe/Paris]",
        ] {
            let e = Time::parse_rfc3339(bad).unwrap_err();
            assert!(!e.to_string().is_empty(), "{bad}");
        }
    }
}
