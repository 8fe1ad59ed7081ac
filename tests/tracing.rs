//! Traces: the real `ledgerlet run` binary exports through the OpenTelemetry SDK's OTLP
//! exporter (gRPC and HTTP/protobuf, gzip) to a real receiver (PyPI `rotel`, which logs every
//! span it receives) and to a real Jaeger (read back from its query API), and with a
//! collector that never answers it runs pods as without tracing while its span queue stays
//! bounded.

mod support;

#[path = "support/peers.rs"]
mod peers;

use std::collections::BTreeSet;
use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

use peers::{descends_from, Jaeger, Rotel, Span};
use support::agent::Agent;

const JOB: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: traced
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "echo traced; sleep 0.3"]
"#;

/// Every trace sampled (the default, as the kubelet's, samples none).
const EVERY_TRACE: [&str; 2] = ["--tracing-sampling-rate-per-million", "1000000"];

fn uid_of(agent: &Agent, name: &str) -> String {
    agent.wait_for(&format!("pod {name} in /pods"), 30, |a| {
        a.pod(name).and_then(|p| p.metadata.uid)
    })
}

fn pod_span<'a>(spans: &'a [Span], name: &str, uid: &str) -> Option<&'a Span> {
    spans.iter().find(|s| {
        s.name == name && s.attributes.get("k8s.pod.uid").map(String::as_str) == Some(uid)
    })
}

/// rotel started in a temporary directory (dropped after it), or `None` where
/// `peers::rotel` finds no rotel and allows that (never under CI).
/// The root of a pod's trace (`in_trace`: its spans): the one span without a parent, the
/// `pod` span naming the pod, with the record that added the pod (`fold PodAdded`) under it.
fn pod_root<'a>(in_trace: &[&'a Span], uid: &str, full_name: &str) -> &'a Span {
    let roots: Vec<&Span> = in_trace
        .iter()
        .copied()
        .filter(|s| s.parent_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "one root in {full_name}'s trace: {roots:?}");
    let root = roots[0];
    let attribute = |key: &str| root.attributes.get(key).map(String::as_str);
    assert_eq!(root.name, "pod");
    assert_eq!(attribute("k8s.pod.uid"), Some(uid));
    assert_eq!(attribute("k8s.pod.name"), Some(full_name));
    assert_eq!(
        attribute("k8s.pod"),
        Some(format!("default/{full_name}").as_str())
    );
    let added = in_trace
        .iter()
        .find(|s| s.name == "fold PodAdded")
        .expect("the record that added the pod is in its trace");
    assert_eq!(
        added.parent_id, root.id,
        "fold PodAdded hangs under the pod's root"
    );
    root
}

fn started_rotel() -> Option<(tempfile::TempDir, Rotel)> {
    let bin = peers::rotel()?;
    let dir = tempfile::tempdir().unwrap();
    let rotel = Rotel::start(&bin, dir.path());
    Some((dir, rotel))
}

/// Every export the agent made was accepted: some spans exported, no export failed.
fn assert_exported_without_errors(agent: &Agent) {
    let (_, text) = agent.get("/metrics");
    assert!(metric(&text, "ledgerlet_trace_spans_exported_total") > 0.0);
    assert_eq!(metric(&text, "ledgerlet_trace_export_errors_total"), 0.0);
}

/// Runs the traced job on an agent started with `args` and `env` (exporting every 200 ms)
/// and waits until `rotel` has received the pod's `until` span; the agent, the pod's UID
/// and the spans received by then.
fn trace_the_job(
    rotel: &Rotel,
    args: &[&str],
    env: &[(&str, &str)],
    until: &str,
) -> (Agent, String, Vec<Span>) {
    let mut all = args.to_vec();
    all.extend(EVERY_TRACE);
    all.extend(["--tracing-export-period-ms", "200"]);
    let agent = Agent::start_with_env(&all, env);
    agent.write_manifest("traced.yaml", JOB);
    let uid = uid_of(&agent, "traced");
    let spans = rotel.wait_for(&format!("{until} of the pod"), 60, |spans| {
        pod_span(spans, until, &uid).map(|_| spans.to_vec())
    });
    (agent, uid, spans)
}

