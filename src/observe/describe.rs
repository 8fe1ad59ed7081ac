//! Help texts of the metrics recorded through the `metrics` facade, and the zero values of
//! counters that exist before anything happens (so alerts and dashboards see a series, as
//! with the kubelet's pre-registered metrics).
//!
//! Owns the descriptions (the kubelet's help text where the kubelet has the metric). Must
//! not record anything but zeros.

/// `kubelet_pod_worker_duration_seconds{operation_type}`.
pub const POD_WORKER_DURATION_SECONDS: &str = "kubelet_pod_worker_duration_seconds";
/// `kubelet_runtime_operations_total{operation_type}`.
pub const RUNTIME_OPERATIONS_TOTAL: &str = "kubelet_runtime_operations_total";
/// `kubelet_runtime_operations_duration_seconds{operation_type}`.
pub const RUNTIME_OPERATIONS_DURATION_SECONDS: &str = "kubelet_runtime_operations_duration_seconds";
/// `kubelet_runtime_operations_errors_total{operation_type}`.
pub const RUNTIME_OPERATIONS_ERRORS_TOTAL: &str = "kubelet_runtime_operations_errors_total";
/// `kubelet_started_pods_total`.
pub const STARTED_PODS_TOTAL: &str = "kubelet_started_pods_total";
/// `kubelet_started_pods_errors_total`.
pub const STARTED_PODS_ERRORS_TOTAL: &str = "kubelet_started_pods_errors_total";
/// `kubelet_started_containers_total{container_type}`.
pub const STARTED_CONTAINERS_TOTAL: &str = "kubelet_started_containers_total";
/// `kubelet_started_containers_errors_total{container_type,code}`.
pub const STARTED_CONTAINERS_ERRORS_TOTAL: &str = "kubelet_started_containers_errors_total";
/// `kubelet_run_podsandbox_duration_seconds{runtime_handler}`.
pub const RUN_PODSANDBOX_DURATION_SECONDS: &str = "kubelet_run_podsandbox_duration_seconds";
/// `kubelet_run_podsandbox_errors_total{runtime_handler}`.
pub const RUN_PODSANDBOX_ERRORS_TOTAL: &str = "kubelet_run_podsandbox_errors_total";
/// `ledgerlet_command_duration_seconds{command}`.
pub const COMMAND_DURATION_SECONDS: &str = "ledgerlet_command_duration_seconds";
/// `ledgerlet_commands_total{command}`.
pub const COMMANDS_TOTAL: &str = "ledgerlet_commands_total";
/// The kubelet's `kubelet_evented_pleg_connection_success_count` under a name Prometheus'
/// naming rules accept (`promtool check metrics` rejects a counter without `_total` and any
/// non-histogram ending in `_count`).
pub const EVENTED_PLEG_CONNECTION_SUCCESSES_TOTAL: &str =
    "ledgerlet_evented_pleg_connection_successes_total";
/// Exits of this node's containers' own processes containerd reported to the PLEG (its
/// task-delete events, which follow an exit, on a containerd without CRI container events):
/// each inspects its pod at once.
pub const PLEG_TASK_EXIT_EVENTS_TOTAL: &str = "ledgerlet_pleg_task_exit_events_total";
/// Pods the PLEG read from the runtime, by `trigger`.
pub const PLEG_INSPECTIONS_TOTAL: &str = "ledgerlet_pleg_inspections_total";
/// The kubelet's `kubelet_evented_pleg_connection_error_count`, renamed for the same reason.
pub const EVENTED_PLEG_CONNECTION_ERRORS_TOTAL: &str =
    "ledgerlet_evented_pleg_connection_errors_total";
/// The kubelet's `kubelet_pleg_discard_events`, renamed for the same reason (always 0: the
/// PLEG waits for the engine instead of discarding).
pub const PLEG_DISCARDED_EVENTS_TOTAL: &str = "ledgerlet_pleg_discarded_events_total";
/// `ledgerlet_status_sync_wait_seconds`.
pub const STATUS_SYNC_WAIT_SECONDS: &str = "ledgerlet_status_sync_wait_seconds";

