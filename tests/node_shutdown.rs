//! Graceful node shutdown against the real control plane (`tests/support/real_cluster.rs`),
//! on the embedded runtime: the test starts its own node agent (`RealCluster::agent`) so it
//! can shut that node down with SIGTERM (the agent's node shutdown trigger with
//! `--stop-pods-on-exit`) and read the outcome from the API server as the cluster admin.
//! Behaviour NS-01, NS-04, NS-05, NS-07, NS-09, NS-11.

mod support;

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, PostParams};
use support::agent::cli;
use support::real_cluster::RealCluster;

const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
const NODE: &str = "node-shutdown";

/// A pod on `NODE` whose container ignores SIGTERM, so only the grace period ends it.
fn stubborn_pod(name: &str, ns: &str, grace_s: i64, priority_class: Option<&str>) -> Pod {
    let class = priority_class.map_or(String::new(), |c| format!("priorityClassName: {c}\n  "));
    serde_yaml::from_str(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  nodeName: {NODE}\n  {class}automountServiceAccountToken: false\n  terminationGracePeriodSeconds: {grace_s}\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, \"trap '' TERM; while true; do sleep 1; done\"]\n"
    ))
    .unwrap()
}

fn is_running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// When the pod's container ended (`state.terminated.finishedAt`).
fn finished_at(p: &Pod) -> SystemTime {
    let t = p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .unwrap_or_else(|| panic!("not terminated: {:?}", p.status))
        .finished_at
        .clone()
        .expect("finishedAt")
        .0;
    SystemTime::UNIX_EPOCH + Duration::from_secs(t.as_second() as u64)
}

fn assert_ended_by_the_shutdown(p: &Pod) {
    let s = p.status.as_ref().unwrap();
    let name = p.metadata.name.as_deref().unwrap();
    assert_eq!(s.phase.as_deref(), Some("Failed"), "{name}");
    assert_eq!(s.reason.as_deref(), Some("Terminated"), "{name}");
    assert_eq!(s.message.as_deref(), Some(MESSAGE), "{name}");
    let dt = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap_or_else(|| panic!("{name}: no DisruptionTarget in {:?}", s.conditions));
    assert_eq!(dt.status, "True", "{name}");
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"), "{name}");
    assert_eq!(dt.message.as_deref(), Some(MESSAGE), "{name}");
}

#[test]
fn a_node_shutdown_stops_normal_pods_within_their_budget_then_critical_pods_then_exits() {
    let Some(c) = RealCluster::shared() else {
        return;
    };
    // 20 s in all: 10 s for non-critical pods, then 10 s for critical ones
    let mut agent = c.agent(
        NODE,
        &[
            "--stop-pods-on-exit",
            "always",
            "--shutdown-grace-period",
            "20s",
            "--shutdown-grace-period-critical-pods",
            "10s",
        ],
    );
    let admin = c.admin();
    admin.wait_node_ready(NODE);
    let normal = stubborn_pod("shut-normal", "default", 120, None);
    let critical = stubborn_pod(
        "shut-critical",
        "kube-system",
        3,
        Some("system-node-critical"),
    );
    for (ns, p) in [("default", &normal), ("kube-system", &critical)] {
        admin
            .run(admin.api::<Pod>(ns).create(&PostParams::default(), p))
            .unwrap();
    }
    for (ns, name) in [("default", "shut-normal"), ("kube-system", "shut-critical")] {
        admin.wait_for(&format!("{name} Running"), 90, |k| {
            let p = k.run(k.api::<Pod>(ns).get(name)).ok()?;
            is_running(&p).then_some(())
        });
    }
    let signalled = SystemTime::now();
    unsafe {
        libc::kill(agent.pid() as i32, libc::SIGTERM);
    }
    let ready = admin.wait_for("the node reports it is shutting down", 15, |k| {
        let n = k.run(k.all::<Node>().get(NODE)).ok()?;
        let ready = n
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "False").then_some(ready)
    });
    assert!(
        ready
            .message
            .as_deref()
            .is_some_and(|m| m.contains("node is shutting down")),
        "{ready:?}"
    );
    let exit = agent.wait_exit(60);
    assert!(exit.success(), "the agent exits cleanly: {exit:?}");
    let normal = admin
        .run(admin.api::<Pod>("default").get("shut-normal"))
        .unwrap();
    let critical = admin
        .run(admin.api::<Pod>("kube-system").get("shut-critical"))
        .unwrap();
    assert_ended_by_the_shutdown(&normal);
    assert_ended_by_the_shutdown(&critical);
    let normal_done = finished_at(&normal);
    let critical_done = finished_at(&critical);
    // the normal pod had 10 s (not its own 120 s); finishedAt is in whole seconds
    let normal_took = normal_done
        .duration_since(signalled - Duration::from_secs(1))
        .unwrap_or_default();
    assert!(
        normal_took >= Duration::from_secs(9) && normal_took < Duration::from_secs(60),
        "the normal pod stopped {normal_took:?} after SIGTERM"
    );
    // the critical pod was killed only after the normal one stopped, with its own 3 s
    let after = critical_done
        .duration_since(normal_done)
        .unwrap_or_else(|_| panic!("the critical pod stopped before the normal one"));
    assert!(
        after >= Duration::from_secs(2),
        "the critical pod stopped {after:?} after the normal one"
    );
    // the kubelet's event on the node (node events live in `default`)
    let params = ListParams::default().fields(&format!("involvedObject.name={NODE}"));
    let events = admin
        .run(admin.api::<Event>("default").list(&params))
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("Shutdown")
                && e.message.as_deref() == Some("Shutdown manager detected shutdown event")
                && e.type_.as_deref() == Some("Normal")),
        "{:?}",
        events
            .iter()
            .map(|e| (&e.reason, &e.message))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_shutdown_grace_period_without_stopping_pods_on_exit_is_refused_naming_the_flags() {
    let out = cli(&[
        "run",
        "--container-runtime-endpoint",
        "unix:///nonexistent/cri.sock",
        "--shutdown-grace-period",
        "30s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--shutdown-grace-period shapes the node shutdown on SIGTERM")
            && err.contains("pass --stop-pods-on-exit always"),
        "{err}"
    );
}

#[test]
fn a_critical_pods_budget_above_the_shutdown_grace_period_is_refused_naming_both_flags() {
    let out = cli(&[
        "run",
        "--shutdown-grace-period",
        "10s",
        "--shutdown-grace-period-critical-pods",
        "30s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--shutdown-grace-period-critical-pods (30 s) must not exceed")
            && err.contains("--shutdown-grace-period (10 s)"),
        "{err}"
    );
}
