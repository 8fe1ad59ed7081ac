//! The agent as the node of a real control plane on containerd + runc, started as a user
//! starts it: `scripts/cluster.sh up DIR --runtime containerd` (with this build's agent). The
//! node hands its podCIDR to containerd (CRI `UpdateRuntimeConfig`), which renders its CNI
//! template over it; pods get bridge IPs from that range, reachable from the host. The pod
//! lifecycle tests of `tests/real_cluster.rs` run here on containerd too, and a restarted
//! container is shown to keep its pod's sandbox and IP, on the host network too (RT-09).

mod support;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use support::on_containerd::{
    agent_log, bound_pod, created_sandboxes, in_containerd, ledger_text, main_status, phase,
    pod_ip, pod_records, volume_dir, IMAGE,
};
use support::real_cluster::{read_sa_probe, sa_probe_script, RealCluster};

const NODE: &str = "ctr-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd(NODE)
}

/// `ADDRESS/PREFIX` → does it hold `ip`?
fn cidr_holds(cidr: &str, ip: Ipv4Addr) -> bool {
    let (net, prefix) = cidr.split_once('/').expect("a CIDR");
    let net: Ipv4Addr = net.parse().expect("an IPv4 CIDR");
    let prefix: u32 = prefix.parse().unwrap();
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(net) & mask == u32::from(ip) & mask
}

/// `GET http://ip:port/` from the host → the body.
fn get_from_host(ip: Ipv4Addr, port: u16) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET / HTTP/1.0\r\nHost: {ip}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn the_node_hands_its_pod_cidr_to_containerd_and_pods_get_ips_from_it_that_answer_from_the_host() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let node = admin.run(admin.all::<Node>().get(NODE)).expect("the node");
    let cidr = node.spec.unwrap().pod_cidr.expect("the node's podCIDR");
    // the node gave containerd its podCIDR, and containerd rendered its CNI template over it
    assert!(
        agent_log(c).contains("pod CIDR handed to the container runtime"),
        "no UpdateRuntimeConfig in the agent's log"
    );
    let net = std::fs::read_to_string(c.dir.join("containerd/cni/conf/10-containerd-net.conflist"))
        .expect("containerd's rendered CNI config");
    assert!(net.contains(&format!("\"subnet\": \"{cidr}\"")), "{net}");

    // a Deployment, as a user makes it: the scheduler places its pods on the node
    let script = "mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www";
    let (ok, out) = c.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image",
        IMAGE,
        "--replicas",
        "2",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert!(ok, "{out}");
    let pods = admin.api::<Pod>("default");
    let running = admin.wait_for("both web pods Running with an IP", 120, |k| {
        let list = k
            .run(pods.list(&ListParams::default().labels("app=web")))
            .ok()?;
        let ips: Vec<(String, Ipv4Addr)> = list
            .items
            .iter()
            .filter(|p| phase(p) == Some("Running"))
            .filter_map(|p| Some((p.metadata.name.clone()?, pod_ip(p)?)))
            .collect();
        (ips.len() == 2).then_some(ips)
    });
    let (ok, wide) = c.kubectl(&["get", "pods", "-l", "app=web", "-o", "wide"]);
    assert!(ok, "{wide}");
    for (name, ip) in &running {
        assert!(cidr_holds(&cidr, *ip), "{name}'s IP {ip} is outside {cidr}");
        let row = wide
            .lines()
            .find(|l| l.starts_with(name.as_str()))
            .unwrap_or_else(|| panic!("{name} in\n{wide}"));
        assert!(
            row.split_whitespace().any(|f| f == ip.to_string()),
            "kubectl get pods -o wide shows {ip} for {name}:\n{wide}"
        );
        assert!(row.contains(NODE), "{row}");
        let body = admin.wait_for(&format!("{name} answering on {ip}:8080"), 60, |_| {
            get_from_host(*ip, 8080).filter(|b| b.contains("hello-from-"))
        });
        assert!(body.contains(&format!("hello-from-{name}")), "{body}");
    }
    let (ok, out) = c.kubectl(&["delete", "deployment", "web", "--wait=false"]);
    assert!(ok, "{out}");
}