/// Registers every description and the zero values.
pub fn describe_all() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    // histograms of durations in seconds
    let seconds = |name: &'static str, help: &'static str| {
        describe_histogram!(name, Unit::Seconds, help);
    };
    describe_gauge!(
        "kubelet_node_name",
        "The node's name. The count is always 1."
    );
    seconds(
        POD_WORKER_DURATION_SECONDS,
        "Duration in seconds to sync a single pod. Broken down by operation type: create, update, sync, kill or terminated."
    );
    seconds(
        "kubelet_pod_status_sync_duration_seconds",
        "Duration in seconds to sync a pod status update. Measures time from detection of a change to pod status until the API is successfully updated for that pod, even if multiple intevening changes to pod status occur."
    );
    seconds(
        "kubelet_pleg_relist_duration_seconds",
        "Duration in seconds for relisting pods in PLEG.",
    );
    seconds(
        "kubelet_pleg_relist_interval_seconds",
        "Interval in seconds between relisting in PLEG.",
    );
    describe_counter!(
        PLEG_DISCARDED_EVENTS_TOTAL,
        "The number of discard events in PLEG (kubelet_pleg_discard_events; ledgerlet's PLEG waits instead of discarding, so this stays 0)."
    );
    describe_gauge!(
        "kubelet_pleg_last_seen_seconds",
        Unit::Seconds,
        "Timestamp in seconds when PLEG was last seen active."
    );
    describe_counter!(
        EVENTED_PLEG_CONNECTION_ERRORS_TOTAL,
        "The number of errors encountered during the establishment of streaming connection with the CRI runtime (kubelet_evented_pleg_connection_error_count)."
    );
    describe_counter!(
        PLEG_TASK_EXIT_EVENTS_TOTAL,
        "Exits of this node's containers' own processes containerd reported to the PLEG (task-delete events, which follow an exit, on a containerd without CRI container events); each inspects its pod at once."
    );
    describe_counter!(
        EVENTED_PLEG_CONNECTION_SUCCESSES_TOTAL,
        "The number of times a streaming client was obtained to receive CRI Events (kubelet_evented_pleg_connection_success_count)."
    );
    seconds(
        "kubelet_evented_pleg_connection_latency_seconds",
        "The latency of streaming connection with the CRI runtime, measured in seconds.",
    );
    describe_gauge!(
        "kubelet_running_pods",
        "Number of pods that have a running pod sandbox"
    );
    describe_gauge!(
        "kubelet_running_containers",
        "Number of containers currently running"
    );
    describe_counter!(STARTED_PODS_TOTAL, "Cumulative number of pods started");
    describe_counter!(
        STARTED_PODS_ERRORS_TOTAL,
        "Cumulative number of errors when starting pods"
    );
    describe_counter!(
        STARTED_CONTAINERS_TOTAL,
        "Cumulative number of containers started"
    );
    describe_counter!(
        STARTED_CONTAINERS_ERRORS_TOTAL,
        "Cumulative number of errors when starting containers"
    );
    seconds(
        RUN_PODSANDBOX_DURATION_SECONDS,
        "Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler."
    );
    describe_counter!(
        RUN_PODSANDBOX_ERRORS_TOTAL,
        "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler."
    );
    describe_counter!(
        RUNTIME_OPERATIONS_TOTAL,
        "Cumulative number of runtime operations by operation type."
    );
    seconds(
        RUNTIME_OPERATIONS_DURATION_SECONDS,
        "Duration in seconds of runtime operations. Broken down by operation type.",
    );
    describe_counter!(
        RUNTIME_OPERATIONS_ERRORS_TOTAL,
        "Cumulative number of runtime operation errors by operation type."
    );
    describe_counter!(
        "rest_client_requests_total",
        "Number of HTTP requests, partitioned by status code, method, and host."
    );
    seconds(
        "rest_client_request_duration_seconds",
        "Request latency in seconds. Broken down by verb, and host.",
    );
    seconds(
        COMMAND_DURATION_SECONDS,
        "Time from the record that emitted a command to the command's outcome, by command.",
    );
    describe_counter!(
        COMMANDS_TOTAL,
        "Commands carried out by the shell, by command."
    );
    seconds(
        STATUS_SYNC_WAIT_SECONDS,
        "Time from a pod status change to the start of the status sync that carries it.",
    );
    describe_counter!(
        "ledgerlet_status_syncs_total",
        "Status syncs (GET, PATCH, DELETE) by outcome."
    );
    describe_counter!(
        super::otel::SPANS_DROPPED_TOTAL,
        "Spans dropped because the export queue was full (a slow or unreachable collector)."
    );
    describe_counter!(
        super::otel::SPANS_EXPORTED_TOTAL,
        "Spans in export calls the OTLP collector accepted."
    );
    describe_counter!(
        super::otel::EXPORT_ERRORS_TOTAL,
        "OTLP export calls that failed or timed out, retries included (their spans are lost)."
    );
    describe_gauge!(
        super::otel::QUEUE_SPANS,
        "Spans waiting for export: queued, batched or being sent."
    );
    describe_gauge!(
        super::otel::QUEUE_CAPACITY_SPANS,
        "The export queue's bound (--tracing-max-queue-size)."
    );
    describe_gauge!(
        "ledgerlet_pleg_mode",
        "1 for the PLEG mode in use (generic relist or evented), 0 for the other."
    );
    describe_counter!(
        "ledgerlet_pleg_inspect_errors_total",
        "Pod inspections by the PLEG that failed."
    );
    describe_counter!(
        PLEG_INSPECTIONS_TOTAL,
        "Pods the PLEG read from the runtime, by what asked: relist (a change in the list), task_exit (containerd's delete of an exited task), recheck (again, the exit not yet shown), container_event (the CRI event stream), request (a pod worker's InspectPod), executor (an InspectPod the executor read itself, the PLEG having stopped)."
    );
    describe_counter!(
        "ledgerlet_manifest_errors_total",
        "Static pod manifests rejected, by reason."
    );
    describe_counter!(
        "ledgerlet_api_relists_total",
        "Relists of the API pod source (watch expired or failed)."
    );
    describe_counter!(
        "ledgerlet_api_watch_errors_total",
        "Errors of the API pod source's watch."
    );
    describe_counter!(
        "ledgerlet_events_dropped_total",
        "Kubernetes Events dropped because the event queue was full."
    );
    describe_counter!(
        super::fold::RECORDS_TOTAL,
        "Ledger records folded, by kind."
    );
    seconds(
        super::fold::FOLD_DURATION_SECONDS,
        "The engine's turn on one record, by kind: its fold and the hand-off of its commands, until the next record's fold starts or the engine is idle."
    );
    describe_counter!(
        super::fold::TRANSITIONS_TOTAL,
        "Pod worker lifecycle transitions (none, sync, terminating, terminated, finished)."
    );
    seconds(
        super::fold::TRANSITION_DURATION_SECONDS,
        "Time a pod worker spent in the `from` state before the transition.",
    );
    seconds(
        "kubelet_pod_worker_start_duration_seconds",
        "Duration in seconds from seeing a pod to starting a worker.",
    );
    seconds(
        "kubelet_pod_start_duration_seconds",
        "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run"
    );
    seconds(
        "kubelet_pod_start_sli_duration_seconds",
        "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch"
    );
    seconds(
        "kubelet_pod_start_total_duration_seconds",
        "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch"
    );
    describe_histogram!(
        "kubelet_containers_per_pod_count",
        "The number of containers per pod."
    );
    describe_counter!(
        "kubelet_restarted_pods_total",
        "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)"
    );
    describe_counter!(
        "kubelet_orphaned_runtime_pods_total",
        "Number of pods that have been detected in the container runtime without being already known to the pod worker. This typically indicates the kubelet was restarted while a pod was force deleted in the API or in the local configuration, which is unusual."
    );
    describe_gauge!(
        "kubelet_desired_pods",
        "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver."
    );
    describe_gauge!(
        "kubelet_active_pods",
        "The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver."
    );
    describe_gauge!(
        "kubelet_mirror_pods",
        "The number of mirror pods the kubelet will try to create (one per admitted static pod)"
    );
    describe_gauge!(
        "kubelet_working_pods",
        "Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible."
    );
    describe_gauge!(
        "ledgerlet_ledger_retained_records",
        "Records retained in the in-memory ledger."
    );
    describe_gauge!(
        "ledgerlet_ledger_retained_bytes",
        "Bytes retained by the ledger (records and the objects they share, each once)."
    );
    describe_counter!(
        "ledgerlet_ledger_evicted_records_total",
        "Records evicted by retention since start."
    );
    describe_gauge!(
        "ledgerlet_ledger_snapshots",
        "Snapshots of the folded state retained for replay."
    );
    describe_gauge!("ledgerlet_ledger_last_seq", "Seq of the newest record.");
    // counters that exist before their first event
    for name in [
        PLEG_DISCARDED_EVENTS_TOTAL,
        EVENTED_PLEG_CONNECTION_ERRORS_TOTAL,
        EVENTED_PLEG_CONNECTION_SUCCESSES_TOTAL,
        PLEG_TASK_EXIT_EVENTS_TOTAL,
        STARTED_PODS_TOTAL,
        STARTED_PODS_ERRORS_TOTAL,
    ] {
        metrics::counter!(name).absolute(0);
    }
    for t in ["container", "init_container"] {
        metrics::counter!(STARTED_CONTAINERS_TOTAL, "container_type" => t).absolute(0);
    }
}
