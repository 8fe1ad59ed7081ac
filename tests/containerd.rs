//! Ledgerlet against a real containerd 1.6 + runc, through the real
//! binary and its CRI client. One private containerd serves this test binary
//! (`tests/support/containerd.rs`); every test runs its own agent with its own node name and
//! removes its pods when it ends. Without containerd the tests are skipped, except under
//! `CI=true` where that is a failure (`scripts/test.sh` installs it as root).

mod support;

use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction};
use ledgerlet::core::record::Event;
use support::scenarios::{self, container, flaky_manifest, phase, waiting_reason, Runtime};

#[test]
fn containerd_restart_policies_always_onfailure_never_give_restart_counts_2_1_0() {
    let Some(rt) = Runtime::containerd("restart policies") else {
        return;
    };
    scenarios::restart_policies(rt, "ctd-restarts");
}

#[test]
fn containerd_init_containers_succeed_under_never_and_fail_under_always_and_never() {
    let Some(rt) = Runtime::containerd("init containers") else {
        return;
    };
    scenarios::init_containers(rt, "ctd-init");
}

#[test]
fn containerd_removing_a_manifest_stops_the_pod_within_its_grace_period() {
    let Some(rt) = Runtime::containerd("graceful deletion") else {
        return;
    };
    scenarios::graceful_deletion(rt, "ctd-grace");
}

/// A pod that runs `sh -c script` on the test image, on the host network.
fn sleeper(name: &str, image: &str, script: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: {image}
      command: ["sh", "-c", "{script}"]
"#
    )
}

