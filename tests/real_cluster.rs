//! The agent as a node of a real control plane (etcd, kube-apiserver with Node + RBAC
//! authorization and NodeRestriction, kube-controller-manager, kube-scheduler of the pinned
//! release; see `tests/support/real_cluster.rs`), on the embedded runtime. Each test runs its
//! own agent under its own node name, with that node's own client certificate, and reads
//! the outcome from the API server as the cluster admin, the requests the node made from
//! the API server's audit log (`RealCluster::audit`), and the node's decisions from its
//! ledger. The tests share the control plane and run in parallel, so every pod name is
//! unique to its test.
//!
//! Pods here opt out of the service-account token volume (`automountServiceAccountToken:
//! false`) where the test is not about it.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ContainerStatus, Event, Node, Pod, PodCondition, PodReadinessGate,
};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction};
use ledgerlet::core::record::Event as LedgerEvent;
use support::real_cluster::{read_sa_probe, sa_probe_script, Kube, RealCluster};
use support::runtime_process::RuntimeProcess;

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared()
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
    let node = admin.wait_node_ready("node-reg");
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
    assert_eq!(
        capacity["pods"].0, "110",
        "the kubelet's default --max-pods"
    );
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
    admin.wait_node_ready("node-sched");
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
    admin.wait_node_ready("node-mirror");
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
    let again = admin.wait_for("the mirror pod recreated", 60, |k| {
        let p = k.run(pods.get_opt("stat-node-mirror")).ok()??;
        (p.metadata.uid.as_deref() != Some(first_uid.as_str())).then_some(p)
    });
    let annotations = again.metadata.annotations.unwrap_or_default();
    assert!(
        annotations.contains_key("kubernetes.io/config.mirror"),
        "the recreated mirror: {annotations:?}"
    );
}

fn terminated_exit_code(p: &Pod) -> Option<i32> {
    p.status.as_ref()?.container_statuses.as_ref()?[0]
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// A pod that ignores SIGTERM is killed when its grace period (2 s) runs out and ends Failed
/// with 137; one that exits on SIGTERM ends Succeeded with 0 and goes long before its grace
/// period (30 s) would run out (RT-39, SM-10).
#[test]
fn deleted_pods_end_failed_137_when_ignoring_sigterm_and_succeeded_when_exiting_0() {
    let Some(c) = cluster() else { return };
    let _agent = c.agent("node-delete", &[]);
    let admin = c.admin();
    admin.wait_node_ready("node-delete");
    let pods = admin.api::<Pod>("default");
    for (name, script, grace_s) in [
        (
            "stubborn",
            "trap '' TERM; while true; do sleep 0.1; done",
            2,
        ),
        (
            "polite",
            "trap 'exit 0' TERM; while true; do sleep 0.1; done",
            30,
        ),
    ] {
        let p = pod(name, "node-delete", script, grace_s, false);
        admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    }
    for name in ["stubborn", "polite"] {
        admin.wait_for(&format!("{name} running"), 60, |k| {
            running(&k.run(pods.get(name)).ok()?).then_some(())
        });
    }
    for (name, grace_s, want_phase, want_exit) in [
        ("stubborn", 2, "Failed", 137),
        ("polite", 30, "Succeeded", 0),
    ] {
        let started = Instant::now();
        let seen = admin.delete_and_watch("default", name, grace_s);
        let took = started.elapsed();
        // the last version before the object went: the node's terminal status
        let last = seen.last().unwrap();
        assert_eq!(phase(last), Some(want_phase), "{name}: {seen:#?}");
        assert_eq!(terminated_exit_code(last), Some(want_exit), "{name}");
        if name == "polite" {
            assert!(
                took < Duration::from_secs(20),
                "polite exits on SIGTERM, yet it took {took:?} of its 30 s to go"
            );
        }
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
    admin.wait_node_ready("node-sa");
    let pods = admin.api::<Pod>("default");
    let script = sa_probe_script();
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
    let bytes = read_sa_probe(&admin, &log_file);

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

// ---------------------------------------------------------------------------------------
// pods bound to the node: their statuses, events, restarts and deletion, and the requests the
// node made for them (the apiserver's audit log, `RealCluster::audit`)

/// A pod bound to `node` by `nodeName`, with restart policy `restart` and one container,
/// `main`, running `script` (the embedded runtime's `busybox` image).
fn bound_pod(name: &str, node: &str, script: &str, grace_s: i64, restart: &str) -> Pod {
    let mut p = support::on_containerd::bound_pod(node, name, script, grace_s, restart);
    p.spec.as_mut().unwrap().containers[0].image = Some("busybox".into());
    p
}

fn create_pod(admin: &Kube, pod: &Pod) -> Pod {
    admin
        .run(
            admin
                .api::<Pod>("default")
                .create(&PostParams::default(), pod),
        )
        .unwrap()
}

fn get_pod(k: &Kube, name: &str) -> Option<Pod> {
    k.run(k.api::<Pod>("default").get_opt(name)).ok()?
}

fn main_container(p: &Pod) -> Option<&ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "main")
}

fn pod_condition<'a>(p: &'a Pod, t: &str) -> Option<&'a PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
}

