//! Issue 3 acceptance: static pods run as real processes on the embedded runtime over a real
//! CRI socket, driven through the real `ledgerlet run` binary and observed through its HTTP
//! endpoints and ledger. Timings are shortened with flags (CrashLoopBackOff starts at 1 s
//! here; the pure core pins the 10 s default), and every timing assertion reads the times
//! recorded in the ledger, never the wall clock.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use ledgerlet::core::runtime_status::ContainerState;
use ledgerlet::ledger::{Event, Record, Time};
use support::agent::{processes_with, Agent};

fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let s = p.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

fn condition(p: &Pod, t: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

/// A container that exits 1 on its first run, 0 on its second, then sleeps.
fn flaky_manifest(name: &str, policy: &str, state_dir: &std::path::Path, marker: &str) -> String {
    let f = state_dir.join(format!("{name}.count"));
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: busybox
      command:
        - sh
        - -c
        - |
          n=$(cat {f} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {f}
          echo "run $n"
          if [ "$n" -eq 1 ]; then exit 1; fi
          if [ "$n" -eq 2 ]; then exit 0; fi
          exec sleep 3600 # {marker}
"#,
        f = f.display()
    )
}

#[test]
fn restart_policies_always_onfailure_never_give_restart_counts_2_1_0() {
    let agent = Agent::start(&[]);
    let state = agent.root.path().join("state-files");
    std::fs::create_dir_all(&state).unwrap();
    let marker = format!("ledgerlet-test-{}", std::process::id());
    for (name, policy) in [
        ("always", "Always"),
        ("onfailure", "OnFailure"),
        ("never", "Never"),
    ] {
        agent.write_manifest(
            &format!("{name}.yaml"),
            &flaky_manifest(name, policy, &state, &marker),
        );
    }
    let expect = [
        ("always", 2, "Running"),
        ("onfailure", 1, "Succeeded"),
        ("never", 0, "Failed"),
    ];
    for (name, restarts, want_phase) in expect {
        agent.wait_for(
            &format!("{name}: phase {want_phase}, restarts {restarts}"),
            60,
            |a| {
                let p = a.pod(name)?;
                let c = container(&p, "main")?;
                let running_ok = want_phase != "Running" || c.state.as_ref()?.running.is_some();
                (phase(&p) == want_phase && c.restart_count == restarts && running_ok).then_some(())
            },
        );
    }
    let p = agent.pod("never").unwrap();
    let t = container(&p, "main")
        .unwrap()
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap();
    assert_eq!(t.exit_code, 1);
    let p = agent.pod("onfailure").unwrap();
    let c = container(&p, "main").unwrap();
    assert_eq!(
        c.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );
    assert_eq!(
        c.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1,
        "lastState keeps the failed run"
    );
}

fn init_manifest(name: &str, policy: &str, init_exit: i32) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  initContainers:
    - name: first
      image: busybox
      command: ["sh", "-c", "echo first; exit 0"]
    - name: second
      image: busybox
      command: ["sh", "-c", "echo second; exit {init_exit}"]
  containers:
    - name: app
      image: busybox
      command: ["sh", "-c", "echo app; exit 0"]
"#
    )
}

#[test]
fn init_containers_succeed_under_never_and_fail_under_always_and_never() {
    let agent = Agent::start(&[]);
    agent.write_manifest("ok.yaml", &init_manifest("init-ok", "Never", 0));
    agent.write_manifest(
        "bad-always.yaml",
        &init_manifest("init-bad-always", "Always", 3),
    );
    agent.write_manifest(
        "bad-never.yaml",
        &init_manifest("init-bad-never", "Never", 3),
    );

    agent.wait_for("init-ok Succeeded and Initialized", 60, |a| {
        let p = a.pod("init-ok")?;
        (phase(&p) == "Succeeded" && condition(&p, "Initialized").as_deref() == Some("True"))
            .then_some(())
    });
    agent.wait_for("init-bad-never Failed", 60, |a| {
        let p = a.pod("init-bad-never")?;
        (phase(&p) == "Failed").then_some(())
    });
    let p = agent.wait_for("init-bad-always restarting its init container", 60, |a| {
        let p = a.pod("init-bad-always")?;
        (container(&p, "second")?.restart_count >= 2).then_some(p)
    });
    assert_eq!(phase(&p), "Pending");
    let app = container(&p, "app").unwrap();
    assert_eq!(
        app.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("PodInitializing")
    );
    // the init container restarts with backoff: its starts are spaced by growing delays
    let runs = instances(&agent.ledger(), "init-bad-always", "second");
    assert!(runs.len() >= 3, "{runs:?}");
    let waits: Vec<u64> = runs
        .windows(2)
        .map(|w| w[1].1.since(w[0].2.unwrap()).as_millis() as u64)
        .collect();
    assert!(
        waits[1] >= 1000,
        "the init container restarts with backoff: {waits:?}"
    );
    agent.assert_ledger_replays_to_state();
}

