//! Graceful node shutdown on containerd against the real control plane: the test binary's
//! cluster (`RealCluster::shared_containerd_with`, `scripts/cluster.sh up --runtime
//! containerd`) runs this build's agent as its node with a shutdown grace period, and the
//! test shuts that node down as systemd would, with SIGTERM to the agent's pid from the
//! cluster directory. The outcome is read from the API server as the cluster admin and from
//! containerd itself (CRI and the containers' cgroups). The node does not come back: this
//! binary holds this one cluster test. Behaviour NS-01, NS-03, NS-04, NS-05, NS-09, NS-11.
//!
//! The test process is a child subreaper (`PR_SET_CHILD_SUBREAPER`) before the cluster
//! starts, so the agent, orphaned when `cluster.sh up` returns, is re-parented to it and
//! its exit status can be read with `waitpid`. `cluster.sh down` at exit copes with an
//! agent that is already gone (its pid file names a dead process).

mod support;

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use ledgerlet::cri::v1;
use support::node_shutdown::{
    assert_ended_by_the_shutdown, assert_normal_then_critical, assert_shutdown_event_on_the_node,
    is_running, stubborn_pod, wait_node_shutting_down,
};
use support::on_containerd::{bound_pod, in_containerd, phase, processes_of, IMAGE};
use support::real_cluster::{Kube, RealCluster};

const NODE: &str = "ctr-shutdown";

/// The cluster, its node with 20 s to shut down, the last 10 s of it for critical pods
/// (`cluster.sh` already runs a containerd node with `--stop-pods-on-exit always`, which
/// NS-07 requires for a grace period; passing it again would be a repeated flag).
fn cluster() -> Option<&'static RealCluster> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER changes only this process's attribute
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl(PR_SET_CHILD_SUBREAPER)");
    RealCluster::shared_containerd_with(
        NODE,
        &[
            "--shutdown-grace-period",
            "20s",
            "--shutdown-grace-period-critical-pods",
            "10s",
        ],
    )
}

/// The node agent's pid (`DIR/pids/ledgerlet.pid`, written by `cluster.sh up`).
fn agent_pid(c: &RealCluster) -> libc::pid_t {
    std::fs::read_to_string(c.dir.join("pids/ledgerlet.pid"))
        .expect("the agent's pid file")
        .trim()
        .parse()
        .expect("a pid")
}

