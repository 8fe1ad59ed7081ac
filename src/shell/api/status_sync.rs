//! Carries out `SyncPodStatus` (the status manager's `syncPod`): GET, UID check, merge,
//! PATCH with the `metadata.uid` precondition, and DELETE with grace 0 when the pod may go.
//!
//! Owns the requests and their order. Must not decide anything: the merge, the patch body and
//! whether the pod can be deleted are the core's pure functions
//! (`core::status::{merge_pod_status, status_patch, can_be_deleted}`), applied to the object
//! the GET returned.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};

use super::ApiClient;
use crate::core::command::SyncPodStatusCommand;
use crate::core::record::event::{StatusSyncFinished, StatusSyncOutcome};
use crate::core::record::Time;
use crate::core::status::{can_be_deleted, merge_pod_status, status_patch};

fn failed(e: super::ApiError) -> StatusSyncOutcome {
    StatusSyncOutcome::Failed {
        code: e.code,
        message: e.message,
    }
}

/// Runs one status sync and says how it ended.
pub async fn sync_pod_status(api: &ApiClient, cmd: &SyncPodStatusCommand) -> StatusSyncFinished {
    let outcome = run(api, cmd).await;
    // the `status.sync` span (observe::command) this runs in
    let span = tracing::Span::current();
    span.record("ledgerlet.status.outcome", outcome_label(&outcome));
    match &outcome {
        StatusSyncOutcome::Patched {
            patch_bytes,
            deleted,
        } => {
            span.record("ledgerlet.status.patch_bytes", *patch_bytes);
            span.record("ledgerlet.status.deleted", *deleted);
        }
        StatusSyncOutcome::Unchanged { deleted } => {
            span.record("ledgerlet.status.patch_bytes", 0u64);
            span.record("ledgerlet.status.deleted", *deleted);
        }
        StatusSyncOutcome::Failed { code, message } => {
            span.record("otel.status_code", "error");
            // as the kubelet's "Failed to get/update status for pod": every failed attempt,
            // at info (a pod deleted meanwhile fails its GET too; the next pass retries)
            tracing::info!(
                pod = %format!("{}/{}", cmd.namespace, cmd.name),
                pod_uid = %cmd.uid,
                code = ?code,
                "pod status not written to the API server; retried at the next status pass: {message}"
            );
        }
        _ => {}
    }
    metrics::counter!("ledgerlet_status_syncs_total", "outcome" => outcome_label(&outcome))
        .increment(1);
    if matches!(outcome, StatusSyncOutcome::Patched { .. }) && cmd.changed_at != Time::ZERO {
        // kubelet_pod_status_sync_duration_seconds: from the change to the API server's ack
        let waited = Time::from_system().since(cmd.changed_at);
        metrics::histogram!("kubelet_pod_status_sync_duration_seconds")
            .record(waited.as_secs_f64());
    }
    StatusSyncFinished {
        uid: cmd.uid.clone(),
        version: cmd.version,
        outcome,
    }
}

fn outcome_label(o: &StatusSyncOutcome) -> &'static str {
    match o {
        StatusSyncOutcome::Patched { .. } => "patched",
        StatusSyncOutcome::Unchanged { .. } => "unchanged",
        StatusSyncOutcome::NotFound => "not_found",
        StatusSyncOutcome::UidChanged { .. } => "uid_changed",
        StatusSyncOutcome::Failed { .. } => "failed",
    }
}

async fn run(api: &ApiClient, cmd: &SyncPodStatusCommand) -> StatusSyncOutcome {
    let pods: Api<Pod> = Api::namespaced(api.client(), &cmd.namespace);
    let current = match api.call("GET", pods.get(&cmd.name)).await {
        Ok(p) => p,
        Err(e) if e.is_not_found() => return StatusSyncOutcome::NotFound,
        Err(e) => return failed(e),
    };
    let api_uid = current.metadata.uid.clone().unwrap_or_default();
    if api_uid != cmd.api_uid.as_str() {
        return StatusSyncOutcome::UidChanged { api_uid };
    }
    let old = current.status.clone().unwrap_or_default();
    let merged = merge_pod_status(
        &old,
        &cmd.status,
        cmd.could_have_running_containers,
        Time::from_system(),
    );
    let (patched, patch_bytes) = match status_patch(&current, &merged) {
        None => (current, None),
        Some(body) => {
            let bytes = serde_json::to_vec(&body).map_or(0, |b| b.len() as u64);
            match api
                .call(
                    "PATCH",
                    pods.patch_status(&cmd.name, &PatchParams::default(), &Patch::Strategic(body)),
                )
                .await
            {
                Ok(p) => (p, Some(bytes)),
                Err(e) if e.is_not_found() => return StatusSyncOutcome::NotFound,
                // a conflict (the UID precondition) is retried; the next GET tells why
                Err(e) => return failed(e),
            }
        }
    };
    let mut deleted = false;
    if !cmd.is_mirror && can_be_deleted(&patched, cmd.pod_is_finished) {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(api_uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.call("DELETE", pods.delete(&cmd.name, &params)).await {
            Ok(_) => deleted = true,
            Err(e) if e.is_not_found() => deleted = true,
            Err(e) => return failed(e),
        }
    }
    match patch_bytes {
        Some(patch_bytes) => StatusSyncOutcome::Patched {
            patch_bytes,
            deleted,
        },
        None => StatusSyncOutcome::Unchanged { deleted },
    }
}
