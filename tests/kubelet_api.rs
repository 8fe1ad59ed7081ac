//! The kubelet API on the secure port, against a real control plane (KA-01, KA-02, KA-11,
//! KA-12, KA-13): the apiserver reaches it through `nodes/NAME/proxy`, every request is
//! authenticated (client certificates of the cluster CA, ServiceAccount tokens through
//! TokenReview) and authorized (SubjectAccessReview on `nodes/<subresource>`), and hostile
//! clients get a 4xx or a closed connection while others are still served.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::PostParams;
use support::agent::Agent;
use support::real_cluster::{Kube, RealCluster};

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared()
}

/// The agent's kubelet API port, from its log line `serving the kubelet API`.
fn api_port(agent: &Agent) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = agent.log();
        if let Some(i) = log.find("kubelet_api=") {
            let rest = &log[i + "kubelet_api=".len()..];
            let rest = &rest[rest.find(':').expect("HOST:PORT") + 1..];
            let port: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            return port.parse().expect("a port");
        }
        assert!(
            Instant::now() < deadline,
            "no kubelet API in the log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How a test calls the API.
enum Cred<'a> {
    None,
    Cert(&'a Path, &'a Path),
    Token(&'a str),
}

/// `curl` to `https://127.0.0.1:PORT{path}`, verifying the serving certificate against the
/// cluster CA: (status, body). Status 0: no HTTP answer.
fn call(c: &RealCluster, port: u16, path: &str, cred: &Cred, extra: &[&str]) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "--path-as-is",
        "--max-time",
        "20",
        "-w",
        "\n%{http_code}",
    ])
    .arg("--cacert")
    .arg(c.dir.join("pki/ca.crt"));
    match cred {
        Cred::None => {}
        Cred::Cert(crt, key) => {
            cmd.arg("--cert").arg(crt).arg("--key").arg(key);
        }
        Cred::Token(t) => {
            cmd.arg("-H").arg(format!("Authorization: Bearer {t}"));
        }
    }
    let out = cmd
        .args(extra)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn admin_cert(c: &RealCluster) -> (PathBuf, PathBuf) {
    (c.dir.join("pki/admin.crt"), c.dir.join("pki/admin.key"))
}

fn kubectl_ok(c: &RealCluster, args: &[&str]) -> String {
    let (ok, out) = c.kubectl(args);
    assert!(ok, "kubectl {args:?}: {out}");
    out
}

/// A ClusterRole allowing `get` on `nodes/<subresource>` and its binding to `subject`
/// (`--user=U` or `--serviceaccount=NS:NAME`).
fn grant(c: &RealCluster, name: &str, subresource: &str, subject: &str) {
    kubectl_ok(
        c,
        &[
            "create",
            "clusterrole",
            name,
            "--verb=get",
            &format!("--resource=nodes/{subresource}"),
        ],
    );
    kubectl_ok(
        c,
        &[
            "create",
            "clusterrolebinding",
            name,
            &format!("--clusterrole={name}"),
            subject,
        ],
    );
}

