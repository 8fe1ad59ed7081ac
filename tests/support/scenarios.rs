//! The issue-3 acceptance scenarios, written once and run on every runtime: the embedded
//! runtime (`tests/run_pods.rs`) and containerd + runc (`tests/containerd.rs`). Each takes a
//! [`Runtime`], starts the real agent on it, writes static pod manifests, and asserts on
//! `/pods` and on the runtime's own times in the ledger (never the wall clock).
//!
//! The manifests are the same on both runtimes: host network (containerd here has no CNI),
//! the runtime's busybox image, and a `hostPath` mounted at its own path where a container
//! keeps state on the host (the only volume the embedded runtime can honour).
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use ledgerlet::core::record::{Event, Record, Time};
use ledgerlet::core::runtime_status::ContainerState;

use super::agent::{processes_with, Agent};
use super::containerd::{Containerd, BUSYBOX_IMAGE};

/// The container runtime a scenario runs on.
#[derive(Clone, Copy, Debug)]
pub enum Runtime {
    /// ledgerlet's embedded runtime (host processes), one per agent.
    Embedded,
    /// The test binary's private containerd, shared by the agents (isolated by node name).
    Containerd(&'static Containerd),
}

impl Runtime {
    /// The test binary's containerd, or `None` (test skipped) when it is not available
    /// outside CI; under `CI=true` an unavailable containerd fails the test.
    pub fn containerd(test: &str) -> Option<Runtime> {
        Containerd::shared_or_skip(test).map(Runtime::Containerd)
    }

    /// The workload image (`image:` of every container).
    pub fn image(&self) -> &'static str {
        match self {
            Runtime::Embedded => "busybox",
            Runtime::Containerd(_) => BUSYBOX_IMAGE,
        }
    }

    /// Starts an agent on this runtime. `node` names it on a shared runtime (the embedded
    /// runtime keeps the harness' `test-node`).
    pub fn start_agent(&self, node: &str, extra: &[&str]) -> TestAgent {
        let agent = match self {
            Runtime::Embedded => Agent::start(extra),
            Runtime::Containerd(c) => {
                let mut flags = vec![
                    "--container-runtime-endpoint",
                    c.endpoint.as_str(),
                    "--node-name",
                    node,
                ];
                flags.extend_from_slice(extra);
                Agent::start(&flags)
            }
        };
        TestAgent {
            agent: Some(agent),
            runtime: *self,
        }
    }
}

/// An agent on a [`Runtime`]. Dropping it kills the agent, then (on containerd) removes
/// every sandbox and container of its node, so no test leaves containers behind.
pub struct TestAgent {
    agent: Option<Agent>,
    /// The runtime it runs on.
    pub runtime: Runtime,
}

impl Deref for TestAgent {
    type Target = Agent;
    fn deref(&self) -> &Agent {
        self.agent.as_ref().expect("agent")
    }
}

