//! `kubectl logs` as users run it: through the API server to the node's authenticated kubelet
//! API (`/containerLogs`), on containerd, with the node on the host's address (the API server
//! does not proxy to loopback). Behaviour KA-30, KA-31, KA-33, KA-34.

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