#[test]
fn otel_01_rotel_receives_pod_worker_spans_with_cri_client_and_runtime_server_spans_in_one_trace() {
    let Some((_dir, rotel)) = started_rotel() else {
        return;
    };
    let endpoint = rotel.endpoint();
    let (agent, uid, spans) = trace_the_job(
        &rotel,
        &["--tracing-endpoint", &endpoint],
        &[],
        "syncTerminatedPod",
    );
    // give the last batches (CRI spans end before their parents) a moment
    std::thread::sleep(Duration::from_millis(600));
    let spans = {
        let later = rotel.spans();
        if later.len() >= spans.len() {
            later
        } else {
            spans
        }
    };

    // the kubelet's pod worker spans, with its attributes
    let sync = pod_span(&spans, "syncPod", &uid).expect("a syncPod span");
    let terminating = pod_span(&spans, "syncTerminatingPod", &uid).expect("syncTerminatingPod");
    let terminated = pod_span(&spans, "syncTerminatedPod", &uid).expect("syncTerminatedPod");
    let full = format!("traced-{}", agent.node_name);
    for s in [sync, terminating, terminated] {
        assert_eq!(s.attributes.get("k8s.pod.name"), Some(&full), "{s:?}");
        assert_eq!(
            s.attributes.get("k8s.namespace.name").map(String::as_str),
            Some("default")
        );
        assert_eq!(
            s.attributes.get("k8s.pod"),
            Some(&format!("default/{full}")),
            "{s:?}"
        );
    }
    let create = spans
        .iter()
        .find(|s| {
            s.name == "syncPod"
                && s.attributes.get("k8s.pod.uid") == Some(&uid)
                && s.attributes.get("k8s.pod.update_type").map(String::as_str) == Some("create")
        })
        .expect("the syncPod of the create has k8s.pod.update_type=create");
    // the pod's whole life is one trace
    assert_eq!(sync.trace_id, terminating.trace_id);
    assert_eq!(sync.trace_id, terminated.trace_id);
    let trace = &create.trace_id;
    let in_trace: Vec<&Span> = spans.iter().filter(|s| &s.trace_id == trace).collect();
    // the trace's root is the pod's own span, made when the pod was first seen; the record
    // that added the pod, and every later record about it without a parent span, are under it
    let root = pod_root(&in_trace, &uid, &full);
    for s in [sync, terminating, terminated] {
        assert!(
            descends_from(&spans, s, root),
            "{} under the pod's root",
            s.name
        );
    }
    assert!(
        in_trace
            .iter()
            .filter(|s| s.name == "fold TimerFired" || s.name == "fold PlegEvent")
            .all(|s| s.parent_id == root.id),
        "records about the pod without a parent span join its trace under its root"
    );
    assert!(
        in_trace.iter().any(|s| s.name == "fold UpdatePod"
            && s.events
                .iter()
                .any(|e| e.contains("pod worker transition") && e.contains("to: Str(sync)"))),
        "a span event marks the worker's transition to sync: {:?}",
        in_trace
            .iter()
            .filter(|s| !s.events.is_empty())
            .map(|s| (&s.name, &s.events))
            .collect::<Vec<_>>()
    );

    // CRI client spans are descendants of the syncPod that created the pod
    let client = cri_client_spans_under(&spans, create, "traced");
    // the embedded runtime continued each call's trace in a server span under the client span
    let run_sandbox = client
        .iter()
        .find(|s| s.name == "runtime.v1.RuntimeService/RunPodSandbox")
        .unwrap();
    let server = spans
        .iter()
        .find(|s| s.kind == "SPAN_KIND_SERVER" && s.parent_id == run_sandbox.id)
        .expect("the runtime's server span of RunPodSandbox, child of the client span");
    assert_eq!(server.trace_id, *trace);
    assert_eq!(server.name, "runtime.v1.RuntimeService/RunPodSandbox");
    // the termination's CRI calls are in the same trace, under syncTerminatingPod
    assert!(spans.iter().any(|s| s.kind == "SPAN_KIND_CLIENT"
        && s.name == "runtime.v1.RuntimeService/StopPodSandbox"
        && descends_from(&spans, s, terminating)));
    // untraced CRI calls (the PLEG's relists) start no traces of their own
    assert!(
        !spans
            .iter()
            .any(|s| s.kind == "SPAN_KIND_SERVER" && s.parent_id.is_empty()),
        "server spans only continue traced calls"
    );
}

