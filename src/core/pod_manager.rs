//! The desired pods (kubelet `pod.Manager`): config pods by UID and mirror pods by full name.
//!
//! Owns the desired set that housekeeping reconciles the workers against and the static ↔
//! mirror translation. Must not know about workers or the runtime.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::pod;
use super::uid::Uid;
use super::uid_map::UidMap;

/// Desired pods and mirror pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodManager {
    pods: UidMap<Arc<Pod>>,
    mirror_pods: UidMap<Arc<Pod>>,
    pod_by_full_name: BTreeMap<String, Uid>,
    mirror_by_full_name: BTreeMap<String, Uid>,
}

/// The answer of `get_pod_and_mirror_pod`.
pub struct PodAndMirror {
    /// The config pod (the static pod when given a mirror).
    pub pod: Option<Arc<Pod>>,
    /// Its mirror pod, if any.
    pub mirror: Option<Arc<Pod>>,
    /// The pod asked about was a mirror pod.
    pub was_mirror: bool,
}

impl PodManager {
    /// The stored `Uid` equal to `uid`, so callers can share one allocation per pod.
    pub fn uid_key<Q>(&self, uid: &Q) -> Option<&Uid>
    where
        Uid: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.pods
            .get_key_value(uid)
            .or_else(|| self.mirror_pods.get_key_value(uid))
            .map(|(k, _)| k)
    }

    /// Adds or replaces a pod (`AddPod` / `UpdatePod`) under `uid` (its `metadata.uid`).
    pub fn upsert(&mut self, uid: Uid, p: Arc<Pod>) {
        debug_assert_eq!(uid.as_str(), pod::uid_str(&p));
        let name = pod::full_name(&p);
        if pod::is_mirror(&p) {
            self.mirror_by_full_name.insert(name, uid.clone());
            self.mirror_pods.insert(uid, p);
        } else {
            self.pod_by_full_name.insert(name, uid.clone());
            self.pods.insert(uid, p);
        }
    }

    /// Removes a pod (`RemovePod`).
    pub fn remove(&mut self, p: &Pod) {
        let uid = pod::uid(p);
        let name = pod::full_name(p);
        let (by_uid, by_name) = if pod::is_mirror(p) {
            (&mut self.mirror_pods, &mut self.mirror_by_full_name)
        } else {
            (&mut self.pods, &mut self.pod_by_full_name)
        };
        by_uid.remove(&uid);
        if by_name.get(&name) == Some(&uid) {
            by_name.remove(&name);
        }
    }

    /// The config pod with `uid` (a `&Uid` or a `&str`).
    pub fn get<Q>(&self, uid: &Q) -> Option<&Arc<Pod>>
    where
        Uid: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.pods.get(uid)
    }

    /// The mirror pod with `uid`, if known.
    pub fn mirror(&self, uid: &Uid) -> Option<&Arc<Pod>> {
        self.mirror_pods.get(uid)
    }

    /// The mirror pod of the static pod with this full name (`name_namespace`), if known.
    pub fn mirror_by_full_name(&self, full_name: &str) -> Option<&Arc<Pod>> {
        self.mirror_by_full_name
            .get(full_name)
            .and_then(|u| self.mirror_pods.get(u))
    }

    /// `GetPodAndMirrorPod`.
    pub fn get_pod_and_mirror_pod(&self, p: &Arc<Pod>) -> PodAndMirror {
        if pod::is_mirror(p) {
            let name = pod::full_name(p);
            PodAndMirror {
                pod: self
                    .pod_by_full_name
                    .get(&name)
                    .and_then(|u| self.pods.get(u))
                    .cloned(),
                mirror: Some(p.clone()),
                was_mirror: true,
            }
        } else {
            PodAndMirror {
                pod: Some(p.clone()),
                // no mirror pods (a node without static pods): no full name to build
                mirror: (!self.mirror_by_full_name.is_empty())
                    .then(|| pod::full_name(p))
                    .and_then(|name| self.mirror_by_full_name.get(&name))
                    .and_then(|u| self.mirror_pods.get(u))
                    .cloned(),
                was_mirror: false,
            }
        }
    }

    /// The config pods with their UIDs, in UID order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uid, &Arc<Pod>)> {
        self.pods.iter()
    }

    /// The UIDs of the config pods, ascending.
    pub fn uids(&self) -> impl Iterator<Item = &Uid> {
        self.pods.keys()
    }

    /// The config pods in UID order (`GetPods`).
    pub fn pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.pods.values()
    }

    /// The mirror pods in UID order.
    pub fn mirror_pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.mirror_pods.values()
    }

    /// The key-set generation of the config pods (`UidMap::generation`).
    pub fn generation(&self) -> crate::core::uid_map::Generation {
        self.pods.generation()
    }

    /// How many config pods are desired.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// True if no pod is desired.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}
