//! Graceful node shutdown against the real control plane (`tests/support/real_cluster.rs`),
//! on the embedded runtime: the test starts its own node agent (`RealCluster::agent`) so it
//! can shut that node down with SIGTERM (the agent's node shutdown trigger with
//! `--stop-pods-on-exit`) and read the outcome from the API server as the cluster admin.
//! The same shutdown on containerd is `tests/node_shutdown_containerd.rs`; both share the
//! pods and the checks of `tests/support/node_shutdown.rs`. Behaviour NS-01, NS-04, NS-05,
//! NS-07, NS-09, NS-11.

mod support;

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use support::agent::cli;
use support::node_shutdown::{
    assert_ended_by_the_shutdown, assert_normal_then_critical, assert_shutdown_event_on_the_node,
    is_running, stubborn_pod, wait_node_shutting_down,
};
use support::real_cluster::RealCluster;

const NODE: &str = "node-shutdown";

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
    let normal = stubborn_pod(NODE, "busybox", "shut-normal", "default", 120, None);
    let critical = stubborn_pod(
        NODE,
        "busybox",
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
    wait_node_shutting_down(&admin, NODE, 15);
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
    // the normal pod had 10 s (not its own 120 s); the critical one then its own 3 s
    assert_normal_then_critical(
        signalled,
        &normal,
        Duration::from_secs(10),
        &critical,
        Duration::from_secs(3),
    );
    assert_shutdown_event_on_the_node(&admin, NODE);
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