/// Polls `f` until it returns `Some`, for up to `secs` (a denial is cached up to 30 s).
fn eventually<T>(what: &str, secs: u64, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => panic!("{what}: {last}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

fn node_port(admin: &Kube, name: &str) -> i32 {
    let n: Node = admin.wait_node_ready(name);
    n.status
        .and_then(|s| s.daemon_endpoints)
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port)
        .unwrap_or_default()
}

/// KA-11, KA-12: the node reports its secure port, and `kubectl get --raw .../proxy/...` reaches
/// `/pods`, `/debug/ledger?pod=NS/NAME` and `/configz` through the apiserver (its client
/// certificate, group `system:masters`, allowed by the SubjectAccessReview).
#[test]
fn ka_11_the_apiserver_proxies_pods_ledger_and_configz_from_the_node_api() {
    let Some(c) = cluster() else { return };
    // the apiserver does not proxy to a loopback address: the node reports the host's
    let host_ip = c.env["APISERVER_ADVERTISE_ADDRESS"].clone();
    let agent = c.agent("ka-proxy", &["--node-ip", &host_ip, "--address", "0.0.0.0"]);
    let admin = c.admin();
    let port = api_port(&agent);
    assert_eq!(node_port(&admin, "ka-proxy"), i32::from(port));
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ka-web", "namespace": "default"},
        "spec": {
            "nodeName": "ka-proxy",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "while true; do sleep 0.2; done"]}]
        }
    }))
    .unwrap();
    pod = admin
        .run(
            admin
                .api::<Pod>("default")
                .create(&PostParams::default(), &pod),
        )
        .unwrap();
    let uid = pod.metadata.uid.clone().unwrap();
    let pods = eventually("the node's /pods through the apiserver", 60, || {
        let (ok, out) = c.kubectl(&["get", "--raw", "/api/v1/nodes/ka-proxy/proxy/pods"]);
        (ok && out.contains("ka-web"))
            .then_some(out.clone())
            .ok_or(out)
    });
    let list: serde_json::Value = serde_json::from_str(&pods).expect("a PodList");
    assert_eq!(list["kind"], "PodList");
    let ledger = kubectl_ok(
        c,
        &[
            "get",
            "--raw",
            "/api/v1/nodes/ka-proxy/proxy/debug/ledger?pod=default/ka-web",
        ],
    );
    let first = ledger.lines().next().expect("records about ka-web");
    assert!(ledger.contains(&uid), "{first}");
    let configz = kubectl_ok(c, &["get", "--raw", "/api/v1/nodes/ka-proxy/proxy/configz"]);
    let configz: serde_json::Value = serde_json::from_str(&configz).unwrap();
    let k = &configz["kubeletconfig"];
    assert_eq!(k["port"], port);
    assert_eq!(k["authorization"]["mode"], "Webhook");
    assert_eq!(k["authentication"]["webhook"]["enabled"], true);
    assert_eq!(k["authentication"]["anonymous"]["enabled"], false);
    assert!(!configz.to_string().contains("PRIVATE KEY"), "{configz}");
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete("ka-web", &kube::api::DeleteParams::default()),
    );
}

/// KA-01, KA-02: no credentials is 401; a client certificate of the cluster CA for a user
/// without RBAC is the kubelet's 403, and 200 once a ClusterRole grants `nodes/proxy` get.
#[test]
fn ka_02_an_unauthenticated_request_is_401_and_a_user_without_rbac_gets_403_until_granted() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("ka-authz", &[]);
    let port = api_port(&agent);
    let (status, body) = call(c, port, "/pods", &Cred::None, &[]);
    assert_eq!((status, body.as_str()), (401, "Unauthorized"));
    let (status, _) = call(c, port, "/no/such/path", &Cred::None, &[]);
    assert_eq!(
        status, 401,
        "an unknown path is no way around authentication"
    );

    let (crt, key) = c.client_certificate("ka-alice", Some("ka-team"));
    let alice = Cred::Cert(&crt, &key);
    let (status, body) = call(c, port, "/pods", &alice, &[]);
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body,
        "Forbidden (user=ka-alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
    );
    grant(c, "ka-alice-proxy", "proxy", "--user=ka-alice");
    let body = eventually("ka-alice allowed after the grant", 120, || {
        let (status, body) = call(c, port, "/pods", &alice, &[]);
        (status == 200)
            .then_some(body.clone())
            .ok_or(format!("{status} {body}"))
    });
    assert!(body.contains("\"PodList\""), "{body}");
    // the grant is for get: a POST (create) stays forbidden
    let (status, body) = call(c, port, "/pods", &alice, &["-X", "POST"]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("verb=create"), "{body}");
}

