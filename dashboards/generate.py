#!/usr/bin/env python3
"""Writes the Grafana dashboards in this directory (ledgerlet-*.json).

The JSON files are committed; edit this script and rerun it (`python3 dashboards/generate.py`)
rather than editing them by hand, so the three dashboards keep one layout and one set of
variables. tests/metrics.rs runs every expression against a real Prometheus scraping a real
agent; tests/dashboards.rs validates every file against ../schemas/grafana-dashboard.schema.json.
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SEL = 'job="$job",instance=~"$instance"'
DS = {"type": "prometheus", "uid": "${datasource}"}


def variables(metric):
    return {
        "list": [
            {
                "name": "datasource",
                "label": "Data source",
                "type": "datasource",
                "query": "prometheus",
                "current": {},
                "hide": 0,
                "refresh": 1,
                "regex": "",
                "options": [],
            },
            {
                "name": "job",
                "label": "Job",
                "type": "query",
                "datasource": DS,
                "query": {"query": f"label_values({metric}, job)", "refId": "job"},
                "definition": f"label_values({metric}, job)",
                "current": {},
                "hide": 0,
                "refresh": 2,
                "regex": "",
                "sort": 1,
                "includeAll": False,
                "multi": False,
                "options": [],
            },
            {
                "name": "instance",
                "label": "Instance",
                "type": "query",
                "datasource": DS,
                "query": {
                    "query": f'label_values({metric}{{job="$job"}}, instance)',
                    "refId": "instance",
                },
                "definition": f'label_values({metric}{{job="$job"}}, instance)',
                "current": {},
                "hide": 0,
                "refresh": 2,
                "regex": "",
                "sort": 1,
                "includeAll": True,
                "allValue": ".+",
                "multi": True,
                "options": [],
            },
        ]
    }


class Board:
    def __init__(self, uid, title, description, var_metric):
        self.uid = uid
        self.title = title
        self.description = description
        self.var_metric = var_metric
        self.panels = []
        self.y = 0
        self.x = 0
        self.next_id = 1

    def row(self, title):
        if self.x:
            self.x = 0
            self.y += 8
        self.panels.append(
            {
                "id": self.next_id,
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.next_id += 1
        self.y += 1

    def panel(self, title, description, targets, unit="short", kind="timeseries", w=12):
        if self.x + w > 24:
            self.x = 0
            self.y += 8
        refs = "ABCDEFGH"
        self.panels.append(
            {
                "id": self.next_id,
                "type": kind,
                "title": title,
                "description": description,
                "datasource": DS,
                "gridPos": {"h": 8, "w": w, "x": self.x, "y": self.y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
                "targets": [
                    {"refId": refs[i], "datasource": DS, "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(targets)
                ],
            }
        )
        self.next_id += 1
        self.x += w
        if self.x >= 24:
            self.x = 0
            self.y += 8

    def json(self):
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["ledgerlet", "kubelet"],
            "editable": True,
            "graphTooltip": 1,
            "schemaVersion": 39,
            "version": 1,
            "refresh": "10s",
            "time": {"from": "now-1h", "to": "now"},
            "timezone": "browser",
            "fiscalYearStartMonth": 0,
            "liveNow": False,
            "links": [],
            "annotations": {"list": []},
            "templating": variables(self.var_metric),
            "panels": self.panels,
        }


def quantile(q, metric, by, extra=""):
    by_clause = f"le, {by}" if by else "le"
    return (
        f"histogram_quantile({q}, sum by ({by_clause}) "
        f"(rate({metric}_bucket{{{SEL}{extra}}}[$__rate_interval])))"
    )


def rate(metric, by, extra=""):
    return f"sum by ({by}) (rate({metric}{{{SEL}{extra}}}[$__rate_interval]))"


def node_sync():
    b = Board(
        "ledgerlet-node-sync",
        "ledgerlet / Node sync",
        "Pod workers, pod start, status sync and PLEG, on the kubelet's metric names.",
        "kubelet_node_name",
    )
    b.row("Pod workers")
    b.panel(
        "Pod worker latency (p99) by operation",
        "kubelet_pod_worker_duration_seconds: from the update that started the work to its end.",
        [(quantile(0.99, "kubelet_pod_worker_duration_seconds", "operation_type"), "{{operation_type}}")],
        unit="s",
    )
    b.panel(
        "Pod worker syncs per second by operation",
        "Completed syncs by operation type (create, update, sync, kill, terminated).",
        [(rate("kubelet_pod_worker_duration_seconds_count", "operation_type"), "{{operation_type}}")],
        unit="ops",
    )
    b.panel(
        "Working pods by lifecycle",
        "kubelet_working_pods: the pod workers by lifecycle phase, config and static.",
        [("sum by (lifecycle) (kubelet_working_pods{%s})" % SEL, "{{lifecycle}}")],
    )
    b.panel(
        "Desired, active and mirror pods",
        "kubelet_desired_pods, kubelet_active_pods and kubelet_mirror_pods.",
        [
            ("sum(kubelet_desired_pods{%s})" % SEL, "desired"),
            ("sum(kubelet_active_pods{%s})" % SEL, "active"),
            ("sum(kubelet_mirror_pods{%s})" % SEL, "mirror"),
        ],
    )
    b.row("Pod start")
    b.panel(
        "Pod start SLI (p50, p99)",
        "kubelet_pod_start_sli_duration_seconds: creation to all containers running, without image pulls.",
        [
            (quantile(0.5, "kubelet_pod_start_sli_duration_seconds", ""), "p50"),
            (quantile(0.99, "kubelet_pod_start_sli_duration_seconds", ""), "p99"),
        ],
        unit="s",
    )
    b.panel(
        "Pod start duration (p99): first seen to running, and total",
        "kubelet_pod_start_duration_seconds and kubelet_pod_start_total_duration_seconds.",
        [
            (quantile(0.99, "kubelet_pod_start_duration_seconds", ""), "first seen to running"),
            (quantile(0.99, "kubelet_pod_start_total_duration_seconds", ""), "creation to all running"),
            (quantile(0.99, "kubelet_pod_worker_start_duration_seconds", ""), "first seen to worker start"),
        ],
        unit="s",
    )
    b.panel(
        "Pods and containers started per second",
        "kubelet_started_pods_total and kubelet_started_containers_total.",
        [
            ("sum(rate(kubelet_started_pods_total{%s}[$__rate_interval]))" % SEL, "pods"),
            (rate("kubelet_started_containers_total", "container_type"), "{{container_type}}"),
        ],
        unit="ops",
    )
    b.panel(
        "Start errors per second",
        "kubelet_started_pods_errors_total and kubelet_started_containers_errors_total by code.",
        [
            ("sum(rate(kubelet_started_pods_errors_total{%s}[$__rate_interval]))" % SEL, "pods"),
            (rate("kubelet_started_containers_errors_total", "container_type, code"), "{{container_type}} {{code}}"),
        ],
        unit="ops",
    )
    b.panel(
        "Restarted and orphaned pods",
        "kubelet_restarted_pods_total (same UID back) and kubelet_orphaned_runtime_pods_total.",
        [
            ("sum by (static) (kubelet_restarted_pods_total{%s})" % SEL, "restarted static={{static}}"),
            ("sum(kubelet_orphaned_runtime_pods_total{%s})" % SEL, "orphaned runtime pods"),
        ],
    )
    b.panel(
        "Containers per pod",
        "kubelet_containers_per_pod_count (p99 and average).",
        [
            (quantile(0.99, "kubelet_containers_per_pod_count", ""), "p99"),
            (
                "sum(kubelet_containers_per_pod_count_sum{%s}) / sum(kubelet_containers_per_pod_count_count{%s})"
                % (SEL, SEL),
                "average",
            ),
        ],
    )
    b.row("Status sync")
    b.panel(
        "Status sync latency (p50, p99)",
        "kubelet_pod_status_sync_duration_seconds: status change to API server acknowledgement.",
        [
            (quantile(0.5, "kubelet_pod_status_sync_duration_seconds", ""), "p50"),
            (quantile(0.99, "kubelet_pod_status_sync_duration_seconds", ""), "p99"),
        ],
        unit="s",
    )
    b.panel(
        "API requests per second by code and method",
        "rest_client_requests_total.",
        [(rate("rest_client_requests_total", "code, method"), "{{method}} {{code}}")],
        unit="reqps",
    )
    b.panel(
        "API request latency (p99) by verb",
        "rest_client_request_duration_seconds.",
        [(quantile(0.99, "rest_client_request_duration_seconds", "verb"), "{{verb}}")],
        unit="s",
    )
    b.panel(
        "Status syncs by outcome",
        "ledgerlet_status_syncs_total: patched, unchanged, not found, UID changed, failed.",
        [(rate("ledgerlet_status_syncs_total", "outcome"), "{{outcome}}")],
        unit="ops",
    )
    b.row("PLEG")
    b.panel(
        "PLEG relist duration and interval (p99)",
        "kubelet_pleg_relist_duration_seconds and kubelet_pleg_relist_interval_seconds.",
        [
            (quantile(0.99, "kubelet_pleg_relist_duration_seconds", ""), "duration"),
            (quantile(0.99, "kubelet_pleg_relist_interval_seconds", ""), "interval"),
        ],
        unit="s",
    )
    b.panel(
        "PLEG last seen",
        "Seconds since the PLEG was last active (unhealthy after 3 minutes).",
        [("time() - max(kubelet_pleg_last_seen_seconds{%s})" % SEL, "seconds ago")],
        unit="s",
    )
    b.panel(
        "Running pods and containers",
        "kubelet_running_pods and kubelet_running_containers by state.",
        [
            ("sum(kubelet_running_pods{%s})" % SEL, "pods"),
            ("sum by (container_state) (kubelet_running_containers{%s})" % SEL, "containers {{container_state}}"),
        ],
    )
    b.panel(
        "Evented PLEG",
        "Mode in use, and connection latency of the runtime's container event stream.",
        [
            ("max by (mode) (ledgerlet_pleg_mode{%s})" % SEL, "mode {{mode}}"),
            (quantile(0.99, "kubelet_evented_pleg_connection_latency_seconds", ""), "connection latency p99"),
        ],
    )
    return b


def ledger():
    b = Board(
        "ledgerlet-ledger",
        "ledgerlet / Ledger",
        "What only ledgerlet has: records by kind, retention, fold latency, pod worker transitions, commands and trace export.",
        "ledgerlet_ledger_records_total",
    )
    b.row("Records")
    b.panel(
        "Records per second by kind",
        "ledgerlet_ledger_records_total: every input and outcome becomes a record.",
        [(rate("ledgerlet_ledger_records_total", "kind"), "{{kind}}")],
        unit="ops",
    )
    b.panel(
        "Retention",
        "Records and bytes retained in memory (bounded by --ledger-max-records / --ledger-max-bytes).",
        [
            ("sum(ledgerlet_ledger_retained_records{%s})" % SEL, "records"),
            ("sum(ledgerlet_ledger_retained_bytes{%s}) / 1024 / 1024" % SEL, "MiB"),
        ],
    )
    b.panel(
        "Evictions and snapshots",
        "Records evicted per second, and snapshots held for replay.",
        [
            ("sum(rate(ledgerlet_ledger_evicted_records_total{%s}[$__rate_interval]))" % SEL, "evicted/s"),
            ("sum(ledgerlet_ledger_snapshots{%s})" % SEL, "snapshots"),
        ],
    )
    b.panel(
        "Newest record",
        "ledgerlet_ledger_last_seq: the ledger's position.",
        [("max(ledgerlet_ledger_last_seq{%s})" % SEL, "seq")],
    )
    b.row("Fold")
    b.panel(
        "Fold latency (p99) by kind",
        "ledgerlet_fold_duration_seconds: one record into the node state.",
        [(quantile(0.99, "ledgerlet_fold_duration_seconds", "kind"), "{{kind}}")],
        unit="s",
    )
    b.panel(
        "Fold time per second",
        "Share of one core spent folding.",
        [("sum(rate(ledgerlet_fold_duration_seconds_sum{%s}[$__rate_interval]))" % SEL, "fold")],
        unit="percentunit",
    )
    b.row("Pod worker transitions")
    b.panel(
        "Transitions per second",
        "ledgerlet_pod_worker_transitions_total{from,to}: none, sync, terminating, terminated, finished.",
        [(rate("ledgerlet_pod_worker_transitions_total", "from, to"), "{{from}} → {{to}}")],
        unit="ops",
    )
    b.panel(
        "Time in a state before each transition (p90)",
        "ledgerlet_pod_worker_transition_duration_seconds: e.g. terminating → terminated is the time to stop a pod.",
        [(quantile(0.9, "ledgerlet_pod_worker_transition_duration_seconds", "from, to"), "{{from}} → {{to}}")],
        unit="s",
    )
    b.row("Commands")
    b.panel(
        "Command latency (p99) by command",
        "ledgerlet_command_duration_seconds: from the record that emitted a command to its outcome.",
        [(quantile(0.99, "ledgerlet_command_duration_seconds", "command"), "{{command}}")],
        unit="s",
    )
    b.panel(
        "Commands per second",
        "ledgerlet_commands_total by command.",
        [(rate("ledgerlet_commands_total", "command"), "{{command}}")],
        unit="ops",
    )
    b.row("Trace export and process")
    b.panel(
        "Spans exported and dropped per second",
        "ledgerlet_trace_spans_exported_total and ledgerlet_trace_spans_dropped_total (a slow or unreachable collector); export calls that failed or timed out, retries included (ledgerlet_trace_export_errors_total).",
        [
            ("sum(rate(ledgerlet_trace_spans_exported_total{%s}[$__rate_interval]))" % SEL, "exported"),
            ("sum(rate(ledgerlet_trace_spans_dropped_total{%s}[$__rate_interval]))" % SEL, "dropped"),
            ("sum(rate(ledgerlet_trace_export_errors_total{%s}[$__rate_interval]))" % SEL, "export errors"),
        ],
        unit="ops",
    )
    b.panel(
        "Span queue",
        "Spans waiting for export, against the queue's bound.",
        [
            ("sum(ledgerlet_trace_queue_spans{%s})" % SEL, "queued"),
            ("sum(ledgerlet_trace_queue_capacity_spans{%s})" % SEL, "capacity"),
        ],
    )
    b.panel(
        "Memory",
        "process_resident_memory_bytes.",
        [("sum(process_resident_memory_bytes{%s})" % SEL, "resident")],
        unit="bytes",
    )
    b.panel(
        "CPU",
        "process_cpu_seconds_total.",
        [("sum(rate(process_cpu_seconds_total{%s}[$__rate_interval]))" % SEL, "cores")],
    )
    return b


def runtime():
    b = Board(
        "ledgerlet-runtime",
        "ledgerlet / Container runtime",
        "CRI operations as the kubelet measures them (kubelet_runtime_operations_*), sandboxes and containers.",
        "kubelet_runtime_operations_total",
    )
    b.row("CRI operations")
    b.panel(
        "Operations per second by type",
        "kubelet_runtime_operations_total by operation_type.",
        [(rate("kubelet_runtime_operations_total", "operation_type"), "{{operation_type}}")],
        unit="ops",
    )
    b.panel(
        "Errors per second by type",
        "kubelet_runtime_operations_errors_total by operation_type.",
        [(rate("kubelet_runtime_operations_errors_total", "operation_type"), "{{operation_type}}")],
        unit="ops",
    )
    b.panel(
        "Latency (p99) by type",
        "kubelet_runtime_operations_duration_seconds.",
        [(quantile(0.99, "kubelet_runtime_operations_duration_seconds", "operation_type"), "{{operation_type}}")],
        unit="s",
    )
    b.panel(
        "Error ratio by type",
        "Errors over all calls of each operation type.",
        [
            (
                "sum by (operation_type) (rate(kubelet_runtime_operations_errors_total{%s}[$__rate_interval])) "
                "/ sum by (operation_type) (rate(kubelet_runtime_operations_total{%s}[$__rate_interval]))"
                % (SEL, SEL),
                "{{operation_type}}",
            )
        ],
        unit="percentunit",
    )
    b.row("Sandboxes and containers")
    b.panel(
        "RunPodSandbox latency (p99)",
        "kubelet_run_podsandbox_duration_seconds by runtime handler.",
        [(quantile(0.99, "kubelet_run_podsandbox_duration_seconds", "runtime_handler"), "handler={{runtime_handler}}")],
        unit="s",
    )
    b.panel(
        "Containers started by type",
        "kubelet_started_containers_total.",
        [("sum by (container_type) (kubelet_started_containers_total{%s})" % SEL, "{{container_type}}")],
    )
    b.panel(
        "Container start errors by code",
        "kubelet_started_containers_errors_total.",
        [("sum by (code) (kubelet_started_containers_errors_total{%s})" % SEL, "{{code}}")],
    )
    b.panel(
        "Runtime calls inside pod syncs (p99)",
        "ledgerlet_command_duration_seconds of the pod worker's syncs, for comparison with the CRI latency.",
        [(quantile(0.99, "ledgerlet_command_duration_seconds", "command", ',command=~"sync.*"'), "{{command}}")],
        unit="s",
    )
    return b


def main():
    import sys

    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    for board, name in [(node_sync(), "ledgerlet-node-sync.json"), (ledger(), "ledgerlet-ledger.json"), (runtime(), "ledgerlet-runtime.json")]:
        with open(os.path.join(out, name), "w") as f:
            json.dump(board.json(), f, indent=2, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
