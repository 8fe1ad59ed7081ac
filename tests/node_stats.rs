//! The kubelet's stats endpoints on the node's read-only port, on a real control plane with
//! containerd as the runtime: `/stats/summary` (the Summary API metrics-server and the e2e
//! framework read) and `/metrics/resource` (the resource metrics behind `kubectl top`), with
//! figures that follow what the containers really do: a busy loop burns CPU, an idle
//! container does not, a container that fills a tmpfs holds memory; and `kubectl top` through
//! metrics-server (`cluster.sh up --with-metrics-server`, reading the read-only port).

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::Value;
use support::agent::http_get;
use support::on_containerd::{node_http_port, phase, IMAGE};
use support::real_cluster::RealCluster;

const NODE: &str = "stats-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd_with_metrics_server(NODE)
}

/// A pod bound to the node with the given `(container name, sh script)` containers.
fn pod(name: &str, containers: &[(&str, &str)]) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(n, script)| serde_json::json!({"name": n, "image": IMAGE, "command": ["sh", "-c", script]}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": containers,
        }
    }))
    .unwrap()
}

/// Creates `pod` and waits until it runs; returns its UID.
fn run(c: &RealCluster, pod: &Pod) -> String {
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let name = pod.metadata.name.clone().unwrap();
    let created = admin.run(pods.create(&PostParams::default(), pod)).unwrap();
    admin.wait_for(&format!("{name} Running"), 120, |k| {
        let p = k.run(pods.get(&name)).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
    created.metadata.uid.unwrap()
}

/// `GET path` on the node's read-only port: the status and body.
fn get(c: &RealCluster, path: &str) -> (u16, String) {
    http_get(node_http_port(c), path)
}

/// `/stats/summary` (with `query`), as JSON.
fn summary(c: &RealCluster, query: &str) -> Value {
    let (status, body) = get(c, &format!("/stats/summary{query}"));
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("summary JSON")
}

/// The summary's entry for pod `name` in `default`.
fn pod_in<'a>(s: &'a Value, name: &str) -> Option<&'a Value> {
    s["pods"]
        .as_array()?
        .iter()
        .find(|p| p["podRef"]["name"] == name && p["podRef"]["namespace"] == "default")
}

/// Container `name` of a summary pod entry.
fn container_in<'a>(p: &'a Value, name: &str) -> Option<&'a Value> {
    p["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

/// Polls the full summary until `check` finds what it wants (generous deadline).
fn wait_summary<T>(c: &RealCluster, what: &str, mut check: impl FnMut(&Value) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let s = summary(c, "");
        if let Some(v) = check(&s) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last summary: {s:#}"
        );
        std::thread::sleep(Duration::from_millis(1000));
    }
}

fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_u64()
}

