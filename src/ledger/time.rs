//! Wall-clock instants as they appear in the ledger.
//!
//! Owns the `Time` value type (nanoseconds since the Unix epoch, UTC) and its RFC 3339
//! text form with nine fractional digits, which is the `at` field of every NDJSON line.
//! It must not read a clock: the only place a `Time` is created from the system clock is
//! the shell's append path (`Time::from_system`, used by the daemon, never by `core`).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant in UTC with nanosecond resolution, as nanoseconds since 1970-01-01T00:00:00Z.
///
/// `Time::ZERO` stands for "not set" where the kubelet uses Go's zero `time.Time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(i64);

const NANOS_PER_SEC: i64 = 1_000_000_000;
const SECS_PER_DAY: i64 = 86_400;

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

    /// The current system time. Shell only: `core` must never call this.
    pub fn from_system() -> Time {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => Time(d.as_nanos().min(i64::MAX as u128) as i64),
            Err(e) => Time(-(e.duration().as_nanos().min(i64::MAX as u128) as i64)),
        }
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
        let mut s = String::with_capacity(30);
        self.write_rfc3339(&mut s, true);
        s
    }

    /// RFC 3339 in whole seconds, e.g. `2026-11-22T10:00:00Z` (Kubernetes `metav1.Time`).
    pub fn to_rfc3339_secs(self) -> String {
        let mut s = String::with_capacity(20);
        self.write_rfc3339(&mut s, false);
        s
    }

    /// `to_rfc3339_nanos` without allocating or formatting machinery, for years 0–9999
    /// (every `Time`: i64 nanoseconds reach from 1677 to 2262); `None` outside them.
    pub fn rfc3339_nanos_bytes(self) -> Option<[u8; 30]> {
        let secs = self.0.div_euclid(NANOS_PER_SEC);
        let frac = self.0.rem_euclid(NANOS_PER_SEC);
        let days = secs.div_euclid(SECS_PER_DAY);
        let sod = secs.rem_euclid(SECS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return None;
        }
        let mut out = *b"0000-00-00T00:00:00.000000000Z";
        let mut put = |at: usize, width: usize, mut v: i64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, 4, y);
        put(5, 2, m);
        put(8, 2, d);
        put(11, 2, sod / 3600);
        put(14, 2, (sod / 60) % 60);
        put(17, 2, sod % 60);
        put(20, 9, frac);
        Some(out)
    }

    fn write_rfc3339(self, out: &mut String, nanos: bool) {
        use fmt::Write;
        let secs = self.0.div_euclid(NANOS_PER_SEC);
        let frac = self.0.rem_euclid(NANOS_PER_SEC);
        let days = secs.div_euclid(SECS_PER_DAY);
        let sod = secs.rem_euclid(SECS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        let _ = write!(
            out,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            y,
            m,
            d,
            sod / 3600,
            (sod / 60) % 60,
            sod % 60
        );
        if nanos {
            let _ = write!(out, ".{frac:09}");
        }
        out.push('Z');
    }

    /// Parses RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, fraction of 1–9 digits.
    pub fn parse_rfc3339(s: &str) -> Result<Time, TimeParseError> {
        match Time::parse_canonical(s.as_bytes()) {
            Some(t) => Ok(t),
            None => Time::parse_general(s),
        }
    }

    /// The form this module writes (`YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, every ledger `at`),
    /// parsed without the general parser's branches; `None` for anything else (including
    /// out-of-range fields), which the general parser then handles or rejects.
    #[inline]
    pub(crate) fn parse_canonical(b: &[u8]) -> Option<Time> {
        let b: &[u8; 30] = b.try_into().ok()?;
        if b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'.'
            || b[29] != b'Z'
        {
            return None;
        }
        let mut bad = 0u8;
        let mut digit = |i: usize| {
            let d = b[i].wrapping_sub(b'0');
            bad |= u8::from(d > 9);
            i64::from(d)
        };
        let year = digit(0) * 1000 + digit(1) * 100 + digit(2) * 10 + digit(3);
        let month = digit(5) * 10 + digit(6);
        let day = digit(8) * 10 + digit(9);
        let hour = digit(11) * 10 + digit(12);
        let minute = digit(14) * 10 + digit(15);
        let second = digit(17) * 10 + digit(18);
        let mut frac = 0i64;
        for i in 20..29 {
            frac = frac * 10 + digit(i);
        }
        if bad != 0
            || !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let secs =
            days_from_civil(year, month, day) * SECS_PER_DAY + hour * 3600 + minute * 60 + second;
        // only about ±292 years around 1970 fit in i64 nanoseconds: checked as the general
        // parser checks
        secs.checked_mul(NANOS_PER_SEC)
            .and_then(|n| n.checked_add(frac))
            .map(Time)
    }

    fn parse_general(s: &str) -> Result<Time, TimeParseError> {
        let err = |what: &'static str| TimeParseError {
            input: s.chars().take(64).collect(),
            what,
        };
        let b = s.as_bytes();
        if b.len() < 20 {
            return Err(err("too short for RFC 3339"));
        }
        let num =
            |range: std::ops::Range<usize>, what: &'static str| -> Result<i64, TimeParseError> {
                let part = &b[range];
                if !part.iter().all(u8::is_ascii_digit) {
                    return Err(err(what));
                }
                Ok(part
                    .iter()
                    .fold(0i64, |acc, c| acc * 10 + i64::from(c - b'0')))
            };
        let year = num(0..4, "year is not 4 digits")?;
        if b[4] != b'-' || b[7] != b'-' {
            return Err(err("expected '-' between date parts"));
        }
        let month = num(5..7, "month is not 2 digits")?;
        let day = num(8..10, "day is not 2 digits")?;
        if b[10] != b'T' && b[10] != b't' && b[10] != b' ' {
            return Err(err("expected 'T' between date and time"));
        }
        let hour = num(11..13, "hour is not 2 digits")?;
        if b[13] != b':' || b[16] != b':' {
            return Err(err("expected ':' between time parts"));
        }
        let minute = num(14..16, "minute is not 2 digits")?;
        let second = num(17..19, "second is not 2 digits")?;
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return Err(err("date or time out of range"));
        }
        let mut i = 19;
        let mut frac: i64 = 0;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = i - start;
            if digits == 0 || digits > 9 {
                return Err(err("fraction must have 1 to 9 digits"));
            }
            frac = num(start..i, "fraction is not digits")? * 10i64.pow(9 - digits as u32);
        }
        let offset_secs = match b.get(i) {
            Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
            Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
                let oh = num(i + 1..i + 3, "offset hour is not 2 digits")?;
                let om = num(i + 4..i + 6, "offset minute is not 2 digits")?;
                let o = oh * 3600 + om * 60;
                if *sign == b'+' {
                    o
                } else {
                    -o
                }
            }
            _ => return Err(err("expected 'Z' or an offset like +01:00 at the end")),
        };
        let days = days_from_civil(year, month, day);
        let secs = days * SECS_PER_DAY + hour * 3600 + minute * 60 + second - offset_secs;
        secs.checked_mul(NANOS_PER_SEC)
            .and_then(|n| n.checked_add(frac))
            .map(Time)
            .ok_or_else(|| err("instant out of range"))
    }
}

