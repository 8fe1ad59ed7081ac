//! The effective grace period of a terminating pod (kubelet `calculateEffectiveGracePeriod`).
//!
//! Owns the rule "the grace period can only shorten and is never below 1 s". Must not look
//! at anything but the current value, the pod and the kill options.

use k8s_openapi::api::core::v1::Pod;

use crate::core::pod;
use crate::core::update::KillPodOptions;

/// Returns the new effective grace period and whether it shortened a previous one.
///
/// Starting from `current_s` (0 = none yet): the pod's `deletionGracePeriodSeconds` applies
/// if none is set or it is smaller; then the kill's override likewise; if nothing overrode
/// and none is set, the spec's `terminationGracePeriodSeconds`; finally at least 1.
/// "Shortened" is `current != 0 && current != new`.
///
/// One deliberate difference from upstream: there, a `deletionGracePeriodSeconds` of 0
/// makes the running value 0, which the override step then reads as "unset", so a larger
/// override wins and the grace period grows (30 s → 31 s). Here only the starting value can
/// be "unset"; an overridden 0 stays the smallest candidate (and becomes 1). Found by the
/// invariant-2 property test; documented in docs/pod-workers.md.
pub fn effective_grace_period(
    current_s: i64,
    pod: &Pod,
    options: Option<&KillPodOptions>,
) -> (i64, bool) {
    let mut grace: Option<i64> = (current_s != 0).then_some(current_s);
    let mut overridden = false;
    let mut consider = |candidate: i64, grace: &mut Option<i64>| {
        if grace.is_none_or(|g| candidate < g) {
            *grace = Some(candidate);
            overridden = true;
        }
    };
    if let Some(d) = pod::deletion_grace_period_s(pod) {
        consider(d, &mut grace);
    }
    if let Some(o) = options.and_then(|o| o.grace_period_override_s) {
        consider(o, &mut grace);
    }
    if !overridden && grace.is_none() {
        grace = pod::termination_grace_period_s(pod);
    }
    let grace = grace.unwrap_or(0).max(1);
    (grace, current_s != 0 && current_s != grace)
}
