//! Carries out the core's node writes: register the Node, renew its Lease, patch its
//! status, create and delete mirror pods.
//!
//! Owns the HTTP shape of each write (an existing Node on registration is adopted, a missing
//! Lease is created, mirror pods get an owner reference to the Node). Must not decide when to
//! write or what the status is: the core does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use super::{ApiClient, ApiError};
use crate::core::command::NodeCommand;
use crate::core::pod;
use crate::core::record::event::{NodeAction, NodeSyncFinished, NodeSyncOutcome};

/// The namespace node leases live in.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Executes node writes; remembers the Node's UID for owner references.
#[derive(Clone)]
pub struct NodeSync {
    api: ApiClient,
    node_uid: Arc<Mutex<Option<String>>>,
}

impl NodeSync {
    /// A node writer over `api`.
    pub fn new(api: ApiClient) -> NodeSync {
        NodeSync {
            api,
            node_uid: Arc::default(),
        }
    }

    fn owner(&self, node_name: &str) -> Option<Vec<OwnerReference>> {
        let uid = self.node_uid.lock().expect("node uid").clone()?;
        Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node_name.into(),
            uid,
            controller: Some(true),
            ..OwnerReference::default()
        }])
    }

    /// Executes one node write; a failure is logged (a refusal by the API server's
    /// authorization says which credentials the node must use).
    pub async fn execute(&self, cmd: NodeCommand) -> NodeSyncFinished {
        let finished = self.execute_one(cmd).await;
        if let NodeSyncOutcome::Failed { code, message } = &finished.outcome {
            let action = finished.action;
            let uid = finished
                .uid
                .as_ref()
                .map(|u| u.to_string())
                .unwrap_or_default();
            if *code == Some(403) {
                tracing::warn!(
                    ?action,
                    pod_uid = %uid,
                    "node write forbidden by the API server (Node authorizer, NodeRestriction or \
                     RBAC: the node's credentials must be CN=system:node:<node name>, \
                     O=system:nodes, and it may only write its own Node, Lease and pods): \
                     {message}"
                );
            } else {
                tracing::warn!(?action, pod_uid = %uid, code = ?code, "node write failed; retried later: {message}");
            }
        }
        finished
    }

    async fn execute_one(&self, cmd: NodeCommand) -> NodeSyncFinished {
        let (action, uid, r) = match cmd {
            NodeCommand::Register { node } => {
                (NodeAction::Register, None, self.register(&node).await)
            }
            NodeCommand::RenewLease {
                name,
                duration_s,
                renew_time,
            } => {
                let r = self.renew_lease(&name, duration_s, renew_time).await;
                (NodeAction::RenewLease, None, r)
            }
            NodeCommand::PatchStatus {
                name,
                status,
                remove_allocatable,
            } => {
                let nodes: Api<Node> = Api::all(self.api.client());
                let body = Patch::Strategic(status_patch(&status, &remove_allocatable));
                let params = PatchParams::default();
                let patch = nodes.patch_status(&name, &params, &body);
                let r = self.api.call("PATCH", patch).await.map(|_| ());
                (NodeAction::PatchStatus, None, r)
            }
            NodeCommand::CreateMirrorPod { pod: p } => {
                let static_uid = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(pod::CONFIG_MIRROR_ANNOTATION))
                    .map(crate::core::Uid::new);
                let mut mirror = (*p).clone();
                let node_name = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
                mirror.metadata.owner_references = self.owner(node_name.unwrap_or_default());
                mirror.metadata.uid = None;
                mirror.metadata.resource_version = None;
                let pods: Api<Pod> = Api::namespaced(self.api.client(), pod::namespace(&p));
                let r = match self
                    .api
                    .call("POST", pods.create(&PostParams::default(), &mirror))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_conflict() => Ok(()), // AlreadyExists: someone was quicker
                    Err(e) => Err(e),
                };
                (NodeAction::CreateMirrorPod, static_uid, r)
            }
            NodeCommand::DeleteMirrorPod {
                namespace,
                name,
                uid,
            } => {
                let pods: Api<Pod> = Api::namespaced(self.api.client(), &namespace);
                let params = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: Some(uid.to_string()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                let r = match self.api.call("DELETE", pods.delete(&name, &params)).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_not_found() => Ok(()),
                    Err(e) => Err(e),
                };
                (NodeAction::DeleteMirrorPod, Some(uid), r)
            }
        };
        let outcome = match r {
            Ok(()) => NodeSyncOutcome::Ok,
            Err(e) => NodeSyncOutcome::Failed {
                code: e.code,
                message: e.message,
            },
        };
        NodeSyncFinished {
            action,
            uid,
            outcome,
        }
    }

    /// `tryRegisterWithAPIServer`: create the Node; if it exists, adopt it and bring our
    /// labels onto it.
    async fn register(&self, node: &Node) -> Result<(), ApiError> {
        let nodes: Api<Node> = Api::all(self.api.client());
        let name = node.metadata.name.clone().unwrap_or_default();
        let created = match self
            .api
            .call("POST", nodes.create(&PostParams::default(), node))
            .await
        {
            Ok(n) => n,
            Err(e) if e.is_conflict() => {
                let labels: BTreeMap<String, String> =
                    node.metadata.labels.clone().unwrap_or_default();
                let patch = serde_json::json!({ "metadata": { "labels": labels } });
                self.api
                    .call(
                        "PATCH",
                        nodes.patch(&name, &PatchParams::default(), &Patch::Merge(patch)),
                    )
                    .await?
            }
            Err(e) => return Err(e),
        };
        *self.node_uid.lock().expect("node uid") = created.metadata.uid.clone();
        Ok(())
    }

    /// Creates the Lease or renews it (GET then PUT with the resourceVersion; a conflict is
    /// a failure the core retries at the next renewal).
    async fn renew_lease(
        &self,
        name: &str,
        duration_s: i32,
        renew_time: crate::core::record::Time,
    ) -> Result<(), ApiError> {
        let leases: Api<Lease> = Api::namespaced(self.api.client(), LEASE_NAMESPACE);
        let renew = MicroTime(crate::core::pod_status::time_to_api(renew_time).0);
        match self.api.call("GET", leases.get(name)).await {
            Ok(mut lease) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(name.into());
                spec.lease_duration_seconds = Some(duration_s);
                spec.renew_time = Some(renew);
                if lease.metadata.owner_references.is_none() {
                    lease.metadata.owner_references = self.owner(name);
                }
                self.api
                    .call("PUT", leases.replace(name, &PostParams::default(), &lease))
                    .await
                    .map(|_| ())
            }
            Err(e) if e.is_not_found() => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.into()),
                        namespace: Some(LEASE_NAMESPACE.into()),
                        owner_references: self.owner(name),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(name.into()),
                        lease_duration_seconds: Some(duration_s),
                        renew_time: Some(renew),
                        ..LeaseSpec::default()
                    }),
                };
                self.api
                    .call("POST", leases.create(&PostParams::default(), &lease))
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }
}

/// The strategic merge patch of a node status: `status`, with each of `remove_allocatable`
/// set to null under `status.allocatable` (deleted by the API server).
fn status_patch(
    status: &k8s_openapi::api::core::v1::NodeStatus,
    remove_allocatable: &[String],
) -> serde_json::Value {
    let mut patch = serde_json::json!({ "status": status });
    if !remove_allocatable.is_empty() {
        let allocatable = &mut patch["status"]["allocatable"];
        if !allocatable.is_object() {
            *allocatable = serde_json::json!({});
        }
        for name in remove_allocatable {
            allocatable[name.as_str()] = serde_json::Value::Null;
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_deletes_the_stale_extended_resources_from_allocatable() {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let status = k8s_openapi::api::core::v1::NodeStatus {
            allocatable: Some([("cpu".to_string(), Quantity("2".into()))].into()),
            ..Default::default()
        };
        let patch = status_patch(&status, &["example.com/widget".to_string()]);
        assert_eq!(
            patch["status"]["allocatable"],
            serde_json::json!({"cpu": "2", "example.com/widget": null})
        );
        let plain = status_patch(&status, &[]);
        assert_eq!(
            plain["status"]["allocatable"],
            serde_json::json!({"cpu": "2"})
        );
    }
}