/// A pod with the defaults ServiceAccount admission gives it (the projected
/// `kube-api-access-*` volume) runs on containerd and reads its token, CA and namespace;
/// the token reaches neither the ledger nor the agent's log.
#[test]
fn a_default_pod_on_containerd_reads_its_service_account_token_ca_and_namespace() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let script = sa_probe_script();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "proj", "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": IMAGE, "command": ["sh", "-c", script]}]
        }
    }))
    .unwrap();
    let created = admin.wait_for("the pod to be admitted", 60, |_| {
        admin.run(pods.create(&PostParams::default(), &pod)).ok()
    });
    let uid = created.metadata.uid.clone().unwrap();
    let injected = created
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .expect("admission injected kube-api-access-*");
    let log_file = c
        .dir
        .join("node/pod-logs")
        .join(format!("default_proj_{uid}"))
        .join("c/0.log");
    let bytes = read_sa_probe(&admin, &log_file);

    let vol = volume_dir(
        &c.dir.join("node"),
        &uid,
        "kubernetes.io~projected",
        &injected.name,
    )
    .expect("the projected volume on the node");
    let token = std::fs::read_to_string(vol.join("token")).unwrap();
    assert_eq!(token.len(), bytes, "the container read the node's token");
    let signature = token.rsplit('.').next().unwrap().to_string();
    assert!(signature.len() > 20);
    assert!(
        !ledger_text(c).contains(&signature),
        "the token is in the ledger"
    );
    assert!(
        !agent_log(c).contains(&signature),
        "the token is in the agent's log"
    );
    let _ = admin.run(pods.delete("proj", &Default::default()));
}

/// On containerd: deleted pods end Failed/137 when they ignore SIGTERM and Succeeded/0 when
/// they exit on it (the last version before the object goes); a crash loop counts its
/// restarts with the last exit in lastState; a Never pod ends with its exit code.
#[test]
fn pods_on_containerd_end_with_their_exit_codes_and_a_crash_loop_counts_its_restarts() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    for p in [
        bound_pod(
            NODE,
            "stubborn",
            "trap '' TERM; while true; do sleep 0.1; done",
            2,
            "Always",
        ),
        bound_pod(
            NODE,
            "polite",
            "trap 'exit 0' TERM; while true; do sleep 0.1; done",
            2,
            "Always",
        ),
        bound_pod(NODE, "crasher", "sleep 0.5; exit 3", 1, "Always"),
        bound_pod(NODE, "once", "exit 7", 1, "Never"),
    ] {
        admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    }
    for name in ["stubborn", "polite"] {
        admin.wait_for(&format!("{name} running"), 120, |k| {
            let p = k.run(pods.get(name)).ok()?;
            main_status(&p)?.state.as_ref()?.running.as_ref()?;
            Some(())
        });
    }
    for (name, want_phase, want_exit) in [("stubborn", "Failed", 137), ("polite", "Succeeded", 0)] {
        let seen = admin.delete_and_watch("default", name, 2);
        let last = seen.last().unwrap();
        assert_eq!(phase(last), Some(want_phase), "{name}: {seen:#?}");
        let code = main_status(last)
            .and_then(|s| s.state.as_ref()?.terminated.as_ref())
            .map(|t| t.exit_code);
        assert_eq!(code, Some(want_exit), "{name}");
    }
    let crasher = admin.wait_for("the crash loop's restarts", 120, |k| {
        let p = k.run(pods.get("crasher")).ok()?;
        let s = main_status(&p)?;
        (s.restart_count >= 2).then_some(s.clone())
    });
    let last = crasher
        .last_state
        .unwrap()
        .terminated
        .expect("lastState.terminated");
    assert_eq!(last.exit_code, 3);
    assert!(crasher
        .container_id
        .unwrap_or_default()
        .starts_with("containerd://"));
    let once = admin.wait_for("the Never pod Failed", 120, |k| {
        let p = k.run(pods.get("once")).ok()?;
        (phase(&p) == Some("Failed")).then_some(p)
    });
    let t = main_status(&once)
        .unwrap()
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(t.exit_code, 7);
    for name in ["crasher", "once"] {
        let _ = admin.run(pods.delete(name, &Default::default()));
    }
}

