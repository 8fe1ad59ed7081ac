//! The node's authenticated kubelet API as users reach it, through the API server, on
//! containerd with the node on the host's address (the API server does not proxy to
//! loopback): `kubectl logs` (`/containerLogs`), `kubectl exec`, `attach` and `port-forward`
//! (`/exec`, `/attach`, `/portForward` proxied to containerd's streaming server) and
//! `ledgerlet explain --kubeconfig --node` (`/debug/ledger`). Behaviour KA-02, KA-30, KA-31,
//! KA-33, KA-34, KA-14, KA-40 to KA-42.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

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

/// `kubectl ARGS…` as the cluster admin with `stdin` as its input, at most `timeout_s`:
/// (exit code, stdout, stderr).
fn kubectl_with_input(
    c: &RealCluster,
    timeout_s: u32,
    args: &[&str],
    stdin: &[u8],
) -> (Option<i32>, String, String) {
    let mut child = Command::new("timeout")
        .arg(timeout_s.to_string())
        .arg(c.dir.join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(c.admin_kubeconfig())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Creates `pod` and waits until it runs.
fn start(c: &RealCluster, pod: &Pod) {
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let name = pod.metadata.name.clone().unwrap();
    admin.run(pods.create(&PostParams::default(), pod)).unwrap();
    admin.wait_for(&format!("{name} running"), 120, |k| {
        let p = k.run(pods.get(&name)).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
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
/// of the node from a workstation, reading the node's ledger through the API server, and
/// `replay` and `diff` read it the same way; a user without `nodes/proxy` is refused with
/// the API server's 403.
#[test]
fn explain_replay_and_diff_read_a_nodes_ledger_through_the_api_server_and_need_nodes_proxy() {
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
    // and diff between the pod's first and last records: what its status became
    let (ok, records, err) = kubectl(
        c,
        30,
        &[
            "get",
            "--raw",
            &format!("/api/v1/nodes/{NODE}/proxy/debug/ledger?pod=default/crasher"),
        ],
    );
    assert!(ok, "{err}");
    let seqs: Vec<u64> = records
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["seq"].as_u64())
        .collect();
    let (first, last) = (seqs[0].to_string(), seqs[seqs.len() - 1].to_string());
    let (ok, out, err) = ledgerlet(&[
        "diff",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node",
        NODE,
        &first,
        &last,
        "--pod",
        "default/crasher",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("from record") && out.contains("records about the pod in between"),
        "{out}"
    );
    assert!(out.contains("api_status.status.containerStatuses"), "{out}");

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

/// KA-40, KA-41: `kubectl exec` runs a command in the running container through containerd's
/// streaming server: stdout and stderr come back apart and kubectl exits with the command's
/// code; with `-i` the command reads what kubectl is given on stdin.
#[test]
fn kubectl_exec_returns_the_commands_streams_and_exit_code_and_exec_i_passes_stdin() {
    let Some(c) = cluster() else { return };
    start(c, &pod("shell", "sleep 3600", "Always"));
    let script = "echo out-line; echo err-line >&2; exit 3";
    let (code, out, err) =
        kubectl_with_input(c, 60, &["exec", "shell", "--", "sh", "-c", script], b"");
    assert_eq!(code, Some(3), "kubectl exec: {out}{err}");
    assert_eq!(out, "out-line\n");
    assert!(err.contains("err-line"), "{err}");

    let (code, out, err) = kubectl_with_input(
        c,
        60,
        &["exec", "-i", "shell", "--", "sh", "-c", "cat; echo end"],
        b"line-1\nline-2\n",
    );
    assert_eq!(code, Some(0), "kubectl exec -i: {err}");
    assert_eq!(out, "line-1\nline-2\nend\n");

    // a container that is not there: kubectl reports the node's refusal
    let (code, _, err) =
        kubectl_with_input(c, 60, &["exec", "shell", "-c", "nope", "--", "true"], b"");
    assert_ne!(code, Some(0));
    assert!(err.contains("nope"), "{err}");
    let _ = c.admin().run(
        c.admin()
            .api::<Pod>("default")
            .delete("shell", &Default::default()),
    );
}

/// KA-40, KA-41: `kubectl attach -i` joins the container's own process: the lines it is given
/// reach the process's stdin and its answers come back, and with `stdinOnce` the end of
/// kubectl's input ends the process's.
#[test]
fn kubectl_attach_i_talks_to_the_containers_own_process() {
    let Some(c) = cluster() else { return };
    let mut reader = pod(
        "reader",
        "while read line; do echo \"got $line\"; done; echo bye",
        "Never",
    );
    let main = &mut reader.spec.as_mut().unwrap().containers[0];
    main.stdin = Some(true);
    main.stdin_once = Some(true);
    start(c, &reader);
    let (code, out, err) =
        kubectl_with_input(c, 60, &["attach", "-i", "reader", "-c", "main"], b"a\nb\n");
    assert_eq!(code, Some(0), "kubectl attach: {out}{err}");
    assert!(out.starts_with("got a\ngot b\n"), "{out}");
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    admin.wait_for("reader done after its stdin closed", 60, |k| {
        let p = k.run(pods.get("reader")).ok()?;
        (phase(&p) == Some("Succeeded")).then_some(())
    });
    let _ = admin.run(pods.delete("reader", &Default::default()));
}

/// KA-42: `kubectl port-forward` carries an HTTP request from the workstation into the pod's
/// network namespace and the answer back.
#[test]
fn kubectl_port_forward_carries_an_http_request_to_the_pods_port() {
    let Some(c) = cluster() else { return };
    let script = "echo served-by-pod > /marks/index.html && exec httpd -f -p 8080 -h /marks";
    start(c, &pod("web", script, "Always"));
    let mut forward = Command::new(c.dir.join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(c.admin_kubeconfig())
        .args(["port-forward", "pod/web", ":8080"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl port-forward");
    let mut line = String::new();
    let mut said = BufReader::new(forward.stdout.take().unwrap());
    said.read_line(&mut line).unwrap();
    // kubectl dies of a closed pipe when it says more: drain what it says
    std::thread::spawn(move || std::io::copy(&mut said, &mut std::io::sink()));
    // "Forwarding from 127.0.0.1:PORT -> 8080"
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local port in {line:?}"));
    // httpd may not listen yet: ask again until it answers
    let admin = c.admin();
    let answer = admin.wait_for("an answer through the forwarded port", 60, |_| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
        s.write_all(b"GET /index.html HTTP/1.0\r\nHost: web\r\n\r\n")
            .ok()?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).ok()?;
        answer.contains("served-by-pod").then_some(answer)
    });
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let _ = forward.kill();
    let _ = forward.wait();
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete("web", &Default::default()),
    );
}

/// The payloads of the data frames of a server's websocket stream (unmasked frames, as a
/// server sends), up to its close frame.
fn websocket_payloads(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while bytes.len() >= 2 {
        let opcode = bytes[0] & 0x0f;
        let (len, header) = match bytes[1] & 0x7f {
            126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
            127 => panic!("a frame of more than 64 KiB"),
            n => (n as usize, 2),
        };
        let payload = &bytes[header..header + len];
        match opcode {
            0x8 => break,
            0x1 | 0x2 => out.extend_from_slice(payload),
            _ => {}
        }
        bytes = &bytes[header + len..];
    }
    out
}

/// KA-45: `GET pods/NAME/log` over a websocket (the upstream e2e test's way, `binary.k8s.io`)
/// carries the whole log: the API server's websocket reader drops the data of a read that
/// also ends the body, so the node writes the body's end apart from its last chunk.
#[test]
fn ka_45_logs_read_over_a_websocket_through_the_api_server_carry_the_whole_log() {
    let Some(c) = cluster() else { return };
    start(
        c,
        &pod("wslog", "echo container is alive; sleep 3600", "Never"),
    );
    c.admin().wait_for("the log written", 60, |_| {
        let (ok, out, _) = kubectl(c, 30, &["logs", "wslog"]);
        (ok && out == "container is alive\n").then_some(())
    });
    let pki = c.dir.join("pki");
    let url = format!(
        "{}/api/v1/namespaces/default/pods/wslog/log?container=main",
        c.env["APISERVER"]
    );
    let out = Command::new("curl")
        .args(["-s", "--http1.1", "--max-time", "10", "-o", "-"])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(["-H", "Connection: Upgrade", "-H", "Upgrade: websocket"])
        .args(["-H", "Sec-WebSocket-Version: 13"])
        .args(["-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="])
        .args(["-H", "Sec-WebSocket-Protocol: binary.k8s.io"])
        .arg(&url)
        .output()
        .expect("run curl");
    assert_eq!(
        String::from_utf8_lossy(&websocket_payloads(&out.stdout)),
        "container is alive\n",
        "frames: {:?}",
        out.stdout
    );
    let admin = c.admin();
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete("wslog", &Default::default()),
    );
}
