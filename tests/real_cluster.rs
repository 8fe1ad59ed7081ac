//! The agent as a node of a real control plane (etcd, kube-apiserver with Node + RBAC
//! authorization and NodeRestriction, kube-controller-manager, kube-scheduler of the pinned
//! release; see `tests/support/real_cluster.rs`), on the embedded runtime. Each test runs its
//! own agent under its own node name, with that node's own client certificate, and reads
//! the outcome from the API server as the cluster admin.
//!
//! Pods here opt out of the service-account token volume (`automountServiceAccountToken:
//! false`) where the test is not about it.

mod support;

use std::path::Path;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use support::real_cluster::{Kube, RealCluster};

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared()
}

fn ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn wait_node_ready(admin: &Kube, name: &str) -> Node {
    admin.wait_for(&format!("node {name} Ready"), 90, |k| {
        let n = k.run(k.all::<Node>().get_opt(name)).ok()??;
        (ready(&n).as_deref() == Some("True")).then_some(n)
    })
}

/// A node affinity to `node` by name, as a DaemonSet's pods have: the scheduler places the
/// pod (the `kubernetes.io/hostname` label is the host's name, as the kubelet sets it, not
/// the node's).
fn affinity(node: &str) -> String {
    format!("affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [{node}]}}]}}]}}}}}}")
}

/// A pod bound to `node` (by `nodeName`, or by a node affinity for the scheduler).
fn pod(name: &str, node: &str, script: &str, grace_s: i64, by_scheduler: bool) -> Pod {
    let placement = if by_scheduler {
        affinity(node)
    } else {
        format!("nodeName: {node}")
    };
    serde_yaml::from_str(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  {placement}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: {grace_s}\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, {script:?}]\n"
    ))
    .unwrap()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

fn running(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        })
        && phase(p) == Some("Running")
}

#[test]
fn the_node_registers_turns_ready_gets_its_pod_cidr_and_renews_its_lease() {
    let Some(c) = cluster() else { return };
    let _agent = c.agent("node-reg", &[]);
    let admin = c.admin();
    let node = wait_node_ready(&admin, "node-reg");
    let labels = node.metadata.labels.clone().unwrap_or_default();
    // the host's name, as the kubelet sets it (not the node's name)
    assert!(!labels
        .get("kubernetes.io/hostname")
        .cloned()
        .unwrap_or_default()
        .is_empty());
    assert_eq!(
        labels.get("kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    let capacity = node.status.as_ref().unwrap().capacity.clone().unwrap();
    for r in ["cpu", "memory", "pods"] {
        assert!(capacity.contains_key(r), "capacity {r}: {capacity:?}");
    }
    // the real node IPAM controller gives the node a pod CIDR
    let cidr = admin.wait_for("spec.podCIDR", 60, |k| {
        k.run(k.all::<Node>().get("node-reg")).ok()?.spec?.pod_cidr
    });
    assert!(cidr.starts_with("10.24"), "{cidr}");
    // the Lease: held by the node, 40 s, renewed every 10 s
    let leases = admin.api::<Lease>("kube-node-lease");
    let first = admin.wait_for("the node's Lease", 30, |k| {
        k.run(leases.get_opt("node-reg")).ok()?
    });
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("node-reg"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &first.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owner
            .iter()
            .any(|o| o.kind == "Node" && o.name == "node-reg"),
        "{owner:?}"
    );
    let renewed = spec.renew_time.unwrap().0;
    admin.wait_for("a Lease renewal", 40, |k| {
        let t = k.run(leases.get("node-reg")).ok()?.spec?.renew_time?.0;
        (t > renewed).then_some(())
    });
}

#[test]
fn pods_placed_by_the_real_scheduler_run_and_a_job_succeeds() {
    let Some(c) = cluster() else { return };
    let _agent = c.agent("node-sched", &[]);
    let admin = c.admin();
    wait_node_ready(&admin, "node-sched");
    let pods = admin.api::<Pod>("default");
    let p = pod(
        "sched-a",
        "node-sched",
        "while true; do sleep 1; done",
        2,
        true,
    );
    admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    let placed = admin.wait_for("sched-a Running", 90, |k| {
        let p = k.run(pods.get("sched-a")).ok()?;
        running(&p).then_some(p)
    });
    assert_eq!(
        placed.spec.unwrap().node_name.as_deref(),
        Some("node-sched")
    );
    let job: Job = serde_yaml::from_str(&format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: once, namespace: default}}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      {affinity}\n      automountServiceAccountToken: false\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox\n        command: [sh, -c, 'echo done']\n",
        affinity = affinity("node-sched")
    ))
    .unwrap();
    let jobs = admin.api::<Job>("default");
    admin
        .run(jobs.create(&PostParams::default(), &job))
        .unwrap();
    admin.wait_for("the Job Succeeded", 120, |k| {
        let j = k.run(jobs.get("once")).ok()?;
        (j.status?.succeeded? == 1).then_some(())
    });
}

