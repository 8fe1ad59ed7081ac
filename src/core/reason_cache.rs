//! Why the last attempt to start each container failed (kubelet `ReasonCache`).
//!
//! Owns, per pod and container name, the reason and message of the last failed start
//! (`CrashLoopBackOff`, `ErrImagePull`, `CreateContainerConfigError`, …) that the status
//! generator shows as the container's waiting state (GS-07). Must not decide restarts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::uid::Uid;

/// The last start failure of a container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartFailure {
    /// One word, e.g. `CrashLoopBackOff`.
    pub reason: String,
    /// Detail, e.g. `back-off 20s restarting failed container=web pod=web_ns(uid)`.
    pub message: String,
}

/// Start failures by pod and container name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasonCache {
    by_pod: BTreeMap<Uid, BTreeMap<String, StartFailure>>,
}

impl ReasonCache {
    /// The failures recorded for a pod, by container name.
    pub fn for_pod(&self, uid: &Uid) -> Option<&BTreeMap<String, StartFailure>> {
        self.by_pod.get(uid)
    }

    /// Records a failed start.
    pub fn set(&mut self, uid: &Uid, container: &str, failure: StartFailure) {
        self.by_pod
            .entry(uid.clone())
            .or_default()
            .insert(container.to_string(), failure);
    }

    /// A successful start clears the container's entry.
    pub fn clear(&mut self, uid: &Uid, container: &str) {
        if let Some(m) = self.by_pod.get_mut(uid) {
            m.remove(container);
            if m.is_empty() {
                self.by_pod.remove(uid);
            }
        }
    }

    /// Forgets a pod.
    pub fn remove_pod(&mut self, uid: &Uid) {
        self.by_pod.remove(uid);
    }
}
