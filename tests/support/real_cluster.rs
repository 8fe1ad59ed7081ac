//! A real control plane for integration tests: etcd, kube-apiserver (TLS, x509 clients,
//! Node + RBAC authorization, NodeRestriction), kube-controller-manager and kube-scheduler of
//! the pinned release, started once per test binary by `scripts/cluster.sh up DIR --no-node`
//! and shared by its tests. Each test runs its own `ledgerlet run` (the [`Agent`] harness) as
//! a node of its own name, with credentials from `cluster.sh node-credentials`.
//!
//! Teardown: a watchdog process, in a session of its own, waits for the test process to exit
//! and then runs `cluster.sh down DIR` and deletes DIR, so no control plane outlives the test
//! binary however it ends. `scripts/test.sh` checks that every such DIR is gone.
//!
//! Availability: `scripts/test.sh` builds the test bed (Go is needed on a cold cache). Under
//! `CI=true` a cluster that cannot start fails the test; otherwise the test says loudly that
//! it was skipped.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::agent::Agent;

pub struct RealCluster {
    /// The cluster's directory (`scripts/cluster.sh` layout).
    pub dir: PathBuf,
    /// `DIR/cluster.env`.
    pub env: BTreeMap<String, String>,
}

/// The repository root.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cluster_sh() -> PathBuf {
    repo().join("scripts/cluster.sh")
}

static SHARED: OnceLock<Option<RealCluster>> = OnceLock::new();