/// The failed outcomes of `PullImage` steps for `container` of pod `uid`, in ledger order.
fn pull_failures(
    agent: &support::agent::Agent,
    uid: &str,
    container: &str,
) -> Vec<(String, String)> {
    agent
        .ledger()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::RuntimeActionFinished(a) if a.uid.as_str() == uid => match (a.action, a.outcome)
            {
                (
                    RuntimeAction::PullImage { container: c, .. },
                    ActionOutcome::Failed {
                        reason, message, ..
                    },
                ) if c == container => Some((reason, message)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn containerd_a_missing_image_shows_err_image_pull_then_image_pull_back_off_and_other_pods_run_on()
{
    let Some(rt) = Runtime::containerd("image pull backoff") else {
        return;
    };
    // the failed sync is retried after 1 s (kubelet: 10 s); the image backoff keeps the
    // kubelet's 10 s, so the retry inside it is refused with ImagePullBackOff
    let agent = rt.start_agent("ctd-pull", &["--sync-error-backoff-ms", "1000"]);
    agent.write_manifest("web.yaml", &sleeper("web", rt.image(), "exec sleep 3600"));
    let web_id = agent.wait_for("web running", 60, |a| {
        let p = a.pod("web")?;
        let c = container(&p, "main")?;
        c.state.as_ref()?.running.as_ref()?;
        c.container_id.clone()
    });
    // no registry: a reference on the loopback that nobody serves fails at once
    let absent = "127.0.0.1:1/ledgerlet/absent:1";
    agent.write_manifest(
        "missing.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: missing
spec:
  hostNetwork: true
  containers:
    - name: main
      image: {absent}
      imagePullPolicy: Always
      command: ["sh", "-c", "exit 0"]
"#
        ),
    );
    agent.write_manifest(
        "never.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: never
spec:
  hostNetwork: true
  containers:
    - name: main
      image: {absent}
      imagePullPolicy: Never
"#
        ),
    );
    let mut seen = Vec::new();
    agent.wait_for("missing: ErrImagePull, then ImagePullBackOff", 60, |a| {
        let p = a.pod("missing")?;
        let r = waiting_reason(&p, "main")?;
        if seen.last() != Some(&r) {
            seen.push(r.clone());
        }
        (seen.iter().any(|s| s == "ErrImagePull") && r == "ImagePullBackOff").then_some(())
    });
    let p = agent.pod("missing").unwrap();
    assert_eq!(phase(&p), "Pending");
    let waiting = container(&p, "main")
        .unwrap()
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    let message = waiting.message.as_deref().unwrap_or("");
    assert!(
        message.starts_with(&format!(
            "Back-off pulling image {absent:?}: ErrImagePull: "
        )) && message.contains("failed to pull and unpack image"),
        "the back-off message carries containerd's own pull error: {message}"
    );
    let failures = pull_failures(&agent, p.metadata.uid.as_deref().unwrap(), "main");
    let first = failures.first().expect("a failed pull");
    assert_eq!(first.0, "ErrImagePull", "{failures:?}");
    assert!(
        first.1.contains(absent) && first.1.contains("failed to pull and unpack image"),
        "containerd's pull error is reported: {failures:?}"
    );
    assert!(failures.iter().any(|f| f.0 == "ImagePullBackOff"));

    // pull policy Never with the image absent
    let never = agent.wait_for("never: ErrImageNeverPull", 30, |a| {
        let p = a.pod("never")?;
        (waiting_reason(&p, "main")? == "ErrImageNeverPull").then_some(p)
    });
    assert_eq!(phase(&never), "Pending");

    // the other pod was not touched
    let p = agent.pod("web").unwrap();
    let c = container(&p, "main").unwrap();
    assert!(c.state.as_ref().unwrap().running.is_some());
    assert_eq!(c.restart_count, 0);
    assert_eq!(c.container_id.as_ref(), Some(&web_id));
    assert!(web_id.starts_with("containerd://"), "{web_id}");
}

#[test]
fn containerd_restarting_the_agent_adopts_its_running_containers() {
    let Some(rt) = Runtime::containerd("agent restart") else {
        return;
    };
    let mut agent = rt.start_agent("ctd-adopt", &[]);
    let state = agent.root.path().join("state-files");
    std::fs::create_dir_all(&state).unwrap();
    agent.write_manifest(
        "steady.yaml",
        &sleeper("steady", rt.image(), "exec sleep 3600"),
    );
    agent.write_manifest(
        "flaky.yaml",
        &flaky_manifest("flaky", "Always", &state, "adopt", rt.image()),
    );
    let running = |a: &support::agent::Agent, name: &str, restarts: i32| {
        let p = a.pod(name)?;
        let c = container(&p, "main")?;
        let started = c.state.as_ref()?.running.as_ref()?.started_at.clone();
        (c.restart_count == restarts && phase(&p) == "Running")
            .then(|| (c.container_id.clone().unwrap(), started))
    };
    let steady = agent.wait_for("steady running", 60, |a| running(a, "steady", 0));
    let flaky = agent.wait_for("flaky running after 2 restarts", 60, |a| {
        running(a, "flaky", 2)
    });

    // SIGTERM: with an external runtime the pods keep running
    let status = agent.stop();
    assert!(status.success(), "{status}");
    assert!(
        !agent.log().contains("all pods stopped"),
        "the agent must not stop containerd's pods on exit"
    );
    agent.restart();
    let steady2 = agent.wait_for("steady adopted", 60, |a| running(a, "steady", 0));
    let flaky2 = agent.wait_for("flaky adopted", 60, |a| running(a, "flaky", 2));
    assert_eq!(steady2, steady, "the same container, started once");
    assert_eq!(flaky2, flaky, "the same container, restart count continued");
    // a few relists and housekeeping passes later, nothing was started, created or killed
    std::thread::sleep(std::time::Duration::from_secs(3));
    let touched: Vec<String> = agent
        .ledger()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::RuntimeActionFinished(a) => match a.action {
                RuntimeAction::CreateSandbox { .. }
                | RuntimeAction::CreateContainer { .. }
                | RuntimeAction::StartContainer { .. }
                | RuntimeAction::KillContainer { .. }
                | RuntimeAction::StopSandbox { .. } => Some(format!("{:?}", a.action)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert!(
        touched.is_empty(),
        "the restarted agent touched: {touched:?}"
    );
    assert_eq!(running(&agent, "steady", 0), Some(steady));
    assert_eq!(running(&agent, "flaky", 2), Some(flaky));
    agent.assert_ledger_replays_to_state();
}

#[test]
fn containerd_container_logs_land_at_the_kubelet_path_layout_and_are_readable() {
    let Some(rt) = Runtime::containerd("container logs") else {
        return;
    };
    // a configurable root: not /var/log/pods
    let logs_root = tempfile::tempdir().unwrap();
    let logs_arg = logs_root.path().to_string_lossy().into_owned();
    let agent = rt.start_agent("ctd-logs", &["--pod-logs-dir", &logs_arg]);
    let state = agent.root.path().join("state-files");
    std::fs::create_dir_all(&state).unwrap();
    // run 1 exits 1, run 2 exits 0, run 3 sleeps: three instances, 0.log 1.log 2.log
    agent.write_manifest(
        "talker.yaml",
        &flaky_manifest("talker", "Always", &state, "logs", rt.image())
            .replace(r#"echo "run $n""#, r#"echo "run $n"; echo "err $n" >&2"#),
    );
    let p = agent.wait_for("talker running after 2 restarts", 60, |a| {
        let p = a.pod("talker")?;
        let c = container(&p, "main")?;
        (c.restart_count == 2 && c.state.as_ref()?.running.is_some()).then_some(p)
    });
    let uid = p.metadata.uid.clone().unwrap();
    let dir = logs_root
        .path()
        .join(format!("default_talker-ctd-logs_{uid}"))
        .join("main");
    for n in 0..3 {
        let file = dir.join(format!("{n}.log"));
        let text = agent.wait_for(&format!("{} written", file.display()), 10, |_| {
            let t = std::fs::read_to_string(&file).ok()?;
            (t.lines().count() >= 2).then_some(t)
        });
        // CRI log format: <RFC 3339 time> <stream> <P|F> <text>
        let mut streams = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(4, ' ');
            let (time, stream, tag, msg) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap_or(""),
            );
            assert!(
                time.len() >= 20 && time.contains('T'),
                "{}: {line:?}",
                file.display()
            );
            assert_eq!(tag, "F", "{line:?}");
            streams.push((stream.to_string(), msg.to_string()));
        }
        assert!(
            streams.contains(&("stdout".into(), format!("run {}", n + 1))),
            "{}: {streams:?}",
            file.display()
        );
        assert!(
            streams.contains(&("stderr".into(), format!("err {}", n + 1))),
            "{}: {streams:?}",
            file.display()
        );
    }
    // nothing was written under the harness' own log directory
    assert!(agent.pod_log_dir("talker").is_none());
}

#[test]
fn containerd_empty_dir_and_host_path_volumes_are_mounted_checked_and_removed_with_the_pod() {
    let Some(rt) = Runtime::containerd("volumes") else {
        return;
    };
    let agent = rt.start_agent("ctd-vols", &[]);
    let host = agent.root.path().join("host");
    std::fs::create_dir_all(&host).unwrap();
    let created_dir = host.join("created");
    let created_file = host.join("file.txt");
    let image = rt.image();
    agent.write_manifest(
        "vols.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: vols
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  volumes:
    - name: scratch
      emptyDir: {{}}
    - name: mem
      emptyDir:
        medium: Memory
        sizeLimit: 8Mi
    - name: made
      hostPath:
        path: {created_dir}
        type: DirectoryOrCreate
    - name: file
      hostPath:
        path: {created_file}
        type: FileOrCreate
  initContainers:
    - name: writer
      image: {image}
      command: ["sh", "-c", "echo from-init > /scratch/msg"]
      volumeMounts:
        - {{name: scratch, mountPath: /scratch}}
  containers:
    - name: main
      image: {image}
      command:
        - sh
        - -c
        - |
          cat /scratch/msg
          grep ' /mem ' /proc/mounts
          echo to-host > /made/out
          echo line > /data/file.txt
          echo in-memory > /mem/x
          exec sleep 3600
      volumeMounts:
        - {{name: scratch, mountPath: /scratch, readOnly: true}}
        - {{name: mem, mountPath: /mem}}
        - {{name: made, mountPath: /made}}
        - {{name: file, mountPath: /data/file.txt}}
"#,
            created_dir = created_dir.display(),
            created_file = created_file.display(),
        ),
    );
    // a hostPath whose type check fails: a clear error, and only that pod waits
    let missing = host.join("not-there");
    agent.write_manifest(
        "badvol.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: badvol
spec:
  hostNetwork: true
  volumes:
    - name: data
      hostPath:
        path: {missing}
        type: Directory
  containers:
    - name: main
      image: {image}
      command: ["sleep", "3600"]
      volumeMounts:
        - {{name: data, mountPath: /data}}
"#,
            missing = missing.display()
        ),
    );
    let p = agent.wait_for("vols running", 60, |a| {
        let p = a.pod("vols")?;
        container(&p, "main")?.state.as_ref()?.running.as_ref()?;
        Some(p)
    });
    let uid = p.metadata.uid.clone().unwrap();
    let pod_dir = agent.root.path().join("state/pods").join(&uid);
    let scratch = pod_dir.join("volumes/kubernetes.io~empty-dir/scratch");
    let mem = pod_dir.join("volumes/kubernetes.io~empty-dir/mem");
    // the container's log shows what it saw
    let log = agent.pod_log_dir("vols").unwrap().join("main/0.log");
    let text = agent.wait_for("main's log", 10, |_| {
        let t = std::fs::read_to_string(&log).ok()?;
        t.contains("tmpfs").then_some(t)
    });
    assert!(
        text.contains("from-init"),
        "the init container's file: {text}"
    );
    assert!(
        text.contains("size=8192k"),
        "medium Memory is a sized tmpfs: {text}"
    );
    agent.wait_for("the container's writes on the host", 10, |_| {
        (std::fs::read_to_string(created_dir.join("out")).ok()? == "to-host\n"
            && std::fs::read_to_string(&created_file).ok()? == "line\n"
            && std::fs::read_to_string(mem.join("x")).ok()? == "in-memory\n")
            .then_some(())
    });
    assert_eq!(
        std::fs::read_to_string(scratch.join("msg")).unwrap(),
        "from-init\n"
    );
    assert_eq!(
        support::containerd::mounts_under(&mem),
        vec![mem.to_string_lossy().to_string()]
    );

    // the hostPath type check fails as the kubelet's volume mount does: the FailedMount
    // warning, no sandbox, the container waiting in ContainerCreating
    let mount_failed = format!(
        "MountVolume.SetUp failed for volume \"data\" : hostPath type check failed: {} is not a \
         directory",
        missing.display()
    );
    agent.wait_for("badvol's FailedMount warning", 30, |a| {
        a.ledger_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|r| {
                let e = &r["event"];
                e["action"] == "pod_config_warning"
                    && e["reason"] == "FailedMount"
                    && e["message"] == mount_failed.as_str()
            })
            .then_some(())
    });
    let bad = agent.pod("badvol").expect("badvol");
    assert_eq!(phase(&bad), "Pending");
    assert_eq!(
        waiting_reason(&bad, "main").as_deref(),
        Some("ContainerCreating")
    );
    let bad_uid = bad.metadata.uid.clone().unwrap();
    assert!(
        !agent
            .ledger_text()
            .lines()
            .any(|l| l.contains("\"create_sandbox\"") && l.contains(&bad_uid)),
        "no sandbox for a pod whose volume cannot be set up"
    );

    // the pod goes: its volumes go with it (hostPath contents stay)
    agent.remove_manifest("vols.yaml");
    agent.wait_for("the pod's directory removed", 60, |_| {
        (!pod_dir.exists()).then_some(())
    });
    assert!(support::containerd::mounts_under(&pod_dir).is_empty());
    assert!(created_dir.join("out").is_file());
    // the other pod is still there, still waiting on its volume
    assert!(agent.pod("badvol").is_some());
}

