//! Static pods run as real processes on the embedded runtime over a real
//! CRI socket, driven through the real `ledgerlet run` binary and observed through its HTTP
//! endpoints and ledger. Timings are shortened with flags (CrashLoopBackOff starts at 1 s
//! here; the pure core pins the 10 s default), and every timing assertion reads the times
//! recorded in the ledger, never the wall clock.

//!
//! The restart-policy, init-container and graceful-deletion scenarios live in
//! `tests/support/scenarios.rs` and run on containerd too (`tests/containerd.rs`).

mod support;

use std::time::Duration;

use ledgerlet::core::record::Event;
use support::agent::{processes_with, Agent};
use support::scenarios::{self, container, instances, Runtime};

#[test]
fn restart_policies_always_onfailure_never_give_restart_counts_2_1_0() {
    scenarios::restart_policies(Runtime::Embedded, "test-node");
}

#[test]
fn init_containers_succeed_under_never_and_fail_under_always_and_never() {
    scenarios::init_containers(Runtime::Embedded, "test-node");
}

/// Runs a container that always exits 1 and checks, on the runtime's own times in the
/// ledger, that the waits between an exit and the next start are `expected_ms` (the first
/// restart is immediate), each within `slack_ms`.
fn assert_crash_loop_waits(flags: &[&str], expected_ms: [u64; 4], slack_ms: u64, within_s: u64) {
    let agent = Agent::start(flags);
    agent.write_manifest(
        "crash.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: crash
spec:
  restartPolicy: Always
  containers:
    - name: crasher
      image: busybox
      command: ["sh", "-c", "exit 1"]
"#,
    );
    let p = agent.wait_for("four restarts and CrashLoopBackOff", within_s, |a| {
        let p = a.pod("crash")?;
        let c = container(&p, "crasher")?;
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        (c.restart_count >= 4 && waiting.reason.as_deref() == Some("CrashLoopBackOff")).then_some(p)
    });
    let waiting = container(&p, "crasher")
        .unwrap()
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert!(
        waiting
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("back-off "),
        "{waiting:?}"
    );
    let records = agent.ledger();
    let runs = instances(&records, "crash", "crasher");
    assert!(runs.len() >= 5, "{runs:?}");
    // the wait between each exit and the next start, by the runtime's own clock
    let waits: Vec<u64> = runs
        .windows(2)
        .take(4)
        .map(|w| {
            let exited = w[0].2.expect("an earlier instance has exited");
            w[1].1.since(exited).as_millis() as u64
        })
        .collect();
    for (w, e) in waits.iter().zip(expected_ms) {
        assert!(
            *w >= e && *w < e + slack_ms,
            "waits {waits:?} ms should be about {expected_ms:?}"
        );
    }
    agent.assert_ledger_replays_to_state();
}

#[test]
fn crash_loop_backoff_doubles_between_restarts() {
    // initial 1 s here (the harness' FAST flags), doubling
    assert_crash_loop_waits(&[], [0, 1000, 2000, 4000], 900, 90);
}

#[test]
fn bo_crash_loop_backoff_waits_10_20_40_s_with_the_default_settings() {
    // the kubelet's defaults: 10 s doubling to 300 s (about 75 s of real time)
    assert_crash_loop_waits(
        &[
            "--crash-loop-backoff-initial-ms",
            "10000",
            "--crash-loop-backoff-max-ms",
            "300000",
        ],
        [0, 10_000, 20_000, 40_000],
        2_000,
        150,
    );
}

#[test]
fn removing_a_manifest_stops_the_pod_within_its_grace_period() {
    scenarios::graceful_deletion(Runtime::Embedded, "test-node");
}

