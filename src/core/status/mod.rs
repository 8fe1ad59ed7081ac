//! The node's record of each pod's API status (kubelet status manager, local half).
//!
//! Owns versioned statuses per pod UID: `SetPodStatus` keeps an existing start time
//! (SM-01/02), keeps a condition's `lastTransitionTime` while its status is unchanged (SM-04),
//! normalises timestamps to seconds (SM-19), and bumps the version only on a real change
//! (SM-03). Must not talk to the API server: syncing versions to it is the status syncer's
//! job (issue 4), driven by commands the core emits from this state.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KTime;
use serde::{Deserialize, Serialize};

use super::uid::Uid;
use crate::ledger::Time;

/// A status with the version the node gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionedStatus {
    /// Increases by one on every change.
    pub version: u64,
    /// The status.
    pub status: Arc<PodStatus>,
    /// When it last changed.
    pub changed_at: Time,
}

/// Statuses by pod UID.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusStore {
    statuses: BTreeMap<Uid, VersionedStatus>,
}

/// Converts a ledger time to a Kubernetes time truncated to whole seconds.
pub fn k8s_time(t: Time) -> KTime {
    super::pod_status::time_to_api(t.truncated_to_secs())
}

/// The timestamp type k8s-openapi uses.
mod jiff_type {
    pub use k8s_openapi::jiff::Timestamp;
}

/// Truncates a Kubernetes time to whole seconds (what the API server stores).
fn truncate(t: &mut Option<KTime>) {
    if let Some(k) = t {
        let secs = k.0.as_second();
        if let Ok(ts) = jiff_type::Timestamp::from_second(secs) {
            k.0 = ts;
        }
    }
}

/// `normalizeStatus` (timestamps part): every timestamp to whole seconds.
pub fn normalize_times(s: &mut PodStatus) {
    truncate(&mut s.start_time);
    for c in s.conditions.iter_mut().flatten() {
        truncate(&mut c.last_probe_time);
        truncate(&mut c.last_transition_time);
    }
    let lists = [
        s.container_statuses.as_mut(),
        s.init_container_statuses.as_mut(),
        s.ephemeral_container_statuses.as_mut(),
    ];
    for list in lists.into_iter().flatten() {
        for cs in list.iter_mut() {
            for st in [cs.state.as_mut(), cs.last_state.as_mut()]
                .into_iter()
                .flatten()
            {
                if let Some(r) = st.running.as_mut() {
                    truncate(&mut r.started_at);
                }
                if let Some(t) = st.terminated.as_mut() {
                    truncate(&mut t.started_at);
                    truncate(&mut t.finished_at);
                }
            }
        }
    }
}

impl StatusStore {
    /// The status of a pod.
    pub fn get(&self, uid: &Uid) -> Option<&VersionedStatus> {
        self.statuses.get(uid)
    }

    /// `SetPodStatus`: records `status` for `pod` at `now`. Returns true if it changed.
    pub fn set(&mut self, pod: &Pod, uid: &Uid, mut status: PodStatus, now: Time) -> bool {
        let old = self
            .statuses
            .get(uid)
            .map(|v| v.status.clone())
            .or_else(|| pod.status.clone().map(Arc::new));
        // a start time, once set, is kept
        match old.as_ref().and_then(|o| o.start_time.clone()) {
            Some(t) => status.start_time = Some(t),
            None if status.start_time.is_none() => status.start_time = Some(k8s_time(now)),
            None => {}
        }
        if let Some(old) = &old {
            super::pod_status::keep_transition_times(&mut status, old);
        }
        normalize_times(&mut status);
        match self.statuses.get_mut(uid) {
            Some(v) if *v.status == status => false,
            Some(v) => {
                v.version += 1;
                v.status = Arc::new(status);
                v.changed_at = now;
                true
            }
            None => {
                self.statuses.insert(
                    uid.clone(),
                    VersionedStatus {
                        version: 1,
                        status: Arc::new(status),
                        changed_at: now,
                    },
                );
                true
            }
        }
    }

    /// Forgets a pod's status.
    pub fn remove(&mut self, uid: &Uid) {
        self.statuses.remove(uid);
    }

    /// All statuses in UID order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uid, &VersionedStatus)> {
        self.statuses.iter()
    }
}