/// A bound pod with sidecars `sc1`, `sc2` (restartable init containers) and `main`.
fn pod_with_sidecars(name: &str, main_on_term: &str) -> Pod {
    let looping = |on_term: &str| format!("trap '{on_term}' TERM; while true; do sleep 0.1; done");
    let c = |n: &str, script: String| serde_json::json!({"name": n, "image": IMAGE, "command": ["sh", "-c", script]});
    let sidecar = |n: &str| {
        let mut s = c(n, looping("exit 0"));
        s["restartPolicy"] = "Always".into();
        s
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 30,
            "initContainers": [sidecar("sc1"), sidecar("sc2")],
            "containers": [c("main", looping(main_on_term))]
        }
    }))
    .unwrap()
}

/// Waits until `name` runs all three of its containers; returns its UID.
fn wait_sidecars_running(admin: &support::real_cluster::Kube, name: &str) -> String {
    let pods = admin.api::<Pod>("default");
    admin.wait_for(&format!("{name}: sidecars and main running"), 120, |k| {
        let p = k.run(pods.get(name)).ok()?;
        let s = p.status.as_ref()?;
        let statuses = s
            .init_container_statuses
            .iter()
            .chain(&s.container_statuses);
        let running = statuses
            .flatten()
            .filter(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()));
        (running.count() == 3)
            .then(|| p.metadata.uid.clone())
            .flatten()
    })
}

/// RT-42 on containerd: deleting a pod with sidecars stops the regular container first,
/// then the sidecars in reverse order, each after the one before it has exited.
#[test]
fn a_deleted_pods_sidecars_stop_after_its_main_container_in_reverse_order() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    // main takes 2 s to exit on SIGTERM, the sidecars exit at once: stopped all together,
    // the sidecars would be gone 2 s before main
    let pod = pod_with_sidecars("ordered", "sleep 2; exit 0");
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let uid = wait_sidecars_running(&admin, "ordered");
    admin.delete_and_watch("default", "ordered", 30);
    let records = pod_records(c, &uid);
    // the last time the runtime showed every container exited
    let finished = records
        .iter()
        .rev()
        .filter(|(kind, _)| kind == "RuntimeStatusObserved")
        .find_map(|(_, e)| {
            let cs = e["status"]["containers"].as_array()?;
            let at = |n: &str| {
                let c = cs
                    .iter()
                    .find(|c| c["name"] == n && c["state"] == "exited")?;
                ledgerlet::core::record::Time::parse_rfc3339(c["finished_at"].as_str()?).ok()
            };
            Some((at("main")?, at("sc2")?, at("sc1")?))
        })
        .unwrap_or_else(|| panic!("no status with all three exited: {records:#?}"));
    let (main, sc2, sc1) = finished;
    assert!(
        main < sc2 && sc2 < sc1,
        "exit order main {main:?}, sc2 {sc2:?}, sc1 {sc1:?}"
    );
}