fn condition_status<'a>(p: &'a Pod, t: &str) -> Option<&'a str> {
    pod_condition(p, t).map(|c| c.status.as_str())
}

fn last_exit_code(c: &ContainerStatus) -> Option<i32> {
    Some(c.last_state.as_ref()?.terminated.as_ref()?.exit_code)
}

fn exit_code(c: &ContainerStatus) -> Option<i32> {
    Some(c.state.as_ref()?.terminated.as_ref()?.exit_code)
}

/// (reason, message) of every Event about pod `name`, as `kubectl describe pod` lists them:
/// core/v1 Events by `involvedObject.name`. The agent writes core/v1 Events; core/v1 and
/// events.k8s.io/v1 are two views of the same objects, so this also sees an Event written
/// through events.k8s.io (its `regarding` is `involvedObject` here).
fn events_about(admin: &Kube, name: &str) -> Vec<(String, String)> {
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    admin
        .run(events.list(&params))
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

fn reasons_about(admin: &Kube, name: &str) -> Vec<String> {
    events_about(admin, name)
        .into_iter()
        .map(|(reason, _)| reason)
        .collect()
}

/// The audit log's entries for the requests node `node` made (with its own credentials).
fn node_requests(c: &RealCluster, node: &str) -> Vec<serde_json::Value> {
    let user = format!("system:node:{node}");
    c.audit()
        .into_iter()
        .filter(|e| e["user"]["username"] == user.as_str())
        .collect()
}

fn is_status_patch(e: &serde_json::Value) -> bool {
    e["verb"] == "patch"
        && e["objectRef"]["resource"] == "pods"
        && e["objectRef"]["subresource"] == "status"
}

fn is_about(e: &serde_json::Value, pod: &str) -> bool {
    e["objectRef"]["namespace"] == "default" && e["objectRef"]["name"] == pod
}

/// Every pod status PATCH of node `node` carried a UID precondition (`metadata.uid` in the
/// patch), the right one for each pod in `uids` (name, UID); there was at least one.
fn assert_status_patches_carry_the_uid(c: &RealCluster, node: &str, uids: &[(&str, &str)]) {
    let patches: Vec<_> = node_requests(c, node)
        .into_iter()
        .filter(is_status_patch)
        .collect();
    assert!(
        !patches.is_empty(),
        "no status PATCH by {node} in the audit log"
    );
    for p in &patches {
        let sent = &p["requestObject"]["metadata"]["uid"];
        assert!(
            sent.as_str().is_some_and(|u| !u.is_empty()),
            "a status PATCH without the UID precondition: {p}"
        );
        if let Some((_, uid)) = uids.iter().find(|(name, _)| is_about(p, name)) {
            assert_eq!(sent, *uid, "{p}");
        }
    }
}

/// A bound pod runs and its status reaches the API server: start time (SM-01), pod IP, the
/// kubelet's conditions True (GS-14), a CRI container ID; a crash-looping container restarts
/// (RT-03) with a growing restart count and its last exit code (RT-38, GS-06), held back by
/// CrashLoopBackOff with a `BackOff` event (BO-03); the events `kubectl describe pod` shows
/// come from the node; every status PATCH carries the pod's UID; the node's ledger replays to
/// its state.
#[test]
fn a_bound_pod_runs_and_its_status_and_events_reach_the_api() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("node-run", &[]);
    let admin = c.admin();
    admin.wait_node_ready("node-run");
    let web = create_pod(
        &admin,
        &bound_pod(
            "run-web",
            "node-run",
            "while true; do sleep 0.2; done",
            2,
            "Always",
        ),
    );
    let crasher = create_pod(
        &admin,
        &bound_pod("run-crasher", "node-run", "exit 1", 2, "Always"),
    );
    let p = admin.wait_for("run-web Running and Ready", 90, |k| {
        let p = get_pod(k, "run-web")?;
        (running(&p) && condition_status(&p, "Ready") == Some("True")).then_some(p)
    });
    let s = p.status.clone().unwrap();
    assert!(s.start_time.is_some(), "startTime: {s:?}");
    assert!(
        s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty()),
        "podIP: {s:?}"
    );
    for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(condition_status(&p, t), Some("True"), "{t}: {s:?}");
    }
    let id = main_container(&p)
        .unwrap()
        .container_id
        .clone()
        .unwrap_or_default();
    assert!(id.contains("://"), "containerID {id:?}");

    let crashed = admin.wait_for("run-crasher restarted twice", 90, |k| {
        let p = get_pod(k, "run-crasher")?;
        let m = main_container(&p)?;
        (m.restart_count >= 2 && last_exit_code(m).is_some()).then_some(p)
    });
    assert_eq!(last_exit_code(main_container(&crashed).unwrap()), Some(1));

    // the events of `kubectl describe pod`, from the node, about the right pod
    let reasons = reasons_about(&admin, "run-web");
    for r in ["Pulling", "Pulled", "Created", "Started"] {
        assert!(reasons.iter().any(|x| x == r), "{r} in {reasons:?}");
    }
    admin.wait_for("a BackOff event for the crash loop", 60, |k| {
        reasons_about(k, "run-crasher")
            .iter()
            .any(|r| r == "BackOff")
            .then_some(())
    });
    let (ok, described) = c.kubectl(&["describe", "pod", "run-crasher", "-n", "default"]);
    assert!(ok, "{described}");
    let events = described.split("Events:").nth(1).unwrap_or_default();
    for r in ["Started", "BackOff"] {
        assert!(events.contains(r), "{r} in kubectl describe:\n{described}");
    }

    let web_uid = web.metadata.uid.unwrap();
    let crasher_uid = crashed.metadata.uid.clone().unwrap();
    assert_eq!(crasher.metadata.uid.as_deref(), Some(crasher_uid.as_str()));
    assert_status_patches_carry_the_uid(
        c,
        "node-run",
        &[("run-web", &web_uid), ("run-crasher", &crasher_uid)],
    );
    agent.assert_ledger_replays_to_state();
}

