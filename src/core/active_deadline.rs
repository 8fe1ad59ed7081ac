//! The kubelet's `activeDeadlineHandler` (AD-02): a pod with `activeDeadlineSeconds` that
//! has been active on the node that long is failed with reason `DeadlineExceeded`.
//!
//! Owns when the deadline falls and the reason and message. Must not read a clock: the
//! caller passes the time of the record being folded.

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::pod_status::api_time::from_api;
use crate::core::record::Time;

/// The status reason of a pod failed by its deadline.
pub const REASON: &str = "DeadlineExceeded";
/// Its message, and that of its Normal `DeadlineExceeded` event.
pub const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// When `p`'s active deadline falls: its start time (the node's own status, else the API
/// server's) plus `activeDeadlineSeconds`. `None` without a deadline or a start time.
pub fn deadline(p: &Pod, cached: Option<&PodStatus>) -> Option<Time> {
    let seconds = p.spec.as_ref()?.active_deadline_seconds?;
    let started = cached
        .and_then(|s| s.start_time.as_ref())
        .or_else(|| p.status.as_ref()?.start_time.as_ref())?;
    Some(from_api(started).plus_ms(u64::try_from(seconds).ok()?.saturating_mul(1000)))
}

/// `pastActiveDeadline` at `now`.
pub fn exceeded(p: &Pod, cached: Option<&PodStatus>, now: Time) -> bool {
    deadline(p, cached).is_some_and(|d| now >= d)
}
