//! `/containerLogs` and container log rotation against a real containerd node
//! (`RealCluster::shared_containerd_with`, the node being ledgerlet with 1Ki log files and a
//! 1 s rotation period). The router is served in-process over plain HTTP on 127.0.0.1 (the
//! kubelet API's authentication is not part of it); it reads the node's pods from the API
//! server (the status the node reports) and log paths from the node's containerd, so it
//! reads the very files the node's containers write and the node rotates. Behaviour KA-30 to
//! KA-35, LR-01 and LR-02.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use ledgerlet::cri::{CriClient, CriClientOptions};
use ledgerlet::kubelet_api::container_logs::{router, ContainerLogsState, NodePods};
use support::on_containerd::{bound_pod, main_status};
use support::real_cluster::{Kube, RealCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NODE: &str = "logs-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd_with(
        NODE,
        &[
            "--container-log-max-size=1Ki",
            "--container-log-monitor-period-ms=1000",
            "--crash-loop-backoff-initial-ms=2000",
        ],
    )
}

/// The pods as the API server has them (spec and the status the node reported).
struct ApiPods(kube::Client);

impl NodePods for ApiPods {
    fn pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Option<Pod>> {
        Box::pin(async move {
            let api = kube::Api::<Pod>::namespaced(self.0.clone(), namespace);
            api.get_opt(name).await.ok().flatten()
        })
    }
}

/// The in-process server: its runtime and port, and a CRI client of the node's containerd.
struct Server {
    rt: tokio::runtime::Runtime,
    port: u16,
    cri: CriClient,
}

fn server(c: &RealCluster) -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let kubeconfig = c.admin_kubeconfig();
        let endpoint = std::fs::read_to_string(c.dir.join("runtime-endpoint")).unwrap();
        let (port, cri) = rt.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            let client = kube::Client::try_from(config).unwrap();
            let cri = CriClient::connect(endpoint.trim(), CriClientOptions::default())
                .await
                .expect("connect to the node's containerd");
            let state = ContainerLogsState {
                pods: Arc::new(ApiPods(client)),
                cri: cri.clone(),
            };
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::spawn(async move { axum::serve(listener, router(state)).await });
            (port, cri)
        });
        Server { rt, port, cri }
    })
}

/// `GET path` (HTTP/1.0, so the body runs to the end of the connection) → (status, body).
fn get(s: &Server, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    split_response(&raw)
}

fn split_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// A streaming GET: the connection, and what has arrived of the response so far.
struct Follower {
    stream: tokio::net::TcpStream,
    raw: Vec<u8>,
}

impl Follower {
    async fn open(port: u16, path: &str) -> Follower {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let req = format!("GET {path} HTTP/1.0\r\n\r\n");
        stream.write_all(req.as_bytes()).await.unwrap();
        Follower {
            stream,
            raw: Vec::new(),
        }
    }

    fn body(&self) -> String {
        split_response(&self.raw).1
    }

    /// Reads until `done(body)` holds; panics after `secs` or at the end of the stream.
    async fn until(&mut self, secs: u64, done: impl Fn(&str) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut buf = vec![0u8; 1024];
        while !done(&self.body()) {
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("timed out after {secs} s; got {:?}", self.body()))
                .unwrap();
            assert!(n > 0, "the stream ended; got {:?}", self.body());
            self.raw.extend_from_slice(&buf[..n]);
        }
    }
}

fn create(admin: &Kube, pod: &Pod) {
    admin
        .run(
            admin
                .api::<Pod>("default")
                .create(&PostParams::default(), pod),
        )
        .unwrap();
}

fn wait_running(admin: &Kube, name: &str) -> Pod {
    admin.wait_for(&format!("{name} running"), 120, |k| {
        let p = k.run(k.api::<Pod>("default").get(name)).ok()?;
        let st = main_status(&p)?;
        st.state.as_ref()?.running.as_ref()?;
        Some(p)
    })
}

