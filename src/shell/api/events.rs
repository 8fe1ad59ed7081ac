//! Kubernetes Events to the API server, as the kubelet's event recorder sends them.
//!
//! Owns correlation (a repeat of the same event for the same object — same type, reason and
//! message — increments `count` and `lastTimestamp` instead of creating another Event), the
//! events' own rate limit (kubelet `--event-qps` 50, `--event-burst` 100) and a bounded queue:
//! Events are best effort, so when the queue is full the newest is dropped and counted
//! (`ledgerlet_events_dropped_total`). Must not change what the core asked to record.

use crate::bounded_map::BoundedMap;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::mpsc;

use super::ApiClient;
use crate::core::command::{EventType, KubeEvent};
use crate::core::pod_status::time_to_api;
use crate::core::record::Time;

/// Correlated events remembered (oldest forgotten first).
pub const CORRELATION_CAPACITY: usize = 4096;

/// The sending end: cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<KubeEvent>,
}

impl EventSink {
    /// Queues an event; drops it (and counts the drop) if the queue is full.
    pub fn send(&self, e: KubeEvent) {
        if self.tx.try_send(e).is_err() {
            metrics::counter!("ledgerlet_events_dropped_total").increment(1);
        }
    }
}

type Key = (String, String, String, String, String, String);

fn key(e: &KubeEvent) -> Key {
    (
        e.object.kind.clone(),
        e.object.namespace.clone(),
        e.object.name.clone(),
        e.object.uid.clone(),
        e.reason.clone(),
        e.message.clone(),
    )
}

/// Starts the sender task; `api` should carry the events' own rate limit.
pub fn spawn(api: ApiClient, node_name: String, queue_capacity: usize) -> EventSink {
    let (tx, mut rx) = mpsc::channel::<KubeEvent>(queue_capacity.max(1));
    tokio::spawn(async move {
        let mut seen: BoundedMap<Key, (String, String, i32)> =
            BoundedMap::new(CORRELATION_CAPACITY);
        while let Some(e) = rx.recv().await {
            let now = time_to_api(Time::from_system().truncated_to_secs());
            let namespace = if e.object.namespace.is_empty() {
                "default".to_string()
            } else {
                e.object.namespace.clone()
            };
            let events: Api<Event> = Api::namespaced(api.client(), &namespace);
            let k = key(&e);
            if let Some((ns, name, count)) = seen.get_mut(&k) {
                *count += 1;
                let patch = serde_json::json!({ "count": *count, "lastTimestamp": now });
                let events: Api<Event> = Api::namespaced(api.client(), ns);
                if let Err(err) = api
                    .call(
                        "PATCH",
                        events.patch(name, &PatchParams::default(), &Patch::Merge(patch)),
                    )
                    .await
                {
                    tracing::debug!(error = %err, "could not update event {name}");
                }
                continue;
            }
            let name = format!("{}.{:x}", e.object.name, Time::from_system().unix_nanos());
            let ev = Event {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    ..ObjectMeta::default()
                },
                involved_object: ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some(e.object.kind.clone()),
                    name: Some(e.object.name.clone()),
                    namespace: (!e.object.namespace.is_empty()).then(|| e.object.namespace.clone()),
                    uid: (!e.object.uid.is_empty()).then(|| e.object.uid.clone()),
                    ..ObjectReference::default()
                },
                reason: Some(e.reason.clone()),
                message: Some(e.message.clone()),
                type_: Some(match e.event_type {
                    EventType::Normal => "Normal".into(),
                    EventType::Warning => "Warning".into(),
                }),
                source: Some(EventSource {
                    component: Some("kubelet".into()),
                    host: Some(node_name.clone()),
                }),
                first_timestamp: Some(now.clone()),
                last_timestamp: Some(now),
                count: Some(1),
                reporting_component: Some("kubelet".into()),
                reporting_instance: Some(node_name.clone()),
                ..Event::default()
            };
            match api
                .call("POST", events.create(&PostParams::default(), &ev))
                .await
            {
                Ok(_) => {
                    seen.insert(k, (namespace, name, 1));
                }
                Err(err) => {
                    tracing::debug!(error = %err, reason = %e.reason, "could not record event")
                }
            }
        }
    });
    EventSink { tx }
}
