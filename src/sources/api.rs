//! The API server pod source: pods bound to this node, from a watch.
//!
//! Owns the watch (`fieldSelector=spec.nodeName=<node>`, relisting on 410 and after a drop,
//! bookmarks, backoff — kube-runtime's watcher) and the kubelet config layer's classification
//! of each change (pkg/kubelet/config `checkAndUpdatePod`): a new UID is an ADD; a change of
//! spec, labels, annotations or deletion fields is an UPDATE, or a DELETE when a deletion
//! timestamp is set; a change of status only is a RECONCILE; a pod that went away is a REMOVE.
//! A relist is compared with what was known (SET semantics), so a dropped watch never
//! re-adds a pod. The first complete list reports the source ready. Must not decide what a
//! change means for a pod worker: `core::dispatch` does.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use tokio::sync::watch as signal;

use crate::core::config::PodSource;
use crate::core::pod::{self, CONFIG_SEEN_ANNOTATION};
use crate::core::record::event::{PodConfigChange, SourceReady};
use crate::core::record::{Event, Time};
use crate::core::Uid;
use crate::shell::Report;

/// Annotations the node adds to every pod it sees (never a reason for an UPDATE).
const LOCAL_ANNOTATIONS: [&str; 2] = [pod::CONFIG_SOURCE_ANNOTATION, CONFIG_SEEN_ANNOTATION];

/// What kind of change a new version of a known pod is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing the node cares about.
    None,
    /// Only the status changed (RECONCILE).
    Reconcile,
    /// Spec or metadata changed (UPDATE).
    Update,
    /// Marked for graceful deletion (DELETE, handled as an update).
    Delete,
}

