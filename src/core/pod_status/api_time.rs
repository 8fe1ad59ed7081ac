//! Conversions between the ledger's `Time` and the API's `metav1.Time`.
//!
//! Owns the two conversions (through nanoseconds, so nothing is lost on the way out). Must not
//! round: truncation to the API server's whole seconds is the caller's decision.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as ApiTime;
use k8s_openapi::jiff::Timestamp;

use crate::core::record::time::Time;

/// Our instant as an API timestamp. Every `i64` nanosecond count is within the API type's
/// range; the epoch is the (unreachable) fallback.
pub fn to_api(t: Time) -> ApiTime {
    ApiTime(Timestamp::from_nanosecond(i128::from(t.unix_nanos())).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// An API timestamp as our instant (saturating at the `i64` nanosecond range, about the years
/// 1677 to 2262).
pub fn from_api(t: &ApiTime) -> Time {
    let n = t.0.as_nanosecond();
    Time::from_unix_nanos(n.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_nanoseconds() {
        for n in [0i64, 1, 1_795_000_000_123_456_789, -5] {
            let t = Time::from_unix_nanos(n);
            assert_eq!(from_api(&to_api(t)), t);
        }
        assert_eq!(
            to_api(Time::from_unix_secs(1_700_000_000)).0.as_second(),
            1_700_000_000
        );
    }
}