/// The runtime ID of the pod's current main container.
fn container_id(p: &Pod) -> String {
    let id = main_status(p).unwrap().container_id.clone().unwrap();
    id.split_once("://").unwrap().1.to_string()
}

fn log_path(s: &Server, id: &str) -> PathBuf {
    let st = s.rt.block_on(s.cri.container_status(id, false)).unwrap();
    PathBuf::from(st.status.unwrap().log_path)
}

const FIVE_LINES: &str = "i=1; while [ $i -le 5 ]; do echo line-$i; i=$((i+1)); done; sleep 3600";

#[test]
fn logs_of_a_running_container_are_served_with_tail_timestamps_and_limit_bytes() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    create(
        &admin,
        &bound_pod(NODE, "cl-running", FIVE_LINES, 0, "Always"),
    );
    wait_running(&admin, "cl-running");
    let base = "/containerLogs/default/cl-running/main";
    let all = "line-1\nline-2\nline-3\nline-4\nline-5\n";
    admin.wait_for("five lines logged", 60, |_| {
        (get(s, base) == (200, all.to_string())).then_some(())
    });
    assert_eq!(
        get(s, &format!("{base}?tailLines=2")),
        (200, "line-4\nline-5\n".into())
    );
    assert_eq!(get(s, &format!("{base}?tail=1")), (200, "line-5\n".into()));
    assert_eq!(
        get(s, &format!("{base}?limitBytes=8")),
        (200, "line-1\nl".into())
    );
    let (status, body) = get(s, &format!("{base}?timestamps=true&tailLines=1"));
    assert_eq!(status, 200);
    let (ts, line) = body.split_once(' ').unwrap();
    assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{body:?}");
    assert_eq!(line, "line-5\n");
    // logged more than an hour ago: nothing; since a time long past: everything
    assert_eq!(
        get(s, &format!("{base}?sinceTime=2999-01-01T00:00:00Z")),
        (200, "".into())
    );
    let since_old = format!("{base}?sinceTime=2000-01-01T00:00:00Z");
    assert_eq!(get(s, &since_old), (200, all.into()));
}

#[test]
fn bad_requests_get_the_kubelets_status_codes_and_messages_naming_the_problem() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    create(
        &admin,
        &bound_pod(NODE, "cl-errors", FIVE_LINES, 0, "Always"),
    );
    wait_running(&admin, "cl-errors");
    let base = "/containerLogs/default/cl-errors/main";
    let (status, body) = get(s, "/containerLogs/default/no-such-pod/main");
    assert_eq!(
        (status, body.trim()),
        (404, "pod \"no-such-pod\" does not exist")
    );
    let (status, body) = get(s, "/containerLogs/default/cl-errors/sidecar");
    let want = "container \"sidecar\" not found in pod \"cl-errors\"";
    assert_eq!((status, body.trim()), (404, want));
    let (status, body) = get(s, &format!("{base}?previous=true"));
    let want = "previous terminated container \"main\" in pod \"cl-errors\" not found";
    assert_eq!((status, body.trim()), (400, want));
    for (query, code, names) in [
        ("tailLines=ten", 400, "tailLines"),
        ("limitBytes=x", 400, "limitBytes"),
        ("sinceTime=yesterday", 400, "sinceTime"),
        ("tailLines=-1", 422, "tailLines"),
        ("limitBytes=0", 422, "limitBytes"),
        ("sinceSeconds=-3", 422, "sinceSeconds"),
        (
            "sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z",
            422,
            "sinceTime",
        ),
    ] {
        let (status, body) = get(s, &format!("{base}?{query}"));
        assert_eq!(status, code, "{query}: {body}");
        assert!(body.contains(names), "{query}: {body}");
    }
}

