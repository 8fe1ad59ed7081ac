//! Helpers for tests of pods on a real control plane with containerd as the node's runtime
//! (`RealCluster::shared_containerd`): the test image, bound pods, what the node reports and
//! records. Each test binary that uses them has its own cluster, and so its own node name.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use super::agent::http_get;
use super::real_cluster::{Kube, RealCluster};

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

/// What container `container` of pod `default/name` (`uid`) wrote, from its CRI log file in
/// the node's pod log directory (`<namespace>_<name>_<uid>/<container>/0.log`, lines of
/// `time stream tag text`).
pub fn container_output(c: &RealCluster, name: &str, uid: &str, container: &str) -> String {
    let path = c
        .dir
        .join("node/pod-logs")
        .join(format!("default_{name}_{uid}"))
        .join(container)
        .join("0.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// AM-01: a label update of the rejected pod `default/name` (`uid`) reaches the node and
/// starts nothing of it (no sandbox, image pull or container start in the ledger); the pod
/// stays Failed.
pub fn assert_an_update_starts_nothing(c: &RealCluster, admin: &Kube, name: &str, uid: &str) {
    use kube::api::{Patch, PatchParams};
    let pods = admin.api::<Pod>("default");
    let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    admin
        .run(pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap();
    admin.wait_for("the node to record the update", 30, |_| {
        pod_records(c, uid)
            .iter()
            .any(|(kind, e)| {
                kind == "PodUpdated" && e["pod"]["metadata"]["labels"]["touched"] == "yes"
            })
            .then_some(())
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let records = pod_records(c, uid);
    // `RuntimeActionFinished` flattens its action: `action` is the step's name
    let started = records.iter().any(|(kind, e)| {
        let action = e["action"].as_str().unwrap_or_default();
        kind == "RuntimeActionFinished"
            && ["create_sandbox", "pulling_image", "start_container"].contains(&action)
    });
    assert!(!started, "{name} was started after an update: {records:?}");
    let now = admin.run(pods.get(name)).unwrap();
    assert_eq!(phase(&now), Some("Failed"), "{name}");
    assert!(main_status(&now).is_none_or(|s| s.state.as_ref().is_none_or(|s| s.running.is_none())));
}

/// Runs `pod` (in `default`) to completion and returns what each of its containers wrote
/// ([`container_output`]); asserts that it Succeeded, then deletes it.
pub fn outputs_of_completed(
    c: &RealCluster,
    admin: &Kube,
    pod: &Pod,
) -> std::collections::BTreeMap<String, String> {
    use kube::api::PostParams;
    let pods = admin.api::<Pod>("default");
    let name = pod.metadata.name.clone().unwrap();
    let created = admin.run(pods.create(&PostParams::default(), pod)).unwrap();
    let uid = created.metadata.uid.unwrap();
    let done = admin.wait_for(&format!("{name} Succeeded or Failed"), 120, |k| {
        let p = k.run(pods.get(&name)).ok()?;
        matches!(phase(&p), Some("Succeeded" | "Failed")).then_some(p)
    });
    let out = pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|ct| (ct.name.clone(), container_output(c, &name, &uid, &ct.name)))
        .collect();
    assert_eq!(
        phase(&done),
        Some("Succeeded"),
        "{name}: {:?}\nlogs: {out:#?}",
        done.status
    );
    let _ = admin.run(pods.delete(&name, &Default::default()));
    out
}
