//! Metrics: the real `ledgerlet run` binary, joined to a real control plane
//! and running the example pods, serves `/metrics` that Debian's `promtool check
//! metrics` accepts, with the kubelet's names, types, labels and buckets; a real Prometheus
//! scrapes it and every PromQL expression of every panel of `dashboards/*.json` returns at
//! least one series.

mod support;

#[path = "support/peers.rs"]
mod peers;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use support::agent::{http_get, Agent};
use support::real_cluster::{Kube, RealCluster};

/// A container whose command does not exist: StartContainer fails (the error paths of the
/// runtime and start metrics are real, not pre-registered).
const BROKEN: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: broken
spec:
  restartPolicy: Always
  containers:
    - name: main
      image: busybox
      command: ["/nonexistent/ledgerlet-test-binary"]
"#;

/// The agent as a node of the real control plane (`tests/support/real_cluster.rs`), with
/// the example pods (static) and an API pod.
struct Node {
    admin: Kube,
    agent: Agent,
}

impl Node {
    /// `None` when there is no control plane (outside CI only).
    fn start(name: &str) -> Option<Node> {
        let c = RealCluster::shared()?;
        let admin = c.admin();
        // tracing to a closed port: the export metrics exist, nothing is received
        let closed = peers::free_port();
        let agent = c.agent(
            name,
            &[
                "--status-sync-period-ms",
                "1000",
                "--evented-relist-period-ms",
                "1000",
                "--tracing-endpoint",
                &format!("127.0.0.1:{closed}"),
                "--tracing-export-timeout-ms",
                "1000",
            ],
        );
        let dir = format!("{}/examples/pods", env!("CARGO_MANIFEST_DIR"));
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_str().unwrap().to_string();
            agent.write_manifest(&name, &std::fs::read_to_string(&f).unwrap());
        }
        agent.write_manifest("broken.yaml", BROKEN);
        let api_pod = format!("api-pod-{name}");
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(api_pod.clone()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some(name.into()),
                automount_service_account_token: Some(false),
                termination_grace_period_seconds: Some(2),
                containers: vec![Container {
                    name: "main".into(),
                    image: Some("busybox".into()),
                    command: Some(vec!["sh".into(), "-c".into(), "sleep 3600".into()]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        admin
            .run(
                admin
                    .api::<Pod>("default")
                    .create(&PostParams::default(), &pod),
            )
            .unwrap();
        // the pods' lives so far: the job done, the api pod running and its status written
        agent.wait_for("job Succeeded, api-pod Running in the API", 60, |a| {
            let job = a
                .pod("job")
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .unwrap_or_default();
            let api_phase = admin
                .run(admin.api::<Pod>("default").get_opt(&api_pod))
                .ok()
                .flatten()
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .unwrap_or_default();
            (job == "Succeeded" && api_phase == "Running").then_some(())
        });
        Some(Node { admin, agent })
    }
}

fn family_type<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("# TYPE {name} ")))
}

