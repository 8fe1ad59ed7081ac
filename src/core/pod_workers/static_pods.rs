//! Static pods with the same full name start one at a time, in arrival order
//! (kubelet `allowPodStart` / `allowStaticPodStart`).
//!
//! Owns the started and waiting tables' rules. Must not start anything itself: it answers
//! whether the worker may start, and asks for a requeue when it may not yet.

use k8s_openapi::api::core::v1::Pod;

use super::{Cx, PodWorkers};
use crate::core::pod;
use crate::core::timers::TimerKey;
use crate::core::uid::Uid;

/// The answer of `allow_pod_start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartDecision {
    /// The pod may start now.
    pub can_start: bool,
    /// The pod could ever start (false: it was terminated before it could).
    pub can_ever_start: bool,
}

impl PodWorkers {
    /// `allowPodStart`: non-static pods always start; a static pod starts if it is next in
    /// line for its full name, else it is requeued with the error backoff.
    pub(super) fn allow_pod_start(&mut self, cx: &mut Cx<'_>, pod: &Pod) -> StartDecision {
        if !pod::is_static(pod) {
            return StartDecision {
                can_start: true,
                can_ever_start: true,
            };
        }
        let uid = pod::uid(pod);
        let Some(status) = self.statuses.get(&uid) else {
            return StartDecision {
                can_start: false,
                can_ever_start: false,
            };
        };
        if status.is_termination_requested() {
            return StartDecision {
                can_start: false,
                can_ever_start: false,
            };
        }
        let fullname = status.fullname.clone();
        if !self.allow_static_pod_start(&fullname, &uid) {
            let delay = crate::core::jitter::jitter_ms(
                cx.config.sync_error_backoff_ms,
                super::BACKOFF_JITTER_FACTOR,
                cx.seq,
                &uid,
            );
            cx.timers
                .set(TimerKey::PodWork { uid }, cx.now.plus_ms(delay), cx.out);
            return StartDecision {
                can_start: false,
                can_ever_start: true,
            };
        }
        StartDecision {
            can_start: true,
            can_ever_start: true,
        }
    }

    /// `allowStaticPodStart`: true if no other static pod with `fullname` is started and
    /// `uid` is the first live one waiting (it is then recorded as started). Waiting entries
    /// that are gone or terminating are skipped and pruned lazily.
    pub(super) fn allow_static_pod_start(&mut self, fullname: &str, uid: &Uid) -> bool {
        if let Some(started) = self.started_static_pods_by_fullname.get(fullname) {
            return started == uid;
        }
        let mut waiting = self
            .waiting_to_start_static_pods_by_fullname
            .remove(fullname)
            .unwrap_or_default();
        let mut i = 0;
        while i < waiting.len() {
            let w = &waiting[i];
            let live = self
                .statuses
                .get(w)
                .is_some_and(|s| !s.is_termination_requested() && !s.is_terminated());
            if !live {
                i += 1;
                continue;
            }
            if w != uid {
                // another pod is next in line; keep the list from it on
                waiting.drain(..i);
                self.waiting_to_start_static_pods_by_fullname
                    .insert(fullname.to_string(), waiting);
                return false;
            }
            // we are next: remove ourselves and everything skipped before us
            waiting.drain(..=i);
            break;
        }
        if !waiting.is_empty() {
            self.waiting_to_start_static_pods_by_fullname
                .insert(fullname.to_string(), waiting);
        }
        self.started_static_pods_by_fullname
            .insert(fullname.to_string(), uid.clone());
        true
    }
}
