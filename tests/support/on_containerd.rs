//! Helpers for tests of pods on a real control plane with containerd as the node's runtime
//! (`RealCluster::shared_containerd`): the test image, bound pods, what the node reports and
//! records. Each test binary that uses them has its own cluster, and so its own node name.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use super::agent::http_get;
use super::real_cluster::RealCluster;

/// The busybox image `scripts/build-test-images.sh` imports into the test containerd.
pub const IMAGE: &str = "ledgerlet.test/busybox:1";

/// The port of the node agent's HTTP server (`NODE_HTTP` in `cluster.env`).
pub fn node_http_port(c: &RealCluster) -> u16 {
    c.env["NODE_HTTP"]
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("NODE_HTTP in cluster.env")
}

/// The node agent's ledger (NDJSON, from its `/debug/ledger`).
pub fn ledger_text(c: &RealCluster) -> String {
    let (status, body) = http_get(node_http_port(c), "/debug/ledger");
    assert_eq!(status, 200, "{body}");
    body
}

/// The node agent's log file.
pub fn agent_log(c: &RealCluster) -> String {
    std::fs::read_to_string(c.dir.join("logs/ledgerlet.log")).unwrap_or_default()
}

/// The pod's `status.phase`.
pub fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

/// The pod's `status.podIP`.
pub fn pod_ip(p: &Pod) -> Option<Ipv4Addr> {
    p.status.as_ref()?.pod_ip.as_ref()?.parse().ok()
}

/// The directory of pod `uid`'s volume `volume` of plugin `plugin` under the node's root.
pub fn volume_dir(root: &Path, uid: &str, plugin: &str, volume: &str) -> Option<PathBuf> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        // another test's pod directory may go while this walks: skip what is gone
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.ends_with(Path::new(uid).join("volumes").join(plugin).join(volume)) {
                return Some(p);
            }
            if e.file_type().is_ok_and(|t| t.is_dir() && !t.is_symlink()) {
                stack.push(p);
            }
        }
    }
    None
}

/// A pod bound to `node` with one container `main` running `sh -c script`, no
/// service-account token.
pub fn bound_pod(node: &str, name: &str, script: &str, grace_s: i64, restart: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": grace_s,
            "restartPolicy": restart,
            "containers": [{"name": "main", "image": IMAGE, "command": ["sh", "-c", script]}]
        }
    }))
    .unwrap()
}

/// The status of the pod's first regular container.
pub fn main_status(p: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    p.status.as_ref()?.container_statuses.as_ref()?.first()
}

/// The ledger records about pod `uid`, in order: `(kind of record, event)`.
pub fn pod_records(c: &RealCluster, uid: &str) -> Vec<(String, serde_json::Value)> {
    ledger_text(c)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| {
            let e = &r["event"];
            e["uid"] == uid || e["pod"]["metadata"]["uid"] == uid
        })
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["event"].clone(),
            )
        })
        .collect()
}

/// What containerd itself holds for pod `uid` (CRI `ListPodSandbox` and `ListContainers` by
/// the `io.kubernetes.pod.uid` label, as `crictl pods` / `crictl ps -a` show it): its
/// sandboxes and containers, in containerd's order.
pub fn in_containerd(
    c: &RealCluster,
    uid: &str,
) -> (
    Vec<ledgerlet::cri::v1::PodSandbox>,
    Vec<ledgerlet::cri::v1::Container>,
) {
    use ledgerlet::cri::{v1, CriClient, CriClientOptions};
    let endpoint = std::fs::read_to_string(c.dir.join("runtime-endpoint")).expect("containerd");
    let by_uid = [("io.kubernetes.pod.uid".to_string(), uid.to_string())];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cri = CriClient::connect(endpoint.trim(), CriClientOptions::default())
            .await
            .expect("connect to containerd");
        let sandboxes = cri
            .list_pod_sandbox(Some(v1::PodSandboxFilter {
                label_selector: by_uid.clone().into(),
                ..Default::default()
            }))
            .await
            .expect("ListPodSandbox");
        let containers = cri
            .list_containers(Some(v1::ContainerFilter {
                label_selector: by_uid.into(),
                ..Default::default()
            }))
            .await
            .expect("ListContainers");
        (sandboxes, containers)
    })
}

/// The live processes whose cgroup path names `id` (a container or sandbox of containerd's,
/// whose runc cgroup is named by its id): none once it is really stopped.
pub fn processes_of(id: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(id))
        })
        .collect()
}

/// The sandbox ids of pod `uid` the node created (its ledger's `create_sandbox` outcomes).
pub fn created_sandboxes(c: &RealCluster, uid: &str) -> Vec<String> {
    pod_records(c, uid)
        .iter()
        .filter(|(_, e)| e["action"] == "create_sandbox" && e["outcome"]["result"] == "ok")
        .filter_map(|(_, e)| Some(e["outcome"]["id"].as_str()?.to_string()))
        .collect()
}