/// The CRI client spans under `create` (a pod's `syncPod` that created it), after checking
/// that they include the calls that start a pod, each a gRPC call that succeeded.
fn cri_client_spans_under<'a>(spans: &'a [Span], create: &Span, pod: &str) -> Vec<&'a Span> {
    let client: Vec<&Span> = spans
        .iter()
        .filter(|s| s.kind == "SPAN_KIND_CLIENT" && descends_from(spans, s, create))
        .collect();
    let methods: BTreeSet<&str> = client.iter().map(|s| s.name.as_str()).collect();
    for m in [
        "runtime.v1.RuntimeService/RunPodSandbox",
        "runtime.v1.RuntimeService/CreateContainer",
        "runtime.v1.RuntimeService/StartContainer",
        "runtime.v1.ImageService/ImageStatus",
    ] {
        assert!(
            methods.contains(m),
            "{m} under {pod}'s syncPod(create); got {methods:?}"
        );
    }
    for c in &client {
        assert_eq!(
            c.attributes.get("rpc.system").map(String::as_str),
            Some("grpc"),
            "{c:?}"
        );
        assert_eq!(
            c.attributes.get("rpc.grpc.status_code").map(String::as_str),
            Some("0"),
            "{c:?}"
        );
    }
    client
}

/// Accepts TCP connections and never answers: the worst collector (every export waits for
/// its timeout).
fn black_hole() -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let mut held = Vec::new();
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(true).ok();
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    held.push(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
            if held.len() > 64 {
                held.remove(0);
            }
        }
    });
    (port, h)
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn otel_02_a_collector_that_never_answers_changes_nothing_and_the_span_queue_stays_bounded() {
    let (port, _hole) = black_hole();
    let queue = 32;
    let agent = Agent::start(&[
        "--tracing-endpoint",
        &format!("127.0.0.1:{port}"),
        "--tracing-max-queue-size",
        &queue.to_string(),
        "--tracing-export-period-ms",
        "100",
        "--tracing-export-timeout-ms",
        "60000",
        EVERY_TRACE[0],
        EVERY_TRACE[1],
    ]);
    // (not web.yaml: its fixed port 8080 may be taken on a shared machine)
    agent.write_manifest("traced.yaml", JOB);
    for f in ["job.yaml", "init.yaml"] {
        let yaml =
            std::fs::read_to_string(format!("{}/examples/pods/{f}", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        agent.write_manifest(f, &yaml);
    }
    // the example pods behave as they do without tracing
    agent.wait_for("traced and job Succeeded, with-init Running", 60, |a| {
        let phase = |n: &str| {
            a.pod(n)
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .unwrap_or_default()
        };
        (phase("traced") == "Succeeded"
            && phase("job") == "Succeeded"
            && phase("with-init") == "Running")
            .then_some(())
    });
    let text = agent.wait_for("spans dropped while the collector hangs", 30, |a| {
        let (_, t) = a.get("/metrics");
        (metric(&t, "ledgerlet_trace_spans_dropped_total") > 0.0).then_some(t)
    });
    assert_eq!(
        metric(&text, "ledgerlet_trace_queue_capacity_spans"),
        queue as f64
    );
    assert!(metric(&text, "ledgerlet_trace_queue_spans") <= queue as f64);
    assert_eq!(metric(&text, "ledgerlet_trace_spans_exported_total"), 0.0);
    // the records still carry their trace context (it is data, whatever the collector does)
    let ledger = agent.ledger();
    assert!(ledger.iter().all(|r| r.trace.is_some()));
    agent.assert_ledger_replays_to_state();
    // and the agent stops as fast as without tracing would allow (shutdown is bounded too)
    let mut agent = agent;
    assert!(agent.stop().success());
}

#[test]
fn otel_03_without_an_endpoint_records_carry_no_trace_and_nothing_is_exported() {
    let agent = Agent::start(&[]);
    agent.write_manifest("traced.yaml", JOB);
    uid_of(&agent, "traced");
    let ledger = agent.ledger();
    assert!(!ledger.is_empty());
    assert!(ledger.iter().all(|r| r.trace.is_none()));
    let (_, text) = agent.get("/metrics");
    assert!(!text.contains("ledgerlet_trace_queue_capacity_spans"));
}

/// Runs `ledgerlet run` with `args` and `env` (the other export variables removed), which
/// must stop at start-up with exit code 2; its stderr.
fn start_up_failure(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ledgerlet"));
    cmd.arg("run").args(args).arg("--root-dir").arg(dir.path());
    for var in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn otel_04_malformed_export_headers_stop_the_agent_at_start_up_naming_the_variable_and_entry() {
    let stderr = start_up_failure(
        &["--tracing-endpoint", "127.0.0.1:4317"],
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Basic%20abc,tenant",
        )],
    );
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_HEADERS") && stderr.contains("\"tenant\""),
        "{stderr}"
    );
}

