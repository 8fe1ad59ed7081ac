//! End-to-end tests: the embedded runtime served on a real unix socket in a
//! temp dir, driven through `CriClient`, running real host processes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ledgerlet::cri::v1;
use ledgerlet::cri::{CriClient, CriClientOptions, CriError};
use ledgerlet::runtime::{EmbeddedRuntime, RuntimeOptions, RUNTIME_NAME};
use tokio_stream::StreamExt;
use tonic::Code;

struct Harness {
    dir: tempfile::TempDir,
    rt: Option<EmbeddedRuntime>,
    client: CriClient,
}

impl Harness {
    async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    async fn start_with(tweak: impl FnOnce(&mut RuntimeOptions)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("cri.sock");
        let mut opts = RuntimeOptions::new(dir.path().join("root"));
        tweak(&mut opts);
        let rt = EmbeddedRuntime::start(&format!("unix://{}", sock.display()), opts)
            .await
            .unwrap();
        let client = CriClient::connect(&rt.endpoint(), CriClientOptions::default())
            .await
            .unwrap();
        Self {
            dir,
            rt: Some(rt),
            client,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn sandbox_config(&self, name: &str) -> v1::PodSandboxConfig {
        v1::PodSandboxConfig {
            metadata: Some(v1::PodSandboxMetadata {
                name: name.into(),
                uid: format!("uid-{name}"),
                namespace: "default".into(),
                attempt: 0,
            }),
            hostname: name.into(),
            log_directory: self
                .path(&format!("logs/default_{name}"))
                .display()
                .to_string(),
            labels: [("app".to_string(), name.to_string())].into(),
            annotations: [("note".to_string(), "kept as given".to_string())].into(),
            ..Default::default()
        }
    }

    async fn sandbox(&self, name: &str) -> (String, v1::PodSandboxConfig) {
        let cfg = self.sandbox_config(name);
        let id = self.client.run_pod_sandbox(cfg.clone(), "").await.unwrap();
        (id, cfg)
    }

    /// Creates and starts a container; returns its id.
    async fn run(
        &self,
        sandbox: &(String, v1::PodSandboxConfig),
        name: &str,
        cmd: &[&str],
    ) -> String {
        let id = self
            .client
            .create_container(&sandbox.0, container_config(name, cmd), sandbox.1.clone())
            .await
            .unwrap();
        self.client.start_container(&id).await.unwrap();
        id
    }

    async fn status(&self, id: &str) -> v1::ContainerStatus {
        self.client
            .container_status(id, false)
            .await
            .unwrap()
            .status
            .unwrap()
    }

    async fn wait_exited(&self, id: &str) -> v1::ContainerStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.status(id).await;
            if s.state == v1::ContainerState::ContainerExited as i32 {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "container {id} did not exit: {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn pid_of(&self, id: &str) -> i32 {
        let resp = self.client.container_status(id, true).await.unwrap();
        let info = &resp.info["info"];
        let start = info.find("\"pid\":").unwrap() + 6;
        let digits: String = info[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    }

    async fn shutdown(&mut self) {
        self.rt.take().unwrap().shutdown().await.unwrap();
    }
}

fn container_config(name: &str, cmd: &[&str]) -> v1::ContainerConfig {
    v1::ContainerConfig {
        metadata: Some(v1::ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(v1::ImageSpec {
            image: "docker.io/library/busybox:1.36".into(),
            ..Default::default()
        }),
        command: cmd.iter().map(|s| s.to_string()).collect(),
        log_path: format!("{name}/0.log"),
        labels: [("container".to_string(), name.to_string())].into(),
        annotations: [(
            "io.kubernetes.container.hash".to_string(),
            "abc".to_string(),
        )]
        .into(),
        ..Default::default()
    }
}

fn sh(script: &str) -> Vec<&str> {
    vec!["sh", "-c", script]
}

fn process_gone(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

async fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    process_gone(pid)
}

async fn wait_for_file(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.contains(needle) {
                return s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never contained {needle:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Parses CRI log lines into (timestamp, stream, tag, content).
fn parse_log(text: &str) -> Vec<(String, String, String, String)> {
    text.lines()
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let ts = parts.next().unwrap().to_string();
            let stream = parts.next().unwrap().to_string();
            let tag = parts.next().unwrap().to_string();
            let content = parts.next().unwrap_or("").to_string();
            (ts, stream, tag, content)
        })
        .collect()
}

fn looks_like_rfc3339_nano(ts: &str) -> bool {
    let b = ts.as_bytes();
    ts.len() == 30
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && ts.ends_with('Z')
        && ts[20..29].bytes().all(|c| c.is_ascii_digit())
}

fn rpc_code(e: &CriError) -> Code {
    e.code()
}

// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_container_exits_with_its_code_reason_error_and_cri_formatted_log() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("logs").await;
    let id = h
        .run(&sb, "app", &sh("echo hi; echo err >&2; exit 3"))
        .await;
    let s = h.wait_exited(&id).await;
    assert_eq!(s.exit_code, 3);
    assert_eq!(s.reason, "Error");
    assert!(s.started_at > 0 && s.finished_at >= s.started_at && s.created_at <= s.started_at);
    assert_eq!(s.labels["container"], "app");
    assert_eq!(s.annotations["io.kubernetes.container.hash"], "abc");
    let log_path = h.path("logs/default_logs/app/0.log");
    assert_eq!(s.log_path, log_path.display().to_string());

    let records = parse_log(&std::fs::read_to_string(&log_path).unwrap());
    assert_eq!(records.len(), 2, "{records:?}");
    for (ts, _, tag, _) in &records {
        assert!(looks_like_rfc3339_nano(ts), "bad timestamp {ts}");
        assert_eq!(tag, "F");
    }
    let mut by_stream: Vec<(String, String)> =
        records.into_iter().map(|(_, s, _, c)| (s, c)).collect();
    by_stream.sort();
    assert_eq!(
        by_stream,
        [
            ("stderr".into(), "err".into()),
            ("stdout".into(), "hi".into())
        ]
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successful_container_reports_completed_and_sees_its_env_and_workdir() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("env").await;
    let workdir = h.path("work");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut cfg = container_config(
        "env",
        &sh("pwd; echo \"$GREETING $HOSTNAME\"; env | grep -c ."),
    );
    cfg.working_dir = workdir.display().to_string();
    cfg.envs = vec![v1::KeyValue {
        key: "GREETING".into(),
        value: "hello".into(),
    }];
    let id = h
        .client
        .create_container(&sb.0, cfg, sb.1.clone())
        .await
        .unwrap();
    h.client.start_container(&id).await.unwrap();
    let s = h.wait_exited(&id).await;
    assert_eq!((s.exit_code, s.reason.as_str()), (0, "Completed"));
    let records =
        parse_log(&std::fs::read_to_string(h.path("logs/default_env/env/0.log")).unwrap());
    let lines: Vec<&str> = records.iter().map(|r| r.3.as_str()).collect();
    assert_eq!(lines[0], workdir.display().to_string());
    assert_eq!(lines[1], "hello env");
    // PATH, HOSTNAME, GREETING, plus what sh itself adds (PWD, maybe SHLVL, _).
    let count: usize = lines[2].parse().unwrap();
    assert!(count <= 6, "environment was not cleared: {count} variables");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlong_output_lines_are_logged_as_partial_records_then_a_full_one() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("long").await;
    let id = h
        .run(
            &sb,
            "long",
            &sh("head -c 40000 /dev/zero | tr '\\0' x; echo; echo tail"),
        )
        .await;
    assert_eq!(h.wait_exited(&id).await.exit_code, 0);
    let records =
        parse_log(&std::fs::read_to_string(h.path("logs/default_long/long/0.log")).unwrap());
    let tags: Vec<&str> = records.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(tags, ["P", "P", "F", "F"]);
    let joined: String = records[..3].iter().map(|r| r.3.as_str()).collect();
    assert_eq!(joined.len(), 40000);
    assert!(joined.bytes().all(|b| b == b'x'));
    assert_eq!(records[3].3, "tail");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_grace_kills_a_sigterm_ignoring_container_with_137_after_the_grace() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("stubborn").await;
    let id = h
        .run(&sb, "stubborn", &sh("trap '' TERM; echo ready; sleep 100"))
        .await;
    wait_for_file(&h.path("logs/default_stubborn/stubborn/0.log"), "ready").await;
    let t0 = Instant::now();
    h.client.stop_container(&id, 1).await.unwrap();
    let took = t0.elapsed();
    let s = h.status(&id).await;
    assert_eq!(s.state, v1::ContainerState::ContainerExited as i32);
    assert_eq!(s.exit_code, 137);
    assert_eq!(s.reason, "Error");
    assert!(
        took >= Duration::from_millis(900),
        "SIGKILL came too early: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "stop took {took:?}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_sends_sigterm_first_so_a_cooperative_container_exits_143() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("polite").await;
    let id = h.run(&sb, "polite", &["sleep", "100"]).await;
    let t0 = Instant::now();
    h.client.stop_container(&id, 30).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    let s = h.status(&id).await;
    assert_eq!((s.exit_code, s.reason.as_str()), (143, "Error"));
    // Stopping an exited container is fine.
    h.client.stop_container(&id, 30).await.unwrap();
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_zero_timeout_kills_at_once() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("zero").await;
    let id = h
        .run(&sb, "zero", &sh("trap '' TERM; echo ready; sleep 100"))
        .await;
    wait_for_file(&h.path("logs/default_zero/zero/0.log"), "ready").await;
    let t0 = Instant::now();
    h.client.stop_container(&id, 0).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(h.status(&id).await.exit_code, 137);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_sync_captures_output_and_exit_code_in_the_container_env_and_workdir() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("exec").await;
    let workdir = h.path("exec-wd");
    std::fs::create_dir_all(&workdir).unwrap();
    let mut cfg = container_config("exec", &["sleep", "100"]);
    cfg.working_dir = workdir.display().to_string();
    cfg.envs = vec![v1::KeyValue {
        key: "FOO".into(),
        value: "bar".into(),
    }];
    let id = h
        .client
        .create_container(&sb.0, cfg, sb.1.clone())
        .await
        .unwrap();
    h.client.start_container(&id).await.unwrap();

    let cmd = |s: &str| vec!["sh".to_string(), "-c".to_string(), s.to_string()];
    let ok = h
        .client
        .exec_sync(&id, cmd("pwd; echo $FOO; echo oops >&2"), 10)
        .await
        .unwrap();
    assert_eq!(ok.exit_code, 0);
    assert_eq!(
        String::from_utf8(ok.stdout).unwrap(),
        format!("{}\nbar\n", workdir.display())
    );
    assert_eq!(ok.stderr, b"oops\n");

    let failed = h.client.exec_sync(&id, cmd("exit 7"), 0).await.unwrap();
    assert_eq!(failed.exit_code, 7);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_sync_timeout_is_deadline_exceeded_and_kills_the_command() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("slow").await;
    let id = h.run(&sb, "slow", &["sleep", "100"]).await;
    let pid_file = h.path("exec.pid");
    let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    let t0 = Instant::now();
    let err = h
        .client
        .exec_sync(&id, vec!["sh".into(), "-c".into(), script], 1)
        .await
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(rpc_code(&err), Code::DeadlineExceeded, "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(err.to_string().contains("ExecSync"), "{err}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_gone(pid).await,
        "timed-out exec process {pid} still exists"
    );
    // The container itself keeps running.
    assert_eq!(
        h.status(&id).await.state,
        v1::ContainerState::ContainerRunning as i32
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_sync_in_a_stopped_container_is_refused() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("gone").await;
    let id = h.run(&sb, "gone", &["true"]).await;
    h.wait_exited(&id).await;
    let err = h
        .client
        .exec_sync(&id, vec!["true".into()], 1)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_events_stream_created_started_then_stopped_with_statuses() {
    let mut h = Harness::start().await;
    let mut events = h.client.get_container_events().await.unwrap();
    let sb = h.sandbox("events").await;
    let id = h.run(&sb, "ev", &sh("exit 0")).await;

    let mut seen = Vec::new();
    let deadline = Duration::from_secs(10);
    while !seen.contains(&v1::ContainerEventType::ContainerStoppedEvent) {
        let ev = tokio::time::timeout(deadline, events.next())
            .await
            .expect("no event in time")
            .expect("stream ended")
            .expect("stream error");
        if ev.container_id != id {
            continue;
        }
        let kind = v1::ContainerEventType::try_from(ev.container_event_type).unwrap();
        let pod = ev.pod_sandbox_status.as_ref().expect("pod sandbox status");
        assert_eq!(pod.id, sb.0);
        assert_eq!(pod.network.as_ref().unwrap().ip, "127.0.0.1");
        let mine = ev
            .containers_statuses
            .iter()
            .find(|c| c.id == id)
            .expect("container status in event");
        if kind == v1::ContainerEventType::ContainerStoppedEvent {
            assert_eq!(mine.state, v1::ContainerState::ContainerExited as i32);
            assert_eq!(mine.reason, "Completed");
        }
        seen.push(kind);
    }
    assert_eq!(
        seen,
        [
            v1::ContainerEventType::ContainerCreatedEvent,
            v1::ContainerEventType::ContainerStartedEvent,
            v1::ContainerEventType::ContainerStoppedEvent
        ]
    );

    h.client.remove_container(&id).await.unwrap();
    let ev = loop {
        let ev = tokio::time::timeout(deadline, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if ev.container_id == id {
            break ev;
        }
    };
    assert_eq!(
        ev.container_event_type,
        v1::ContainerEventType::ContainerDeletedEvent as i32
    );
    assert!(ev.containers_statuses.iter().all(|c| c.id != id));

    // Shutdown ends the stream instead of hanging on it.
    h.shutdown().await;
    let end = tokio::time::timeout(deadline, async {
        while let Some(Ok(_)) = events.next().await {}
    })
    .await;
    assert!(end.is_ok(), "event stream did not end at shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_does_not_read_is_disconnected_instead_of_blocking_the_runtime() {
    let mut h = Harness::start_with(|o| o.event_capacity = 8).await;
    let mut events = h.client.get_container_events().await.unwrap();
    let sb = h.sandbox("flood").await;
    // Each event carries every container status of the pod, so they grow;
    // a few hundred fill every buffer between us and the runtime.
    let t0 = Instant::now();
    for i in 0..300 {
        h.client
            .create_container(
                &sb.0,
                container_config(&format!("c{i}"), &["true"]),
                sb.1.clone(),
            )
            .await
            .unwrap();
    }
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "runtime was slowed by the watcher"
    );
    let mut received = 0;
    let mut error = None;
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(item) = events.next().await {
            match item {
                Ok(_) => received += 1,
                Err(s) => {
                    error = Some(s);
                    break;
                }
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "lagging stream was not closed");
    assert!(
        received < 301,
        "watcher received everything ({received}); nothing lagged"
    );
    if let Some(s) = error {
        assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_container_without_command_is_invalid_argument_explaining_images_are_not_resolved() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("nocmd").await;
    let err = h
        .client
        .create_container(&sb.0, container_config("web", &[]), sb.1.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "CRI CreateContainer on {} failed: InvalidArgument: ",
            h.client.endpoint()
        )),
        "{msg}"
    );
    assert!(msg.contains("\"web\""), "{msg}");
    assert!(msg.contains("does not resolve images"), "{msg}");
    assert!(msg.contains("command"), "{msg}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remapped_mounts_need_root_and_identity_mounts_always_work() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("mounts").await;
    let host = h.path("data");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("file"), "from the host").unwrap();
    let mount = |container_path: &str| v1::Mount {
        host_path: host.display().to_string(),
        container_path: container_path.to_string(),
        ..Default::default()
    };
    // a host path shown at another path: a private mount namespace, which needs root
    let remapped = h.path("elsewhere").display().to_string();
    let mut cfg = container_config("m", &["cat", &format!("{remapped}/file")]);
    cfg.mounts = vec![mount(&remapped)];
    let created = h.client.create_container(&sb.0, cfg, sb.1.clone()).await;
    if unsafe { libc::geteuid() } == 0 {
        let id = created.expect("a remapped mount as root");
        h.client.start_container(&id).await.unwrap();
        let status = h.wait_exited(&id).await;
        assert_eq!(
            status.exit_code, 0,
            "the container read the file at its new path"
        );
        assert!(
            !std::path::Path::new(&remapped).join("file").exists(),
            "the bind mount stayed in the container's namespace"
        );
    } else {
        let err = created.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.to_string().contains("needs root"), "{err}");
        assert!(err.to_string().contains(&format!("{remapped:?}")), "{err}");
    }

    let mut cfg = container_config("m2", &["true"]);
    cfg.mounts = vec![mount(&host.display().to_string())];
    let id = h
        .client
        .create_container(&sb.0, cfg, sb.1.clone())
        .await
        .unwrap();
    assert_eq!(h.status(&id).await.mounts.len(), 1);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_every_process_group_including_grandchildren_and_removes_the_socket() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("sd").await;
    let gc_file = h.path("grandchild.pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", gc_file.display());
    let with_child = h.run(&sb, "parent", &sh(&script)).await;
    let plain = h.run(&sb, "plain", &["sleep", "1000"]).await;
    let grandchild: i32 = wait_for_file(&gc_file, "\n").await.trim().parse().unwrap();
    let parent = h.pid_of(&with_child).await;
    let sleeper = h.pid_of(&plain).await;
    for pid in [grandchild, parent, sleeper] {
        assert!(
            !process_gone(pid),
            "{pid} should be running before shutdown"
        );
    }
    let socket = h.rt.as_ref().unwrap().socket_path().to_path_buf();

    h.shutdown().await;

    for pid in [grandchild, parent, sleeper] {
        assert!(process_gone(pid), "process {pid} survived shutdown");
    }
    assert!(!socket.exists(), "socket file left behind");
    let err = CriClient::connect(
        &format!("unix://{}", socket.display()),
        CriClientOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_runtime_without_shutdown_still_kills_its_processes() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("drop").await;
    let id = h.run(&sb, "sleeper", &["sleep", "1000"]).await;
    let pid = h.pid_of(&id).await;
    let socket = h.rt.as_ref().unwrap().socket_path().to_path_buf();
    drop(h.rt.take());
    assert!(wait_gone(pid).await, "process {pid} survived drop");
    assert!(!socket.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_main_process_exit_ends_the_rest_of_its_group() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("pid1").await;
    let gc_file = h.path("bg.pid");
    let script = format!("sleep 1000 & echo $! > {}; exit 0", gc_file.display());
    let id = h.run(&sb, "bg", &sh(&script)).await;
    assert_eq!(h.wait_exited(&id).await.exit_code, 0);
    let bg: i32 = wait_for_file(&gc_file, "\n").await.trim().parse().unwrap();
    assert!(
        wait_gone(bg).await,
        "background process {bg} outlived its container"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_stop_kills_its_containers_and_remove_is_idempotent() {
    let mut h = Harness::start_with(|o| o.sandbox_stop_grace = Duration::from_millis(300)).await;
    let sb = h.sandbox("pod").await;
    let id = h
        .run(&sb, "stubborn", &sh("trap '' TERM; echo ready; sleep 100"))
        .await;
    wait_for_file(&h.path("logs/default_pod/stubborn/0.log"), "ready").await;

    h.client.stop_pod_sandbox(&sb.0).await.unwrap();
    let st = h.client.pod_sandbox_status(&sb.0, false).await.unwrap();
    let status = st.status.unwrap();
    assert_eq!(status.state, v1::PodSandboxState::SandboxNotready as i32);
    assert_eq!(status.annotations["note"], "kept as given");
    assert_eq!(status.labels["app"], "pod");
    assert_eq!(st.containers_statuses.len(), 1);
    assert_eq!(h.status(&id).await.exit_code, 137);
    h.client.stop_pod_sandbox(&sb.0).await.unwrap();

    // No new containers in a stopped sandbox.
    let err = h
        .client
        .create_container(&sb.0, container_config("late", &["true"]), sb.1.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);

    h.client.remove_pod_sandbox(&sb.0).await.unwrap();
    h.client.remove_pod_sandbox(&sb.0).await.unwrap();
    h.client.stop_pod_sandbox(&sb.0).await.unwrap();
    h.client.remove_container(&id).await.unwrap();
    assert!(h
        .client
        .container_status(&id, false)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(h
        .client
        .pod_sandbox_status(&sb.0, false)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(h.client.list_containers(None).await.unwrap().is_empty());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_running_container_kills_it_and_forgets_it_but_keeps_the_log() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("rm").await;
    let id = h.run(&sb, "rm", &sh("echo before; sleep 1000")).await;
    let log = h.path("logs/default_rm/rm/0.log");
    wait_for_file(&log, "before").await;
    let pid = h.pid_of(&id).await;
    h.client.remove_container(&id).await.unwrap();
    assert!(wait_gone(pid).await);
    assert!(h
        .client
        .container_status(&id, false)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(log.exists());
    // Removing again is fine; stopping a missing container is NotFound.
    h.client.remove_container(&id).await.unwrap();
    assert!(h
        .client
        .stop_container(&id, 1)
        .await
        .unwrap_err()
        .is_not_found());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_filters_select_by_id_state_sandbox_and_labels() {
    let mut h = Harness::start().await;
    let a = h.sandbox("a").await;
    let b = h.sandbox("b").await;
    let done = h.run(&a, "done", &["true"]).await;
    let running = h.run(&a, "running", &["sleep", "100"]).await;
    let other = h.run(&b, "other", &["sleep", "100"]).await;
    h.wait_exited(&done).await;

    let ids = |v: Vec<v1::Container>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(h.client.list_containers(None).await.unwrap().len(), 3);
    let by_sandbox = v1::ContainerFilter {
        pod_sandbox_id: b.0.clone(),
        ..Default::default()
    };
    assert_eq!(
        ids(h.client.list_containers(Some(by_sandbox)).await.unwrap()),
        [other.as_str()]
    );
    let by_state = v1::ContainerFilter {
        state: Some(v1::ContainerStateValue {
            state: v1::ContainerState::ContainerRunning as i32,
        }),
        pod_sandbox_id: a.0.clone(),
        ..Default::default()
    };
    assert_eq!(
        ids(h.client.list_containers(Some(by_state)).await.unwrap()),
        [running.as_str()]
    );
    let by_label = v1::ContainerFilter {
        label_selector: HashMap::from([("container".to_string(), "done".to_string())]),
        ..Default::default()
    };
    assert_eq!(
        ids(h.client.list_containers(Some(by_label)).await.unwrap()),
        [done.as_str()]
    );
    let by_id_prefix = v1::ContainerFilter {
        id: done[..20].to_string(),
        ..Default::default()
    };
    assert_eq!(
        ids(h.client.list_containers(Some(by_id_prefix)).await.unwrap()),
        [done.as_str()]
    );

    h.client.stop_pod_sandbox(&b.0).await.unwrap();
    let ready = v1::PodSandboxFilter {
        state: Some(v1::PodSandboxStateValue {
            state: v1::PodSandboxState::SandboxReady as i32,
        }),
        ..Default::default()
    };
    let pods = h.client.list_pod_sandbox(Some(ready)).await.unwrap();
    assert_eq!(
        pods.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        [a.0.as_str()]
    );
    let labelled = v1::PodSandboxFilter {
        label_selector: HashMap::from([("app".to_string(), "b".to_string())]),
        ..Default::default()
    };
    let pods = h.client.list_pod_sandbox(Some(labelled)).await.unwrap();
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].id, b.0);
    assert_eq!(pods[0].metadata.as_ref().unwrap().name, "b");
    assert_eq!(h.client.list_pod_sandbox(None).await.unwrap().len(), 2);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_reserved_per_sandbox_and_attempt() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("dup").await;
    let err = h
        .client
        .run_pod_sandbox(sb.1.clone(), "")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    h.client
        .create_container(&sb.0, container_config("c", &["true"]), sb.1.clone())
        .await
        .unwrap();
    let err = h
        .client
        .create_container(&sb.0, container_config("c", &["true"]), sb.1.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    let mut retry = container_config("c", &["true"]);
    retry.metadata.as_mut().unwrap().attempt = 1;
    h.client
        .create_container(&sb.0, retry, sb.1.clone())
        .await
        .unwrap();
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_fails_start_and_records_start_error() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("missing").await;
    let id = h
        .client
        .create_container(
            &sb.0,
            container_config("x", &["/no/such/program"]),
            sb.1.clone(),
        )
        .await
        .unwrap();
    let err = h.client.start_container(&id).await.unwrap_err();
    assert!(err.to_string().contains("/no/such/program"), "{err}");
    let s = h.status(&id).await;
    assert_eq!(s.state, v1::ContainerState::ContainerExited as i32);
    assert_eq!((s.exit_code, s.reason.as_str()), (128, "StartError"));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_recorded_by_pull_and_forgotten_by_remove() {
    let mut h = Harness::start().await;
    let spec = |s: &str| v1::ImageSpec {
        image: s.into(),
        ..Default::default()
    };
    let img = "registry.example/app:1.0";
    assert!(h
        .client
        .image_status(spec(img), false)
        .await
        .unwrap()
        .image
        .is_none());
    let image_ref = h.client.pull_image(spec(img), None, None).await.unwrap();
    assert_eq!(image_ref, img);
    let status = h.client.image_status(spec(img), false).await.unwrap();
    assert_eq!(status.image.unwrap().id, image_ref);
    assert_eq!(h.client.list_images(None).await.unwrap().len(), 1);
    h.client.remove_image(spec(img)).await.unwrap();
    h.client.remove_image(spec(img)).await.unwrap();
    assert!(h.client.list_images(None).await.unwrap().is_empty());

    let fs = h.client.image_fs_info().await.unwrap();
    let usage = &fs.image_filesystems[0];
    assert_eq!(
        usage.fs_id.as_ref().unwrap().mountpoint,
        h.path("root").display().to_string()
    );
    assert!(usage.timestamp > 0);
    assert!(usage.inodes_used.as_ref().unwrap().value >= 1);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_status_report_a_ready_embedded_runtime() {
    let mut h = Harness::start().await;
    let v = h.client.version().await.unwrap();
    assert_eq!(v.runtime_name, RUNTIME_NAME);
    assert_eq!(v.runtime_name, "ledgerlet-embedded");
    assert_eq!(v.runtime_api_version, "v1");
    let st = h.client.status(false).await.unwrap();
    let conds: Vec<(String, bool)> = st
        .status
        .unwrap()
        .conditions
        .into_iter()
        .map(|c| (c.r#type, c.status))
        .collect();
    assert_eq!(
        conds,
        [
            ("RuntimeReady".to_string(), true),
            ("NetworkReady".to_string(), true)
        ]
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_a_missing_or_dead_socket_fails_fast_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.sock");
    let t0 = Instant::now();
    let err = CriClient::connect(missing.to_str().unwrap(), CriClientOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, CriError::Connect { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("unix://{}", missing.display())),
        "{msg}"
    );
    assert!(msg.contains("does not exist"), "{msg}");

    // A socket file nobody listens on any more.
    let dead = dir.path().join("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
    let err = CriClient::connect(
        &format!("unix://{}", dead.display()),
        CriClientOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CriError::Connect { .. }), "{err:?}");
    assert!(err.to_string().to_lowercase().contains("refused"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(2));

    let err = CriClient::connect("tcp://127.0.0.1:1", CriClientOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, CriError::InvalidEndpoint { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_runtime_on_a_live_socket_is_refused_and_a_stale_socket_is_replaced() {
    let mut h = Harness::start().await;
    let endpoint = h.rt.as_ref().unwrap().endpoint();
    let err = EmbeddedRuntime::start(&endpoint, RuntimeOptions::new(h.path("root2")))
        .await
        .err()
        .expect("second bind must fail");
    assert!(err.to_string().contains("in use"), "{err}");
    h.shutdown().await;

    let stale = h.path("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let rt = EmbeddedRuntime::start(
        stale.to_str().unwrap(),
        RuntimeOptions::new(h.path("root3")),
    )
    .await
    .unwrap();
    let client = CriClient::connect(&rt.endpoint(), CriClientOptions::default())
        .await
        .unwrap();
    client.version().await.unwrap();
    rt.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_until_its_shutdown_future_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("serve.sock");
    let listen = format!("unix://{}", sock.display());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn({
        let listen = listen.clone();
        let opts = RuntimeOptions::new(dir.path().join("root"));
        async move {
            ledgerlet::runtime::serve(&listen, opts, async {
                let _ = rx.await;
            })
            .await
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let client = loop {
        match CriClient::connect(&listen, CriClientOptions::default()).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "server never came up: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let sb = client
        .run_pod_sandbox(
            v1::PodSandboxConfig {
                metadata: Some(v1::PodSandboxMetadata {
                    name: "s".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            "",
        )
        .await
        .unwrap();
    let cfg = container_config("s", &["sleep", "1000"]);
    let id = client
        .create_container(&sb, cfg, v1::PodSandboxConfig::default())
        .await
        .unwrap();
    client.start_container(&id).await.unwrap();
    let info = client.container_status(&id, true).await.unwrap().info["info"].clone();
    let start = info.find("\"pid\":").unwrap() + 6;
    let pid: i32 = info[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("serve did not return")
        .unwrap()
        .unwrap();
    assert!(process_gone(pid));
    assert!(!sock.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_hits_the_client_deadline_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("silent.sock");
    // Accepts connections and never answers.
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let opts = CriClientOptions {
        request_timeout_ms: 300,
        connect_timeout_ms: 300,
        ..Default::default()
    };
    let t0 = Instant::now();
    let outcome = match CriClient::connect(sock.to_str().unwrap(), opts).await {
        Err(e) => e,
        Ok(client) => client.version().await.unwrap_err(),
    };
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t0.elapsed()
    );
    match &outcome {
        CriError::Connect { reason, .. } => assert!(reason.contains("timed out"), "{outcome}"),
        CriError::Rpc { method, code, .. } => {
            assert_eq!(*method, "Version");
            assert_eq!(*code, Code::DeadlineExceeded, "{outcome}");
        }
        other => panic!("unexpected {other:?}"),
    }
    holder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_sync_output_is_capped_at_16_mib_and_the_command_still_succeeds() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("cap").await;
    let id = h.run(&sb, "cap", &["sleep", "100"]).await;
    let resp = h
        .client
        .exec_sync(
            &id,
            vec![
                "sh".into(),
                "-c".into(),
                "head -c 17000000 /dev/zero; echo done >&2".into(),
            ],
            30,
        )
        .await
        .unwrap();
    assert_eq!(resp.exit_code, 0);
    assert_eq!(resp.stdout.len(), 16 * 1024 * 1024);
    assert_eq!(resp.stderr, b"done\n");
    h.shutdown().await;
}

/// The `tick-N` numbers logged in `text`, in order.
fn ticks(text: &str) -> Vec<u64> {
    parse_log(text)
        .into_iter()
        .filter_map(|(_, _, _, content)| content.strip_prefix("tick-")?.parse().ok())
        .collect()
}

/// LR-03: after a rotation renamed the log away, `ReopenContainerLog` makes the output go
/// to a fresh file at the log path; a container that no longer runs is refused, and no
/// file is created for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_container_log_moves_the_output_to_a_fresh_file_and_refuses_a_stopped_container() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("rotate").await;
    let script = "i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo tick-$i; sleep 0.05; done";
    let id = h.run(&sb, "app", &sh(script)).await;
    let log = h.path("logs/default_rotate/app/0.log");
    wait_for_file(&log, "tick-3\n").await;
    let rotated = h.path("logs/default_rotate/app/0.log.20240101-000000");
    std::fs::rename(&log, &rotated).unwrap();
    h.client.reopen_container_log(&id).await.unwrap();
    h.wait_exited(&id).await;
    let old = ticks(&std::fs::read_to_string(&rotated).unwrap());
    let new = ticks(&std::fs::read_to_string(&log).unwrap());
    assert!(
        !new.is_empty(),
        "the fresh file gets the output after the reopen"
    );
    let all: Vec<u64> = old.iter().chain(new.iter()).copied().collect();
    assert_eq!(
        all,
        (1..=60).collect::<Vec<u64>>(),
        "every line once, old file then new"
    );
    std::fs::remove_file(&log).unwrap();
    let err = h.client.reopen_container_log(&id).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    assert!(
        !log.exists(),
        "no log file is created for a stopped container"
    );
    h.shutdown().await;
}

/// ST-07: the embedded runtime measures each running container's process group: a busy
/// loop's cumulative CPU rises, an idle container's stays low, and the sandbox's stats cover
/// its containers'; the node's summary on it has the pod with both containers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn st_07_embedded_runtime_reports_cpu_and_memory_of_its_containers_process_groups() {
    let mut h = Harness::start().await;
    let sb = h.sandbox("stats").await;
    let busy = h.run(&sb, "busy", &sh("while :; do :; done")).await;
    let idle = h.run(&sb, "idle", &["sleep", "3600"]).await;
    let cpu_of = |stats: &[v1::ContainerStats], id: &str| -> u64 {
        let s = stats
            .iter()
            .find(|s| s.attributes.as_ref().unwrap().id == id)
            .unwrap_or_else(|| panic!("no stats for {id}: {stats:?}"));
        s.cpu
            .as_ref()
            .unwrap()
            .usage_core_nano_seconds
            .as_ref()
            .unwrap()
            .value
    };
    let before = h.client.list_container_stats(None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = h.client.list_container_stats(None).await.unwrap();
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(
        cpu_of(&after, &busy) > cpu_of(&before, &busy) + 200_000_000,
        "busy: {before:?} then {after:?}"
    );
    assert!(cpu_of(&after, &idle) < 200_000_000, "idle: {after:?}");
    let idle_stats = after
        .iter()
        .find(|s| s.attributes.as_ref().unwrap().id == idle)
        .unwrap();
    let rss = idle_stats
        .memory
        .as_ref()
        .unwrap()
        .working_set_bytes
        .as_ref()
        .unwrap()
        .value;
    assert!(rss > 0, "{idle_stats:?}");
    let sandboxes = h.client.list_pod_sandbox_stats(None).await.unwrap();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    let linux = sandboxes[0].linux.as_ref().unwrap();
    assert_eq!(linux.containers.len(), 2, "{sandboxes:?}");
    let pod_cpu = linux
        .cpu
        .as_ref()
        .unwrap()
        .usage_core_nano_seconds
        .as_ref()
        .unwrap()
        .value;
    assert!(pod_cpu >= cpu_of(&after, &busy), "{sandboxes:?}");

    let stats =
        ledgerlet::shell::stats::StatsState::new(h.client.clone(), "node-a".into(), h.path("root"));
    let summary = stats.summary(false).await.unwrap();
    assert_eq!(summary.node.node_name, "node-a");
    assert_eq!(summary.pods.len(), 1, "{summary:?}");
    let pod = &summary.pods[0];
    assert_eq!(pod.pod_ref.uid, "uid-stats");
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["busy", "idle"]);
    h.shutdown().await;
}

/// ST-05: when the runtime's stats cannot be had, `/metrics/resource` is only the scrape
/// error.
#[test]
fn st_05_resource_metrics_without_stats_are_only_the_scrape_error() {
    let text = ledgerlet::shell::stats::resource_metrics::render(None);
    assert_eq!(
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        ["resource_scrape_error 1"]
    );
}