impl RealCluster {
    /// The test binary's control plane, started by the first test that asks; `None` (after
    /// a loud message) when it cannot start outside CI.
    pub fn shared() -> Option<&'static RealCluster> {
        SHARED.get_or_init(RealCluster::start).as_ref()
    }

    fn start() -> Option<RealCluster> {
        RealCluster::start_with("", &["--no-node"])
    }

    /// The test binary's cluster with containerd as the runtime and the agent of this test
    /// build (`CARGO_BIN_EXE_ledgerlet`) as its node, named `node`, on loopback
    /// (`scripts/cluster.sh up DIR --runtime containerd --node-on-loopback`: its InternalIP
    /// and host IP are 127.0.0.1); torn down at process exit like [`RealCluster::shared`].
    pub fn shared_containerd(node: &str) -> Option<&'static RealCluster> {
        RealCluster::shared_containerd_with(node, &[])
    }

    /// [`RealCluster::shared_containerd`] with more `ledgerlet run` flags for its node
    /// (`--node-arg`); the first caller's flags win for the test binary.
    pub fn shared_containerd_with(
        node: &str,
        agent_flags: &[&str],
    ) -> Option<&'static RealCluster> {
        RealCluster::containerd_cluster(node, &["--node-on-loopback"], agent_flags)
    }

    /// [`RealCluster::shared_containerd`] with metrics-server serving the cluster's
    /// `v1beta1.metrics.k8s.io` (`cluster.sh up DIR --with-metrics-server`), for `kubectl
    /// top`.
    pub fn shared_containerd_with_metrics_server(node: &str) -> Option<&'static RealCluster> {
        RealCluster::containerd_cluster(node, &["--with-metrics-server", "--node-on-loopback"], &[])
    }

    /// [`RealCluster::shared_containerd`] with the node on the host's address (`cluster.sh up
    /// DIR --node-on-host`): the API server proxies to it (it refuses loopback addresses), so
    /// `kubectl logs` and `kubectl get --raw /api/v1/nodes/NODE/proxy/…` reach the node's
    /// authenticated API as in a real cluster.
    pub fn shared_containerd_on_host(node: &str) -> Option<&'static RealCluster> {
        RealCluster::containerd_cluster(node, &["--node-on-host"], &[])
    }

    /// A containerd cluster with two nodes side by side: the agent of this test build as
    /// `node` on the host's address, and the real kubelet of the pinned release as
    /// `kubelet_node` on a containerd of its own (`cluster.sh up DIR --runtime containerd
    /// --kubelet-node NAME`); torn down at process exit like [`RealCluster::shared`].
    pub fn shared_side_by_side(node: &str, kubelet_node: &str) -> Option<&'static RealCluster> {
        static SIDE_BY_SIDE: OnceLock<Option<RealCluster>> = OnceLock::new();
        SIDE_BY_SIDE
            .get_or_init(|| {
                RealCluster::start_with(
                    "-side-by-side",
                    &[
                        "--runtime",
                        "containerd",
                        "--node-name",
                        node,
                        "--kubelet-node",
                        kubelet_node,
                    ],
                )
            })
            .as_ref()
    }

    /// The test binary's one containerd cluster (`cluster.sh up DIR --runtime containerd
    /// --node-name NODE CLUSTER_FLAGS… --node-arg=FLAG…`), started by the first caller, whose
    /// flags win.
    fn containerd_cluster(
        node: &str,
        cluster_flags: &[&str],
        agent_flags: &[&str],
    ) -> Option<&'static RealCluster> {
        static CONTAINERD: OnceLock<Option<RealCluster>> = OnceLock::new();
        CONTAINERD
            .get_or_init(|| {
                let mut args: Vec<String> = ["--runtime", "containerd", "--node-name", node]
                    .iter()
                    .chain(cluster_flags)
                    .map(|s| s.to_string())
                    .collect();
                args.extend(agent_flags.iter().map(|f| format!("--node-arg={f}")));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                RealCluster::start_with("-containerd", &args)
            })
            .as_ref()
    }

    /// `scripts/cluster.sh up DIR ARGS…` in `$TMPDIR/ledgerlet-cluster-<pid><suffix>`.
    fn start_with(suffix: &str, args: &[&str]) -> Option<RealCluster> {
        let dir =
            std::env::temp_dir().join(format!("ledgerlet-cluster-{}{suffix}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        watch_and_tear_down(&dir);
        let started = Instant::now();
        let out = Command::new(cluster_sh())
            .arg("up")
            .arg(&dir)
            .args(args)
            .env("LEDGERLET_BIN", env!("CARGO_BIN_EXE_ledgerlet"))
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/cluster.sh");
        if !out.status.success() {
            let why = format!(
                "scripts/cluster.sh up {} failed ({}):\n{}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("a real control plane is required under CI=true: {why}");
            }
            eprintln!("SKIPPED: no real control plane: {why}");
            return None;
        }
        eprintln!(
            "control plane up in {:?} at {}",
            started.elapsed(),
            dir.display()
        );
        let env = std::fs::read_to_string(dir.join("cluster.env"))
            .expect("cluster.env")
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(RealCluster { dir, env })
    }

    /// The cluster admin's kubeconfig (`system:masters`).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// A kubeconfig with the credentials of node `name` (`system:node:<name>`).
    pub fn node_kubeconfig(&self, name: &str) -> PathBuf {
        let out = Command::new(cluster_sh())
            .arg("node-credentials")
            .arg(&self.dir)
            .arg(name)
            .output()
            .expect("run scripts/cluster.sh node-credentials");
        assert!(
            out.status.success(),
            "node-credentials {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }

    /// `ledgerlet run` as node `name`, joined with that node's own credentials, on the
    /// embedded runtime unless `extra` says otherwise; its kubelet API as a cluster node's
    /// (see [`RealCluster::node_args`]).
    pub fn agent(&self, name: &str, extra: &[&str]) -> Agent {
        let args = self.node_args(name, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Agent::start(&args)
    }

    /// [`RealCluster::agent`] in an existing test directory (see [`Agent::start_in`]).
    pub fn agent_in(&self, root: tempfile::TempDir, name: &str, extra: &[&str]) -> Agent {
        let args = self.node_args(name, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Agent::start_in(root, &args, &[])
    }

    /// The flags of node `name`, as `cluster.sh up` starts its own: its kubeconfig, and a
    /// kubelet API with a serving certificate signed by the cluster CA, client certificates
    /// of that CA, TokenReview and SubjectAccessReview (each left out when `extra` sets it).
    pub fn node_args(&self, name: &str, extra: &[&str]) -> Vec<String> {
        let kubeconfig = self.node_kubeconfig(name);
        let pki = self.dir.join("pki");
        let file = |f: String| pki.join(f).to_str().unwrap().to_string();
        let mut args: Vec<String> = vec![
            "--kubeconfig".into(),
            kubeconfig.to_str().unwrap().into(),
            "--node-name".into(),
            name.into(),
        ];
        let api: [(&str, String); 5] = [
            ("--tls-cert-file", file(format!("node-{name}-serving.crt"))),
            (
                "--tls-private-key-file",
                file(format!("node-{name}-serving.key")),
            ),
            ("--client-ca-file", file("ca.crt".into())),
            ("--authentication-token-webhook", "true".into()),
            ("--authorization-mode", "Webhook".into()),
        ];
        for (flag, value) in api {
            if !extra.contains(&flag) {
                args.push(flag.into());
                args.push(value);
            }
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// A client certificate signed by the cluster CA for `user` in `group` (`cluster.sh
    /// client-credentials`): (certificate file, key file).
    pub fn client_certificate(&self, user: &str, group: Option<&str>) -> (PathBuf, PathBuf) {
        let out = Command::new(cluster_sh())
            .arg("client-credentials")
            .arg(&self.dir)
            .arg(user)
            .args(group)
            .output()
            .expect("run scripts/cluster.sh client-credentials");
        assert!(
            out.status.success(),
            "client-credentials {user}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let cert = PathBuf::from(lines.next().expect("certificate path"));
        let key = PathBuf::from(lines.next().expect("key path"));
        (cert, key)
    }

    /// A kube client with the credentials of `kubeconfig`, on a runtime of its own.
    pub fn client(&self, kubeconfig: &Path) -> Kube {
        Kube::new(kubeconfig)
    }

    /// The cluster admin's client.
    pub fn admin(&self) -> Kube {
        Kube::new(&self.admin_kubeconfig())
    }

    /// The kube-apiserver's audit log (`DIR/logs/audit.log`, see `scripts/cluster.sh`): the
    /// nodes' create, update, patch and delete requests on pods and `pods/status`, each an
    /// `audit.k8s.io/v1` Event at level Request (`verb`, `objectRef`, `user`,
    /// `responseStatus`, `requestObject`: the patch or the DeleteOptions as sent,
    /// `requestReceivedTimestamp`), in the order the requests completed (the apiserver
    /// writes an entry once it has answered). A rotated file comes first; a last line still
    /// being written is left out.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        let logs = self.dir.join("logs");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&logs)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("audit-") && n.ends_with(".log"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        // rotated files are named audit-<time>.log: their names sort by age
        files.sort();
        files.push(logs.join("audit.log"));
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|text| {
                text.lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect::<Vec<serde_json::Value>>()
            })
            .collect()
    }

    /// `kubectl --kubeconfig admin.kubeconfig ARGS…` → (success, stdout + stderr).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(self.dir.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(self.admin_kubeconfig())
            .args(args)
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

/// Starts the watchdog that tears the cluster in `dir` down once this process is gone.
fn watch_and_tear_down(dir: &Path) {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \"$0\" down \"$1\" >/dev/null 2>&1; \
         if [ -z \"$LEDGERLET_KEEP_CLUSTER\" ]; then rm -rf \"$1\"; fi",
        pid = std::process::id()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg(cluster_sh())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    // never waited for: it outlives this process by design, in a session of its own
    #[allow(clippy::zombie_processes)]
    cmd.spawn().expect("start the cluster watchdog");
}

/// A blocking facade over `kube::Client` for tests: each call runs on the client's own
/// tokio runtime.
pub struct Kube {
    rt: tokio::runtime::Runtime,
    pub client: kube::Client,
}

impl Kube {
    fn new(kubeconfig: &Path) -> Kube {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = rt.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
            let config = kube::Config::from_custom_kubeconfig(
                kc,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .expect("kubeconfig");
            kube::Client::try_from(config).expect("kube client")
        });
        Kube { rt, client }
    }

    /// Runs `f` on this client's runtime.
    pub fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    /// The namespaced API of `K`.
    pub fn api<K>(&self, ns: &str) -> kube::Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        kube::Api::namespaced(self.client.clone(), ns)
    }

    /// The cluster-scoped API of `K`.
    pub fn all<K>(&self) -> kube::Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        kube::Api::all(self.client.clone())
    }

    /// Polls `check` every 200 ms until it gives `Some`, for at most `secs`.
    pub fn wait_for<T>(
        &self,
        what: &str,
        secs: u64,
        mut check: impl FnMut(&Kube) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {secs} s waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Kube {
    /// Deletes pod `ns/name` with `grace_s` and watches it until it is gone; returns every
    /// version seen after the deletion (the last one is the node's final status).
    pub fn delete_and_watch(
        &self,
        ns: &str,
        name: &str,
        grace_s: u32,
    ) -> Vec<k8s_openapi::api::core::v1::Pod> {
        use futures::{StreamExt, TryStreamExt};
        use kube::api::{DeleteParams, WatchEvent, WatchParams};
        let pods = self.api::<k8s_openapi::api::core::v1::Pod>(ns);
        let rv = self
            .run(pods.get(name))
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        self.run(async {
            let params = WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(120);
            let mut stream = pods.watch(&params, &rv).await.unwrap().boxed();
            pods.delete(name, &DeleteParams::default().grace_period(grace_s))
                .await
                .unwrap();
            let mut seen = Vec::new();
            while let Some(event) =
                tokio::time::timeout(Duration::from_secs(120), stream.try_next())
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
}

/// The status of node `n`'s Ready condition.
pub fn node_ready(n: &k8s_openapi::api::core::v1::Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

impl Kube {
    /// Waits (90 s at most) for node `name` to be Ready; returns it.
    pub fn wait_node_ready(&self, name: &str) -> k8s_openapi::api::core::v1::Node {
        self.wait_for(&format!("node {name} Ready"), 90, |k| {
            let n = k
                .run(k.all::<k8s_openapi::api::core::v1::Node>().get_opt(name))
                .ok()??;
            (node_ready(&n).as_deref() == Some("True")).then_some(n)
        })
    }
}

/// The directory every pod's service-account files are mounted at.
pub const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A container script that prints what a pod reads from its service-account volume: the
/// namespace, the token's size and the CA's first line; then sleeps.
pub fn sa_probe_script() -> String {
    format!(
        "cat {SA_DIR}/namespace; echo; echo token-bytes=$(wc -c < {SA_DIR}/token); \
         head -1 {SA_DIR}/ca.crt; sleep 3600"
    )
}

/// Waits for the [`sa_probe_script`] container's CRI log at `log_file` and checks it read
/// namespace `default` and a CA certificate; returns the size of the token it read.
pub fn read_sa_probe(admin: &Kube, log_file: &Path) -> usize {
    let log = admin.wait_for("the container to read the projected files", 120, |_| {
        let text = std::fs::read_to_string(log_file).ok()?;
        text.contains("BEGIN CERTIFICATE").then_some(text)
    });
    // CRI log lines: <time> <stream> <tag> <content>
    let lines: Vec<&str> = log
        .lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3))
        .collect();
    assert_eq!(lines.first(), Some(&"default"), "{log}");
    assert!(lines.contains(&"-----BEGIN CERTIFICATE-----"), "{log}");
    let bytes: usize = lines
        .iter()
        .find_map(|l| l.strip_prefix("token-bytes="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no token size in {log}"));
    assert!(bytes > 100, "token of {bytes} bytes: {log}");
    bytes
}