#[test]
fn a_static_pods_mirror_pod_is_owned_by_the_node_and_recreated_when_deleted() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("node-mirror", &[]);
    let admin = c.admin();
    wait_node_ready(&admin, "node-mirror");
    agent.write_manifest(
        "stat.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: stat}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'while true; do sleep 1; done']\n",
    );
    let pods = admin.api::<Pod>("default");
    let mirror = admin.wait_for("the mirror pod", 60, |k| {
        let p = k.run(pods.get_opt("stat-node-mirror")).ok()??;
        running(&p).then_some(p)
    });
    let annotations = mirror.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("kubernetes.io/config.mirror"),
        "{annotations:?}"
    );
    let owners = mirror.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "Node" && o.name == "node-mirror" && o.controller == Some(true)),
        "{owners:?}"
    );
    let first_uid = mirror.metadata.uid.clone().unwrap();
    admin
        .run(pods.delete("stat-node-mirror", &DeleteParams::default()))
        .unwrap();
    admin.wait_for("the mirror pod recreated", 60, |k| {
        let p = k.run(pods.get_opt("stat-node-mirror")).ok()??;
        (p.metadata.uid.as_deref() != Some(first_uid.as_str())).then_some(())
    });
}

/// Deletes pod `name` with `grace_s` and watches it until it is gone; returns every version
/// seen after the deletion.
fn delete_and_watch(admin: &Kube, name: &str, grace_s: u32) -> Vec<Pod> {
    let pods = admin.api::<Pod>("default");
    let rv = admin
        .run(pods.get(name))
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    admin.run(async {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(120);
        let mut stream = pods.watch(&params, &rv).await.unwrap().boxed();
        pods.delete(name, &DeleteParams::default().grace_period(grace_s))
            .await
            .unwrap();
        let mut seen = Vec::new();
        while let Some(event) = tokio::time::timeout(Duration::from_secs(120), stream.try_next())
            .await
            .expect("the pod was deleted within 120 s")
            .unwrap()
        {
            match event {
                WatchEvent::Modified(p) => seen.push(p),
                WatchEvent::Deleted(p) => {
                    seen.push(p);
                    return seen;
                }
                _ => {}
            }
        }
        panic!("the watch ended before the pod was deleted: {seen:#?}");
    })
}

fn terminated_exit_code(p: &Pod) -> Option<i32> {
    p.status.as_ref()?.container_statuses.as_ref()?[0]
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

#[test]
fn deleted_pods_end_failed_137_when_ignoring_sigterm_and_succeeded_when_exiting_0() {
    let Some(c) = cluster() else { return };
    let _agent = c.agent("node-delete", &[]);
    let admin = c.admin();
    wait_node_ready(&admin, "node-delete");
    let pods = admin.api::<Pod>("default");
    for (name, script) in [
        ("stubborn", "trap '' TERM; while true; do sleep 0.1; done"),
        (
            "polite",
            "trap 'exit 0' TERM; while true; do sleep 0.1; done",
        ),
    ] {
        let p = pod(name, "node-delete", script, 2, false);
        admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    }
    for name in ["stubborn", "polite"] {
        admin.wait_for(&format!("{name} running"), 60, |k| {
            running(&k.run(pods.get(name)).ok()?).then_some(())
        });
    }
    for (name, want_phase, want_exit) in [("stubborn", "Failed", 137), ("polite", "Succeeded", 0)] {
        let seen = delete_and_watch(&admin, name, 2);
        // the last version before the object went: the node's terminal status
        let last = seen.last().unwrap();
        assert_eq!(phase(last), Some(want_phase), "{name}: {seen:#?}");
        assert_eq!(terminated_exit_code(last), Some(want_exit), "{name}");
    }
}

#[test]
fn node_restriction_refuses_writes_outside_the_node_and_the_agent_says_so_and_keeps_running() {
    let Some(c) = cluster() else { return };
    // the node "node-rx" with its own credentials, and a pod bound to another node
    let admin = c.admin();
    let other = pod("elsewhere", "node-nowhere", "sleep 1", 1, false);
    let pods = admin.api::<Pod>("default");
    admin
        .run(pods.create(&PostParams::default(), &other))
        .unwrap();
    let node: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "node-other"}})).unwrap();
    admin
        .run(admin.all::<Node>().create(&PostParams::default(), &node))
        .unwrap();
    let rx = c.client(&c.node_kubeconfig("node-rx"));
    let forbidden = |r: Result<_, kube::Error>| match r {
        Err(kube::Error::Api(s)) => s.code == 403,
        _ => false,
    };
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}}));
    let node_patch = rx.run(
        rx.all::<Node>()
            .patch("node-other", &PatchParams::default(), &patch),
    );
    let pod_patch = rx.run(rx.api::<Pod>("default").patch_status(
        "elsewhere",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": "Failed"}})),
    ));
    assert!(forbidden(node_patch.map(|_| ())), "another node's object");
    assert!(forbidden(pod_patch.map(|_| ())), "a pod bound elsewhere");
    // an agent whose name is not its certificate's: every node write is refused; it says
    // so, naming the credentials it needs, and keeps running its static pods
    let kubeconfig = c.node_kubeconfig("node-rx");
    let agent = support::agent::Agent::start(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node-name",
        "node-impostor",
    ]);
    agent.write_manifest(
        "stat.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: stat}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'while true; do sleep 1; done']\n",
    );
    agent.wait_for("the refusal logged", 60, |a| {
        a.log()
            .lines()
            .any(|l| {
                l.contains("node write forbidden by the API server")
                    && l.contains("CN=system:node:<node name>")
            })
            .then_some(())
    });
    agent.wait_for("the static pod running", 60, |a| {
        let p = a.pod("stat")?;
        (phase(&p) == Some("Running")).then_some(())
    });
    assert_eq!(agent.get("/healthz").0, 200);
    assert!(admin
        .run(admin.all::<Node>().get_opt("node-impostor"))
        .unwrap()
        .is_none());
}