/// Waits (at most `secs`) for the re-parented agent `pid` to exit; its exit code.
fn wait_exit_code(c: &RealCluster, pid: libc::pid_t, secs: u64) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut status = 0;
        // SAFETY: waitpid on a pid this process is the (adoptive) parent of
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(
            r >= 0,
            "waitpid({pid}): {} (not re-parented to the test?)",
            std::io::Error::last_os_error()
        );
        if r == pid {
            assert!(
                libc::WIFEXITED(status),
                "the agent ended by a signal: {status:#x}"
            );
            return libc::WEXITSTATUS(status);
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not exit within {secs} s:\n{}",
            support::on_containerd::agent_log(c)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get(admin: &Kube, ns: &str, name: &str) -> Pod {
    admin.run(admin.api::<Pod>(ns).get(name)).unwrap()
}

/// NS-01, NS-03, NS-04, NS-05, NS-09, NS-11 on containerd: SIGTERM to the node agent turns
/// the node NotReady ("node is shutting down") and rejects a pod created then with
/// `NodeShutdown`; the normal pod is killed within the non-critical budget, the
/// `system-node-critical` one only after it; both end Failed/Terminated with the
/// DisruptionTarget condition; the node records its Shutdown event; the agent exits 0 and
/// the pods' containers and sandboxes are stopped in containerd, no process left in them.
#[test]
fn a_node_shutdown_on_containerd_stops_normal_then_critical_pods_rejects_new_ones_and_exits_0() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let normal = stubborn_pod(NODE, IMAGE, "shut-normal", "default", 120, None);
    // its own 5 s (less than the critical budget) keeps the node shutting down long
    // enough after the normal pod for the late pod below
    let critical = stubborn_pod(
        NODE,
        IMAGE,
        "shut-critical",
        "kube-system",
        5,
        Some("system-node-critical"),
    );
    for (ns, p) in [("default", &normal), ("kube-system", &critical)] {
        admin
            .run(admin.api::<Pod>(ns).create(&PostParams::default(), p))
            .unwrap();
    }
    let mut uids = Vec::new();
    for (ns, name) in [("default", "shut-normal"), ("kube-system", "shut-critical")] {
        let p = admin.wait_for(&format!("{name} Running"), 120, |k| {
            let p = k.run(k.api::<Pod>(ns).get(name)).ok()?;
            is_running(&p).then_some(p)
        });
        uids.push(p.metadata.uid.unwrap());
    }
    // the containers run in containerd, with processes in their cgroups
    for uid in &uids {
        let (sandboxes, containers) = in_containerd(c, uid);
        assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
        assert_eq!(containers.len(), 1, "{containers:?}");
        assert!(
            !processes_of(&containers[0].id).is_empty(),
            "no process found in the cgroup of container {}",
            containers[0].id
        );
    }

    let pid = agent_pid(c);
    let signalled = SystemTime::now();
    // SAFETY: a signal to the node agent's pid, which is alive (the node is Ready)
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    wait_node_shutting_down(&admin, NODE, 15);

    // NS-05: the normal pod holds the shutdown for 10 s: a pod created now is rejected
    let late = bound_pod(NODE, "shut-late", "sleep 3600", 1, "Always");
    admin
        .run(
            admin
                .api::<Pod>("default")
                .create(&PostParams::default(), &late),
        )
        .unwrap();
    let late = admin.wait_for("the late pod rejected", 30, |k| {
        let p = k.run(k.api::<Pod>("default").get("shut-late")).ok()?;
        (phase(&p) == Some("Failed")).then_some(p)
    });
    let s = late.status.as_ref().unwrap();
    assert_eq!(s.reason.as_deref(), Some("NodeShutdown"), "{s:?}");
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: Pod was rejected as the node is shutting down."),
        "{s:?}"
    );
    assert!(
        s.container_statuses
            .iter()
            .flatten()
            .all(|c| c.state.as_ref().is_none_or(|st| st.running.is_none())),
        "the rejected pod never ran: {s:?}"
    );
    let late_uid = late.metadata.uid.clone().unwrap();

    // NS-11: the agent waits for its pods, then exits 0
    assert_eq!(wait_exit_code(c, pid, 60), 0, "the agent's exit code");

    let normal = get(&admin, "default", "shut-normal");
    let critical = get(&admin, "kube-system", "shut-critical");
    assert_ended_by_the_shutdown(&normal);
    assert_ended_by_the_shutdown(&critical);
    // the normal pod had 10 s (not its own 120 s); the critical one then its own 5 s
    assert_normal_then_critical(
        signalled,
        &normal,
        Duration::from_secs(10),
        &critical,
        Duration::from_secs(5),
    );
    assert_shutdown_event_on_the_node(&admin, NODE);

    // containerd: every container exited, every sandbox stopped, nothing left running
    for uid in &uids {
        let (sandboxes, containers) = in_containerd(c, uid);
        for s in &sandboxes {
            assert_eq!(
                s.state,
                v1::PodSandboxState::SandboxNotready as i32,
                "sandbox {} of pod {uid} still ready",
                s.id
            );
        }
        for ct in &containers {
            assert_eq!(
                ct.state,
                v1::ContainerState::ContainerExited as i32,
                "container {} of pod {uid} not exited",
                ct.id
            );
        }
        let ids: Vec<&str> = sandboxes
            .iter()
            .map(|s| s.id.as_str())
            .chain(containers.iter().map(|ct| ct.id.as_str()))
            .collect();
        admin.wait_for("no process left in the pods' cgroups", 30, |_| {
            ids.iter()
                .all(|id| processes_of(id).is_empty())
                .then_some(())
        });
    }
    let (sandboxes, containers) = in_containerd(c, &late_uid);
    assert!(
        sandboxes.is_empty() && containers.is_empty(),
        "the rejected pod got a sandbox or container: {sandboxes:?} {containers:?}"
    );
}
