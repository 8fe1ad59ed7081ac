//! The API server node source: this node's own Node object, from a watch
//! (`fieldSelector=metadata.name=<node>`), as the kubelet's node informer feeds
//! `getNodeAnyWay`.
//!
//! Owns reducing each observed Node to what the core reads (its labels and taints) and
//! recording a `NodeObserved` only when that changed, so status heartbeats leave no record.
//! Must not decide anything about pods: admission in `core::admission` does.

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use tokio::sync::watch as signal;

use crate::core::record::event::NodeObserved;
use crate::core::record::Event;
use crate::shell::Report;

/// The parts of `node` the core reads.
pub fn observed(node: &Node) -> NodeObserved {
    NodeObserved {
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints: node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default(),
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
                    tracing::warn!(node = %node_name, "cannot watch the node for its labels and taints; retrying with backoff: {error}");
                }
                failing = true;
            }
            None => return,
        }
    }
}