fn annotations_without_local(p: &Pod) -> BTreeMap<&str, &str> {
    p.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !LOCAL_ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// `checkAndUpdatePod`.
pub fn classify(existing: &Pod, new: &Pod) -> Change {
    let differ = existing.spec != new.spec
        || existing.metadata.labels != new.metadata.labels
        || existing.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || existing.metadata.deletion_grace_period_seconds
            != new.metadata.deletion_grace_period_seconds
        || annotations_without_local(existing) != annotations_without_local(new);
    if !differ {
        if existing.status != new.status {
            return Change::Reconcile;
        }
        return Change::None;
    }
    if new.metadata.deletion_timestamp.is_some() {
        Change::Delete
    } else {
        Change::Update
    }
}

/// The pod as the node keeps it: marked as coming from the API server, first seen when the
/// `known` version of it was (or at `seen`), and without `metadata.managedFields`. Nothing
/// on a node reads who manages which field, and they are two fifths of an API server's pod
/// in memory and in the ledger, every version of it (the scheduler and the controller
/// manager drop them from their caches too; the kubelet keeps them, docs/kubelet-differences.md).
fn local(mut p: Pod, known: Option<&Arc<Pod>>, seen: Time) -> Arc<Pod> {
    p.metadata.managed_fields = None;
    let known_seen = known
        .and_then(|k| k.metadata.annotations.as_ref()?.get(CONFIG_SEEN_ANNOTATION))
        .cloned();
    let a = p.metadata.annotations.get_or_insert_with(Default::default);
    a.insert(pod::CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    let seen = known_seen
        .or_else(|| a.get(CONFIG_SEEN_ANNOTATION).cloned())
        .unwrap_or_else(|| seen.to_rfc3339_nanos());
    a.insert(CONFIG_SEEN_ANNOTATION.into(), seen);
    Arc::new(p)
}

fn from_api(pod: Arc<Pod>) -> PodConfigChange {
    PodConfigChange {
        source: PodSource::Api,
        pod,
    }
}

fn change_event(change: Change, p: Arc<Pod>) -> Option<Event> {
    let c = from_api(p);
    match change {
        Change::None => None,
        Change::Reconcile => Some(Event::PodReconcile(c)),
        Change::Update => Some(Event::PodUpdated(c)),
        Change::Delete => Some(Event::PodDeleted(c)),
    }
}

/// Compares a complete list with what was known: the events that turn one into the other,
/// in UID order (removals first).
pub fn diff_list(known: &BTreeMap<Uid, Arc<Pod>>, listed: &BTreeMap<Uid, Arc<Pod>>) -> Vec<Event> {
    let mut out = Vec::new();
    for (uid, p) in known {
        if !listed.contains_key(uid) {
            out.push(Event::PodRemoved(from_api(p.clone())));
        }
    }
    for (uid, p) in listed {
        match known.get(uid) {
            None => out.push(Event::PodAdded(from_api(p.clone()))),
            Some(old) => out.extend(change_event(classify(old, p), p.clone())),
        }
    }
    out
}

/// Watches the pods bound to `node_name` until `shutdown` turns true or the engine stops.
pub async fn run(
    client: kube::Client,
    node_name: String,
    report: Report,
    mut shutdown: signal::Receiver<bool>,
) {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    // client-go's reflector backoff: 800 ms doubling to 30 s, with jitter
    let mut stream = watcher(api, config).default_backoff().boxed();
    let mut failing: u64 = 0;
    let mut last_error = String::new();
    let mut known: BTreeMap<Uid, Arc<Pod>> = BTreeMap::new();
    let mut relist: Option<BTreeMap<Uid, Arc<Pod>>> = None;
    let mut ready = false;
    loop {
        let item = tokio::select! {
            r = shutdown.changed() => {
                if r.is_err() || *shutdown.borrow() { return; }
                continue;
            }
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        if item.is_ok() && failing > 0 {
            tracing::info!(node = %node_name, failed_attempts = failing, "pod watch working again");
            failing = 0;
            last_error.clear();
        }
        let now = Time::from_system();
        let events: Vec<Event> = match item {
            Ok(watcher::Event::Init) => {
                relist = Some(BTreeMap::new());
                vec![]
            }
            Ok(watcher::Event::InitApply(p)) => {
                let uid = pod::uid(&p);
                let p = local(p, known.get(&uid), now);
                relist.get_or_insert_with(BTreeMap::new).insert(uid, p);
                vec![]
            }
            Ok(watcher::Event::InitDone) => {
                let listed = relist.take().unwrap_or_default();
                let mut ev = diff_list(&known, &listed);
                known = listed;
                if !ready {
                    ready = true;
                    ev.push(Event::SourceReady(SourceReady {
                        source: PodSource::Api,
                    }));
                }
                metrics::counter!("ledgerlet_api_relists_total").increment(1);
                ev
            }
            Ok(watcher::Event::Apply(p)) => {
                let uid = pod::uid(&p);
                let p = local(p, known.get(&uid), now);
                let ev = match known.get(&uid) {
                    None => Some(Event::PodAdded(from_api(p.clone()))),
                    Some(old) => change_event(classify(old, &p), p.clone()),
                };
                known.insert(uid, p);
                ev.into_iter().collect()
            }
            Ok(watcher::Event::Delete(p)) => {
                let uid = pod::uid(&p);
                match known.remove(&uid) {
                    Some(last) => vec![Event::PodRemoved(from_api(last))],
                    None => vec![],
                }
            }
            Err(e) => {
                metrics::counter!("ledgerlet_api_watch_errors_total").increment(1);
                let error = crate::error_chain::error_chain(&e);
                // a warning for each new kind of failure, not for each retry
                if error != last_error {
                    tracing::warn!(node = %node_name, %error, attempt = failing + 1, "pod watch failed; retrying with backoff (800 ms doubling to 30 s)");
                    last_error = error;
                } else {
                    tracing::debug!(node = %node_name, %error, attempt = failing + 1, "pod watch failed again");
                }
                failing += 1;
                vec![]
            }
        };
        for e in events {
            if !report.send(e, None).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn p(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus::default()),
        }
    }

    #[test]
    fn changes_are_classified_like_the_kubelet_config_layer() {
        let a = p("a");
        assert_eq!(classify(&a, &a), Change::None);
        let mut status = a.clone();
        status.status.as_mut().unwrap().phase = Some("Running".into());
        assert_eq!(classify(&a, &status), Change::Reconcile);
        let mut labels = a.clone();
        labels.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(classify(&a, &labels), Change::Update);
        let mut deleted = a.clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert_eq!(classify(&a, &deleted), Change::Delete);
        let mut seen = a.clone();
        seen.metadata.annotations =
            Some([("kubernetes.io/config.seen".to_string(), "x".to_string())].into());
        assert_eq!(
            classify(&a, &seen),
            Change::None,
            "local annotations are not changes"
        );
    }

    #[test]
    fn the_node_keeps_an_api_pod_without_its_managed_fields() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut api = p("a");
        api.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kube-controller-manager".into()),
            operation: Some("Update".into()),
            ..ManagedFieldsEntry::default()
        }]);
        let kept = local(api.clone(), None, Time::from_unix_secs(1));
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(kept.metadata.uid, api.metadata.uid);
        assert_eq!(kept.spec, api.spec);
        assert_eq!(
            classify(&kept, &local(api, Some(&kept), Time::from_unix_secs(2))),
            Change::None,
            "the same version seen again is no change"
        );
    }

    #[test]
    fn a_relist_reports_only_what_changed() {
        let now = Time::from_unix_secs(1);
        let known: BTreeMap<Uid, Arc<Pod>> = [("a", p("a")), ("b", p("b"))]
            .into_iter()
            .map(|(u, x)| (Uid::new(u), local(x, None, now)))
            .collect();
        let mut b2 = p("b");
        b2.status.as_mut().unwrap().phase = Some("Running".into());
        let listed: BTreeMap<Uid, Arc<Pod>> = [("b", b2), ("c", p("c"))]
            .into_iter()
            .map(|(u, x)| (Uid::new(u), local(x, None, now)))
            .collect();
        let kinds: Vec<(&str, String)> = diff_list(&known, &listed)
            .iter()
            .map(|e| (e.kind(), e.pod_uid().unwrap().to_string()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("PodRemoved", "a".to_string()),
                ("PodReconcile", "b".into()),
                ("PodAdded", "c".into())
            ]
        );
        assert!(
            diff_list(&listed, &listed).is_empty(),
            "an unchanged relist is silent"
        );
    }
}