#[test]
fn otel_05_otlp_http_protobuf_gzip_set_by_the_opentelemetry_variables_reaches_a_real_collector() {
    let Some((_dir, rotel)) = started_rotel() else {
        return;
    };
    // no flag: the generic endpoint variable is a base that /v1/traces is added to
    let (agent, uid, spans) = trace_the_job(
        &rotel,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &rotel.http_base()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ],
        "syncTerminatedPod",
    );
    let sync = pod_span(&spans, "syncPod", &uid).expect("a syncPod span");
    let terminated = pod_span(&spans, "syncTerminatedPod", &uid).unwrap();
    assert_eq!(sync.trace_id, terminated.trace_id, "one trace per pod");
    let root = spans
        .iter()
        .find(|s| s.name == "pod" && s.attributes.get("k8s.pod.uid") == Some(&uid))
        .expect("the pod's root span (a fold span's note) arrived");
    assert!(
        descends_from(&spans, sync, root),
        "syncPod under the pod's root"
    );
    assert!(
        spans.iter().any(|s| s.kind == "SPAN_KIND_CLIENT"
            && s.name == "runtime.v1.RuntimeService/RunPodSandbox"
            && descends_from(&spans, s, sync)),
        "CRI client spans under syncPod"
    );
    assert_exported_without_errors(&agent);
}

#[test]
fn otel_06_an_unknown_tracing_protocol_stops_the_agent_at_start_up_naming_it() {
    let stderr = start_up_failure(
        &["--tracing-endpoint", "127.0.0.1:4318"],
        &[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")],
    );
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            && stderr.contains("\"http/json\"")
            && stderr.contains("http/protobuf or grpc"),
        "{stderr}"
    );
}

#[test]
fn otel_07_gzip_over_otlp_grpc_set_by_flags_reaches_a_real_collector() {
    let Some((_dir, rotel)) = started_rotel() else {
        return;
    };
    let endpoint = rotel.endpoint();
    let (agent, uid, spans) = trace_the_job(
        &rotel,
        &[
            "--tracing-endpoint",
            &endpoint,
            "--tracing-protocol",
            "grpc",
            "--tracing-compression",
            "gzip",
        ],
        &[],
        "syncPod",
    );
    let sync = pod_span(&spans, "syncPod", &uid).unwrap();
    assert!(
        spans
            .iter()
            .any(|s| s.kind == "SPAN_KIND_CLIENT" && descends_from(&spans, s, sync)),
        "CRI client spans under syncPod"
    );
    assert_exported_without_errors(&agent);
}

/// Prints its text if the test fails while it is alive.
struct ShowOnFailure(String);

impl Drop for ShowOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.0);
        }
    }
}

/// A quick job like [`JOB`], named `name`.
fn job(name: &str) -> String {
    JOB.replace("name: traced", &format!("name: {name}"))
}

