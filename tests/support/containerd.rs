//! A private containerd (Debian's containerd 1.6 + runc) for the tests that run pods in real
//! containers: its own root, state, runc root and socket in a temporary directory, the
//! `native` snapshotter, the CRI plugin with `sandbox_image` set to a locally built pause
//! image, and the two images of `scripts/build-test-images.sh` imported with
//! `ctr -n k8s.io images import`. Nothing is downloaded.
//!
//! One containerd serves a whole test binary ([`Containerd::shared`]). It is stopped and its
//! directory removed when the test process exits (an `atexit` handler: every sandbox is
//! stopped and removed through CRI, containerd gets SIGTERM then SIGKILL, any shim left is
//! killed, anything still mounted under the directory is unmounted, the directory is
//! deleted), and a directory left by a test process that was killed outright is swept the
//! next time a test binary starts one. Tests isolate their pods by node name: each agent runs
//! with its own `--node-name`, ledgerlet lists only the pods labelled with it, and
//! [`Containerd::remove_node_pods`] removes them when the test ends.
//!
//! Availability: if containerd, runc, ctr or busybox-static is missing, or containerd does
//! not come up, [`Containerd::shared`] returns the reason; the caller skips the test, except
//! under `CI=true` where it fails (`scripts/test.sh` installs the packages as root).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ledgerlet::cri::{v1, CriClient, CriClientOptions};

/// The workload image (sh, sleep, httpd, nc, … from busybox-static).
pub const BUSYBOX_IMAGE: &str = "ledgerlet.test/busybox:1";
/// The sandbox image: sleeps forever.
pub const PAUSE_IMAGE: &str = "ledgerlet.test/pause:1";
/// Prefix of every private containerd directory (under the temp dir).
pub const DIR_PREFIX: &str = "ledgerlet-containerd-";
/// The label ledgerlet puts the node name under (its list filter).
pub const NODE_LABEL: &str = "ledgerlet.dev/node";

/// A running private containerd.
#[derive(Debug)]
pub struct Containerd {
    /// Its directory (config, root, state, socket, logs, images).
    pub dir: PathBuf,
    /// Its CRI endpoint, `unix:///…/containerd.sock`.
    pub endpoint: String,
    /// The socket path.
    pub socket: PathBuf,
    pid: i32,
}

static SHARED: OnceLock<Result<Containerd, String>> = OnceLock::new();

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.is_file());
    found
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A current-thread tokio runtime for the synchronous helpers.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

async fn connect(endpoint: &str) -> Result<CriClient, String> {
    CriClient::connect(
        endpoint,
        CriClientOptions {
            request_timeout_ms: 30_000,
            ..CriClientOptions::default()
        },
    )
    .await
    .map_err(|e| e.to_string())
}

extern "C" fn stop_shared_at_exit() {
    if let Some(Ok(c)) = SHARED.get() {
        c.shutdown();
    }
}

