//! The workloads of `compare_kubelet`, each run on one node at a time (the steady state on
//! both at once): they create pods pinned by `nodeName`, time what a watch sees against the
//! bench's own clock, and leave nothing behind but the burst's pods (kept for the steady
//! state).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{json, Value};

use crate::differential;

/// How long any one wait of a workload may take before the bench gives up.
const WAIT: Duration = Duration::from_secs(600);
/// The gap between two pods' triggers (exit, deletion): each is timed on its own.
const STAGGER: Duration = Duration::from_millis(50);

/// One of the two nodes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Ledgerlet,
    Kubelet,
}

impl Side {
    /// Both sides, ledgerlet first in even rounds and the kubelet first in odd ones.
    pub fn order(round: usize) -> [Side; 2] {
        if round % 2 == 0 {
            [Side::Ledgerlet, Side::Kubelet]
        } else {
            [Side::Kubelet, Side::Ledgerlet]
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Ledgerlet => "ledgerlet",
            Side::Kubelet => "kubelet",
        }
    }
}

/// One side's resource use over the steady state.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// The agent's CPU, in cores (CPU seconds per second).
    pub cpu_cores: f64,
    /// The agent's RSS sampled every 5 s: mean and maximum, MiB.
    pub rss_mean_mib: f64,
    pub rss_max_mib: f64,
    /// Its containerd's CPU, in cores (information: the runtime's share of the work).
    pub containerd_cpu_cores: f64,
    /// Pods running on the node while measured.
    pub pods: usize,
}

/// Both sides' resource use over the same minutes.
#[derive(Debug, Clone)]
pub struct Steady {
    pub seconds: u64,
    pub ledgerlet: Usage,
    pub kubelet: Usage,
}

pub struct Bench {
    pub client: kube::Client,
    pub env: BTreeMap<String, String>,
    pub dir: PathBuf,
    pub ns: String,
    fifo_dir: PathBuf,
}