/// ST-01: the node's own figures, with the fields metrics-server and the e2e framework read.
#[test]
fn st_01_stats_summary_reports_the_nodes_cpu_memory_filesystems_and_process_limits() {
    let Some(c) = cluster() else { return };
    let s = wait_summary(c, "a node CPU rate", |s| {
        u64_at(s, &["node", "cpu", "usageNanoCores"]).map(|_| s.clone())
    });
    let node = &s["node"];
    assert_eq!(node["nodeName"], NODE, "{node:#}");
    assert!(
        node["startTime"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{node:#}"
    );
    assert!(node["cpu"]["time"].is_string(), "{node:#}");
    assert!(
        u64_at(node, &["cpu", "usageCoreNanoSeconds"]).unwrap() > 0,
        "{node:#}"
    );
    for field in [
        "workingSetBytes",
        "usageBytes",
        "availableBytes",
        "rssBytes",
        "pageFaults",
    ] {
        assert!(
            u64_at(node, &["memory", field]).is_some_and(|v| v > 0),
            "node memory {field}: {node:#}"
        );
    }
    assert!(
        u64_at(node, &["fs", "capacityBytes"]).unwrap() > 0,
        "{node:#}"
    );
    assert!(
        u64_at(node, &["fs", "availableBytes"]).is_some(),
        "{node:#}"
    );
    assert!(u64_at(node, &["fs", "inodes"]).unwrap() > 0, "{node:#}");
    let image_fs = &node["runtime"]["imageFs"];
    assert!(
        u64_at(image_fs, &["capacityBytes"]).unwrap() > 0,
        "{node:#}"
    );
    assert!(u64_at(image_fs, &["usedBytes"]).is_some(), "{node:#}");
    assert!(u64_at(node, &["rlimit", "maxpid"]).unwrap() > 0, "{node:#}");
    assert!(
        u64_at(node, &["rlimit", "curproc"]).unwrap() > 0,
        "{node:#}"
    );
}

/// ST-02 and ST-03: a pod's entry names it and its running containers, and the CPU figures
/// follow the work done: a busy loop's cumulative CPU and rate rise, an idle container's
/// rate stays near zero; the pod's CPU covers its containers'.
#[test]
fn st_02_st_03_a_busy_container_burns_cpu_in_the_summary_and_an_idle_one_does_not() {
    let Some(c) = cluster() else { return };
    let uid = run(
        c,
        &pod(
            "burner",
            &[("busy", "while :; do :; done"), ("idle", "exec sleep 3600")],
        ),
    );
    let first = wait_summary(c, "burner's containers with CPU rates", |s| {
        let p = pod_in(s, "burner")?;
        let busy = container_in(p, "busy")?;
        let idle = container_in(p, "idle")?;
        u64_at(busy, &["cpu", "usageNanoCores"])?;
        u64_at(idle, &["cpu", "usageNanoCores"])?;
        Some(p.clone())
    });
    assert_eq!(first["podRef"]["uid"], uid.as_str(), "{first:#}");
    assert!(first["startTime"].is_string(), "{first:#}");
    for name in ["busy", "idle"] {
        let ct = container_in(&first, name).unwrap();
        assert!(ct["startTime"].is_string(), "{ct:#}");
        assert!(
            u64_at(ct, &["memory", "workingSetBytes"]).is_some(),
            "{ct:#}"
        );
        assert!(ct["cpu"]["time"].is_string(), "{ct:#}");
    }
    let busy_before = u64_at(
        container_in(&first, "busy").unwrap(),
        &["cpu", "usageCoreNanoSeconds"],
    )
    .unwrap();
    // a few seconds of a busy loop, even on a loaded two-core machine
    std::thread::sleep(Duration::from_secs(4));
    let later = wait_summary(c, "burner again", |s| pod_in(s, "burner").cloned());
    let busy = container_in(&later, "busy").unwrap();
    let idle = container_in(&later, "idle").unwrap();
    let busy_after = u64_at(busy, &["cpu", "usageCoreNanoSeconds"]).unwrap();
    assert!(
        busy_after > busy_before + 400_000_000,
        "the busy loop used {} ns of CPU in 4 s: {later:#}",
        busy_after - busy_before
    );
    let busy_rate = u64_at(busy, &["cpu", "usageNanoCores"]).unwrap();
    let idle_rate = u64_at(idle, &["cpu", "usageNanoCores"]).unwrap();
    assert!(busy_rate > 100_000_000, "busy: {busy:#}");
    assert!(idle_rate < 50_000_000, "idle: {idle:#}");
    assert!(
        u64_at(idle, &["cpu", "usageCoreNanoSeconds"]).unwrap() < 500_000_000,
        "idle: {idle:#}"
    );
    let pod_cpu = u64_at(&later, &["cpu", "usageCoreNanoSeconds"]).unwrap();
    assert!(
        pod_cpu >= busy_after,
        "the pod's CPU covers its containers': {later:#}"
    );
    assert!(
        u64_at(&later, &["memory", "workingSetBytes"]).is_some(),
        "{later:#}"
    );
    assert!(later["ephemeral-storage"].is_object(), "{later:#}");
    // the container's CRI log file, empty for a silent loop
    assert!(
        u64_at(busy, &["logs", "inodesUsed"]).is_some_and(|n| n >= 1),
        "{busy:#}"
    );
    assert!(
        u64_at(busy, &["logs", "capacityBytes"]).is_some_and(|n| n > 0),
        "{busy:#}"
    );
}

/// ST-02: memory a container holds (a tmpfs it filled) is in its and its pod's working set;
/// ST-04: the CPU-and-memory summary has the node's and the pods' CPU and memory and nothing
/// else.
#[test]
fn st_02_st_04_memory_a_container_holds_is_in_its_working_set_and_the_cpu_and_memory_summary() {
    let Some(c) = cluster() else { return };
    run(
        c,
        &pod(
            "hog",
            &[(
                "fill",
                "dd if=/dev/zero of=/dev/shm/fill bs=1M count=40 && exec sleep 3600",
            )],
        ),
    );
    let mib = 1024 * 1024;
    let p = wait_summary(c, "hog holding 40 MiB", |s| {
        let p = pod_in(s, "hog")?;
        let ws = u64_at(container_in(p, "fill")?, &["memory", "workingSetBytes"])?;
        (ws >= 35 * mib).then(|| p.clone())
    });
    assert!(
        u64_at(&p, &["memory", "workingSetBytes"]).unwrap() >= 35 * mib,
        "{p:#}"
    );
    let s = summary(c, "?only_cpu_and_memory=true");
    let node = &s["node"];
    assert!(
        u64_at(node, &["cpu", "usageCoreNanoSeconds"]).is_some(),
        "{node:#}"
    );
    assert!(
        u64_at(node, &["memory", "workingSetBytes"]).is_some(),
        "{node:#}"
    );
    for absent in ["fs", "runtime", "rlimit", "network"] {
        assert!(node.get(absent).is_none(), "{absent} in {node:#}");
    }
    let hog = pod_in(&s, "hog").expect("hog in the CPU-and-memory summary");
    let fill = container_in(hog, "fill").unwrap();
    assert!(
        u64_at(fill, &["memory", "workingSetBytes"]).unwrap() >= 35 * mib,
        "{fill:#}"
    );
    assert!(
        u64_at(fill, &["cpu", "usageCoreNanoSeconds"]).is_some(),
        "{fill:#}"
    );
    assert!(fill.get("rootfs").is_none(), "{fill:#}");
    assert!(hog.get("ephemeral-storage").is_none(), "{hog:#}");
    let (status, body) = get(c, "/stats/summary?only_cpu_and_memory=maybe");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("only_cpu_and_memory"), "{body}");
}

/// The value of the series `name{labels}` in a Prometheus exposition, and its timestamp.
fn series(text: &str, name_and_labels: &str) -> Option<(f64, Option<i64>)> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name_and_labels)?.strip_prefix(' ')?;
        let mut it = rest.split(' ');
        let v = it.next()?.parse().ok()?;
        Some((v, it.next().and_then(|t| t.parse().ok())))
    })
}