impl Containerd {
    /// The test binary's containerd, started on first use. `Err` says why it cannot run.
    pub fn shared() -> Result<&'static Containerd, String> {
        SHARED
            .get_or_init(|| {
                let started = Containerd::start();
                if started.is_ok() {
                    unsafe {
                        libc::atexit(stop_shared_at_exit);
                    }
                }
                started
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// [`Containerd::shared`], or `None` after printing why the test is skipped. Under
    /// `CI=true` an unavailable containerd panics: it is a failure, not a skip.
    pub fn shared_or_skip(test: &str) -> Option<&'static Containerd> {
        match Containerd::shared() {
            Ok(c) => Some(c),
            Err(e) if in_ci() => panic!("containerd is required under CI=true: {e}"),
            Err(e) => {
                eprintln!("skipping {test}: containerd is not available: {e}");
                None
            }
        }
    }

    fn start() -> Result<Containerd, String> {
        for bin in ["containerd", "ctr", "runc", "containerd-shim-runc-v2"] {
            if which(bin).is_none() {
                return Err(format!(
                    "{bin} is not installed (apt-get install containerd runc)"
                ));
            }
        }
        if !Path::new("/bin/busybox").is_file() {
            return Err("/bin/busybox is missing (apt-get install busybox-static)".into());
        }
        if unsafe { libc::geteuid() } != 0 {
            return Err("containerd needs root".into());
        }
        sweep_stale();
        let dir = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::write(dir.join("owner.pid"), std::process::id().to_string())
            .map_err(|e| e.to_string())?;
        match Containerd::start_in(&dir) {
            Ok(c) => Ok(c),
            Err(e) => {
                let log = std::fs::read_to_string(dir.join("containerd.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                let pid = std::fs::read_to_string(dir.join("containerd.pid"))
                    .ok()
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or(0);
                Containerd {
                    dir: dir.clone(),
                    endpoint: String::new(),
                    socket: dir.join("containerd.sock"),
                    pid,
                }
                .shutdown();
                Err(format!(
                    "{e}\n--- containerd log tail:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ))
            }
        }
    }

    fn start_in(dir: &Path) -> Result<Containerd, String> {
        let d = dir.display();
        let socket = dir.join("containerd.sock");
        let config = format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # This machine's root lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (the
  # sandbox's -998), so keep it at or above the current value.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"#
        );
        std::fs::write(dir.join("config.toml"), config).map_err(|e| e.to_string())?;

        // the images, built offline from busybox-static
        let images = dir.join("images");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-test-images.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&images)
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }

        let log = std::fs::File::create(dir.join("containerd.log")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(which("containerd").expect("checked"));
        cmd.arg("--config")
            .arg(dir.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        // its own process group: a terminal's Ctrl-C goes to the tests, whose exit handler
        // then stops containerd after removing its pods
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting containerd: {e}"))?;
        let pid = child.id() as i32;
        std::fs::write(dir.join("containerd.pid"), pid.to_string()).map_err(|e| e.to_string())?;
        // the child is reaped by the exit handler (or init); never waited on here
        std::mem::forget(child);
        let c = Containerd {
            dir: dir.to_path_buf(),
            endpoint: format!("unix://{}", socket.display()),
            socket,
            pid,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !c.socket.exists() {
            if Instant::now() > deadline {
                return Err("containerd did not create its socket within 30 s".into());
            }
            if unsafe { libc::kill(pid, 0) } != 0 {
                return Err("containerd exited at start-up".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for image in ["busybox", "pause"] {
            let archive = images.join(format!("{image}.oci.tar"));
            let out = c
                .ctr(&["images", "import", "--snapshotter", "native"])
                .arg(&archive)
                .output()
                .map_err(|e| format!("ctr: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "ctr -n k8s.io images import {}: {}",
                    archive.display(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        // the CRI plugin sees both images (its image store follows containerd's events)
        let endpoint = c.endpoint.clone();
        block_on(async move {
            let cri = connect(&endpoint).await?;
            let deadline = Instant::now() + Duration::from_secs(30);
            for image in [BUSYBOX_IMAGE, PAUSE_IMAGE] {
                loop {
                    let spec = v1::ImageSpec {
                        image: image.into(),
                        ..Default::default()
                    };
                    match cri.image_status(spec, false).await {
                        Ok(r) if r.image.is_some() => break,
                        Ok(_) | Err(_) if Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(100)).await
                        }
                        Ok(_) => return Err(format!("CRI does not list the image {image}")),
                        Err(e) => return Err(format!("CRI ImageStatus {image}: {e}")),
                    }
                }
            }
            Ok::<_, String>(())
        })?;
        Ok(c)
    }

    /// `ctr --address <socket> -n k8s.io ARGS…`
    pub fn ctr(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(which("ctr").expect("checked"));
        cmd.arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io"])
            .args(args);
        cmd
    }

    /// A CRI client on this containerd (async).
    pub async fn cri(&self) -> CriClient {
        connect(&self.endpoint).await.expect("CRI connection")
    }

    /// Stops and removes every sandbox and container labelled with `node` (the pods of one
    /// test's agent). Failures are printed, not raised: this runs in `Drop`.
    pub fn remove_node_pods(&self, node: &str) {
        let endpoint = self.endpoint.clone();
        let selector = HashMap::from([(NODE_LABEL.to_string(), node.to_string())]);
        let res = block_on(async move { remove_pods(&endpoint, Some(selector)).await });
        if let Err(e) = res {
            eprintln!("containerd: removing the pods of node {node}: {e}");
        }
    }

    /// How many sandboxes and containers labelled with `node` containerd still has.
    pub fn node_objects(&self, node: &str) -> (usize, usize) {
        let endpoint = self.endpoint.clone();
        let selector = HashMap::from([(NODE_LABEL.to_string(), node.to_string())]);
        block_on(async move {
            let cri = connect(&endpoint).await.expect("CRI");
            let sandboxes = cri
                .list_pod_sandbox(Some(v1::PodSandboxFilter {
                    label_selector: selector.clone(),
                    ..Default::default()
                }))
                .await
                .expect("ListPodSandbox");
            let containers = cri
                .list_containers(Some(v1::ContainerFilter {
                    label_selector: selector,
                    ..Default::default()
                }))
                .await
                .expect("ListContainers");
            (sandboxes.len(), containers.len())
        })
    }

    /// Stops containerd and deletes its directory (see the module doc).
    pub fn shutdown(&self) {
        if !self.endpoint.is_empty() && self.socket.exists() {
            let endpoint = self.endpoint.clone();
            let res = block_on(async move {
                tokio::time::timeout(Duration::from_secs(60), remove_pods(&endpoint, None))
                    .await
                    .unwrap_or_else(|_| Err("timed out".into()))
            });
            if let Err(e) = res {
                eprintln!("containerd: removing every pod at exit: {e}");
            }
        }
        teardown(&self.dir, self.pid);
    }
}

/// Stops then removes every sandbox matching `selector` (all if `None`), then any container
/// left without one.
async fn remove_pods(
    endpoint: &str,
    selector: Option<HashMap<String, String>>,
) -> Result<(), String> {
    let cri = connect(endpoint).await?;
    let filter = selector.clone().map(|label_selector| v1::PodSandboxFilter {
        label_selector,
        ..Default::default()
    });
    let sandboxes = cri
        .list_pod_sandbox(filter)
        .await
        .map_err(|e| e.to_string())?;
    let mut errors = Vec::new();
    for sb in &sandboxes {
        if let Err(e) = cri.stop_pod_sandbox(&sb.id).await {
            errors.push(e.to_string());
        }
        if let Err(e) = cri.remove_pod_sandbox(&sb.id).await {
            errors.push(e.to_string());
        }
    }
    let filter = selector.map(|label_selector| v1::ContainerFilter {
        label_selector,
        ..Default::default()
    });
    for c in cri
        .list_containers(filter)
        .await
        .map_err(|e| e.to_string())?
    {
        let _ = cri.stop_container(&c.id, 0).await;
        if let Err(e) = cri.remove_container(&c.id).await {
            if !e.is_not_found() {
                errors.push(e.to_string());
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn alive(pid: i32) -> bool {
    pid > 0
        && unsafe { libc::kill(pid, 0) } == 0
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'))
}

/// Stops containerd (SIGTERM, then SIGKILL after 10 s), kills any process still naming the
/// directory (shims), unmounts what is mounted under it and deletes it.
fn teardown(dir: &Path, pid: i32) {
    if alive(pid) {
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            reap(pid);
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        reap(pid);
    }
    let marker = dir.to_string_lossy().into_owned();
    for p in processes_naming(&marker) {
        unsafe { libc::kill(p, libc::SIGKILL) };
        reap(p);
    }
    for m in mounts_under(dir) {
        let c = std::ffi::CString::new(m.clone()).expect("no NUL in a mount point");
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            eprintln!(
                "containerd: cannot unmount {m}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    if let Err(e) = std::fs::remove_dir_all(dir) {
        eprintln!("containerd: cannot remove {}: {e}", dir.display());
    }
}

fn reap(pid: i32) {
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
}

/// PIDs of live processes whose command line contains `marker`.
pub fn processes_naming(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if alive(pid) && String::from_utf8_lossy(&cmdline).contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// Mount points under `dir`, deepest first (from /proc/self/mountinfo; octal escapes
/// decoded).
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut v: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount)
        .filter(|m| m == &prefix || m.starts_with(&format!("{prefix}/")))
        .collect();
    v.sort_by_key(|m| std::cmp::Reverse(m.len()));
    v.dedup();
    v
}

fn unescape_mount(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            if let Ok(n) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(n);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Tears down the directories of test processes that no longer exist (killed before their
/// exit handler ran).
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(DIR_PREFIX) {
            continue;
        }
        let dir = e.path();
        let owner: i32 = std::fs::read_to_string(dir.join("owner.pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        if alive(owner) {
            continue;
        }
        let pid: i32 = std::fs::read_to_string(dir.join("containerd.pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        let _ = writeln!(
            std::io::stderr(),
            "containerd: sweeping {} left by a test process that died",
            dir.display()
        );
        // a containerd still running removes its pods itself
        let socket = dir.join("containerd.sock");
        if alive(pid) && socket.exists() {
            let endpoint = format!("unix://{}", socket.display());
            let _ = block_on(async move {
                tokio::time::timeout(Duration::from_secs(60), remove_pods(&endpoint, None)).await
            });
        }
        teardown(&dir, pid);
    }
}