/// Each instance of `container` of pod `pod` (name without the node suffix) with its start
/// and exit times, as the runtime reported them in the ledger, ordered by start.
fn instances(records: &[Record], pod: &str, container: &str) -> Vec<(String, Time, Option<Time>)> {
    let mut seen: std::collections::BTreeMap<String, (Time, Option<Time>)> = Default::default();
    let prefix = format!("{pod}-");
    for r in records {
        if let Event::RuntimeStatusObserved(o) = &r.event {
            let of_pod = o.status.iter().filter(|s| s.name.starts_with(&prefix));
            for c in of_pod.flat_map(|s| s.containers.iter()) {
                if c.name != container {
                    continue;
                }
                if let Some(started) = c.started_at {
                    let e = seen.entry(c.id.clone()).or_insert((started, None));
                    if c.state == ContainerState::Exited {
                        e.1 = c.finished_at;
                    }
                }
            }
        }
    }
    let mut v: Vec<_> = seen.into_iter().map(|(id, (s, f))| (id, s, f)).collect();
    v.sort_by_key(|(_, s, _)| *s);
    v
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
    let agent = Agent::start(&[]);
    let marker = format!("ledgerlet-grace-{}", std::process::id());
    agent.write_manifest(
        "polite.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: polite
spec:
  terminationGracePeriodSeconds: 30
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done # {marker}-polite"]
"#
        ),
    );
    agent.write_manifest(
        "stubborn.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: stubborn
spec:
  terminationGracePeriodSeconds: 3
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done # {marker}-stubborn"]
"#
        ),
    );
    for name in ["polite", "stubborn"] {
        agent.wait_for(&format!("{name} running"), 60, |a| {
            let p = a.pod(name)?;
            container(&p, "main")?
                .state
                .as_ref()?
                .running
                .as_ref()
                .map(|_| ())
        });
    }
    agent.remove_manifest("polite.yaml");
    agent.remove_manifest("stubborn.yaml");
    agent.wait_for("both pods gone", 60, |a| {
        (a.pod("polite").is_none()
            && a.pod("stubborn").is_none()
            && processes_with(&marker).is_empty())
        .then_some(())
    });
    let records = agent.ledger();
    let exit = |name: &str| -> (i32, Time, Time) {
        records
            .iter()
            .find_map(|r| match &r.event {
                Event::RuntimeStatusObserved(o) => o
                    .status
                    .iter()
                    .flat_map(|s| s.containers.iter())
                    .find(|c| {
                        c.state == ContainerState::Exited
                            && o.status.as_ref().is_some_and(|s| s.name.starts_with(name))
                    })
                    .map(|c| (c.exit_code, c.started_at.unwrap(), c.finished_at.unwrap())),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no exit recorded for {name}"))
    };
    let kill_time = |name: &str| -> Time {
        records
            .iter()
            .find_map(|r| match &r.event {
                Event::UpdatePod(u)
                    if u.update_type == ledgerlet::core::update::UpdateType::Kill
                        && u.pod.as_ref().is_some_and(|p| {
                            p.metadata.name.as_deref().unwrap_or("").starts_with(name)
                        }) =>
                {
                    Some(r.at)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no kill recorded for {name}"))
    };
    let (code, _, finished) = exit("polite");
    assert_eq!(code, 0, "exits on SIGTERM");
    assert!(finished.since(kill_time("polite")) < Duration::from_secs(5));
    let (code, _, finished) = exit("stubborn");
    assert_eq!(code, 137, "killed at the end of its grace period");
    let took = finished.since(kill_time("stubborn"));
    assert!(
        took >= Duration::from_millis(2_900) && took < Duration::from_secs(8),
        "stubborn was killed {took:?} after the kill (grace 3 s)"
    );
    agent.assert_ledger_replays_to_state();
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
