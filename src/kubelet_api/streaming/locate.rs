//! What a streaming request reaches in the runtime: the running container of a pod by name
//! (the kubelet's `findContainer` over the runtime's running pods) and the pod's ready
//! sandbox (its `getSandboxIDByPodUID`).
//!
//! Owns the CRI look-ups, limited to this node's own sandboxes and containers (several
//! agents may share one runtime). Must not start, stop or change anything.

use std::collections::HashMap;

use crate::cri::{v1, CriClient, CriError};
use crate::shell::cri_config::{
    CONTAINER_NAME_LABEL, NODE_LABEL, POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_UID_LABEL,
};

/// Which pod a request names: by namespace and name, and by UID when the path gave one.
pub struct PodRef<'a> {
    /// The node whose objects these are.
    pub node: &'a str,
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
    /// The UID from the path, if any.
    pub uid: Option<&'a str>,
}

impl PodRef<'_> {
    fn selector(&self) -> HashMap<String, String> {
        let mut s = HashMap::from([
            (NODE_LABEL.to_string(), self.node.to_string()),
            (POD_NAMESPACE_LABEL.to_string(), self.namespace.to_string()),
            (POD_NAME_LABEL.to_string(), self.name.to_string()),
        ]);
        if let Some(uid) = self.uid {
            s.insert(POD_UID_LABEL.to_string(), uid.to_string());
        }
        s
    }

    /// The kubelet's `podFullName`: `name_namespace`.
    pub fn full_name(&self) -> String {
        format!("{}_{}", self.name, self.namespace)
    }
}

/// The ID of the pod's running container `container` (the newest, should there be two).
pub async fn running_container(
    cri: &CriClient,
    pod: &PodRef<'_>,
    container: &str,
) -> Result<Option<String>, CriError> {
    let mut selector = pod.selector();
    selector.insert(CONTAINER_NAME_LABEL.to_string(), container.to_string());
    let found = cri
        .list_containers(Some(v1::ContainerFilter {
            state: Some(v1::ContainerStateValue {
                state: v1::ContainerState::ContainerRunning as i32,
            }),
            label_selector: selector,
            ..Default::default()
        }))
        .await?;
    Ok(found
        .into_iter()
        .max_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)))
        .map(|c| c.id))
}

/// The ID of the pod's ready sandbox (the newest, should there be two).
pub async fn ready_sandbox(cri: &CriClient, pod: &PodRef<'_>) -> Result<Option<String>, CriError> {
    let found = cri
        .list_pod_sandbox(Some(v1::PodSandboxFilter {
            state: Some(v1::PodSandboxStateValue {
                state: v1::PodSandboxState::SandboxReady as i32,
            }),
            label_selector: pod.selector(),
            ..Default::default()
        }))
        .await?;
    Ok(found
        .into_iter()
        .max_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)))
        .map(|s| s.id))
}