/// ServiceAccount admission injects `kube-api-access-*` into an ordinary pod; the agent
/// requests a bound token, reads `kube-root-ca.crt` and writes the namespace, atomically
/// (the `..data` layout), and the container (a host process of the embedded runtime, in a
/// private mount namespace as root) reads all three where every pod expects them. The token
/// reaches neither the ledger nor the agent's log.
#[test]
fn a_default_pod_reads_its_service_account_token_ca_and_namespace_and_the_token_stays_secret() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("node-sa", &[]);
    let admin = c.admin();
    wait_node_ready(&admin, "node-sa");
    const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
    let pods = admin.api::<Pod>("default");
    let script = format!(
        "cat {SA_DIR}/namespace; echo; echo token-bytes=$(wc -c < {SA_DIR}/token); \
         head -1 {SA_DIR}/ca.crt; sleep 3600"
    );
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "proj", "namespace": "default"},
        "spec": {
            "nodeName": "node-sa",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "c",
                "image": "busybox",
                "command": ["sh", "-c", script]
            }]
        }
    }))
    .unwrap();
    // ServiceAccount admission needs the default ServiceAccount, which the controller makes
    let created = admin.wait_for("the pod to be admitted", 60, |_| {
        admin.run(pods.create(&PostParams::default(), &pod)).ok()
    });
    let volumes = created
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap();
    let injected = volumes
        .iter()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .expect("admission injected kube-api-access-*");
    assert!(injected.projected.is_some());
    let uid = created.metadata.uid.clone().unwrap();

    // the container's log (CRI format) under the agent's pod logs dir
    let log_file = agent
        .logs
        .join(format!("default_proj_{uid}"))
        .join("c")
        .join("0.log");
    let log = admin.wait_for("the container to read the projected files", 120, |_| {
        let text = std::fs::read_to_string(&log_file).ok()?;
        text.contains("BEGIN CERTIFICATE").then_some(text)
    });
    let lines: Vec<&str> = log
        .lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3))
        .collect();
    assert_eq!(lines.first(), Some(&"default"), "{log}");
    let bytes: usize = lines
        .iter()
        .find_map(|l| l.strip_prefix("token-bytes="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no token size in {log}"));
    assert!(bytes > 100, "token of {bytes} bytes: {log}");
    assert!(lines.contains(&"-----BEGIN CERTIFICATE-----"), "{log}");

    // the volume's layout on the node
    let vol = agent
        .state_dir()
        .join("pods")
        .join(&uid)
        .join("volumes/kubernetes.io~projected")
        .join(&injected.name);
    assert_eq!(
        std::fs::read_link(vol.join("token")).unwrap(),
        Path::new("..data/token")
    );
    assert!(std::fs::read_link(vol.join("..data"))
        .unwrap()
        .to_string_lossy()
        .starts_with(".."));
    let token = std::fs::read_to_string(vol.join("token")).unwrap();
    assert_eq!(token.len(), bytes);
    // nothing of the token in the ledger or the agent's log (its signature is unique to it)
    let signature = token.rsplit('.').next().unwrap().to_string();
    assert!(signature.len() > 20);
    let ledger = agent.ledger_text();
    assert!(!ledger.is_empty());
    assert!(!ledger.contains(&signature), "the token is in the ledger");
    assert!(
        !agent.log().contains(&signature),
        "the token is in the agent's log"
    );
    let _ = admin.run(pods.delete("proj", &Default::default()));
    drop(agent);
}