#[test]
fn otel_08_jaeger_shows_one_trace_per_pod_rooted_at_pod_with_cri_client_and_runtime_server_spans() {
    let Some(bin) = peers::jaeger() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(&bin, dir.path());
    let endpoint = jaeger.endpoint();
    let mut args = vec!["--tracing-endpoint", endpoint.as_str()];
    args.extend(EVERY_TRACE);
    args.extend(["--tracing-export-period-ms", "200"]);
    let agent = Agent::start(&args);
    let names = ["traced-a", "traced-b", "traced-c"];
    for n in names {
        agent.write_manifest(&format!("{n}.yaml"), &job(n));
    }
    let uids: Vec<String> = names.iter().map(|n| uid_of(&agent, n)).collect();
    jaeger.wait_for("ledgerlet", "every pod's syncTerminatedPod", 60, |spans| {
        uids.iter()
            .all(|uid| pod_span(spans, "syncTerminatedPod", uid).is_some())
            .then_some(())
    });
    // give the last batches (CRI spans end before their parents) a moment
    std::thread::sleep(Duration::from_millis(1000));
    let (spans, body) = jaeger.spans("ledgerlet");
    // every assertion below fails with what Jaeger returned
    let _shown = ShowOnFailure(peers::returned(&spans, &body));

    let mut traces = BTreeSet::new();
    for (name, uid) in names.iter().zip(&uids) {
        // every span that names the pod is in one trace, and that trace names no other pod
        let own: BTreeSet<&str> = spans
            .iter()
            .filter(|s| s.attributes.get("k8s.pod.uid") == Some(uid))
            .map(|s| s.trace_id.as_str())
            .collect();
        assert_eq!(own.len(), 1, "{name}'s spans in one trace: {own:?}");
        let trace = *own.iter().next().unwrap();
        assert!(traces.insert(trace), "{name} has a trace of its own");
        let in_trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace).collect();
        let others: Vec<&&Span> = in_trace
            .iter()
            .filter(|s| s.attributes.get("k8s.pod.uid").is_some_and(|u| u != uid))
            .collect();
        assert!(
            others.is_empty(),
            "{name}'s trace has other pods' spans: {others:?}"
        );

        // the trace's root is the pod's own span
        let full = format!("{name}-{}", agent.node_name);
        let root = pod_root(&in_trace, uid, &full);
        assert!(
            in_trace.iter().any(|s| s.name == "fold UpdatePod"
                && s.events
                    .iter()
                    .any(|e| e.starts_with("pod worker transition") && e.contains("to: sync"))),
            "a span event marks {name}'s worker's transition to sync"
        );

        // the kubelet's pod worker spans under the root, with its attributes
        let create = in_trace
            .iter()
            .find(|s| {
                s.name == "syncPod"
                    && s.attributes.get("k8s.pod.update_type").map(String::as_str) == Some("create")
            })
            .unwrap_or_else(|| panic!("{name}'s syncPod(create)"));
        let terminating = pod_span(&spans, "syncTerminatingPod", uid).expect("syncTerminatingPod");
        let terminated = pod_span(&spans, "syncTerminatedPod", uid).expect("syncTerminatedPod");
        for s in [*create, terminating, terminated] {
            assert!(
                descends_from(&spans, s, root),
                "{} under {name}'s root",
                s.name
            );
            assert_eq!(s.attributes.get("k8s.pod.name"), Some(&full), "{s:?}");
            assert_eq!(
                s.attributes.get("k8s.namespace.name").map(String::as_str),
                Some("default")
            );
        }

        // the CRI client spans under syncPod(create), each continued by the embedded
        // runtime in a server span of the same method under it
        let client = cri_client_spans_under(&spans, create, name);
        for c in &client {
            let server = spans
                .iter()
                .find(|s| s.kind == "SPAN_KIND_SERVER" && s.parent_id == c.id)
                .unwrap_or_else(|| panic!("the runtime's server span under {} of {name}", c.name));
            assert_eq!(server.trace_id, trace);
            assert_eq!(server.name, c.name);
        }
        // the termination's CRI calls are in the same trace, under syncTerminatingPod
        assert!(spans.iter().any(|s| s.kind == "SPAN_KIND_CLIENT"
            && s.name == "runtime.v1.RuntimeService/StopPodSandbox"
            && descends_from(&spans, s, terminating)));
    }
    // untraced CRI calls (the PLEG's relists) start no traces of their own
    assert!(
        !spans
            .iter()
            .any(|s| s.kind == "SPAN_KIND_SERVER" && s.parent_id.is_empty()),
        "server spans only continue traced calls"
    );
}