/// KA-02: `nodes/metrics` covers `/metrics` and `/metrics/probes`, not `/pods`.
#[test]
fn ka_02_a_user_allowed_only_nodes_metrics_reads_metrics_but_not_pods() {
    let Some(c) = cluster() else { return };
    let (crt, key) = c.client_certificate("ka-scraper", None);
    grant(c, "ka-scraper-metrics", "metrics", "--user=ka-scraper");
    let agent = c.agent("ka-metrics", &[]);
    let port = api_port(&agent);
    let scraper = Cred::Cert(&crt, &key);
    let (status, body) = call(c, port, "/metrics", &scraper, &[]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("# TYPE"), "{body}");
    let (status, _) = call(c, port, "/metrics/probes", &scraper, &[]);
    assert_eq!(status, 200);
    let (status, body) = call(c, port, "/pods", &scraper, &[]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("user=ka-scraper"), "{body}");
}

/// KA-01, KA-02: a ServiceAccount token (TokenRequest) is authenticated by TokenReview and
/// authorized by RBAC; without RBAC it is 403; a made-up token is 401; no token reaches the
/// agent's log.
#[test]
fn ka_01_service_account_tokens_are_reviewed_and_authorized_by_rbac() {
    let Some(c) = cluster() else { return };
    for sa in ["ka-sa-ok", "ka-sa-none"] {
        kubectl_ok(c, &["create", "serviceaccount", sa, "-n", "default"]);
    }
    grant(
        c,
        "ka-sa-ok-proxy",
        "proxy",
        "--serviceaccount=default:ka-sa-ok",
    );
    let token = |sa: &str| {
        kubectl_ok(c, &["create", "token", sa, "-n", "default"])
            .trim()
            .to_string()
    };
    let (ok, none) = (token("ka-sa-ok"), token("ka-sa-none"));
    let agent = c.agent("ka-tokens", &[]);
    let port = api_port(&agent);
    let (status, body) = call(c, port, "/pods", &Cred::Token(&ok), &[]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(c, port, "/pods", &Cred::Token(&none), &[]);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.starts_with("Forbidden (user=system:serviceaccount:default:ka-sa-none, verb=get"),
        "{body}"
    );
    let (status, _) = call(c, port, "/pods", &Cred::Token("not-a-token"), &[]);
    assert_eq!(status, 401);
    let log = agent.log();
    assert!(
        !log.contains(&ok) && !log.contains(&none),
        "a token in the agent's log"
    );
}

/// KA-13: a client that never handshakes, plain HTTP on the TLS port, oversized headers,
/// odd paths and an oversized body get a closed connection or a 4xx; others are served.
#[test]
fn ka_13_hostile_clients_get_4xx_or_a_closed_connection_and_others_are_still_served() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("ka-hostile", &[]);
    let port = api_port(&agent);
    let (crt, key) = admin_cert(c);
    let admin = Cred::Cert(&crt, &key);

    // never starts its handshake, and stays connected meanwhile
    let _stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // plain HTTP on the TLS port: no HTTP answer, the connection ends
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    plain
        .write_all(b"GET /pods HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("HTTP/1.1"),
        "{answer:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let headers = dir.path().join("headers");
    std::fs::write(&headers, format!("X-Big: {}\n", "a".repeat(1024 * 1024))).unwrap();
    let (status, _) = call(
        c,
        port,
        "/healthz",
        &admin,
        &["-H", &format!("@{}", headers.display())],
    );
    // 431, or the connection closed while curl was still sending
    assert!(status == 431 || status == 0, "oversized headers: {status}");
    for path in [
        "/pods/../debug/state",
        "/%ff%00",
        "/debug//state",
        "/pods?%zz",
    ] {
        let (status, body) = call(c, port, path, &admin, &[]);
        assert!(
            (400..500).contains(&status) || (status == 200 && path.starts_with("/pods?")),
            "{path}: {status} {body}"
        );
    }
    let file = dir.path().join("body");
    std::fs::write(&file, vec![b'x'; 2 * 1024 * 1024]).unwrap();
    let (status, _) = call(
        c,
        port,
        "/pods",
        &admin,
        &[
            "-X",
            "POST",
            "--data-binary",
            &format!("@{}", file.display()),
        ],
    );
    assert_eq!(status, 413);

    let (status, body) = call(c, port, "/healthz", &admin, &[]);
    assert_eq!((status, body.as_str()), (200, "ok"));
}