/// The `ledgerlet run …` command of the README's containerd section, as arguments after
/// `ledgerlet run`.
fn readme_containerd_command() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Running on containerd"))
        .expect("README has a 'Running on containerd' section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in the containerd section");
    let line = block.replace("\\\n", " ");
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    assert_eq!(
        words.get(..2),
        Some(&["ledgerlet".to_string(), "run".to_string()][..]),
        "{words:?}"
    );
    words[2..].to_vec()
}

#[test]
fn containerd_the_readme_command_runs_pods_and_says_which_pleg_mode_runs() {
    let Some(rt) = Runtime::containerd("README command") else {
        return;
    };
    let Runtime::Containerd(ctd) = rt else {
        unreachable!()
    };
    let readme = readme_containerd_command();
    let flags: Vec<&str> = readme
        .iter()
        .filter(|w| w.starts_with("--"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        flags,
        ["--container-runtime-endpoint", "--pod-manifest-path"],
        "the test substitutes exactly these flags' values"
    );
    let value = |flag: &str| {
        let i = readme.iter().position(|w| w == flag).unwrap();
        readme[i + 1].clone()
    };
    assert_eq!(
        value("--container-runtime-endpoint"),
        "unix:///run/containerd/containerd.sock"
    );
    // the same command, pointed at the private containerd and the test's manifest directory
    let scratch = tempfile::tempdir().unwrap();
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let manifests_arg = manifests.to_string_lossy().into_owned();
    let args: Vec<String> = readme
        .iter()
        .map(|w| {
            if *w == value("--container-runtime-endpoint") {
                ctd.endpoint.clone()
            } else if *w == value("--pod-manifest-path") {
                manifests_arg.clone()
            } else {
                w.clone()
            }
        })
        .collect();
    let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
    extra.extend(["--node-name", "ctd-readme"]);
    // dropped after the agent, even on a panic
    let _guard = NodePods(ctd, "ctd-readme");
    let agent = support::agent::Agent::start(&extra);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        manifests.join("web.yaml"),
        sleeper(
            "web",
            rt.image(),
            &format!("echo serving; exec httpd -f -p 127.0.0.1:{port} -h /etc"),
        ),
    )
    .unwrap();
    let p = agent.wait_for("web running", 60, |a| {
        let p = a.pod("web")?;
        container(&p, "main")?.state.as_ref()?.running.as_ref()?;
        Some(p)
    });
    assert!(container(&p, "main")
        .unwrap()
        .container_id
        .as_deref()
        .unwrap()
        .starts_with("containerd://"));
    // busybox httpd in the container, on the host network, serves the image's /etc/passwd
    let body = agent.wait_for("the container's HTTP server answers", 20, |_| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        use std::io::{Read, Write};
        s.write_all(b"GET /passwd HTTP/1.0\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    });
    assert!(body.contains("nobody:x:65534"), "{body}");
    // the PLEG says which mode runs: containerd 1.6 has no GetContainerEvents
    let log = agent.log();
    assert!(
        log.contains("PLEG: generic mode") && log.contains("does not implement GetContainerEvents"),
        "{log}"
    );
    assert_eq!(log.matches("PLEG: generic mode").count(), 1, "said once");
    let (_, metrics) = agent.get("/metrics");
    assert!(
        metrics.contains("ledgerlet_pleg_mode{mode=\"generic\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ledgerlet_pleg_mode{mode=\"evented\"} 0"),
        "{metrics}"
    );
}

/// Removes a node's pods from containerd when dropped (for tests that start an `Agent`
/// directly).
struct NodePods(&'static support::containerd::Containerd, &'static str);

impl Drop for NodePods {
    fn drop(&mut self) {
        self.0.remove_node_pods(self.1);
    }
}

#[test]
fn containerd_exit_codes_reasons_and_nanosecond_times_are_parsed() {
    let Some(rt) = Runtime::containerd("status parsing") else {
        return;
    };
    let agent = rt.start_agent("ctd-status", &[]);
    let image = rt.image();
    let pod = |name: &str, extra: &str, script: &str| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
    - name: main
      image: {image}
      command: ["sh", "-c", "{script}"]
{extra}"#
        )
    };
    agent.write_manifest("ok.yaml", &pod("ok", "", "sleep 0.3; exit 0"));
    agent.write_manifest("err.yaml", &pod("err", "", "exit 42"));
    // more than its memory limit: the kernel's OOM killer ends it
    agent.write_manifest(
        "oom.yaml",
        &pod(
            "oom",
            "      resources:\n        limits:\n          memory: 16Mi\n",
            "a=$(head -c 100000000 /dev/zero | tr '\\\\0' x); echo survived",
        ),
    );
    let terminated = |name: &str| {
        agent.wait_for(&format!("{name} terminated"), 60, |a| {
            let p = a.pod(name)?;
            let t = container(&p, "main")?.state.as_ref()?.terminated.clone()?;
            (phase(&p) == "Failed" || phase(&p) == "Succeeded").then_some((phase(&p), t))
        })
    };
    let (ph, t) = terminated("ok");
    assert_eq!(
        (ph.as_str(), t.exit_code, t.reason.as_deref()),
        ("Succeeded", 0, Some("Completed"))
    );
    let (ph, t) = terminated("err");
    assert_eq!(
        (ph.as_str(), t.exit_code, t.reason.as_deref()),
        ("Failed", 42, Some("Error"))
    );
    let (ph, t) = terminated("oom");
    assert_eq!(
        (ph.as_str(), t.exit_code, t.reason.as_deref()),
        ("Failed", 137, Some("OOMKilled")),
        "{t:?}"
    );
    // the runtime's times keep their nanoseconds, and "ok" ran for about 0.3 s
    let records = agent.ledger();
    let runs = scenarios::instances(&records, "ok", "main");
    let (_, started, finished) = runs.last().cloned().expect("ok ran");
    let finished = finished.expect("ok finished");
    let ran = finished.since(started);
    assert!(
        ran >= std::time::Duration::from_millis(250) && ran < std::time::Duration::from_secs(5),
        "{ran:?}"
    );
    assert!(
        started.unix_nanos() % 1_000_000_000 != 0 || finished.unix_nanos() % 1_000_000_000 != 0,
        "nanosecond times: {started:?} {finished:?}"
    );
}

#[test]
fn pl_13_a_containers_exit_comes_from_containerds_task_events_and_probe_execs_do_not_count() {
    let Some(rt) = Runtime::containerd("task exit events") else {
        return;
    };
    let agent = rt.start_agent("ctd-exits", &[]);
    agent.write_manifest(
        "exits.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: exits
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
    - name: main
      image: {}
      command: ["sh", "-c", "sleep 4; exit 3"]
      readinessProbe:
        exec:
          command: ["true"]
        periodSeconds: 1
"#,
            rt.image()
        ),
    );
    let exit_code = agent.wait_for("the container terminated", 60, |a| {
        let p = a.pod("exits")?;
        let c = container(&p, "main")?;
        c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code)
    });
    assert_eq!(exit_code, 3);
    let (code, metrics) = agent.get("/metrics");
    assert_eq!(code, 200);
    let exits: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ledgerlet_pleg_task_exit_events_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the task exit counter");
    // the container's own exit, and once the pod is terminal its sandbox's (stopped by the
    // node); the readiness probe's execs, one a second for four seconds, exited too but are
    // not the container's
    assert!((1.0..=2.0).contains(&exits), "{exits}: {metrics}");
    assert!(agent.log().contains("containerd's task-exit events"));
}
