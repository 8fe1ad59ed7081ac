//! The node's allocatable as its Node in the API says (the kubelet's `getNodeAnyWay`), for
//! downward API `resourceFieldRef`s that name an unset limit, in env and in volumes.
//!
//! Owns one GET of the node's own Node (the Node authorizer allows it) under the API client's
//! rate limit, each time a caller needs it. Must not cache (the allocatable is the one the
//! node last registered), and must not be asked when no reference needs it
//! ([`super::resource_field::needs_allocatable`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::api::ApiClient;

/// `status.allocatable` of the Node `node_name` (empty when it reports none).
pub async fn read(api: &ApiClient, node_name: &str) -> Result<BTreeMap<String, Quantity>, String> {
    let nodes: kube::Api<Node> = kube::Api::all(api.client());
    let node = api.call("GET", nodes.get(node_name)).await;
    let node = node.map_err(|e| format!("cannot read Node {node_name}: {e}"))?;
    Ok(node.status.and_then(|s| s.allocatable).unwrap_or_default())
}