/// `curl -k` to a standalone agent's kubelet API (its certificate is self-signed).
fn call_insecure(port: u16, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// KA-01, KA-11: a standalone agent (no kubeconfig: AlwaysAllow) makes a self-signed serving
/// certificate once under `<root-dir>/pki` and keeps it across restarts; without
/// `--anonymous-auth` a request without credentials is 401, with it the request is served.
#[test]
fn ka_11_a_standalone_agent_keeps_its_self_signed_certificate_and_needs_anonymous_auth() {
    let mut agent = Agent::start(&[]);
    let port = api_port(&agent);
    let cert = agent.state_dir().join("pki/kubelet.crt");
    let first = std::fs::read(&cert).expect("a self-signed certificate");
    assert!(agent.state_dir().join("pki/kubelet.key").exists());
    let (status, body) = call_insecure(port, "/healthz");
    assert_eq!((status, body.as_str()), (401, "Unauthorized"));
    assert!(agent.stop().success());
    agent.restart();
    assert_eq!(std::fs::read(&cert).unwrap(), first, "the pair is reused");

    let anonymous = Agent::start(&["--anonymous-auth"]);
    let port = api_port(&anonymous);
    let (status, body) = call_insecure(port, "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = call_insecure(port, "/configz");
    assert_eq!(status, 200, "{body}");
    let configz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        configz["kubeletconfig"]["authorization"]["mode"],
        "AlwaysAllow"
    );
    assert_eq!(
        configz["kubeletconfig"]["authentication"]["anonymous"]["enabled"],
        true
    );
}

/// KA-02: `--authorization-mode Webhook` without a kubeconfig stops the start, naming the flag.
#[test]
fn ka_02_a_webhook_authorizer_without_a_kubeconfig_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args(["run", "--read-only-port", "0", "--port", "0"])
        .args(["--authorization-mode", "Webhook", "--root-dir"])
        .arg(dir.path())
        .arg("--pod-logs-dir")
        .arg(dir.path().join("logs"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--authorization-mode Webhook needs --kubeconfig"),
        "{err}"
    );
}

/// KA-02: a user the cluster CA vouches for but without RBAC on the node is refused a
/// command (`/exec`, POST: `create`) and a log (`/containerLogs`, GET: `get`) with the
/// kubelet's 403, both as `nodes/proxy`; the admin is not refused.
#[test]
fn ka_02_a_user_without_rbac_gets_403_for_exec_and_logs() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("ka-exec-authz", &[]);
    let port = api_port(&agent);
    let (crt, key) = c.client_certificate("ka-bob", None);
    let bob = Cred::Cert(&crt, &key);
    let exec = "/exec/default/any/main?command=ls&output=1";
    let (status, body) = call(c, port, exec, &bob, &["-X", "POST"]);
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            "Forbidden (user=ka-bob, verb=create, resource=nodes, subresource(s)=[proxy])\n"
        )
    );
    let (status, body) = call(c, port, "/containerLogs/default/any/main", &bob, &[]);
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            "Forbidden (user=ka-bob, verb=get, resource=nodes, subresource(s)=[proxy])\n"
        )
    );
    let (crt, key) = admin_cert(c);
    let (status, body) = call(c, port, exec, &Cred::Cert(&crt, &key), &["-X", "POST"]);
    assert_eq!((status, body.as_str()), (404, "pod does not exist\n"));
}

