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
pub fn effective_grace_period(
    current_s: i64,
    pod: &Pod,
    options: Option<&KillPodOptions>,
) -> (i64, bool) {
    let mut grace = current_s;
    let mut overridden = false;
    if let Some(d) = pod::deletion_grace_period_s(pod) {
        if grace == 0 || d < grace {
            grace = d;
            overridden = true;
        }
    }
    if let Some(o) = options.and_then(|o| o.grace_period_override_s) {
        if grace == 0 || o < grace {
            grace = o;
            overridden = true;
        }
    }
    if !overridden && grace == 0 {
        if let Some(spec) = pod::termination_grace_period_s(pod) {
            grace = spec;
        }
    }
    if grace < 1 {
        grace = 1;
    }
    (grace, current_s != 0 && current_s != grace)
}