/// Why a timestamp could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RFC 3339 timestamp {input:?}: {what}")]
pub struct TimeParseError {
    input: String,
    what: &'static str,
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339_nanos())
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.rfc3339_nanos_bytes() {
            Some(b) => s.serialize_str(std::str::from_utf8(&b).expect("ASCII digits")),
            None => s.serialize_str(&self.to_rfc3339_nanos()),
        }
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

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_nine_fraction_digits() {
        let t = Time::from_unix_nanos(1_795_000_000_000_000_123);
        assert_eq!(t.to_rfc3339_nanos(), "2026-11-18T11:06:40.000000123Z");
        assert_eq!(t.to_rfc3339_secs(), "2026-11-18T11:06:40Z");
        assert_eq!(
            Time::ZERO.to_rfc3339_nanos(),
            "1970-01-01T00:00:00.000000000Z"
        );
    }

    #[test]
    fn parses_what_it_formats_and_offsets() {
        for n in [0i64, 1, 999_999_999, 1_795_000_000_123_456_789, -1] {
            let t = Time::from_unix_nanos(n);
            assert_eq!(Time::parse_rfc3339(&t.to_rfc3339_nanos()), Ok(t));
        }
        assert_eq!(
            Time::parse_rfc3339("1970-01-01T01:00:00.5+01:00"),
            Ok(Time::from_unix_nanos(500_000_000))
        );
        assert_eq!(
            Time::parse_rfc3339("2024-02-29T00:00:00Z").map(|t| t.unix_secs()),
            Ok(1_709_164_800)
        );
    }

    #[test]
    fn formatting_without_fmt_gives_the_same_text() {
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
            let b = t.rfc3339_nanos_bytes().expect("a four-digit year");
            assert_eq!(std::str::from_utf8(&b).unwrap(), t.to_rfc3339_nanos());
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.to_rfc3339_nanos()));
        }
    }

    #[test]
    fn the_canonical_fast_path_agrees_with_the_general_parser() {
        let mut inputs: Vec<String> = [
            0i64,
            -1,
            1,
            951_782_400_000_000_000,   // 2000-02-29
            1_709_164_800_123_456_789, // 2024-02-29
            4_102_444_799_999_999_999, // 2099-12-31T23:59:59.999999999
            i64::MAX,
            i64::MIN,
        ]
        .iter()
        .map(|n| Time::from_unix_nanos(*n).to_rfc3339_nanos())
        .collect();
        inputs.extend(
            [
                "2023-02-29T00:00:00.000000000Z",
                "2024-01-01T00:00:60.000000000Z",
                "2024-01-01T24:00:00.000000000Z",
                "2024-00-01T00:00:00.000000000Z",
                "2024-01-32T00:00:00.000000000Z",
                "2024-01-01T00:00:00.00000000aZ",
                "2024-01-01t00:00:00.000000000Z",
                "9999-12-31T23:59:59.999999999Z",
                "0000-01-01T00:00:00.000000000Z",
                "2024-01-01T00:00:00.000000000z",
            ]
            .map(String::from),
        );
        for s in inputs {
            assert_eq!(Time::parse_rfc3339(&s), Time::parse_general(&s), "{s}");
            if let Some(t) = Time::parse_canonical(s.as_bytes()) {
                assert_eq!(Ok(t), Time::parse_general(&s), "{s}");
            }
        }
        assert!(Time::parse_canonical(b"2024-01-01T00:00:00.000000000Z").is_some());
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
        ] {
            let e = Time::parse_rfc3339(bad).unwrap_err();
            assert!(!e.to_string().is_empty(), "{bad}");
        }
    }
}