/// KA-40, KA-42 to KA-44: on the embedded runtime `/run` runs a command through ExecSync;
/// `/exec`, `/attach` and `/portForward` get the kubelet's refusals in its order (bad
/// options 400, unknown pod 404, no such running container 500, no upgrade 500), and an
/// upgrade the runtime's own refusal of streaming, named, as a 500.
#[test]
fn ka_40_streaming_requests_get_the_kubelets_refusals_and_run_answers_on_the_embedded_runtime() {
    let Some(c) = cluster() else { return };
    let agent = c.agent("ka-stream", &[]);
    let port = api_port(&agent);
    let admin = c.admin();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ka-sh", "namespace": "default"},
        "spec": {
            "nodeName": "ka-stream",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "while true; do sleep 0.2; done"]}]
        }
    }))
    .unwrap();
    let pods = admin.api::<Pod>("default");
    let pod = admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let uid = pod.metadata.uid.clone().unwrap();
    admin.wait_for("ka-sh running", 60, |k| {
        let p = k.run(pods.get("ka-sh")).ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    });
    let (crt, key) = admin_cert(c);
    let admin_cred = Cred::Cert(&crt, &key);
    let post = |path: &str, extra: &[&str]| {
        let mut args = vec!["-X", "POST"];
        args.extend_from_slice(extra);
        call(c, port, path, &admin_cred, &args)
    };
    let spdy = [
        "-H",
        "Connection: Upgrade",
        "-H",
        "Upgrade: SPDY/3.1",
        "-H",
        "X-Stream-Protocol-Version: v4.channel.k8s.io",
    ];
    let websocket = [
        "-H",
        "Connection: Upgrade",
        "-H",
        "Upgrade: websocket",
        "-H",
        "Sec-WebSocket-Version: 13",
        "-H",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ];

    assert_eq!(
        post("/run/default/ka-sh/main?cmd=echo%20hello", &[]),
        (200, "hello\n".into())
    );
    assert_eq!(
        post(
            &format!("/run/default/ka-sh/{uid}/main?cmd=echo%20by-uid"),
            &[]
        ),
        (200, "by-uid\n".into())
    );
    assert_eq!(
        post("/run/default/ka-sh/main?cmd=false", &[]),
        (500, "command 'false' exited with 1: \n".into())
    );
    let (status, body) = post("/exec/default/ka-sh/main?command=ls", &spdy);
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            "you must specify at least 1 of stdin, stdout, stderr\n"
        )
    );
    let (status, body) = post("/exec/default/no-such-pod/main?command=ls&output=1", &spdy);
    assert_eq!((status, body.as_str()), (404, "pod does not exist\n"));
    let (status, body) = post("/exec/default/ka-sh/nope?command=ls&output=1", &spdy);
    assert_eq!(
        (status, body.as_str()),
        (500, "container not found (\"nope\")\n")
    );
    let (status, body) = post("/exec/default/ka-sh/main?command=ls&output=1", &[]);
    assert_eq!((status, body.as_str()), (500, "Upgrade request required\n"));
    for path in [
        "/exec/default/ka-sh/main?command=ls&output=1",
        "/attach/default/ka-sh/main?output=1&error=1",
    ] {
        let (status, body) = post(path, &spdy);
        assert_eq!(status, 500, "{path}: {body}");
        assert!(
            body.contains("code = Unimplemented")
                && body.contains("the embedded runtime has no streaming server"),
            "{path}: {body}"
        );
    }
    let forward = |path: &str| call(c, port, path, &admin_cred, &websocket);
    assert_eq!(
        forward("/portForward/default/ka-sh"),
        (400, "query parameter \"port\" is required\n".into())
    );
    let (status, body) = forward("/portForward/default/ka-sh?port=70000");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        forward("/portForward/default/ka-sh/not-its-uid?port=80"),
        (404, "pod not found\n".into())
    );
    let (status, body) = forward(&format!("/portForward/default/ka-sh/{uid}?port=80"));
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("PortForward: the embedded runtime"), "{body}");
    let _ = admin.run(pods.delete("ka-sh", &Default::default()));
}
