//! The API server node source: this node's own Node object, from a watch
//! (`fieldSelector=metadata.name=<node>`), as the kubelet's node informer feeds
//! `getNodeAnyWay`.
//!
//! Owns reducing each observed Node to what the core reads (its labels, taints and the
//! extended resources of its status) and recording a `NodeObserved` only when that changed,
//! so status heartbeats leave no record.
//! Must not decide anything about pods: admission in `core::admission` does.

use std::collections::BTreeMap;

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use tokio::sync::watch as signal;

use crate::core::admission::fit::is_extended_resource_name;
use crate::core::record::event::NodeObserved;
use crate::core::record::Event;
use crate::shell::Report;

/// The parts of `node` the core reads.
pub fn observed(node: &Node) -> NodeObserved {
    let status = node.status.as_ref();
    let extended = |list: Option<&BTreeMap<String, Quantity>>| -> BTreeMap<String, Quantity> {
        list.into_iter()
            .flatten()
            .filter(|(name, _)| is_extended_resource_name(name))
            .map(|(name, q)| (name.clone(), q.clone()))
            .collect()
    };
    NodeObserved {
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints: node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default(),
        extended_capacity: extended(status.and_then(|s| s.capacity.as_ref())),
        extended_allocatable: extended(status.and_then(|s| s.allocatable.as_ref())),
    }
}

/// The versions of node `node_name` as a watch sees them (kube-runtime's watcher, with its
/// default backoff); also followed by `shell::pod_cidr`.
pub fn watch_own_node(
    client: kube::Client,
    node_name: &str,
) -> BoxStream<'static, Result<Node, watcher::Error>> {
    let api: Api<Node> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
    watcher(api, config)
        .default_backoff()
        .applied_objects()
        .boxed()
}

/// Follows node `node_name` until `shutdown` turns true or the engine stops.
pub async fn run(
    client: kube::Client,
    node_name: String,
    report: Report,
    mut shutdown: signal::Receiver<bool>,
) {
    let mut nodes = watch_own_node(client, &node_name);
    let mut last: Option<NodeObserved> = None;
    let mut failing = false;
    loop {
        let item = tokio::select! {
            r = shutdown.changed() => {
                if r.is_err() || *shutdown.borrow() { return; }
                continue;
            }
            item = nodes.next() => item,
        };
        match item {
            Some(Ok(node)) => {
                failing = false;
                let now = observed(&node);
                if last.as_ref() == Some(&now) {
                    continue;
                }
                last = Some(now.clone());
                if !report.send(Event::NodeObserved(now), None).await {
                    return;
                }
            }
            Some(Err(e)) => {
                if !failing {
                    let error = crate::error_chain::error_chain(&e);
                    tracing::warn!(node = %node_name, "cannot watch the node for its labels, taints and extended resources; retrying with backoff: {error}");
                }
                failing = true;
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_observed_node_keeps_only_the_extended_resources_of_its_status() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "labels": {"disk": "ssd"}},
            "status": {
                "capacity": {"cpu": "4", "hugepages-2Mi": "0", "example.com/widget": "2",
                             "kubernetes.io/batteries": "1"},
                "allocatable": {"cpu": "3", "example.com/widget": "2"}
            }
        }))
        .unwrap();
        let seen = observed(&node);
        let widget = BTreeMap::from([("example.com/widget".to_string(), Quantity("2".into()))]);
        assert_eq!(seen.extended_capacity, widget);
        assert_eq!(seen.extended_allocatable, widget);
        assert_eq!(seen.labels["disk"], "ssd");
    }
}