/// RT-42 on containerd: a pod kill stops every sandbox of the pod, the NOTREADY one left
/// from a sandbox re-creation (RT-07) too.
#[test]
fn a_pod_kill_stops_its_not_ready_sandboxes_too() {
    use ledgerlet::cri::{CriClient, CriClientOptions};
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let pod = bound_pod(
        NODE,
        "resandboxed",
        "trap 'exit 0' TERM; while true; do sleep 0.1; done",
        5,
        "Always",
    );
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let uid = admin.wait_for("resandboxed running", 120, |k| {
        let p = k.run(pods.get("resandboxed")).ok()?;
        main_status(&p)?.state.as_ref()?.running.as_ref()?;
        p.metadata.uid
    });
    let sandboxes = |c: &RealCluster| created_sandboxes(c, &uid);
    let first = sandboxes(c).pop().expect("the pod's sandbox");
    // the sandbox stops behind the node's back: it turns NOTREADY and the node makes a new one
    let endpoint = std::fs::read_to_string(c.dir.join("runtime-endpoint")).unwrap();
    admin
        .run(async {
            let cri = CriClient::connect(endpoint.trim(), CriClientOptions::default()).await?;
            cri.stop_pod_sandbox(&first).await
        })
        .expect("StopPodSandbox");
    admin.wait_for("a second sandbox, the pod running again", 120, |k| {
        let p = k.run(pods.get("resandboxed")).ok()?;
        main_status(&p)?.state.as_ref()?.running.as_ref()?;
        (sandboxes(c).len() >= 2).then_some(())
    });
    admin.delete_and_watch("default", "resandboxed", 5);
    let records = pod_records(c, &uid);
    let deleted = records
        .iter()
        .position(|(kind, _)| kind == "PodDeleted")
        .expect("the deletion reached the node");
    let stopped: Vec<&str> = records[deleted..]
        .iter()
        .filter(|(_, e)| e["action"] == "stop_sandbox")
        .filter_map(|(_, e)| e["id"].as_str())
        .collect();
    let all = sandboxes(c);
    for id in &all {
        assert!(
            stopped.contains(&id.as_str()),
            "sandbox {id} was not stopped by the kill; stopped {stopped:?} of {all:?}"
        );
    }
}

/// AD-02 on containerd: a pod past its `activeDeadlineSeconds` ends Failed with reason
/// `DeadlineExceeded`, its container killed, and a Normal `DeadlineExceeded` event.
#[test]
fn a_pod_past_its_active_deadline_ends_failed_deadline_exceeded_and_is_killed() {
    use k8s_openapi::api::core::v1::Event;
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let looping = "trap 'exit 0' TERM; while true; do sleep 0.1; done";
    let mut pod = bound_pod(NODE, "deadline", looping, 2, "Always");
    pod.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let status = admin.wait_for("deadline Failed with its container stopped", 120, |k| {
        let p = k.run(pods.get("deadline")).ok()?;
        main_status(&p)?.state.as_ref()?.terminated.as_ref()?;
        (phase(&p) == Some("Failed")).then_some(p.status?)
    });
    assert_eq!(
        (status.reason.as_deref(), status.message.as_deref()),
        (
            Some("DeadlineExceeded"),
            Some("Pod was active on the node longer than the specified deadline")
        )
    );
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=deadline");
    admin.wait_for("the DeadlineExceeded event", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("DeadlineExceeded")
                    && e.type_.as_deref() == Some("Normal")
            })
            .then_some(())
    });
    let _ = admin.run(pods.delete("deadline", &Default::default()));
}

/// The terminated state of ephemeral container `name` of `p`.
fn ephemeral_terminated(
    p: &Pod,
    name: &str,
) -> Option<k8s_openapi::api::core::v1::ContainerStateTerminated> {
    let statuses = p.status.as_ref()?.ephemeral_container_statuses.as_ref()?;
    let s = statuses.iter().find(|s| s.name == name)?;
    s.state.as_ref()?.terminated.clone()
}

