//! Hands the node's pod CIDRs to the container runtime, as the kubelet's `updatePodCIDR`
//! does: it watches its own Node (`metadata.name=<node>`), and whenever `spec.podCIDRs`
//! differs from what the runtime last accepted it calls CRI `UpdateRuntimeConfig`. A
//! runtime with a CNI template (containerd's `conf_template`) then writes its pod network
//! over that range.
//!
//! Owns that one call and its retries (every `retry_period_ms` until the runtime accepts).
//! Must not write to the API server or touch pods. It leaves no ledger record: no pod's
//! fold depends on it, and the runtime's network readiness reaches the ledger through its
//! `Status` (`NetworkReady`), which the runtime health probe records.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use tokio::sync::watch as signal;

use crate::cri::CriClient;

/// The kubelet retries a failed pod CIDR update at its next node status update (10 s).
pub const DEFAULT_RETRY_PERIOD_MS: u64 = 10_000;

/// The node's pod CIDRs as the kubelet passes them to the runtime: `spec.podCIDRs` joined
/// by commas (the first is `spec.podCIDR`); `None` while none is allocated.
pub fn pod_cidrs(node: &Node) -> Option<String> {
    let spec = node.spec.as_ref()?;
    let joined = match &spec.pod_cidrs {
        Some(list) if !list.is_empty() => list.join(","),
        _ => spec.pod_cidr.clone().unwrap_or_default(),
    };
    (!joined.is_empty()).then_some(joined)
}

/// What to do after an observation: the CIDRs to hand over, if they differ from the ones
/// the runtime accepted.
pub fn due<'a>(wanted: Option<&'a str>, applied: Option<&str>) -> Option<&'a str> {
    wanted.filter(|w| Some(*w) != applied)
}

/// Follows node `node_name`'s pod CIDRs until `shutdown` turns true.
pub async fn run(
    client: kube::Client,
    cri: CriClient,
    node_name: String,
    retry_period_ms: u64,
    mut shutdown: signal::Receiver<bool>,
) {
    let mut nodes = crate::sources::node::watch_own_node(client, &node_name);
    let mut retry = tokio::time::interval(Duration::from_millis(retry_period_ms.max(1)));
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut wanted: Option<String> = None;
    let mut applied: Option<String> = None;
    let mut watch_failing = false;
    loop {
        tokio::select! {
            r = shutdown.changed() => {
                if r.is_err() || *shutdown.borrow() { return; }
                continue;
            }
            item = nodes.next() => match item {
                Some(Ok(node)) => {
                    watch_failing = false;
                    if let Some(c) = pod_cidrs(&node) {
                        wanted = Some(c);
                    }
                }
                Some(Err(e)) => {
                    if !watch_failing {
                        let error = crate::error_chain::error_chain(&e);
                        tracing::warn!(node = %node_name, "cannot watch the node for its pod CIDR; retrying with backoff: {error}");
                    }
                    watch_failing = true;
                    continue;
                }
                None => return,
            },
            _ = retry.tick() => {}
        }
        let Some(cidr) = due(wanted.as_deref(), applied.as_deref()) else {
            continue;
        };
        match cri.update_runtime_config(cidr).await {
            Ok(()) => {
                tracing::info!(node = %node_name, pod_cidr = %cidr, "pod CIDR handed to the container runtime (UpdateRuntimeConfig)");
                applied = Some(cidr.to_string());
            }
            Err(e) => {
                tracing::warn!(node = %node_name, pod_cidr = %cidr, "the container runtime refused the pod CIDR (UpdateRuntimeConfig); retrying in {retry_period_ms} ms: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    fn node(pod_cidr: Option<&str>, pod_cidrs: Option<Vec<&str>>) -> Node {
        Node {
            spec: Some(NodeSpec {
                pod_cidr: pod_cidr.map(String::from),
                pod_cidrs: pod_cidrs.map(|l| l.into_iter().map(String::from).collect()),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn dual_stack_pod_cidrs_are_joined_by_commas_as_the_kubelet_passes_them() {
        let n = node(
            Some("10.244.1.0/24"),
            Some(vec!["10.244.1.0/24", "fd00:1::/64"]),
        );
        assert_eq!(pod_cidrs(&n).as_deref(), Some("10.244.1.0/24,fd00:1::/64"));
    }

    #[test]
    fn a_node_without_a_pod_cidr_hands_nothing_to_the_runtime() {
        assert_eq!(pod_cidrs(&node(None, None)), None);
        assert_eq!(pod_cidrs(&node(Some(""), Some(vec![]))), None);
        assert_eq!(pod_cidrs(&Node::default()), None);
        assert_eq!(
            pod_cidrs(&node(Some("10.244.2.0/24"), None)).as_deref(),
            Some("10.244.2.0/24")
        );
    }

    #[test]
    fn the_runtime_is_called_only_when_the_cidr_differs_from_the_accepted_one() {
        assert_eq!(due(Some("10.0.0.0/24"), None), Some("10.0.0.0/24"));
        assert_eq!(due(Some("10.0.0.0/24"), Some("10.0.0.0/24")), None);
        assert_eq!(
            due(Some("10.0.1.0/24"), Some("10.0.0.0/24")),
            Some("10.0.1.0/24")
        );
        assert_eq!(due(None, Some("10.0.0.0/24")), None);
    }
}