#[test]
fn a_container_waiting_to_start_is_refused_with_its_waiting_reason() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    let mut pod = bound_pod(NODE, "cl-waiting", "true", 0, "Always");
    let main = &mut pod.spec.as_mut().unwrap().containers[0];
    main.image = Some("ledgerlet.test/absent:1".into());
    main.image_pull_policy = Some("Never".into());
    create(&admin, &pod);
    admin.wait_for("cl-waiting waiting on its image", 120, |k| {
        let p = k.run(k.api::<Pod>("default").get("cl-waiting")).ok()?;
        let w = main_status(&p)?.state.as_ref()?.waiting.as_ref()?;
        (w.reason.as_deref() == Some("ErrImageNeverPull")).then_some(())
    });
    let (status, body) = get(s, "/containerLogs/default/cl-waiting/main");
    let want = "container \"main\" in pod \"cl-waiting\" is waiting to start: ErrImageNeverPull";
    assert_eq!((status, body.trim()), (400, want));
}

#[test]
fn previous_serves_the_log_of_the_instance_before_a_restart() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    let script = "echo born-$(date +%s); sleep 2; exit 1";
    create(&admin, &bound_pod(NODE, "cl-restart", script, 0, "Always"));
    let p = admin.wait_for("cl-restart running again after a restart", 120, |k| {
        let p = k.run(k.api::<Pod>("default").get("cl-restart")).ok()?;
        let st = main_status(&p)?;
        (st.restart_count >= 1 && st.state.as_ref()?.running.is_some()).then_some(p)
    });
    let base = "/containerLogs/default/cl-restart/main";
    let (status, previous) = get(s, &format!("{base}?previous=true"));
    assert_eq!(status, 200, "{previous}");
    assert!(previous.starts_with("born-"), "{previous:?}");
    // the current instance logs its own line (read while it runs, or just after it exited)
    let current = admin.wait_for("the current instance's line", 30, |_| {
        let (status, body) = get(s, base);
        (status == 200 && body.starts_with("born-")).then_some(body)
    });
    assert_ne!(previous, current, "two instances, two logs");
    assert!(main_status(&p).unwrap().last_state.is_some());
}

/// The `seq-N` numbers in `body`, in order.
fn seqs(body: &str) -> Vec<u64> {
    body.lines()
        .filter_map(|l| {
            l.split_whitespace()
                .next()?
                .strip_prefix("seq-")?
                .parse()
                .ok()
        })
        .collect()
}

/// The files of the container log directory of `log`, names only, sorted.
fn log_files(log: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

const CHATTY: &str = "i=0; while true; do i=$((i+1)); \
                      echo \"seq-$i padding-padding-padding-padding-padding-padding\"; \
                      sleep 0.1; done";

#[test]
fn follow_streams_new_lines_without_gaps_across_log_rotations() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    create(&admin, &bound_pod(NODE, "cl-follow", CHATTY, 0, "Always"));
    let p = wait_running(&admin, "cl-follow");
    let log = log_path(s, &container_id(&p));
    let rotated = |log: &Path| -> Vec<String> {
        log_files(log)
            .into_iter()
            .filter(|f| f != "0.log")
            .collect()
    };
    let got = s.rt.block_on(async {
        let path = "/containerLogs/default/cl-follow/main?follow=true";
        let mut f = Follower::open(s.port, path).await;
        f.until(30, |b| !seqs(b).is_empty()).await;
        let before = rotated(&log);
        // 150 lines at 10 a second, 1Ki files rotated every second: several rotations
        let first = seqs(&f.body())[0];
        f.until(120, |b| seqs(b).last().is_some_and(|n| *n >= first + 150))
            .await;
        let after = rotated(&log);
        assert!(
            after.iter().any(|r| !before.contains(r)),
            "the log rotated while followed: {before:?} then {after:?}"
        );
        f.body()
    });
    let got = seqs(&got);
    let want: Vec<u64> = (got[0]..got[0] + got.len() as u64).collect();
    assert_eq!(got, want, "every line once, in order, across rotations");
}

