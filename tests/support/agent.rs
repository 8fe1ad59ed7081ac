//! Runs the real `ledgerlet` binary for integration tests: its own root directory,
//! manifest directory and log directory, an ephemeral HTTP port, and plain HTTP/1.1 over a
//! TCP socket to read `/pods`, `/debug/ledger` and `/debug/state`.
//!
//! It owns the agent process: dropping an `Agent` kills it (SIGKILL) if a test did not stop
//! it, so a failing test never leaves an agent behind.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use ledgerlet::core::record::Record;
use ledgerlet::core::Node;
use ledgerlet::ledger::{Line, Reader};

#[path = "http.rs"]
mod http;
pub use http::http_get;

pub struct Agent {
    child: Option<Child>,
    pub root: tempfile::TempDir,
    pub manifests: PathBuf,
    pub logs: PathBuf,
    pub log_file: PathBuf,
    pub port: u16,
    /// The `--read-only-port` given (picked at the first start).
    read_only_port: u16,
    pub node_name: String,
    extra: Vec<String>,
    env: Vec<(String, String)>,
}

/// The flags every test uses: short periods so tests are quick.
pub const FAST: &[&str] = &[
    "--housekeeping-period-ms",
    "500",
    "--manifest-check-period-ms",
    "200",
    "--crash-loop-backoff-initial-ms",
    "1000",
    "--crash-loop-backoff-max-ms",
    "8000",
];

impl Agent {
    /// Starts `ledgerlet run` with the embedded runtime and `extra` flags (a flag of
    /// [`FAST`] that `extra` also sets takes `extra`'s value; `--node-name` in `extra`
    /// replaces `test-node`).
    pub fn start(extra: &[&str]) -> Agent {
        Agent::start_with_env(extra, &[])
    }