/// Restart policies as the API shows them: Always restarts a container that exited 0 (RT-03,
/// PH-01); OnFailure restarts one that exited 1 (RT-04) but not one that exited 0, which
/// ends the pod Succeeded (PH-08); Never restarts nothing and the pod ends Failed with the
/// exit code (RT-06, PH-05). A terminal pod is not Ready (SM-24).
#[test]
fn restart_policies_always_on_failure_and_never() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("node-policy", &[]);
    let admin = c.admin();
    admin.wait_node_ready("node-policy");
    for (name, script, restart) in [
        ("rp-always-0", "sleep 1; exit 0", "Always"),
        ("rp-onfailure-1", "sleep 1; exit 1", "OnFailure"),
        ("rp-onfailure-0", "sleep 1; exit 0", "OnFailure"),
        ("rp-never-3", "sleep 1; exit 3", "Never"),
    ] {
        create_pod(&admin, &bound_pod(name, "node-policy", script, 2, restart));
    }
    for (name, exit) in [("rp-always-0", 0), ("rp-onfailure-1", 1)] {
        let p = admin.wait_for(&format!("{name} restarted twice"), 90, |k| {
            let p = get_pod(k, name)?;
            (main_container(&p)?.restart_count >= 2).then_some(p)
        });
        let m = main_container(&p).unwrap();
        assert_eq!(last_exit_code(m), Some(exit), "{name}: {m:?}");
        assert_eq!(phase(&p), Some("Running"), "{name}");
    }
    for (name, want_phase, exit, reason) in [
        ("rp-onfailure-0", "Succeeded", 0, "PodCompleted"),
        ("rp-never-3", "Failed", 3, "PodFailed"),
    ] {
        let p = admin.wait_for(&format!("{name} {want_phase}"), 60, |k| {
            let p = get_pod(k, name)?;
            (phase(&p) == Some(want_phase)).then_some(p)
        });
        // by now the restarting pods above have been through two restarts: these were not
        let m = main_container(&p).unwrap();
        assert_eq!(exit_code(m), Some(exit), "{name}: {m:?}");
        assert_eq!(m.restart_count, 0, "{name} was restarted: {m:?}");
        let ready = pod_condition(&p, "Ready").unwrap();
        assert_eq!(ready.status, "False", "{name}: {ready:?}");
        assert_eq!(ready.reason.as_deref(), Some(reason), "{name}: {ready:?}");
    }
    agent.assert_ledger_replays_to_state();
}