/// RT-47 on containerd, as `kubectl debug --target`: ephemeral containers added through the
/// `ephemeralcontainers` subresource start in the running pod; the targeted one shares the
/// target's PID namespace (PID 1 is the target's `sleep`), the other does not; both run
/// once, and the pod's own container is not restarted.
#[test]
fn ephemeral_containers_added_to_a_running_pod_run_once_and_a_target_shares_its_pids() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let pod = bound_pod(NODE, "debugged", "exec sleep 3600", 1, "Always");
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let main_id = admin.wait_for("debugged running", 120, |k| {
        let p = k.run(pods.get("debugged")).ok()?;
        let s = main_status(&p)?;
        s.state.as_ref()?.running.as_ref()?;
        s.container_id.clone()
    });
    let pid1_is_sleep = r#"[ "$(cat /proc/1/comm)" = sleep ]"#;
    let debugger = |name: &str, target: Option<&str>| {
        let mut d = serde_json::json!({
            "name": name,
            "image": IMAGE,
            "command": ["sh", "-c", pid1_is_sleep],
        });
        if let Some(t) = target {
            d["targetContainerName"] = t.into();
        }
        d
    };
    let patch = serde_json::json!({"spec": {"ephemeralContainers": [
        debugger("targeted", Some("main")),
        debugger("untargeted", None),
    ]}});
    admin
        .run(pods.patch_subresource(
            "ephemeralcontainers",
            "debugged",
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        ))
        .expect("PATCH pods/ephemeralcontainers");
    let p = admin.wait_for("both ephemeral containers terminated", 120, |k| {
        let p = k.run(pods.get("debugged")).ok()?;
        ephemeral_terminated(&p, "targeted")?;
        ephemeral_terminated(&p, "untargeted")?;
        Some(p)
    });
    let exit = |name| ephemeral_terminated(&p, name).unwrap().exit_code;
    assert_eq!(exit("targeted"), 0, "PID 1 of the targeted container");
    assert_eq!(exit("untargeted"), 1, "PID 1 of the untargeted container");
    // a later sync starts neither again, and the pod's own container kept running
    std::thread::sleep(Duration::from_secs(3));
    let later = admin.run(pods.get("debugged")).unwrap();
    let ids = |p: &Pod| -> Vec<Option<String>> {
        let statuses = p
            .status
            .as_ref()
            .unwrap()
            .ephemeral_container_statuses
            .iter();
        statuses.flatten().map(|s| s.container_id.clone()).collect()
    };
    assert_eq!(ids(&later), ids(&p));
    let main = main_status(&later).unwrap();
    assert_eq!(
        (main.container_id.as_ref(), main.restart_count),
        (Some(&main_id), 0)
    );
    let uid = later.metadata.uid.clone().unwrap();
    let starts = pod_records(c, &uid)
        .into_iter()
        .filter(|(kind, e)| {
            kind == "RuntimeActionFinished"
                && e["action"] == "start_container"
                && e["container"] == "untargeted"
        })
        .count();
    assert_eq!(
        starts, 1,
        "StartContainer records of the untargeted container"
    );
    let _ = admin.run(pods.delete("debugged", &Default::default()));
}

/// A bound pod (restartPolicy Always) whose container `main` exits 3 on its first run and
/// sleeps on every later one (a marker in an emptyDir, which outlives the container).
fn exits_once_pod(name: &str, host_network: bool) -> Pod {
    let script = "if [ -e /mark/ran ]; then exec sleep 3600; fi; touch /mark/ran; exit 3";
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "hostNetwork": host_network,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Always",
            "volumes": [{"name": "mark", "emptyDir": {}}],
            "containers": [{
                "name": "main", "image": IMAGE, "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "mark", "mountPath": "/mark"}]
            }]
        }
    }))
    .unwrap()
}

/// Creates `pod`; the pod IP it first shows, and the pod once its container exited (code
/// 3) and runs again.
fn restarted_once(admin: &support::real_cluster::Kube, pod: &Pod) -> (Ipv4Addr, Pod) {
    let pods = admin.api::<Pod>("default");
    let name = pod.metadata.name.clone().unwrap();
    admin.run(pods.create(&PostParams::default(), pod)).unwrap();
    let first_ip = admin.wait_for(&format!("{name} with a pod IP"), 120, |k| {
        pod_ip(&k.run(pods.get(&name)).ok()?)
    });
    let again = admin.wait_for(&format!("{name} running again after its exit"), 120, |k| {
        let p = k.run(pods.get(&name)).ok()?;
        let s = main_status(&p)?;
        s.state.as_ref()?.running.as_ref()?;
        let last = s.last_state.as_ref()?.terminated.as_ref()?;
        (s.restart_count >= 1 && last.exit_code == 3).then_some(p)
    });
    (first_ip, again)
}