/// ST-05: `/metrics/resource` has the kubelet's series for the node, the pod and its
/// containers, timestamped, and no scrape error.
#[test]
fn st_05_metrics_resource_has_the_kubelets_series_for_the_node_pods_and_containers() {
    let Some(c) = cluster() else { return };
    run(c, &pod("metered", &[("work", "while :; do :; done")]));
    let deadline = Instant::now() + Duration::from_secs(90);
    let ctr = r#"{container="work",namespace="default",pod="metered"}"#;
    let pod_labels = r#"{namespace="default",pod="metered"}"#;
    let text = loop {
        let (status, text) = get(c, "/metrics/resource");
        assert_eq!(status, 200, "{text}");
        if series(&text, &format!("container_cpu_usage_seconds_total{ctr}")).is_some() {
            break text;
        }
        assert!(Instant::now() < deadline, "no series for metered:\n{text}");
        std::thread::sleep(Duration::from_secs(1));
    };
    for name in [
        "node_cpu_usage_seconds_total".to_string(),
        "node_memory_working_set_bytes".to_string(),
        format!("container_cpu_usage_seconds_total{ctr}"),
        format!("container_memory_working_set_bytes{ctr}"),
        format!("container_start_time_seconds{ctr}"),
        format!("pod_cpu_usage_seconds_total{pod_labels}"),
        format!("pod_memory_working_set_bytes{pod_labels}"),
    ] {
        let (v, ts) = series(&text, &name).unwrap_or_else(|| panic!("no {name} in:\n{text}"));
        assert!(v > 0.0, "{name} = {v}:\n{text}");
        assert!(
            ts.is_some_and(|t| t > 1_600_000_000_000),
            "{name} has no ms timestamp:\n{text}"
        );
    }
    assert_eq!(
        series(&text, "resource_scrape_error"),
        Some((0.0, None)),
        "{text}"
    );
    assert!(
        text.contains("# TYPE container_cpu_usage_seconds_total counter"),
        "{text}"
    );
}

/// `kubectl top ARGS…` once it answers with a line for `name` whose `column` passes `ok`
/// (generous deadline: metrics-server needs two scrapes, 15 s apart).
fn top_until(
    c: &RealCluster,
    args: &[&str],
    name: &str,
    column: usize,
    ok: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let (done, out) = c.kubectl(&[&["top"], args].concat());
        let found = done
            && out
                .lines()
                .filter_map(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    (cols.first() == Some(&name)).then(|| cols.get(column).copied())
                })
                .flatten()
                .any(&ok);
        if found {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl top {args:?} never showed {name} as wanted:\n{out}"
        );
        std::thread::sleep(Duration::from_secs(3));
    }
}

/// The millicores of a `kubectl top` CPU column (`584m`, `2`).
fn millicores(v: &str) -> Option<u64> {
    match v.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => v.parse::<u64>().ok().map(|c| c * 1000),
    }
}

/// ST-06: metrics-server reads the node's resource metrics and `kubectl top` shows the node
/// and a busy pod's CPU.
#[test]
fn st_06_kubectl_top_shows_the_node_and_a_busy_pods_cpu_through_metrics_server() {
    let Some(c) = cluster() else { return };
    run(c, &pod("topped", &[("spin", "while :; do :; done")]));
    top_until(c, &["node"], NODE, 1, |v| {
        millicores(v).is_some_and(|m| m > 0)
    });
    let out = top_until(c, &["pod", "-n", "default"], "topped", 1, |v| {
        millicores(v).is_some_and(|m| m >= 100)
    });
    assert!(out.contains("MEMORY"), "{out}");
}
