//! The node's authenticated kubelet API as users reach it, through the API server, on
//! containerd with the node on the host's address (the API server does not proxy to
//! loopback): `kubectl logs` (`/containerLogs`) and `ledgerlet explain --kubeconfig --node`
//! (`/debug/ledger`). Behaviour KA-02, KA-30, KA-31, KA-33, KA-34, KA-14.

mod support;

use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use support::on_containerd::{main_status, phase, IMAGE};
use support::real_cluster::RealCluster;

const NODE: &str = "logs-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd_on_host(NODE)
}

/// `kubectl ARGS…` as the cluster admin, at most `timeout_s`: (success, stdout, stderr).
fn kubectl(c: &RealCluster, timeout_s: u32, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout")
        .arg(timeout_s.to_string())
        .arg(c.dir.join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(c.admin_kubeconfig())
        .args(args)
        .output()
        .expect("run kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pod(name: &str, script: &str, restart: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": restart,
            "volumes": [{"name": "marks", "emptyDir": {}}],
            "containers": [{
                "name": "main", "image": IMAGE, "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "marks", "mountPath": "/marks"}]
            }]
        }
    }))
    .unwrap()
}

/// KA-30, KA-31, KA-33: `kubectl logs` reads the running instance's log, `--tail` its last
/// lines, `--previous` what the instance before the restart wrote.
#[test]
fn kubectl_logs_tail_and_previous_read_the_containers_log_through_the_api_server() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let script = "if [ -e /marks/once ]; then echo second-1; echo second-2; echo second-3; \
                  sleep 3600; else touch /marks/once; echo first-1; exit 1; fi";
    admin
        .run(pods.create(&PostParams::default(), &pod("restarted", script, "Always")))
        .unwrap();
    admin.wait_for("restarted running again after one exit", 120, |k| {
        let p = k.run(pods.get("restarted")).ok()?;
        let s = main_status(&p)?;
        (phase(&p) == Some("Running")
            && s.restart_count >= 1
            && s.state.as_ref()?.running.is_some())
        .then_some(())
    });
    let logs = |args: &[&str]| {
        let mut all = vec!["logs", "restarted"];
        all.extend_from_slice(args);
        admin.wait_for(&format!("kubectl {}", all.join(" ")), 60, |_| {
            let (ok, out, err) = kubectl(c, 30, &all);
            if !ok {
                eprintln!("kubectl {}: {err}", all.join(" "));
            }
            // the third line may not be written yet
            (ok && !out.is_empty() && (args.contains(&"--previous") || out.contains("second-3")))
                .then_some(out)
        })
    };
    assert_eq!(logs(&[]), "second-1\nsecond-2\nsecond-3\n");
    assert_eq!(logs(&["--tail=1"]), "second-3\n");
    assert_eq!(logs(&["--previous"]), "first-1\n");
    assert_eq!(
        logs(&["--timestamps", "--tail=1"])
            .split_once(' ')
            .map(|(_, line)| line),
        Some("second-3\n")
    );
    let _ = admin.run(pods.delete("restarted", &Default::default()));
}

/// KA-34: `kubectl logs -f` streams lines as they are written and returns once the
/// container has exited.
#[test]
fn kubectl_logs_follow_streams_until_the_container_exits() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let script = "sleep 3; echo tick-1; sleep 1; echo tick-2; sleep 1; echo tick-3";
    admin
        .run(pods.create(&PostParams::default(), &pod("ticker", script, "Never")))
        .unwrap();
    admin.wait_for("ticker running", 120, |k| {
        let p = k.run(pods.get("ticker")).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
    let (ok, out, err) = kubectl(c, 90, &["logs", "-f", "ticker"]);
    assert!(ok, "kubectl logs -f: {err}");
    assert_eq!(out, "tick-1\ntick-2\ntick-3\n");
    let _ = admin.run(pods.delete("ticker", &Default::default()));
}

/// A kubeconfig for the cluster's API server with the client certificate of `user` (signed by
/// the cluster CA, no RBAC of its own).
fn user_kubeconfig(c: &RealCluster, user: &str) -> std::path::PathBuf {
    let (cert, key) = c.client_certificate(user, None);
    let server = &c.env["APISERVER"];
    let ca = c.dir.join("pki/ca.crt");
    let path = c.dir.join(format!("{user}.kubeconfig"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: u\n  user:\n    client-certificate: {cert}\n    \
         client-key: {key}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        ca = ca.display(),
        cert = cert.display(),
        key = key.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `ledgerlet ARGS…`: (success, stdout, stderr).
fn ledgerlet(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args(args)
        .output()
        .expect("run ledgerlet");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// KA-14: `ledgerlet explain --kubeconfig … --node … --pod …` explains a crash-looping pod
/// of the node from a workstation, reading the node's ledger through the API server; a user
/// without `nodes/proxy` is refused with the API server's 403.
#[test]
fn explain_reads_a_crash_looping_pods_ledger_through_the_api_server_and_needs_nodes_proxy() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    admin
        .run(pods.create(
            &PostParams::default(),
            &pod("crasher", "echo boom; exit 3", "Always"),
        ))
        .unwrap();
    admin.wait_for("crasher restarted twice", 120, |k| {
        let p = k.run(pods.get("crasher")).ok()?;
        (main_status(&p)?.restart_count >= 2).then_some(())
    });
    let kubeconfig = c.admin_kubeconfig();
    let args = [
        "explain",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node",
        NODE,
        "--pod",
        "default/crasher",
    ];
    let (ok, out, err) = ledgerlet(&args);
    assert!(ok, "{err}");
    let restart = out
        .lines()
        .find(|l| l.contains("container main restarted"))
        .unwrap_or_else(|| panic!("no restart in:\n{out}"));
    assert!(restart.contains("exited with code 3"), "{restart}");
    // replay reads the whole ledger the same way
    let (ok, out, err) = ledgerlet(&[
        "replay",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node",
        NODE,
        "--verify",
    ]);
    assert!(ok && out.contains("verify: OK"), "{out}{err}");

    let mallory = user_kubeconfig(c, "mallory");
    let (ok, out, err) = ledgerlet(&[
        "explain",
        "--kubeconfig",
        mallory.to_str().unwrap(),
        "--node",
        NODE,
        "--pod",
        "default/crasher",
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("403") && err.contains("nodes/proxy") && err.contains("mallory"),
        "{err}"
    );
    let _ = admin.run(pods.delete("crasher", &Default::default()));
}