/// Pod `uid`'s one sandbox: the only one the node created (its ledger) and the only one
/// containerd holds, READY, with both of the pod's containers (the exited first run and the
/// running second one) in it.
fn the_one_sandbox_of_both_runs(c: &RealCluster, uid: &str) -> String {
    use ledgerlet::cri::v1::{ContainerState, PodSandboxState};
    let created = created_sandboxes(c, uid);
    assert_eq!(created.len(), 1, "sandboxes the node created: {created:?}");
    let (sandboxes, containers) = in_containerd(c, uid);
    assert_eq!(sandboxes.len(), 1, "sandboxes in containerd: {sandboxes:?}");
    assert_eq!(sandboxes[0].id, created[0]);
    assert_eq!(sandboxes[0].state, PodSandboxState::SandboxReady as i32);
    let mut states: Vec<i32> = containers.iter().map(|ct| ct.state).collect();
    states.sort();
    assert_eq!(
        states,
        [
            ContainerState::ContainerRunning as i32,
            ContainerState::ContainerExited as i32
        ],
        "{containers:?}"
    );
    for ct in &containers {
        assert_eq!(ct.pod_sandbox_id, created[0], "{ct:?}");
    }
    created[0].clone()
}

/// RT-03, RT-09 on containerd: a container that exits under restartPolicy Always is
/// restarted in the pod's sandbox: the same sandbox (no second one in the ledger or in
/// containerd), the same pod IP, a new container with restartCount 1.
#[test]
fn a_restarted_container_keeps_its_pods_sandbox_and_pod_ip() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let (first_ip, again) = restarted_once(&admin, &exits_once_pod("reuse", false));
    let uid = again.metadata.uid.clone().unwrap();
    assert_eq!(
        pod_ip(&again),
        Some(first_ip),
        "the pod IP after the restart"
    );
    assert_eq!(main_status(&again).unwrap().restart_count, 1);
    the_one_sandbox_of_both_runs(c, &uid);
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete("reuse", &Default::default()),
    );
}

/// RT-09 on containerd: a host-network pod's sandbox reports a network status with an
/// empty IP, which recreates the sandbox of a pod with its own network but not this one:
/// its restarted container runs in the same sandbox, and its pod IP stays the node's IP.
#[test]
fn a_host_network_pods_sandbox_without_an_ip_is_kept_when_its_container_restarts() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let (first_ip, again) = restarted_once(&admin, &exits_once_pod("reuse-host", true));
    let uid = again.metadata.uid.clone().unwrap();
    let host_ip = again.status.as_ref().unwrap().host_ip.clone();
    assert_eq!(
        host_ip.as_deref(),
        Some("127.0.0.1"),
        "the node's --node-ip"
    );
    assert_eq!(first_ip.to_string(), "127.0.0.1", "the host IP as pod IP");
    assert_eq!(
        pod_ip(&again),
        Some(first_ip),
        "the pod IP after the restart"
    );
    assert_eq!(main_status(&again).unwrap().restart_count, 1);
    let sandbox = the_one_sandbox_of_both_runs(c, &uid);
    // the node saw the empty IP RT-09 is about, on the host-network sandbox it kept
    let observed = pod_records(c, &uid)
        .into_iter()
        .filter(|(kind, _)| kind == "RuntimeStatusObserved")
        .flat_map(|(_, e)| {
            e["status"]["sandboxes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|s| s["id"] == sandbox.as_str())
        .expect("a runtime status with the sandbox");
    assert_eq!(observed["ip"], "", "{observed}");
    assert_eq!(observed["host_network"], true, "{observed}");
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete("reuse-host", &Default::default()),
    );
}
