//! Mirror pods: the API server's view of static pods (kubelet.go `SyncPod`'s mirror-pod block,
//! `HandlePodCleanups`' orphaned mirror cleanup, `mirror_client.go`).
//!
//! Owns the decisions: a static pod without a mirror gets one; a mirror that is being deleted
//! or no longer matches its static pod's hash is deleted (it is recreated on the next sync,
//! once the watch shows it gone); a mirror whose static pod is gone is deleted, unless that
//! static pod is still terminating. At most one creation or deletion per pod is in flight.
//! Must not run without an API source: standalone nodes have no mirror pods.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::command::{Command, NodeCommand};
use super::node::Node;
use super::pod;
use super::uid::Uid;
use crate::core::record::event::{NodeAction, NodeSyncFinished};

/// Mirror writes in flight, by the static pod's config hash (creations) or the mirror's
/// UID (deletions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MirrorState {
    creating: BTreeSet<Uid>,
    deleting: BTreeSet<Uid>,
}

fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The static pod's hash (`kubernetes.io/config.hash`, falling back to its UID).
pub fn static_hash(p: &Pod) -> String {
    annotation(p, pod::CONFIG_HASH_ANNOTATION)
        .map(str::to_string)
        .unwrap_or_else(|| pod::uid_str(p).to_string())
}

/// `IsMirrorPodOf`: the mirror records the static pod's hash and has its full name.
pub fn is_mirror_pod_of(mirror: &Pod, static_pod: &Pod) -> bool {
    pod::full_name(mirror) == pod::full_name(static_pod)
        && annotation(mirror, pod::CONFIG_MIRROR_ANNOTATION)
            == Some(static_hash(static_pod).as_str())
}

/// The mirror pod to create for `static_pod` (`CreateMirrorPod`): the same pod, marked with
/// the mirror annotation; the shell adds the owner reference to the Node.
pub fn mirror_of(static_pod: &Pod) -> Pod {
    let mut m = static_pod.clone();
    let hash = static_hash(static_pod);
    let a = m.metadata.annotations.get_or_insert_with(Default::default);
    a.insert(pod::CONFIG_MIRROR_ANNOTATION.into(), hash);
    a.remove(pod::CONFIG_SOURCE_ANNOTATION);
    a.remove("kubernetes.io/config.seen");
    m.metadata.uid = None;
    m.metadata.resource_version = None;
    m.metadata.creation_timestamp = None;
    m.status = None;
    m
}

impl Node {
    /// The mirror-pod part of `SyncPod` for a static pod.
    pub(super) fn sync_mirror_pod(&mut self, static_pod: &Pod, out: &mut Vec<Command>) {
        // the mirror needs the Node (its owner) to exist, as the kubelet checks
        if !self.has_api_source()
            || !pod::is_static(static_pod)
            || !self.node_status.is_registered()
        {
            return;
        }
        let full = pod::full_name(static_pod);
        let mirror = self
            .pod_manager
            .mirror_pods()
            .find(|m| pod::full_name(m) == full)
            .cloned();
        match mirror {
            Some(m) => {
                if m.metadata.deletion_timestamp.is_some() || !is_mirror_pod_of(&m, static_pod) {
                    self.delete_mirror(&m, out);
                }
            }
            None => {
                let hash = Uid::new(static_hash(static_pod));
                if self.mirror.creating.insert(hash) {
                    out.push(Command::Node(NodeCommand::CreateMirrorPod {
                        pod: Arc::new(mirror_of(static_pod)),
                    }));
                }
            }
        }
    }

    fn delete_mirror(&mut self, m: &Pod, out: &mut Vec<Command>) {
        let uid = pod::uid(m);
        if self.mirror.deleting.insert(uid.clone()) {
            out.push(Command::Node(NodeCommand::DeleteMirrorPod {
                namespace: pod::namespace(m).to_string(),
                name: pod::name(m).to_string(),
                uid,
            }));
        }
    }

    /// Housekeeping: delete mirror pods whose static pod is gone, unless it is still
    /// terminating (PW-32).
    pub(super) fn delete_orphaned_mirror_pods(&mut self, out: &mut Vec<Command>) {
        if !self.has_api_source() {
            return;
        }
        let orphans: Vec<Arc<Pod>> = self
            .pod_manager
            .mirror_pods()
            .filter(|m| {
                let full = pod::full_name(m);
                self.pod_manager
                    .pods()
                    .all(|p| pod::full_name(p) != full || !pod::is_static(p))
                    && !self
                        .pod_workers
                        .is_pod_for_mirror_pod_terminating_by_full_name(&full)
            })
            .cloned()
            .collect();
        for m in orphans {
            self.delete_mirror(&m, out);
        }
    }

    /// Folds the outcome of a mirror write: it is no longer in flight.
    pub(super) fn mirror_write_finished(&mut self, f: &NodeSyncFinished) {
        let Some(uid) = &f.uid else { return };
        match f.action {
            NodeAction::CreateMirrorPod => {
                self.mirror.creating.remove(uid);
            }
            NodeAction::DeleteMirrorPod => {
                self.mirror.deleting.remove(uid);
            }
            _ => {}
        }
    }
}
