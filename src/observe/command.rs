//! Command spans and command metrics: every command the shell carries out runs inside a span
//! whose parent is the span of the record that caused it, named as the kubelet names the
//! same work (`syncPod`, `syncTerminatingPod`, `syncTerminatedPod`, `status.sync`, …) with
//! OpenTelemetry's k8s attributes.
//!
//! Owns the span shapes and `kubelet_pod_worker_duration_seconds{operation_type}`,
//! `ledgerlet_command_duration_seconds{command}`, `ledgerlet_commands_total{command}` and
//! `ledgerlet_status_sync_wait_seconds`. Must not execute commands.

use k8s_openapi::api::core::v1::Pod;

use crate::core::command::Command;
use crate::core::pod;
use crate::core::record::{Time, TraceParent};

use super::context;
use super::describe::{
    COMMANDS_TOTAL, COMMAND_DURATION_SECONDS, POD_WORKER_DURATION_SECONDS, STATUS_SYNC_WAIT_SECONDS,
};

fn pod_span(name: &'static str, p: &Pod, uid: &str, update_type: Option<&str>) -> tracing::Span {
    let ns = pod::namespace(p);
    let pod_name = pod::name(p);
    tracing::info_span!(
        "command",
        otel.name = name,
        otel.status_code = tracing::field::Empty,
        k8s.pod.uid = uid,
        k8s.pod = %format_args!("{ns}/{pod_name}"),
        k8s.pod.name = pod_name,
        k8s.namespace.name = ns,
        k8s.pod.update_type = update_type,
    )
}

/// The span a command runs in; `Span::none()` when tracing is off or the command is carried
/// out at once (timers, cancellations).
pub fn span(command: &Command, parent: Option<&TraceParent>) -> tracing::Span {
    if !context::enabled() {
        return tracing::Span::none();
    }
    let span = match command {
        Command::SyncPod(c) => pod_span(
            "syncPod",
            &c.pod,
            c.uid.as_str(),
            Some(c.update_type.as_str()),
        ),
        Command::SyncTerminatingPod(c) => {
            pod_span("syncTerminatingPod", &c.pod, c.uid.as_str(), None)
        }
        Command::SyncTerminatedPod(c) => {
            pod_span("syncTerminatedPod", &c.pod, c.uid.as_str(), None)
        }
        Command::SyncTerminatingRuntimePod(c) => tracing::info_span!(
            "command",
            otel.name = "syncTerminatingRuntimePod",
            k8s.pod.uid = c.uid.as_str(),
            k8s.pod.name = %c.running_pod.name,
            k8s.namespace.name = %c.running_pod.namespace,
        ),
        Command::InspectPod { uid } => tracing::info_span!(
            "command",
            otel.name = "inspectPod",
            k8s.pod.uid = uid.as_str(),
        ),
        Command::RemovePodContent(c) => tracing::info_span!(
            "command",
            otel.name = "removePodContent",
            k8s.pod.uid = c.uid.as_str(),
        ),
        Command::SyncPodStatus(c) => tracing::info_span!(
            "command",
            otel.name = "status.sync",
            otel.status_code = tracing::field::Empty,
            k8s.pod.uid = c.uid.as_str(),
            k8s.pod.name = %c.name,
            k8s.namespace.name = %c.namespace,
            ledgerlet.status.version = c.version,
            ledgerlet.status.since_change_seconds =
                since(c.changed_at).map(|d| d.as_secs_f64()),
            ledgerlet.status.outcome = tracing::field::Empty,
            ledgerlet.status.patch_bytes = tracing::field::Empty,
            ledgerlet.status.deleted = tracing::field::Empty,
        ),
        Command::RunProbe(c) => tracing::info_span!(
            "command",
            otel.name = "probe",
            otel.status_code = tracing::field::Empty,
            k8s.pod.uid = c.uid.as_str(),
            k8s.pod.name = crate::core::pod::name(&c.pod),
            k8s.namespace.name = crate::core::pod::namespace(&c.pod),
            k8s.container.name = %c.container,
            ledgerlet.probe.type = c.probe.as_str(),
        ),
        Command::Node(_) | Command::RecordEvent(_) => tracing::info_span!(
            "command",
            otel.name = command.name(),
            otel.status_code = tracing::field::Empty,
        ),
        Command::Append(_) | Command::SetTimer(_) | Command::CancelSync { .. } => {
            return tracing::Span::none()
        }
    };
    context::set_parent(&span, parent);
    span
}

fn since(t: Time) -> Option<std::time::Duration> {
    (t != Time::ZERO).then(|| Time::from_system().since(t))
}

/// Records the status sync's wait (from the status change to the start of its sync).
pub fn status_sync_started(changed_at: Time) {
    if let Some(d) = since(changed_at) {
        metrics::histogram!(STATUS_SYNC_WAIT_SECONDS).record(d.as_secs_f64());
    }
}

/// Records a finished command: its duration from the causing record's append, and for the
/// pod worker's syncs the kubelet's `kubelet_pod_worker_duration_seconds` (from the update
/// that started the work to its end, labelled as upstream: the update type for `syncPod`,
/// `kill` for terminating work, `terminated` for `syncTerminatedPod`).
pub fn finished(command_name: &'static str, operation_type: Option<&'static str>, cause_at: Time) {
    let d = Time::from_system().since(cause_at).as_secs_f64();
    metrics::counter!(COMMANDS_TOTAL, "command" => command_name).increment(1);
    metrics::histogram!(COMMAND_DURATION_SECONDS, "command" => command_name).record(d);
    if let Some(op) = operation_type {
        metrics::histogram!(POD_WORKER_DURATION_SECONDS, "operation_type" => op).record(d);
    }
}

/// The kubelet's `operation_type` for a pod worker command.
pub fn operation_type(command: &Command) -> Option<&'static str> {
    match command {
        Command::SyncPod(c) => Some(c.update_type.as_str()),
        Command::SyncTerminatingPod(_) | Command::SyncTerminatingRuntimePod(_) => Some("kill"),
        Command::SyncTerminatedPod(_) => Some("terminated"),
        _ => None,
    }
}