impl Bench {
    /// The cluster's admin client and a namespace of this run's own.
    pub async fn connect(dir: PathBuf) -> Bench {
        let env: BTreeMap<String, String> = std::fs::read_to_string(dir.join("cluster.env"))
            .expect("DIR/cluster.env: is DIR a cluster made by scripts/cluster.sh up?")
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for key in ["NODE_NAME", "KUBELET_NODE_NAME"] {
            assert!(
                env.contains_key(key),
                "{} has no {key}: start it with --runtime containerd --kubelet-node NAME",
                dir.display()
            );
        }
        let kc = kube::config::Kubeconfig::read_from(dir.join("admin.kubeconfig")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let ns = format!("compare-{}", std::process::id());
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create the bench's namespace");
        let fifo_dir =
            std::env::temp_dir().join(format!("ledgerlet-compare-{}", std::process::id()));
        std::fs::create_dir_all(&fifo_dir).unwrap();
        Bench {
            client,
            env,
            dir,
            ns,
            fifo_dir,
        }
    }

    pub fn node(&self, side: Side) -> &str {
        match side {
            Side::Ledgerlet => &self.env["NODE_NAME"],
            Side::Kubelet => &self.env["KUBELET_NODE_NAME"],
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The pid a component of the cluster runs as (`DIR/pids/NAME.pid`).
    fn pid(&self, component: &str) -> u32 {
        let f = self.dir.join("pids").join(format!("{component}.pid"));
        std::fs::read_to_string(&f)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
            .trim()
            .parse()
            .unwrap()
    }

    fn pod(&self, name: &str, batch: &str, side: Side, spec: Value) -> Pod {
        let mut spec = spec;
        spec["nodeName"] = json!(self.node(side));
        spec["enableServiceLinks"] = json!(false);
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"batch": batch, "side": side.name()}},
            "spec": spec,
        }))
        .unwrap()
    }

    /// The pods of a batch, one per name, each with the spec `spec` gives for its name.
    fn batch(
        &self,
        names: &[String],
        batch: &str,
        side: Side,
        spec: impl Fn(&str) -> Value,
    ) -> Vec<Pod> {
        names
            .iter()
            .map(|name| self.pod(name, batch, side, spec(name)))
            .collect()
    }

    /// Creates the pods of a batch all at once; when each create was sent.
    async fn create_all(&self, pods: Vec<Pod>) -> HashMap<String, Instant> {
        let api = self.pods();
        let creates = pods.into_iter().map(|p| {
            let api = api.clone();
            async move {
                let name = p.metadata.name.clone().unwrap();
                let sent = Instant::now();
                api.create(&PostParams::default(), &p)
                    .await
                    .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
                (name, sent)
            }
        });
        futures::future::join_all(creates)
            .await
            .into_iter()
            .collect()
    }

    /// Watches the pods labelled `selector` (the watch established before this returns) and
    /// records when each of `expected` of them first satisfies `reached` (the pod; whether
    /// the event is its deletion), on a task of its own so the times are those of arrival.
    async fn observe(
        &self,
        selector: &str,
        expected: usize,
        reached: fn(&Pod, bool) -> bool,
    ) -> tokio::task::JoinHandle<HashMap<String, Instant>> {
        let config = watcher::Config::default().labels(selector);
        let mut events = watcher::watcher(self.pods(), config).boxed();
        loop {
            match events.try_next().await.expect("watch pods") {
                Some(Event::InitDone) => break,
                Some(_) => {}
                None => panic!("the watch ended before it was established"),
            }
        }
        let selector = selector.to_string();
        tokio::spawn(async move {
            let mut seen = HashMap::new();
            let deadline = tokio::time::Instant::now() + WAIT;
            while seen.len() < expected {
                let event = tokio::time::timeout_at(deadline, events.next())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("{selector}: {} of {expected} pods in {WAIT:?}", seen.len())
                    });
                let (pod, gone) = match event {
                    Some(Ok(Event::Apply(p))) | Some(Ok(Event::InitApply(p))) => (p, false),
                    Some(Ok(Event::Delete(p))) => (p, true),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => panic!("{selector}: watch: {e}"),
                    None => panic!("{selector}: the watch ended"),
                };
                let now = Instant::now();
                if let Some(refused) = refused_by_the_node(&pod) {
                    panic!("{selector}: {refused}");
                }
                if reached(&pod, gone) {
                    seen.entry(pod.metadata.name.clone().unwrap())
                        .or_insert(now);
                }
            }
            seen
        })
    }

    /// Deletes every pod matching `selector` at once (grace 0) and waits until they are gone.
    async fn delete_all(&self, selector: &str) {
        let api = self.pods();
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let lp = ListParams::default().labels(selector);
        api.delete_collection(&dp, &lp)
            .await
            .unwrap_or_else(|e| panic!("delete pods {selector}: {e}"));
        let deadline = Instant::now() + WAIT;
        while !api.list(&lp).await.unwrap().items.is_empty() {
            assert!(
                Instant::now() < deadline,
                "pods {selector} not gone in {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn sleeper(&self, name: &str, batch: &str, side: Side) -> Pod {
        self.pod(
            name,
            batch,
            side,
            json!({"terminationGracePeriodSeconds": 1,
                   "containers": [container("sleep 3600")]}),
        )
    }

    /// N pods created at once; per pod, ms from its create to the watch seeing it Running.
    pub async fn startup(&self, side: Side, n: usize, round: usize) -> Vec<f64> {
        let batch = format!("startup-{}-{round}", side.name());
        let running = self.observe(&format!("batch={batch}"), n, is_running).await;
        let pods = (0..n)
            .map(|i| self.sleeper(&format!("{batch}-{i}"), &batch, side))
            .collect();
        let sent = self.create_all(pods).await;
        let running = running.await.unwrap();
        self.delete_all(&format!("batch={batch}")).await;
        elapsed_ms(&sent, &running)
    }

    /// N running containers, each blocked reading a FIFO; the bench writes the FIFOs one by
    /// one; per pod, ms from the write to the watch seeing the container terminated.
    pub async fn exit(&self, side: Side, n: usize, round: usize) -> Vec<f64> {
        let batch = format!("exit-{}-{round}", side.name());
        let dir = self.fifo_dir.join(&batch);
        std::fs::create_dir_all(&dir).unwrap();
        let names: Vec<String> = (0..n).map(|i| format!("{batch}-{i}")).collect();
        for name in &names {
            let path = std::ffi::CString::new(dir.join(name).to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");
        }
        let selector = format!("batch={batch}");
        let running = self.observe(&selector, n, is_running).await;
        let pods = self.batch(&names, &batch, side, |name| {
            json!({
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "volumes": [{"name": "fifo", "hostPath": {"path": dir, "type": "Directory"}}],
                "containers": [{
                    "name": "app", "image": differential::IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", format!("read x < /fifo/{name}; exit 0")],
                    "volumeMounts": [{"name": "fifo", "mountPath": "/fifo"}],
                }],
            })
        });
        self.create_all(pods).await;
        running.await.unwrap();
        let terminated = self.observe(&selector, n, is_terminated).await;
        let mut written = HashMap::new();
        for name in &names {
            written.insert(name.clone(), write_fifo(&dir.join(name)).await);
            tokio::time::sleep(STAGGER).await;
        }
        let terminated = terminated.await.unwrap();
        self.delete_all(&selector).await;
        let _ = std::fs::remove_dir_all(&dir);
        elapsed_ms(&written, &terminated)
    }

    /// N running pods whose container exits on TERM, deleted one by one with grace 1 s; per
    /// pod, ms from the delete request to the watch seeing the object gone.
    pub async fn deletion(&self, side: Side, n: usize, round: usize) -> Vec<f64> {
        let batch = format!("deletion-{}-{round}", side.name());
        let selector = format!("batch={batch}");
        let running = self.observe(&selector, n, is_running).await;
        let names: Vec<String> = (0..n).map(|i| format!("{batch}-{i}")).collect();
        let pods = self.batch(&names, &batch, side, |_| {
            json!({"terminationGracePeriodSeconds": 1,
                   "containers": [container("trap 'exit 0' TERM; sleep 3600 & wait")]})
        });
        self.create_all(pods).await;
        running.await.unwrap();
        // the shells have set their traps
        tokio::time::sleep(Duration::from_secs(1)).await;
        let gone = self.observe(&selector, n, |_, gone| gone).await;
        let api = self.pods();
        let dp = DeleteParams {
            grace_period_seconds: Some(1),
            ..DeleteParams::default()
        };
        let mut sent = HashMap::new();
        for name in &names {
            sent.insert(name.clone(), Instant::now());
            api.delete(name, &dp).await.expect("delete pod");
            tokio::time::sleep(STAGGER).await;
        }
        elapsed_ms(&sent, &gone.await.unwrap())
    }

    /// N pods created at once; ms from the first create to the last pod seen Running. The
    /// pods stay (label `steady=<side>`) for the steady state.
    pub async fn burst(&self, side: Side, n: usize) -> f64 {
        let batch = format!("burst-{}", side.name());
        let running = self.observe(&format!("batch={batch}"), n, is_running).await;
        let pods = (0..n)
            .map(|i| {
                let mut p = self.sleeper(&format!("{batch}-{i}"), &batch, side);
                steady_label(&mut p, side);
                p
            })
            .collect();
        let sent = self.create_all(pods).await;
        let running = running.await.unwrap();
        let first = sent.values().min().unwrap();
        let last = running.values().max().unwrap();
        last.duration_since(*first).as_secs_f64() * 1000.0
    }

    /// Tops both nodes up to `pods` running pods (the burst's and more), lets them settle, and
    /// measures both agents and their containerds over `duration`; then deletes them.
    pub async fn steady(&self, burst: usize, pods: usize, duration: Duration) -> Steady {
        for side in Side::order(0) {
            let batch = format!("steady-{}", side.name());
            let more = pods.saturating_sub(burst);
            let running = self
                .observe(&format!("batch={batch}"), more, is_running)
                .await;
            let extra = (0..more)
                .map(|i| {
                    let mut p = self.sleeper(&format!("{batch}-{i}"), &batch, side);
                    steady_label(&mut p, side);
                    p
                })
                .collect();
            self.create_all(extra).await;
            running.await.unwrap();
        }
        // what starting them cost is not the steady state
        tokio::time::sleep(Duration::from_secs(if duration.as_secs() >= 60 {
            30
        } else {
            2
        }))
        .await;
        let procs = [
            (self.pid("ledgerlet"), self.pid("containerd")),
            (self.pid("kubelet"), self.pid("kubelet-containerd")),
        ];
        let start: Vec<(f64, f64)> = procs.iter().map(|(a, c)| (cpu_s(*a), cpu_s(*c))).collect();
        let started = Instant::now();
        let mut rss: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        while started.elapsed() < duration {
            for (i, (agent, _)) in procs.iter().enumerate() {
                rss[i].push(rss_mib(*agent));
            }
            tokio::time::sleep(Duration::from_secs(5).min(duration)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let usage = |i: usize| {
            let (agent, runtime) = procs[i];
            Usage {
                cpu_cores: (cpu_s(agent) - start[i].0) / seconds,
                containerd_cpu_cores: (cpu_s(runtime) - start[i].1) / seconds,
                rss_mean_mib: rss[i].iter().sum::<f64>() / rss[i].len() as f64,
                rss_max_mib: rss[i].iter().cloned().fold(0.0, f64::max),
                pods,
            }
        };
        let figures = Steady {
            seconds: duration.as_secs(),
            ledgerlet: usage(0),
            kubelet: usage(1),
        };
        for side in Side::order(0) {
            self.delete_all(&format!("steady={}", side.name())).await;
        }
        figures
    }

    /// Every spec of the differential status check on both nodes at once.
    pub async fn differential(&self) -> Vec<differential::Difference> {
        let all = differential::all();
        let specs: Vec<&differential::Spec> = all.iter().collect();
        let differences = differential::run(
            self.client.clone(),
            &self.ns,
            &specs,
            self.node(Side::Ledgerlet),
            self.node(Side::Kubelet),
            Duration::from_secs(180),
        )
        .await;
        differences
    }

    /// Deletes the namespace (and with it every pod left) and the FIFOs.
    pub async fn clean_up(&self) {
        let _ = std::fs::remove_dir_all(&self.fifo_dir);
        self.delete_all("side").await;
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await;
    }
}

fn container(script: &str) -> Value {
    json!({"name": "app", "image": differential::IMAGE, "imagePullPolicy": "IfNotPresent",
           "command": ["sh", "-c", script]})
}

fn steady_label(p: &mut Pod, side: Side) {
    p.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("steady".into(), side.name().into());
}

/// Why the node refused or evicted `pod`, if it did: a pod its agent failed with a reason
/// before running it (`Evicted` under disk or memory pressure, `OutOfcpu`, an admission
/// error). The bench's pods are not meant to fail, so waiting out the deadline for them
/// would only hide the reason, which on a full host disk is the kubelet's DiskPressure
/// (its default eviction threshold is `imagefs.available<15%`).
fn refused_by_the_node(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Failed") {
        return None;
    }
    let reason = status.reason.as_deref()?;
    let refused = reason == "Evicted"
        || reason == "NodeAffinity"
        || reason.starts_with("OutOf")
        || reason.ends_with("AdmissionError");
    if !refused {
        return None;
    }
    Some(format!(
        "pod {} on node {} failed with reason {reason}: {}",
        pod.metadata.name.as_deref().unwrap_or("?"),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("?"),
        status.message.as_deref().unwrap_or("(no message)")
    ))
}

fn is_running(p: &Pod, gone: bool) -> bool {
    !gone && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn is_terminated(p: &Pod, gone: bool) -> bool {
    !gone
        && p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
            })
}

/// Per pod, ms from `from` to `to`, in name order.
fn elapsed_ms(from: &HashMap<String, Instant>, to: &HashMap<String, Instant>) -> Vec<f64> {
    let mut names: Vec<&String> = from.keys().collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let to = to
                .get(n)
                .unwrap_or_else(|| panic!("pod {n} never reached its state"));
            to.saturating_duration_since(from[n]).as_secs_f64() * 1000.0
        })
        .collect()
}

/// Opens the FIFO without blocking once its reader has it open, writes a line; when.
async fn write_fifo(path: &std::path::Path) -> Instant {
    let deadline = Instant::now() + WAIT;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(mut f) => {
                let at = Instant::now();
                std::io::Write::write_all(&mut f, b"x\n").expect("write the FIFO");
                return at;
            }
            // ENXIO: nobody reads it yet
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

/// utime + stime of a process, seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/stat: {e}"));
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// VmRSS of a process, MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}