/// A user deletes a pod that traps SIGTERM (TGPS 30) with grace 7: the worker terminates it
/// with 7 (PW-05, RT-39) and stops its container with a `Killing` event; the node writes a
/// terminal phase and only then DELETEs the pod with grace 0 and a UID precondition (SM-10,
/// SM-11, SM-11b), as the audit log shows.
#[test]
fn a_graceful_delete_kills_with_its_grace_writes_a_terminal_phase_then_deletes_with_the_uid() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("node-grace", &[]);
    let admin = c.admin();
    admin.wait_node_ready("node-grace");
    let created = create_pod(
        &admin,
        &bound_pod(
            "grace-polite",
            "node-grace",
            "trap 'exit 0' TERM; while true; do sleep 0.1; done",
            30,
            "Always",
        ),
    );
    let uid = created.metadata.uid.clone().unwrap();
    admin.wait_for("grace-polite running", 90, |k| {
        running(&get_pod(k, "grace-polite")?).then_some(())
    });
    let pods = admin.api::<Pod>("default");
    admin
        .run(pods.delete("grace-polite", &DeleteParams::default().grace_period(7)))
        .unwrap();
    admin.wait_for("grace-polite deleted by the node", 60, |k| {
        get_pod(k, "grace-polite").is_none().then_some(())
    });

    // the worker terminated the pod with the deletion's grace period: replay the ledger up
    // to the deletion's update and read the worker's effective grace period
    let records = agent.ledger();
    let deleted_at = records
        .iter()
        .find(|r| matches!(&r.event, LedgerEvent::PodDeleted(_)))
        .expect("the deletion reached the node")
        .seq;
    let replayed = ledgerlet::postmortem::replay::replay(
        agent.ledger_text().as_bytes(),
        Some(ledgerlet::postmortem::replay::Until::Seq(deleted_at + 1)),
    )
    .unwrap();
    let worker = replayed
        .node
        .pod_workers
        .status(&ledgerlet::core::Uid::new(&uid))
        .expect("the worker");
    assert_eq!(worker.grace_period_s(), 7);
    assert!(worker.is_deleted());
    let killed = records.iter().any(|r| {
        matches!(&r.event, LedgerEvent::RuntimeActionFinished(a)
            if matches!(&a.action, RuntimeAction::KillContainer { name, .. } if name == "main")
            && matches!(a.outcome, ActionOutcome::Ok { .. }))
    });
    assert!(killed, "the container was stopped");
    let events = events_about(&admin, "grace-polite");
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Killing" && m == "Stopping container main"),
        "a Killing event: {events:?}"
    );

    // the node's requests: a status PATCH with a terminal phase, then DELETE with grace 0
    // and the UID precondition (the apiserver logs a request just after answering it, so
    // the DELETE's entry may come a moment after the pod is gone)
    let is_delete = |e: &serde_json::Value| {
        e["verb"] == "delete"
            && e["objectRef"]["subresource"].is_null()
            && e["responseStatus"]["code"] == 200
            && e["requestObject"]["gracePeriodSeconds"] == 0
    };
    let reqs = admin.wait_for("the node's DELETE in the audit log", 15, |_| {
        let reqs: Vec<_> = node_requests(c, "node-grace")
            .into_iter()
            .filter(|e| is_about(e, "grace-polite"))
            .collect();
        reqs.iter().any(is_delete).then_some(reqs)
    });
    let terminal_patch = reqs.iter().position(|e| {
        is_status_patch(e)
            && e["responseStatus"]["code"] == 200
            && matches!(
                e["requestObject"]["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
    });
    let delete = reqs.iter().position(is_delete);
    let (Some(p), Some(d)) = (terminal_patch, delete) else {
        panic!("expected a terminal status PATCH and a DELETE: {reqs:#?}");
    };
    assert!(
        p < d,
        "the terminal phase is written before the delete: {reqs:#?}"
    );
    assert!(
        reqs[p]["requestReceivedTimestamp"].as_str() < reqs[d]["requestReceivedTimestamp"].as_str(),
        "{reqs:#?}"
    );
    assert_eq!(
        reqs[d]["requestObject"]["preconditions"]["uid"],
        uid.as_str(),
        "{:#}",
        reqs[d]
    );
    assert_status_patches_carry_the_uid(c, "node-grace", &[("grace-polite", &uid)]);
    agent.assert_ledger_replays_to_state();
}

/// A readiness gate keeps a running pod not Ready until another client sets its condition
/// True (GS-14), and then Ready follows within a sync (GS-17); the node's status PATCHes keep that foreign condition (SM-21); and a pod
/// whose status does not change gets no PATCH, across more than one periodic status pass
/// (SM-06, SM-07).
#[test]
fn no_patch_without_a_change_and_foreign_conditions_survive() {
    let Some(c) = cluster() else { return };
    let _agent = c.agent("node-gate", &[]);
    let admin = c.admin();
    admin.wait_node_ready("node-gate");
    const GATE: &str = "example.com/gate";
    let mut p = bound_pod(
        "gate-steady",
        "node-gate",
        "while true; do sleep 0.2; done",
        2,
        "Always",
    );
    p.spec.as_mut().unwrap().readiness_gates = Some(vec![PodReadinessGate {
        condition_type: GATE.into(),
    }]);
    let uid = create_pod(&admin, &p).metadata.uid.unwrap();
    let containers_ready = |k: &Kube| {
        let p = get_pod(k, "gate-steady")?;
        (running(&p) && condition_status(&p, "ContainersReady") == Some("True")).then_some(p)
    };
    admin.wait_for(
        "gate-steady running, its containers ready",
        90,
        containers_ready,
    );
    // the node has had time to write what it has: still not Ready, for the gate
    std::thread::sleep(Duration::from_secs(3));
    let p = containers_ready(&admin).expect("still running");
    let ready = pod_condition(&p, "Ready").cloned().unwrap();
    assert_eq!(ready.status, "False", "{ready:?}");
    assert_eq!(
        ready.reason.as_deref(),
        Some("ReadinessGatesNotReady"),
        "{ready:?}"
    );
    assert!(ready.message.unwrap_or_default().contains(GATE));

    // the gate's owner sets it True (a strategic merge: conditions merge by type)
    let pods = admin.api::<Pod>("default");
    let gated = admin
        .run(pods.patch_status(
            "gate-steady",
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({
                "status": {"conditions": [{"type": GATE, "status": "True"}]}
            })),
        ))
        .unwrap();
    let rv = gated.metadata.resource_version.clone().unwrap();
    let gate_set = Instant::now();
    // every version from then on keeps the gate, up to the node's PATCH that makes it Ready.
    // The status-only change needs its readiness reconciled, so the node syncs the pod at
    // once (GS-17), not at its next periodic resync (1 min plus up to 50 % jitter).
    let seen = admin.run(async {
        let params = WatchParams::default()
            .fields("metadata.name=gate-steady")
            .timeout(150);
        let mut stream = pods.watch(&params, &rv).await.unwrap().boxed();
        let mut seen = Vec::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
                .await
                .expect("Ready within 20 s of the gate, well before a periodic resync")
                .unwrap();
            match event {
                Some(WatchEvent::Modified(p)) => {
                    let ready = condition_status(&p, "Ready") == Some("True");
                    seen.push(p);
                    if ready {
                        return seen;
                    }
                }
                Some(_) => {}
                None => panic!("the watch ended before the pod was Ready: {seen:#?}"),
            }
        }
    });
    for p in &seen {
        assert_eq!(condition_status(p, GATE), Some("True"), "{seen:#?}");
    }
    eprintln!(
        "gate-steady Ready {:?} after its gate was set",
        gate_set.elapsed()
    );
    assert!(
        gate_set.elapsed() < Duration::from_secs(20),
        "Ready {:?} after the gate: a periodic resync, not the reconcile",
        gate_set.elapsed()
    );

    // quiet: nothing changes, so the node sends no status PATCH for 12 s (more than one
    // periodic pass of 10 s, many housekeeping passes). The window starts once the audit
    // log has the PATCH that made the pod Ready (logged just after it was answered).
    let patches = |c: &RealCluster| -> Vec<serde_json::Value> {
        node_requests(c, "node-gate")
            .into_iter()
            .filter(is_status_patch)
            .collect()
    };
    let sets_ready = |e: &serde_json::Value| {
        e["requestObject"]["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    };
    let before = admin.wait_for("the PATCH that made it Ready in the audit log", 15, |_| {
        let all = patches(c);
        all.iter().any(sets_ready).then_some(all.len())
    });
    std::thread::sleep(Duration::from_secs(12));
    let after = patches(c);
    assert_eq!(
        after.len(),
        before,
        "a PATCH when nothing changed: {:#?}\nall of them: {:#?}",
        &after[before..],
        after
            .iter()
            .map(|e| (&e["requestReceivedTimestamp"], &e["requestObject"]))
            .collect::<Vec<_>>()
    );
    let p = get_pod(&admin, "gate-steady").unwrap();
    assert_eq!(condition_status(&p, GATE), Some("True"));
    assert_eq!(condition_status(&p, "Ready"), Some("True"));
    assert_status_patches_carry_the_uid(c, "node-gate", &[("gate-steady", &uid)]);
}

/// The node follows its container runtime's health: Ready while CRI `Status` answers,
/// NotReady with a message naming the container runtime once it stops answering, Ready again
/// once it is back.
#[test]
fn the_node_turns_not_ready_when_its_runtime_stops_answering_and_ready_when_it_is_back() {
    let Some(c) = cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let runtime = RuntimeProcess::start(dir.path());
    let endpoint = runtime.endpoint.clone();
    let _agent = c.agent("node-health", &["--container-runtime-endpoint", &endpoint]);
    let admin = c.admin();
    admin.wait_node_ready("node-health");
    let ready_condition = |k: &Kube| {
        k.run(k.all::<Node>().get_opt("node-health"))
            .ok()??
            .status?
            .conditions?
            .into_iter()
            .find(|x| x.type_ == "Ready")
    };
    // the runtime goes away (SIGTERM; its socket with it)
    drop(runtime);
    let _ = std::fs::remove_file(dir.path().join("rt.sock"));
    let down = admin.wait_for("NotReady", 75, |k| {
        ready_condition(k).filter(|r| r.status == "False")
    });
    let message = down.message.clone().unwrap_or_default();
    assert!(message.contains("container runtime"), "{down:?} {message}");
    let _runtime = RuntimeProcess::start(dir.path());
    admin.wait_for("Ready again", 60, |k| {
        ready_condition(k).filter(|r| r.status == "True")
    });
}