    /// [`Agent::start`] with extra environment variables.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Agent {
        let root = tempfile::tempdir().expect("tempdir");
        Agent::start_in(root, extra, env)
    }

    /// Starts the agent in an existing test directory (its `state` is the --root-dir), e.g.
    /// to restart an agent that was killed with [`Agent::kill_hard`]; the log continues in
    /// the same file.
    pub fn start_in(root: tempfile::TempDir, extra: &[&str], env: &[(&str, &str)]) -> Agent {
        let manifests = root.path().join("manifests");
        let logs = root.path().join("pod-logs");
        std::fs::create_dir_all(&manifests).unwrap();
        let log_file = root.path().join("agent.log");
        let node_name = extra
            .iter()
            .position(|f| *f == "--node-name")
            .and_then(|i| extra.get(i + 1))
            .map_or_else(|| "test-node".to_string(), |n| n.to_string());
        let mut agent = Agent {
            child: None,
            root,
            manifests,
            logs,
            log_file,
            port: 0,
            read_only_port: 0,
            node_name,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        agent.spawn();
        agent
    }

    fn spawn(&mut self) {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let fast: Vec<&str> = FAST
            .chunks(2)
            .filter(|pair| !extra.contains(&pair[0]))
            .flatten()
            .copied()
            .collect();
        let node: Vec<&str> = if extra.contains(&"--node-name") {
            vec![]
        } else {
            vec!["--node-name", &self.node_name]
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_file)
            .unwrap();
        let start_offset = log.metadata().map(|m| m.len()).unwrap_or(0);
        // the harness' directories, unless `extra` names its own
        let state = self.root.path().join("state");
        let dirs: Vec<(&str, &Path)> = [
            ("--root-dir", state.as_path()),
            ("--pod-logs-dir", self.logs.as_path()),
            ("--pod-manifest-path", self.manifests.as_path()),
        ]
        .into_iter()
        .filter(|(flag, _)| !extra.contains(flag))
        .collect();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ledgerlet"));
        // if the test process dies without dropping the harness (killed, aborted, or a bench
        // that exits early), the agent is told to stop and stops its pods, never outliving it
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        cmd.arg("run");
        for (flag, dir) in dirs {
            cmd.arg(flag).arg(dir);
        }
        // the kubelet API on a free port (many agents share the host), unless `extra` names one
        let secure_port: &[&str] = if extra.contains(&"--port") {
            &[]
        } else {
            &["--port", "0"]
        };
        // the read-only port: one picked once and kept across restarts (0 would turn it off)
        if self.read_only_port == 0 {
            self.read_only_port = free_port();
        }
        let read_only_port = self.read_only_port.to_string();
        let read_only: Vec<&str> = if extra.contains(&"--read-only-port") {
            vec![]
        } else {
            vec!["--read-only-port", &read_only_port]
        };
        let child = cmd
            .args(&node)
            .args(&read_only)
            .args(secure_port)
            .args(&fast)
            .args(&extra)
            .env("RUST_LOG", "info,ledgerlet=debug")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start ledgerlet");
        self.child = Some(child);
        self.port = self.wait_for_port(start_offset as usize);
    }

    /// Starts the agent again with the same flags, directories and manifests (after
    /// [`Agent::stop`] or [`Agent::kill`]); its log continues in the same file.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the agent is still running");
        self.spawn();
    }

    /// Kills the agent with SIGKILL (as a crash would) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn wait_for_port(&mut self, from: usize) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all = std::fs::read_to_string(&self.log_file).unwrap_or_default();
            let log = all.get(from..).unwrap_or_default();
            let found = ["address=127.0.0.1:", "address=0.0.0.0:"]
                .iter()
                .find_map(|m| log.find(m).map(|i| i + m.len()));
            if let Some(i) = found {
                let rest = &log[i..];
                let port: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                if let Ok(p) = port.parse() {
                    return p;
                }
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("ledgerlet exited early ({status}):\n{log}");
            }
            assert!(Instant::now() < deadline, "ledgerlet did not start:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The running agent's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the agent is running").id()
    }

    /// Writes a manifest file into the watched directory.
    pub fn write_manifest(&self, file: &str, yaml: &str) {
        let tmp = self.manifests.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, yaml).unwrap();
        std::fs::rename(&tmp, self.manifests.join(file)).unwrap();
    }

    /// Removes a manifest file.
    pub fn remove_manifest(&self, file: &str) {
        std::fs::remove_file(self.manifests.join(file)).unwrap();
    }

    /// `GET path` from the agent's HTTP server → (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.port, path)
    }

    /// The pods with their statuses.
    pub fn pods(&self) -> Vec<Pod> {
        let (status, body) = self.get("/pods");
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("PodList JSON");
        serde_json::from_value(v["items"].clone()).expect("pods")
    }

    /// The pod named `name` (without the node suffix).
    pub fn pod(&self, name: &str) -> Option<Pod> {
        let full = format!("{name}-{}", self.node_name);
        self.pods()
            .into_iter()
            .find(|p| p.metadata.name.as_deref() == Some(full.as_str()))
    }

    /// Every retained ledger record.
    pub fn ledger(&self) -> Vec<Record> {
        let (status, body) = self.get("/debug/ledger");
        assert_eq!(status, 200);
        Reader::<_, Node>::new(body.as_bytes())
            .map(|l| match l.expect("valid ledger line") {
                Line::Record(r) => r,
                Line::Snapshot(_) => panic!("no snapshot in /debug/ledger"),
            })
            .collect()
    }

    /// The raw NDJSON of the ledger.
    pub fn ledger_text(&self) -> String {
        self.get("/debug/ledger").1
    }

    /// The folded state.
    pub fn state(&self) -> Node {
        let (status, body) = self.get("/debug/state");
        assert_eq!(status, 200);
        serde_json::from_str(&body).expect("state JSON")
    }

    /// Waits until `check` returns Some, polling every 50 ms for up to `secs` seconds; on
    /// timeout, panics with `what`, the pods and the agent's log tail.
    pub fn wait_for<T>(
        &self,
        what: &str,
        secs: u64,
        mut check: impl FnMut(&Agent) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            if Instant::now() > deadline {
                let pods = self.get("/pods").1;
                let log = std::fs::read_to_string(&self.log_file).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "timed out after {secs}s waiting for {what}\n--- /pods:\n{pods}\n--- log tail:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The agent's --root-dir.
    pub fn state_dir(&self) -> PathBuf {
        self.root.path().join("state")
    }

    /// Sends `signal` and waits (up to 90 s) for the exit status.
    pub fn signal_and_wait(&mut self, signal: i32) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("ledgerlet did not exit within 90 s of signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (up to `secs`) for the agent to exit by itself.
    pub fn wait_exit(&mut self, secs: u64) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                self.child = None;
                return s;
            }
            if Instant::now() > deadline {
                panic!("ledgerlet did not exit within {secs} s:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the agent with SIGKILL and hands back its test directory (pods on an external
    /// runtime keep running), for a restart with [`Agent::start_in`].
    pub fn kill_hard(mut self) -> tempfile::TempDir {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let placeholder = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.root, placeholder)
    }

    /// Runs `ledgerlet ARGS…` (a client subcommand) and returns its output.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        cli(args)
    }

    /// Sends SIGTERM and waits (up to 90 s) for the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        self.signal_and_wait(libc::SIGTERM)
    }

    /// `/debug/ledger` replays (offline, with the library's `replay`) to exactly the state
    /// `/debug/state` reports, and passes `replay --verify`. The state is read first, so the ledger read after it holds at
    /// least as many records; the replay stops at the state's last seq.
    pub fn assert_ledger_replays_to_state(&self) {
        let state = self.state();
        let text = self.ledger_text();
        let replayed = ledgerlet::postmortem::replay::replay(
            text.as_bytes(),
            Some(ledgerlet::postmortem::replay::Until::Seq(state.last_seq)),
        )
        .expect("the ledger replays");
        assert_eq!(
            replayed.node.pod_workers, state.pod_workers,
            "replayed pod workers differ from /debug/state"
        );
        assert_eq!(
            replayed.node, state,
            "replayed node differs from /debug/state"
        );
        // and the node did what its code says: every caused record is explained
        let v = ledgerlet::postmortem::verify::verify(
            text.as_bytes(),
            Some(ledgerlet::postmortem::replay::Until::Seq(state.last_seq)),
        )
        .expect("the ledger verifies");
        assert!(
            v.passed() && v.outcomes_ok > 0,
            "{}",
            ledgerlet::postmortem::verify::render(&v)
        );
    }

    /// The agent's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// The pod log directory of `pod_name` (the first match).
    pub fn pod_log_dir(&self, pod_name: &str) -> Option<PathBuf> {
        let prefix = format!("default_{pod_name}-{}_", self.node_name);
        std::fs::read_dir(&self.logs)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
            })
    }
}

/// How long a dropped agent gets to stop after SIGTERM before it is killed.
const DROP_STOP_LIMIT: Duration = Duration::from_secs(10);

impl Drop for Agent {
    /// Stops the agent as an operator would: SIGTERM, so its embedded runtime kills the
    /// container processes it started (each in a process group of its own, which a SIGKILL
    /// of the agent leaves running after the test), then SIGKILL after [`DROP_STOP_LIMIT`].
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + DROP_STOP_LIMIT;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `ledgerlet ARGS…` and returns its output.
pub fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ledgerlet")
}

/// PIDs of live processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline"))
            .unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// A TCP port free on loopback now, in 10000–19999 (below the kernel's ephemeral range, so no
/// outgoing connection takes it meanwhile, and apart from `cluster.sh`'s 20000–31999), never
/// handed out twice by this process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::process::id().wrapping_mul(7919);
    for _ in 0..10_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 10_000 + (base.wrapping_add(n.wrapping_mul(7)) % 10_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 10000-19999");
}