#[test]
fn metrics_01_promtool_check_metrics_accepts_the_agents_metrics_with_the_kubelets_names() {
    let Some(promtool) = peers::promtool() else {
        return;
    };
    let Some(node) = Node::start("metrics-promtool") else {
        return;
    };
    let text = node
        .agent
        .wait_for("status syncs and pod start metrics", 60, |a| {
            let (_, t) = a.get("/metrics");
            (t.contains("kubelet_pod_status_sync_duration_seconds_count")
                && t.contains("kubelet_pleg_relist_interval_seconds_count")
                && t.contains("rest_client_requests_total{")
                && t.contains("kubelet_started_containers_errors_total{"))
            .then_some(t)
        });
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics exited {:?}:\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // the kubelet's names and types (OBSERVABILITY.md §1)
    for (name, kind) in [
        ("kubelet_node_name", "gauge"),
        ("kubelet_containers_per_pod_count", "histogram"),
        ("kubelet_pod_worker_duration_seconds", "histogram"),
        ("kubelet_pod_start_duration_seconds", "histogram"),
        ("kubelet_pod_start_sli_duration_seconds", "histogram"),
        ("kubelet_pod_start_total_duration_seconds", "histogram"),
        ("kubelet_pod_worker_start_duration_seconds", "histogram"),
        ("kubelet_pod_status_sync_duration_seconds", "histogram"),
        ("kubelet_pleg_relist_duration_seconds", "histogram"),
        ("kubelet_pleg_relist_interval_seconds", "histogram"),
        ("kubelet_pleg_last_seen_seconds", "gauge"),
        (
            "kubelet_evented_pleg_connection_latency_seconds",
            "histogram",
        ),
        ("kubelet_running_pods", "gauge"),
        ("kubelet_running_containers", "gauge"),
        ("kubelet_desired_pods", "gauge"),
        ("kubelet_active_pods", "gauge"),
        ("kubelet_mirror_pods", "gauge"),
        ("kubelet_working_pods", "gauge"),
        ("kubelet_orphaned_runtime_pods_total", "counter"),
        ("kubelet_restarted_pods_total", "counter"),
        ("kubelet_started_pods_total", "counter"),
        ("kubelet_started_pods_errors_total", "counter"),
        ("kubelet_started_containers_total", "counter"),
        ("kubelet_started_containers_errors_total", "counter"),
        ("kubelet_run_podsandbox_duration_seconds", "histogram"),
        ("kubelet_runtime_operations_total", "counter"),
        ("kubelet_runtime_operations_duration_seconds", "histogram"),
        ("kubelet_runtime_operations_errors_total", "counter"),
        ("rest_client_requests_total", "counter"),
        ("rest_client_request_duration_seconds", "histogram"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_start_time_seconds", "gauge"),
        ("process_open_fds", "gauge"),
        ("ledgerlet_ledger_records_total", "counter"),
        ("ledgerlet_ledger_retained_records", "gauge"),
        ("ledgerlet_ledger_retained_bytes", "gauge"),
        ("ledgerlet_fold_duration_seconds", "histogram"),
        ("ledgerlet_command_duration_seconds", "histogram"),
        ("ledgerlet_pod_worker_transitions_total", "counter"),
        ("ledgerlet_trace_spans_dropped_total", "counter"),
    ] {
        assert_eq!(family_type(&text, name), Some(kind), "{name}");
    }
    // labels and buckets
    for sample in [
        "kubelet_node_name{node=\"metrics-promtool\"} 1",
        "kubelet_pod_worker_duration_seconds_bucket{operation_type=\"create\",le=\"10\"}",
        "kubelet_pod_start_sli_duration_seconds_bucket{le=\"0.5\"}",
        "kubelet_pod_start_sli_duration_seconds_bucket{le=\"3600\"}",
        "kubelet_pod_status_sync_duration_seconds_bucket{le=\"45\"}",
        "kubelet_containers_per_pod_count_bucket{le=\"16\"}",
        "kubelet_containers_per_pod_count_count ",
        "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"run_podsandbox\",le=\"0.03125\"}",
        "kubelet_runtime_operations_errors_total{operation_type=\"start_container\"}",
        "kubelet_started_containers_total{container_type=\"init_container\"}",
        "kubelet_started_containers_errors_total{container_type=\"container\",code=\"RunContainerError\"}",
        "kubelet_working_pods{config=\"desired\",lifecycle=\"sync\",static=\"true\"}",
        "kubelet_desired_pods{static=\"false\"} 1",
        "kubelet_running_containers{container_state=\"running\"}",
        "rest_client_request_duration_seconds_bucket{verb=\"PATCH\",host=\"127.0.0.1\",le=\"15\"}",
        "ledgerlet_pod_worker_transitions_total{from=\"none\",to=\"sync\"}",
        "ledgerlet_pod_worker_transitions_total{from=\"sync\",to=\"terminating\"}",
    ] {
        assert!(text.contains(sample), "{sample} missing from /metrics");
    }
    let rest = text
        .lines()
        .find(|l| l.starts_with("rest_client_requests_total{") && l.contains("method=\"PATCH\""))
        .expect("a PATCH in rest_client_requests_total");
    assert!(
        rest.contains("code=\"200\"") && rest.contains("host=\"127.0.0.1\""),
        "{rest}"
    );
    // the mirror pods of the five static pods
    assert!(text.contains("kubelet_mirror_pods 5"), "five mirror pods");
    drop(node.admin);
}

// ----- Prometheus -----------------------------------------------------------------------

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A real Prometheus scraping one target every second.
struct Prometheus {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(bin: &std::path::Path, target_port: u16) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let port = peers::free_port();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: ledgerlet\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            port,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    fn query(&self, expr: &str) -> serde_json::Value {
        let (status, body) = http_get(
            self.port,
            &format!("/api/v1/query?query={}", urlencode(expr)),
        );
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{expr}: HTTP {status}: {e}: {body}"));
        assert_eq!(v["status"], "success", "{expr}: {body}");
        v
    }

    /// Waits until the target has been scraped `n` times.
    fn wait_scrapes(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            // Prometheus listens before its storage is up and answers 503 until `/-/ready`
            // says 200 (seen on a loaded machine): query only once it is ready.
            let ready = std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && http_get(self.port, "/-/ready").0 == 200;
            if ready {
                let v = self.query("count_over_time(up{job=\"ledgerlet\"}[5m])");
                let count = v["data"]["result"][0]["value"][1]
                    .as_str()
                    .and_then(|s| s.parse::<f64>().ok())
                    .unwrap_or(0.0);
                let up = self.query("up{job=\"ledgerlet\"}");
                if count >= n as f64 && up["data"]["result"][0]["value"][1] == "1" {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not scrape the agent {n} times:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every `targets[].expr` of every panel (rows' nested panels too), with its panel title.
fn panel_exprs(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(panels: &serde_json::Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push((title.clone(), e.to_string()));
                }
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Grafana's variables, as a dashboard on this node would resolve them.
fn substitute(expr: &str, instance: &str) -> String {
    expr.replace("$__rate_interval", "30s")
        .replace("${__rate_interval}", "30s")
        .replace("$__interval", "5s")
        .replace("$__range", "5m")
        .replace("${job}", "ledgerlet")
        .replace("$job", "ledgerlet")
        .replace("${instance}", instance)
        .replace("$instance", instance)
}

pub fn dashboards() -> Vec<(String, serde_json::Value)> {
    let dir = format!("{}/dashboards", env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<(String, serde_json::Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn metrics_02_prometheus_scrapes_the_agent_and_every_dashboard_expression_returns_series() {
    let Some(bin) = peers::prometheus() else {
        return;
    };
    let Some(node) = Node::start("metrics-prometheus") else {
        return;
    };
    let prom = Prometheus::start(&bin, node.agent.port);
    prom.wait_scrapes(5);
    let instance = format!("127.0.0.1:{}", node.agent.port);
    let boards = dashboards();
    assert!(
        boards.len() >= 3,
        "node sync, ledger and runtime dashboards"
    );
    let mut checked = 0;
    let mut empty = Vec::new();
    for (file, board) in &boards {
        for (title, expr) in panel_exprs(board) {
            let q = substitute(&expr, &instance);
            assert!(
                !q.contains('$'),
                "{file} / {title}: unsubstituted variable in {q}"
            );
            let v = prom.query(&q);
            let n = v["data"]["result"].as_array().map_or(0, Vec::len);
            if n == 0 {
                empty.push(format!("{file} / {title}: {q}"));
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} expressions");
    assert!(
        empty.is_empty(),
        "expressions without series after {} scrapes:\n{}",
        5,
        empty.join("\n")
    );
    // the variables' own queries resolve to this target
    for (file, board) in &boards {
        for var in board["templating"]["list"].as_array().into_iter().flatten() {
            if var["type"] == "query" {
                let q = var["query"]["query"]
                    .as_str()
                    .or_else(|| var["query"].as_str())
                    .unwrap_or_default();
                // label_values(metric{...}, label) → the metric's series
                let inner = q
                    .strip_prefix("label_values(")
                    .and_then(|r| r.rsplit_once(','))
                    .map(|(m, _)| substitute(m, &instance))
                    .unwrap_or_else(|| {
                        panic!("{file}: variable {} is not label_values(...)", var["name"])
                    });
                let v = prom.query(&inner);
                assert!(
                    v["data"]["result"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty()),
                    "{file}: variable {} has no values ({inner})",
                    var["name"]
                );
            }
        }
    }
    drop(node.admin);
}