#[test]
fn rotation_keeps_at_most_five_files_gzipping_all_but_the_newest_rotation() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    create(&admin, &bound_pod(NODE, "cl-rotate", CHATTY, 0, "Always"));
    let p = wait_running(&admin, "cl-rotate");
    let log = log_path(s, &container_id(&p));
    // enough rotations to fill the five files (1Ki a second, rotated every second)
    let files = admin.wait_for("five files, the older rotations gzipped", 120, |_| {
        let files = log_files(&log);
        let gz = files.iter().filter(|f| f.ends_with(".gz")).count();
        (files.len() == 5 && gz == 3).then_some(files)
    });
    assert_eq!(files[0], "0.log");
    let plain: Vec<&String> = files[1..].iter().filter(|f| !f.ends_with(".gz")).collect();
    assert_eq!(
        plain.len(),
        1,
        "only the newest rotation is plain: {files:?}"
    );
    assert_eq!(
        Some(plain[0]),
        files.last(),
        "the plain rotation is the newest"
    );
    // a gzipped rotation holds CRI records of the container
    let gz = log.parent().unwrap().join(&files[1]);
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_string(&mut text)
        .unwrap_or_default();
    assert!(text.contains(" stdout F seq-"), "{gz:?}: {text:?}");
    // the count stays bounded while the container keeps logging into a fresh live file
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(500));
        let now = log_files(&log);
        let kept = now.iter().filter(|f| !f.ends_with(".tmp")).count();
        assert!(
            kept <= 6,
            "at most max-files (plus one being compressed): {now:?}"
        );
    }
    let (status, body) = get(s, "/containerLogs/default/cl-rotate/main?tailLines=1");
    assert_eq!(status, 200);
    let last = seqs(&body)[0];
    admin.wait_for("the container still logging", 30, |_| {
        let (_, body) = get(s, "/containerLogs/default/cl-rotate/main?tailLines=1");
        seqs(&body).first().is_some_and(|n| *n > last).then_some(())
    });
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn a_thousand_followers_of_one_log_all_see_its_new_lines_in_bounded_memory() {
    let Some(c) = cluster() else { return };
    let s = server(c);
    let admin = c.admin();
    let script = "i=0; while true; do i=$((i+1)); echo tick-$i; sleep 1; done";
    create(&admin, &bound_pod(NODE, "cl-many", script, 0, "Always"));
    wait_running(&admin, "cl-many");
    let before = rss_kib();
    let tick = |b: &str| {
        b.lines()
            .rev()
            .find_map(|l| l.strip_prefix("tick-")?.parse::<u64>().ok())
    };
    let (during, newest) = s.rt.block_on(async {
        let path = "/containerLogs/default/cl-many/main?follow=true&tailLines=1";
        let mut followers = Vec::new();
        for _ in 0..1000 {
            followers.push(Follower::open(s.port, path).await);
        }
        let mut tasks = tokio::task::JoinSet::new();
        for mut f in followers {
            tasks.spawn(async move {
                f.until(120, |b| tick(b).is_some()).await;
                f
            });
        }
        let mut followers = Vec::new();
        while let Some(f) = tasks.join_next().await {
            followers.push(f.unwrap());
        }
        let during = rss_kib();
        let newest = followers
            .iter()
            .filter_map(|f| tick(&f.body()))
            .max()
            .unwrap();
        // every follower sees a line written after all of them were following
        let mut tasks = tokio::task::JoinSet::new();
        for mut f in followers {
            tasks.spawn(async move {
                f.until(120, |b| tick(b).is_some_and(|t| t > newest)).await;
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        (during, newest)
    });
    let grown_mib = during.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "1000 followers of one log (tick {newest}): process RSS {before} KiB -> {during} KiB \
         (+{grown_mib:.1} MiB, server and test clients together)"
    );
    assert!(grown_mib < 256.0, "1000 followers took {grown_mib:.1} MiB");
}