#[test]
fn editing_a_manifest_replaces_the_pod_and_an_invalid_one_is_reported_and_ignored() {
    let agent = Agent::start(&[]);
    let v = |n: u32| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: edited
  labels:
    version: "v{n}"
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "while true; do sleep 0.2; done"]
"#
        )
    };
    agent.write_manifest("edited.yaml", &v(1));
    let first = agent.wait_for("v1 running", 60, |a| {
        let p = a.pod("edited")?;
        container(&p, "main")?.state.as_ref()?.running.as_ref()?;
        p.metadata.uid.clone()
    });
    agent.write_manifest("edited.yaml", &v(2));
    let second = agent.wait_for("v2 running with a new UID", 60, |a| {
        let p = a.pod("edited")?;
        let uid = p.metadata.uid.clone()?;
        (uid != first && container(&p, "main")?.state.as_ref()?.running.is_some()).then_some(uid)
    });
    assert_ne!(first, second);
    assert_eq!(agent.pods().len(), 1, "the old pod is gone");

    agent.write_manifest(
        "broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers: []\n",
    );
    let rejected = agent.wait_for("the broken manifest reported", 30, |a| {
        a.ledger().into_iter().find_map(|r| match r.event {
            Event::ManifestRejected(m) => Some(m),
            _ => None,
        })
    });
    assert!(rejected.path.ends_with("broken.yaml"), "{rejected:?}");
    assert!(rejected.error.contains("spec.containers"), "{rejected:?}");
    // the other pod keeps running, untouched
    std::thread::sleep(Duration::from_millis(500));
    let p = agent.pod("edited").unwrap();
    assert_eq!(p.metadata.uid.as_deref(), Some(second.as_str()));
    assert!(container(&p, "main")
        .unwrap()
        .state
        .as_ref()
        .unwrap()
        .running
        .is_some());
}

#[test]
fn sigterm_stops_every_pod_and_leaves_no_process_and_the_ledger_replays_to_the_final_state() {
    let mut agent = Agent::start(&[]);
    let marker = format!("ledgerlet-exit-{}", std::process::id());
    for i in 0..3 {
        agent.write_manifest(
            &format!("p{i}.yaml"),
            &format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  name: p{i}
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "sleep 3600 & wait # {marker}"]
"#
            ),
        );
    }
    agent.wait_for("three pods running", 60, |a| {
        (processes_with(&marker).len() >= 3 && a.pods().len() == 3).then_some(())
    });
    agent.assert_ledger_replays_to_state();

    let status = agent.stop();
    assert!(status.success(), "exit status {status}");
    let left = processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
    assert!(agent.log().contains("all pods stopped"), "{}", agent.log());
}

#[test]
fn an_empty_dir_runs_in_a_private_mount_namespace_as_root_or_is_refused_clearly_and_other_pods_run_on(
) {
    let agent = Agent::start(&[]);
    let shared = agent.root.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    agent.write_manifest(
        "ok.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: same-path
spec:
  volumes:
    - name: shared
      hostPath: {{path: {dir}, type: Directory}}
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "echo hi > {dir}/out; sleep 3600"]
      volumeMounts:
        - {{name: shared, mountPath: {dir}}}
"#,
            dir = shared.display()
        ),
    );
    // the emptyDir shown inside the container at a path of the test's own
    let inside = agent.root.path().join("scratch");
    agent.write_manifest(
        "scratch.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: scratch
spec:
  volumes:
    - name: tmp
      emptyDir: {{}}
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "echo there > {inside}/file; sleep 3600"]
      volumeMounts:
        - {{name: tmp, mountPath: {inside}}}
"#,
            inside = inside.display()
        ),
    );
    if unsafe { libc::geteuid() } == 0 {
        let p = agent.wait_for("scratch running", 60, |a| {
            let p = a.pod("scratch")?;
            container(&p, "main")?.state.as_ref()?.running.as_ref()?;
            Some(p)
        });
        let uid = p.metadata.uid.unwrap();
        let on_host = agent
            .state_dir()
            .join("pods")
            .join(&uid)
            .join("volumes/kubernetes.io~empty-dir/tmp/file");
        agent.wait_for("the file in the emptyDir", 30, |_| {
            (std::fs::read_to_string(&on_host).ok()? == "there\n").then_some(())
        });
        assert!(
            !inside.join("file").exists(),
            "the bind mount stayed in the container's mount namespace"
        );
    } else {
        let p = agent.wait_for("scratch: CreateContainerError", 60, |a| {
            let p = a.pod("scratch")?;
            (scenarios::waiting_reason(&p, "main")? == "CreateContainerError").then_some(p)
        });
        let msg = container(&p, "main")
            .unwrap()
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap()
            .message
            .unwrap();
        assert!(
            msg.contains("embedded runtime") && msg.contains("needs root"),
            "{msg}"
        );
    }
    // a hostPath mounted at its own path works, and that pod runs
    agent.wait_for("same-path running and writing", 60, |a| {
        let p = a.pod("same-path")?;
        container(&p, "main")?.state.as_ref()?.running.as_ref()?;
        (std::fs::read_to_string(shared.join("out")).ok()? == "hi\n").then_some(())
    });
}