impl DerefMut for TestAgent {
    fn deref_mut(&mut self) -> &mut Agent {
        self.agent.as_mut().expect("agent")
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        if let Some(mut a) = self.agent.take() {
            a.kill();
            if let Runtime::Containerd(c) = self.runtime {
                c.remove_node_pods(&a.node_name);
            }
            // a failed test may leave a pod's tmpfs (emptyDir medium Memory) mounted
            for m in super::containerd::mounts_under(a.root.path()) {
                let c = std::ffi::CString::new(m).expect("no NUL");
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

pub fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

pub fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let s = p.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

pub fn condition(p: &Pod, t: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

/// The waiting reason of a container, if it is waiting.
pub fn waiting_reason(p: &Pod, name: &str) -> Option<String> {
    container(p, name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// A container that exits 1 on its first run, 0 on its second, then sleeps; it counts its
/// runs in a file of `state_dir` (a hostPath at its own path).
pub fn flaky_manifest(
    name: &str,
    policy: &str,
    state_dir: &std::path::Path,
    marker: &str,
    image: &str,
) -> String {
    let f = state_dir.join(format!("{name}.count"));
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  hostNetwork: true
  volumes:
    - name: state
      hostPath:
        path: {dir}
        type: Directory
  containers:
    - name: main
      image: {image}
      volumeMounts:
        - name: state
          mountPath: {dir}
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
        f = f.display(),
        dir = state_dir.display()
    )
}

/// Restart policies: exit 1, then 0, then sleep → restart counts 2/1/0 and phases
/// Running/Succeeded/Failed.
pub fn restart_policies(rt: Runtime, node: &str) {
    let agent = rt.start_agent(node, &[]);
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
            &flaky_manifest(name, policy, &state, &marker, rt.image()),
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
    assert_eq!(t.reason.as_deref(), Some("Error"), "{t:?}");
    let p = agent.pod("onfailure").unwrap();
    let c = container(&p, "main").unwrap();
    let t = c.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(t.exit_code, 0);
    assert_eq!(t.reason.as_deref(), Some("Completed"), "{t:?}");
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

pub fn init_manifest(name: &str, policy: &str, init_exit: i32, image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  hostNetwork: true
  initContainers:
    - name: first
      image: {image}
      command: ["sh", "-c", "echo first; exit 0"]
    - name: second
      image: {image}
      command: ["sh", "-c", "echo second; exit {init_exit}"]
  containers:
    - name: app
      image: {image}
      command: ["sh", "-c", "echo app; exit 0"]
"#
    )
}

/// Init containers: succeed under Never; a failing one fails the pod under Never and
/// restarts with backoff under Always while the app container waits in PodInitializing.
pub fn init_containers(rt: Runtime, node: &str) {
    let agent = rt.start_agent(node, &[]);
    let image = rt.image();
    agent.write_manifest("ok.yaml", &init_manifest("init-ok", "Never", 0, image));
    agent.write_manifest(
        "bad-always.yaml",
        &init_manifest("init-bad-always", "Always", 3, image),
    );
    agent.write_manifest(
        "bad-never.yaml",
        &init_manifest("init-bad-never", "Never", 3, image),
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
    assert_eq!(
        waiting_reason(&p, "app").as_deref(),
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
pub fn instances(
    records: &[Record],
    pod: &str,
    container: &str,
) -> Vec<(String, Time, Option<Time>)> {
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

/// Graceful deletion: removing the manifests of a pod that exits on SIGTERM and of one that
/// ignores it stops the first at once (exit 0) and kills the second at the end of its 3 s
/// grace period (exit 137).
pub fn graceful_deletion(rt: Runtime, node: &str) {
    let agent = rt.start_agent(node, &[]);
    let image = rt.image();
    let marker = format!("ledgerlet-grace-{}-{node}", std::process::id());
    agent.write_manifest(
        "polite.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: polite
spec:
  terminationGracePeriodSeconds: 30
  hostNetwork: true
  containers:
    - name: main
      image: {image}
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
  hostNetwork: true
  containers:
    - name: main
      image: {image}
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
    // both containers' processes are visible on the host (the check below can fail)
    agent.wait_for("both processes visible", 10, |_| {
        (processes_with(&format!("{marker}-polite")).len() == 1
            && processes_with(&format!("{marker}-stubborn")).len() == 1)
            .then_some(())
    });
    agent.remove_manifest("polite.yaml");
    agent.remove_manifest("stubborn.yaml");
    let exit_in = |records: &[Record], name: &str| -> Option<(i32, Time, Time)> {
        records.iter().find_map(|r| match &r.event {
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
    };
    // The pods leave /pods when their manifests go; the processes end within the grace
    // period; the agent records the exits when it sees them.
    let records = agent.wait_for("both pods gone and their exits recorded", 60, |a| {
        if a.pod("polite").is_some() || a.pod("stubborn").is_some() {
            return None;
        }
        if !processes_with(&marker).is_empty() {
            return None;
        }
        let records = a.ledger();
        (exit_in(&records, "polite").is_some() && exit_in(&records, "stubborn").is_some())
            .then_some(records)
    });
    let exit = |name: &str| -> (i32, Time, Time) {
        exit_in(&records, name).unwrap_or_else(|| {
            let seen: Vec<String> = records
                .iter()
                .filter_map(|r| match &r.event {
                    Event::RuntimeStatusObserved(o)
                        if o.uid.as_str().is_empty()
                            || o.status.as_ref().is_some_and(|s| s.name.starts_with(name)) =>
                    {
                        Some(format!("{} {:?}", r.seq, o.status))
                    }
                    Event::RuntimeActionFinished(a) => {
                        Some(format!("{} {:?} {:?}", r.seq, a.action, a.outcome))
                    }
                    _ => None,
                })
                .collect();
            panic!(
                "no exit recorded for {name}; observations and actions:\n{}\n--- log:\n{}",
                seen.join("\n"),
                agent.log()
            )
        })
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
    // deleted pods are removed from the runtime (RemoveContainer, RemovePodSandbox)
    if let Runtime::Containerd(c) = rt {
        agent.wait_for("the runtime has nothing left of the node", 30, |_| {
            (c.node_objects(node) == (0, 0)).then_some(())
        });
    }
    agent.assert_ledger_replays_to_state();
}
