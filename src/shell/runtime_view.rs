//! What the runtime has, in the core's vocabulary (kubelet `GetPodStatus`, `GetPods`).
//!
//! Owns the conversion from CRI sandboxes and containers to `RuntimePodStatus` and the
//! queries that gather them: one pod by UID, or every pod ledgerlet manages. Must not decide
//! anything about what it reads.

use std::collections::BTreeMap;

use crate::core::record::Time;
use crate::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState, SandboxStatus,
};
use crate::core::Uid;
use crate::cri::{v1, CriClient, CriError};

use super::cri_config::{
    CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, MANAGED_LABEL, NODE_LABEL,
    POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_UID_LABEL, RESTART_COUNT_ANNOTATION,
};

fn state(s: i32) -> ContainerState {
    match v1::ContainerState::try_from(s) {
        Ok(v1::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(v1::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(v1::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

fn ns_time(ns: i64) -> Option<Time> {
    (ns > 0).then(|| Time::from_unix_nanos(ns))
}

/// A CRI container status in the core's terms.
pub fn container_status(s: &v1::ContainerStatus) -> ContainerStatus {
    let name = s
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| s.labels.get(CONTAINER_NAME_LABEL).cloned())
        .unwrap_or_default();
    ContainerStatus {
        id: s.id.clone(),
        name,
        state: state(s.state),
        created_at: Time::from_unix_nanos(s.created_at),
        started_at: ns_time(s.started_at),
        finished_at: ns_time(s.finished_at),
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message: s.message.clone(),
        image: s
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: s.image_ref.clone(),
        hash: s
            .annotations
            .get(CONTAINER_HASH_ANNOTATION)
            .cloned()
            .unwrap_or_default(),
        restart_count: s
            .annotations
            .get(RESTART_COUNT_ANNOTATION)
            .and_then(|v| v.parse().ok())
            .or_else(|| s.metadata.as_ref().map(|m| m.attempt as i32))
            .unwrap_or(0),
    }
}

/// A CRI sandbox status in the core's terms.
pub fn sandbox_status(s: &v1::PodSandboxStatus) -> SandboxStatus {
    let host_network = s
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .is_some_and(|o| o.network == v1::NamespaceMode::Node as i32);
    SandboxStatus {
        id: s.id.clone(),
        state: if s.state == v1::PodSandboxState::SandboxReady as i32 {
            SandboxState::SandboxReady
        } else {
            SandboxState::SandboxNotready
        },
        created_at: Time::from_unix_nanos(s.created_at),
        attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
        ip: s.network.as_ref().map(|n| n.ip.clone()),
        host_network,
    }
}

/// Assembles a pod status from its sandboxes and containers (newest first), as the kubelet's
/// `GetPodStatus` does; IPs come from the newest sandbox.
pub fn assemble(
    name: String,
    namespace: String,
    mut sandboxes: Vec<(SandboxStatus, Vec<String>)>,
    mut containers: Vec<ContainerStatus>,
) -> RuntimePodStatus {
    sandboxes.sort_by(|a, b| {
        b.0.created_at
            .cmp(&a.0.created_at)
            .then(b.0.id.cmp(&a.0.id))
    });
    containers.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    let ips = sandboxes
        .first()
        .map(|(s, extra)| {
            let primary = s.ip.iter().filter(|ip| !ip.is_empty());
            primary.chain(extra).cloned().collect()
        })
        .unwrap_or_default();
    RuntimePodStatus {
        name,
        namespace,
        ips,
        sandboxes: sandboxes.into_iter().map(|(s, _)| s).collect(),
        containers,
    }
}

fn uid_selector(uid: &str) -> std::collections::HashMap<String, String> {
    std::collections::HashMap::from([(POD_UID_LABEL.to_string(), uid.to_string())])
}

/// [`pod_status`] with its error as text (what a `RuntimeStatusObserved` carries), counted
/// in `ledgerlet_pleg_inspections_total` by what asked (`trigger`).
pub async fn read_pod(
    cri: &CriClient,
    uid: &Uid,
    trigger: &'static str,
) -> Result<RuntimePodStatus, String> {
    metrics::counter!(crate::observe::describe::PLEG_INSPECTIONS_TOTAL, "trigger" => trigger)
        .increment(1);
    pod_status(cri, uid).await.map_err(|e| e.to_string())
}

/// `GetPodStatus`: everything the runtime has for one pod (empty if nothing). A sandbox or
/// container that disappears between the list and its status call is skipped. The two
/// lists go out together, then every status call together: an inspection costs two round
/// trips instead of one per call, which is what a worker waiting on it (and a busy
/// runtime) notices.
pub async fn pod_status(cri: &CriClient, uid: &Uid) -> Result<RuntimePodStatus, CriError> {
    let (sandboxes, containers) = futures::try_join!(
        cri.list_pod_sandbox(Some(v1::PodSandboxFilter {
            label_selector: uid_selector(uid.as_str()),
            ..Default::default()
        })),
        cri.list_containers(Some(v1::ContainerFilter {
            label_selector: uid_selector(uid.as_str()),
            ..Default::default()
        })),
    )?;
    let (sandbox_reads, container_reads) = futures::join!(
        futures::future::join_all(
            sandboxes
                .iter()
                .map(|sb| cri.pod_sandbox_status(&sb.id, false))
        ),
        futures::future::join_all(
            containers
                .iter()
                .map(|c| cri.container_status(&c.id, false))
        ),
    );
    let mut name = String::new();
    let mut namespace = String::new();
    let mut sbs = Vec::new();
    for (sb, read) in sandboxes.iter().zip(sandbox_reads) {
        if let Some(m) = &sb.metadata {
            name = m.name.clone();
            namespace = m.namespace.clone();
        }
        match read {
            Ok(resp) => {
                if let Some(st) = resp.status {
                    let extra = st
                        .network
                        .as_ref()
                        .map(|n| n.additional_ips.iter().map(|i| i.ip.clone()).collect())
                        .unwrap_or_default();
                    sbs.push((sandbox_status(&st), extra));
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let mut cs = Vec::new();
    for (c, read) in containers.iter().zip(container_reads) {
        if name.is_empty() {
            name = c.labels.get(POD_NAME_LABEL).cloned().unwrap_or_default();
            namespace = c
                .labels
                .get(POD_NAMESPACE_LABEL)
                .cloned()
                .unwrap_or_default();
        }
        match read {
            Ok(resp) => {
                if let Some(st) = resp.status {
                    let mut status = container_status(&st);
                    super::termination_message::enrich(&st, &mut status.message);
                    cs.push(status);
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(assemble(name, namespace, sbs, cs))
}

/// A cheap view of one pod: its sandboxes' and containers' IDs and states.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListedPod {
    /// Sandboxes: ID → ready.
    pub sandboxes: BTreeMap<String, bool>,
    /// Containers: ID → state.
    pub containers: BTreeMap<String, ContainerState>,
}

/// `GetPods(all)`: every pod ledgerlet manages, from two list calls, by UID. With a
/// non-empty `node_name`, only the pods this node created (its `ledgerlet.dev/node` label):
/// another agent's pods on a shared runtime are not this node's to kill.
pub async fn list_pods(
    cri: &CriClient,
    node_name: &str,
) -> Result<BTreeMap<Uid, ListedPod>, CriError> {
    let mut managed = std::collections::HashMap::from([(MANAGED_LABEL.to_string(), "true".into())]);
    if !node_name.is_empty() {
        managed.insert(NODE_LABEL.to_string(), node_name.to_string());
    }
    let sandboxes = cri
        .list_pod_sandbox(Some(v1::PodSandboxFilter {
            label_selector: managed.clone(),
            ..Default::default()
        }))
        .await?;
    let containers = cri
        .list_containers(Some(v1::ContainerFilter {
            label_selector: managed,
            ..Default::default()
        }))
        .await?;
    let mut pods: BTreeMap<Uid, ListedPod> = BTreeMap::new();
    for sb in sandboxes {
        let Some(uid) = sb
            .labels
            .get(POD_UID_LABEL)
            .cloned()
            .or_else(|| sb.metadata.as_ref().map(|m| m.uid.clone()))
        else {
            continue;
        };
        pods.entry(Uid::new(uid)).or_default().sandboxes.insert(
            sb.id.clone(),
            sb.state == v1::PodSandboxState::SandboxReady as i32,
        );
    }
    for c in containers {
        let Some(uid) = c.labels.get(POD_UID_LABEL).cloned() else {
            continue;
        };
        pods.entry(Uid::new(uid))
            .or_default()
            .containers
            .insert(c.id.clone(), state(c.state));
    }
    Ok(pods)
}
