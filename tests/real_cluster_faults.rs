//! The agent as a node of a real control plane (see `tests/support/real_cluster.rs`) when the
//! API server misbehaves: each test puts a fault proxy (`tests/support/fault_proxy.rs`)
//! between its own agent (its own node name, with that node's own client certificate, which
//! the proxy presents upstream) and the real kube-apiserver, and injects one fault: the API
//! unreachable (connections refused and cut), every request answered `500`, every watch cut,
//! or every byte late. The outcome is read from the API server as the cluster admin (who
//! talks to it directly, not through the proxy), from the agent's ledger and from its log.
//!
//! Pods opt out of the service-account token volume (`automountServiceAccountToken: false`)
//! and are bound by `nodeName`.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use kube::api::PostParams;
use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction, StatusSyncOutcome};
use ledgerlet::core::record::Event;
use support::agent::Agent;
use support::fault_proxy::{FaultProxy, Stats};
use support::real_cluster::{Kube, RealCluster};

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared()
}

/// How long each fault lasts.
const OUTAGE: Duration = Duration::from_secs(30);

/// The agent of node `name`, talking to the API server through a fault proxy of its own.
fn agent_via_proxy(c: &RealCluster, name: &str) -> (FaultProxy, Agent) {
    let (proxy, kubeconfig) = FaultProxy::for_node(c, name);
    let agent = Agent::start(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node-name",
        name,
    ]);
    (proxy, agent)
}

/// A pod bound to `node` by `nodeName`, one container running `script`.
fn pod(name: &str, node: &str, script: &str, restart: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": restart,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]
        }
    }))
    .unwrap()
}

/// Creates the pods and returns their UIDs, in order.
fn create(admin: &Kube, pods: &[Pod]) -> Vec<String> {
    let api = admin.api::<Pod>("default");
    pods.iter()
        .map(|p| {
            let created = admin.run(api.create(&PostParams::default(), p)).unwrap();
            created.metadata.uid.unwrap()
        })
        .collect()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

fn main_state(p: &Pod) -> Option<&ContainerState> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "main")?
        .state
        .as_ref()
}

fn running(p: &Pod) -> bool {
    phase(p) == Some("Running") && main_state(p).is_some_and(|s| s.running.is_some())
}

fn exit_code(p: &Pod) -> Option<i32> {
    main_state(p)?.terminated.as_ref().map(|t| t.exit_code)
}

/// The pod `name` as the API server has it.
fn api_pod(admin: &Kube, name: &str) -> Option<Pod> {
    admin
        .run(admin.api::<Pod>("default").get_opt(name))
        .ok()
        .flatten()
}

/// The pod `name` as the agent has it (its own `/pods`, not through the proxy).
fn node_pod(agent: &Agent, name: &str) -> Option<Pod> {
    agent
        .pods()
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
}

/// Waits until the API server shows every pod of `names` Running at the same time (a pod
/// that has exited already means this machine is too slow for the test's timing).
fn wait_all_running(admin: &Kube, names: &[String], secs: u64) {
    admin.wait_for(&format!("{names:?} Running"), secs, |k| {
        let pods: Vec<Option<Pod>> = names.iter().map(|n| api_pod(k, n)).collect();
        for (n, p) in names.iter().zip(&pods) {
            if let Some(code) = p.as_ref().and_then(exit_code) {
                panic!("{n} exited ({code}) before {names:?} were all seen Running");
            }
        }
        pods.iter()
            .all(|p| p.as_ref().is_some_and(running))
            .then_some(())
    });
}

/// Successful `StartContainer`s of pod `uid` in the agent's ledger.
fn starts(agent: &Agent, uid: &str) -> usize {
    agent
        .ledger()
        .iter()
        .filter(|r| {
            matches!(&r.event, Event::RuntimeActionFinished(a)
                if a.uid.as_str() == uid
                    && matches!(a.action, RuntimeAction::StartContainer { .. })
                    && matches!(a.outcome, ActionOutcome::Ok { .. }))
        })
        .count()
}

/// `PodAdded` records of pod `uid` in the agent's ledger.
fn added(agent: &Agent, uid: &str) -> usize {
    agent
        .ledger()
        .iter()
        .filter(|r| matches!(&r.event, Event::PodAdded(c) if c.pod.metadata.uid.as_deref() == Some(uid)))
        .count()
}

/// The agent is up and answering.
fn assert_alive(agent: &Agent) {
    let (status, body) = agent.get("/healthz");
    assert_eq!(status, 200, "/healthz: {body}");
}

/// What [`exits_during_a_fault`] leaves for the test to check further.
struct Outcome {
    /// Dropped (stopped) first, while its API server is still reachable.
    agent: Agent,
    proxy: FaultProxy,
    /// The pods' names and UIDs, in order.
    pods: Vec<(String, String)>,
}

/// The Lease's `renewTime` of node `name`, as JSON text.
fn lease_renewed(admin: &Kube, name: &str) -> Option<String> {
    let lease = admin
        .run(admin.api::<Lease>("kube-node-lease").get_opt(name))
        .ok()??;
    let t = lease.spec?.renew_time?;
    Some(serde_json::to_string(&t).unwrap())
}

/// Runs three `restartPolicy: Never` pods that exit `i` after `5 + i` s, puts `fault` on for
/// [`OUTAGE`] once all three are Running (so they exit during it) and checks that the agent
/// `met` it, that the last exit did not reach the API server during it, that every exit code
/// and phase reaches the API server within 60 s afterwards, that the node renews its Lease
/// again, that no container started twice and that the ledger has the failed status writes.
fn exits_during_a_fault(
    node: &str,
    prefix: &str,
    fault: impl Fn(&FaultProxy),
    met: impl Fn(&Stats, &Stats) -> bool,
) -> Option<Outcome> {
    let c = cluster()?;
    let (proxy, agent) = agent_via_proxy(c, node);
    let admin = c.admin();
    admin.wait_node_ready(node);
    let names: Vec<String> = (0..3).map(|i| format!("{prefix}-{i}")).collect();
    let specs: Vec<Pod> = names
        .iter()
        .enumerate()
        .map(|(i, n)| pod(n, node, &format!("sleep {}; exit {i}", 5 + i), "Never"))
        .collect();
    let uids = create(&admin, &specs);
    wait_all_running(&admin, &names, 60);

    let before = proxy.stats();
    fault(&proxy);
    let started = Instant::now();
    // the containers exit during the fault: the node knows, the API server cannot yet
    agent.wait_for("every container exited on the node", 25, |a| {
        names
            .iter()
            .all(|n| node_pod(a, n).and_then(|p| exit_code(&p)).is_some())
            .then_some(())
    });
    std::thread::sleep(OUTAGE.saturating_sub(started.elapsed()));
    let during = proxy.stats();
    let last = api_pod(&admin, &names[2]).unwrap();
    assert_eq!(
        exit_code(&last),
        None,
        "{}'s exit (7 s after it started, during the fault) reached the API server through \
         the fault: {:?}",
        names[2],
        last.status
    );
    assert!(
        met(&before, &during),
        "the agent never met the fault: before {before:?}, during {during:?}"
    );
    let renewed = lease_renewed(&admin, node);
    proxy.clear();
    let cleared = Instant::now();
    assert_alive(&agent);

    for (i, name) in names.iter().enumerate() {
        let p = admin.wait_for(&format!("{name}'s exit code in the API"), 60, |k| {
            let p = api_pod(k, name)?;
            exit_code(&p).is_some().then_some(p)
        });
        assert_eq!(exit_code(&p), Some(i as i32), "{name}'s exit code");
        let want = if i == 0 { "Succeeded" } else { "Failed" };
        admin.wait_for(&format!("{name} {want}"), 60, |k| {
            (phase(&api_pod(k, name)?) == Some(want)).then_some(())
        });
    }
    eprintln!(
        "{node}: every status reached the API server {:?} after the fault ended",
        cleared.elapsed()
    );
    // the heartbeat is back too (renewed every 10 s)
    admin.wait_for("a Lease renewal after the fault", 30, |k| {
        (lease_renewed(k, node) != renewed).then_some(())
    });
    let pods: Vec<(String, String)> = names.into_iter().zip(uids).collect();
    for (name, uid) in &pods {
        assert_eq!(starts(&agent, uid), 1, "{name} started once");
    }
    // the failed writes of the last pod's status are in the ledger, with the API's answer
    let (name, uid) = &pods[2];
    let failed = failed_status_syncs(&agent, uid);
    assert!(
        !failed.is_empty(),
        "no failed status sync of {name} in the ledger"
    );
    eprintln!(
        "{node}: {} failed status syncs of {name}, the first: {}",
        failed.len(),
        failed[0]
    );
    assert_alive(&agent);
    Some(Outcome { proxy, agent, pods })
}

/// The failed status syncs of pod `uid` in the agent's ledger, each as `CODE MESSAGE`.
fn failed_status_syncs(agent: &Agent, uid: &str) -> Vec<String> {
    agent
        .ledger()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::StatusSyncFinished(f) if f.uid.as_str() == uid => match f.outcome {
                StatusSyncOutcome::Failed { code, message } => Some(format!("{code:?} {message}")),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The agent's log has a WARN or ERROR line of ledgerlet's own containing all of `words`.
fn assert_logged(agent: &Agent, words: &[&str]) {
    let log = agent.log();
    let found = log.lines().any(|l| {
        (l.contains(" WARN ledgerlet") || l.contains(" ERROR ledgerlet"))
            && words.iter().all(|w| l.contains(w))
    });
    assert!(
        found,
        "no warning with {words:?} in the agent's log:\n{}",
        log.lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn with_the_api_unreachable_for_30_s_every_exit_code_reaches_it_afterwards_and_nothing_starts_twice(
) {
    let Some(o) = exits_during_a_fault(
        "faults-unreachable",
        "unreach",
        FaultProxy::unreachable,
        |before, during| during.refused > before.refused && during.cut > before.cut,
    ) else {
        return;
    };
    // what an operator reads: the watch and the heartbeat could not connect
    assert_logged(
        &o.agent,
        &[
            "pod watch failed",
            "client error (Connect)",
            // the proxy refuses by accepting and resetting (RST) at once
            "Connection reset by peer",
        ],
    );
    assert_logged(
        &o.agent,
        &["node write failed", "action=RenewLease", "(Connect)"],
    );
    // which pods' statuses are stale (at info, as the kubelet), and when the outage ended
    let log = o.agent.log();
    assert!(
        log.lines()
            .any(|l| l.contains("pod status not written to the API server")
                && l.contains("pod=default/unreach-")),
        "the failed status writes are logged with their pods"
    );
    // the watch comes back at its next attempt, up to 30 s (+ jitter) after the outage
    // (its backoff doubles from 800 ms, as client-go's reflector's does)
    o.agent
        .wait_for("the recovery of the pod watch in the log", 90, |a| {
            a.log().contains("pod watch working again").then_some(())
        });
    eprintln!("faults-unreachable: {:?}", o.proxy.stats());
}

#[test]
fn after_500s_for_30_s_statuses_converge() {
    let Some(o) = exits_during_a_fault(
        "faults-500",
        "e500",
        |p| p.status_500(true),
        |before, during| during.answered_500 > before.answered_500 && during.cut > before.cut,
    ) else {
        return;
    };
    // the status writes were answered 500, and the ledger says so
    let failed = failed_status_syncs(&o.agent, &o.pods[2].1);
    assert!(
        failed.iter().any(|f| f.starts_with("Some(500)")),
        "{failed:?}"
    );
    // what an operator reads: the API server's own message
    assert_logged(
        &o.agent,
        &["pod watch failed", "injected 500 Internal Server Error"],
    );
    assert_logged(
        &o.agent,
        &["node write failed", "action=RenewLease", "code=Some(500)"],
    );
    eprintln!("faults-500: {:?}", o.proxy.stats());
}

/// The value of the agent's metric `name` (without labels), 0 when absent.
fn metric(agent: &Agent, name: &str) -> f64 {
    agent
        .get("/metrics")
        .1
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_cut_watch_relists_without_starting_any_container_twice() {
    let Some(c) = cluster() else { return };
    let node = "faults-cut-watch";
    let (proxy, agent) = agent_via_proxy(c, node);
    let admin = c.admin();
    admin.wait_node_ready(node);
    let uids = create(
        &admin,
        &[pod(
            "cutw-main",
            node,
            "while true; do sleep 1; done",
            "Always",
        )],
    );
    wait_all_running(&admin, &["cutw-main".to_string()], 60);

    // the watch is cut: the watcher resumes from its resource version
    let before = proxy.stats();
    assert!(proxy.open() > 0, "the agent holds a connection (its watch)");
    proxy.reset();
    proxy.wait_for_stats("a new connection after the cut", 30, |s| {
        s.forwarded > before.forwarded
    });
    std::thread::sleep(Duration::from_secs(2));
    let after = proxy.stats();
    assert!(after.cut > before.cut, "{before:?} → {after:?}");
    assert_logged(
        &agent,
        &["pod watch failed", "error reading a body from connection"],
    );

    // the watch is cut and its resumption answered `410 Expired`, as the apiserver answers a
    // resource version it no longer has: the watcher lists again
    let relists = metric(&agent, "ledgerlet_api_relists_total");
    assert!(relists >= 1.0, "the first list is counted");
    // (each failed attempt doubles the watcher's backoff, 800 ms up to 30 s with jitter, as
    // client-go's reflector does: the next attempt may be that far off)
    proxy.watch_gone(true);
    // (the node's own watch, for its pod CIDR, goes through the proxy too: wait for the pods')
    proxy.wait_for_stats("the pod watch answered 410", 60, |s| {
        s.answered_gone_pods > 0
    });
    proxy.clear();
    agent.wait_for("a relist", 90, |a| {
        (metric(a, "ledgerlet_api_relists_total") > relists).then_some(())
    });

    // the watch is back: a pod created now reaches the node and runs
    let second = create(
        &admin,
        &[pod(
            "cutw-after",
            node,
            "while true; do sleep 1; done",
            "Always",
        )],
    );
    wait_all_running(&admin, &["cutw-after".to_string()], 60);
    assert_eq!(starts(&agent, &uids[0]), 1, "cutw-main started once");
    assert_eq!(
        added(&agent, &uids[0]),
        1,
        "the relist did not re-add cutw-main"
    );
    assert_eq!(starts(&agent, &second[0]), 1, "cutw-after started once");
    let still = api_pod(&admin, "cutw-main").unwrap();
    assert!(
        running(&still),
        "cutw-main still Running: {:?}",
        still.status
    );
    assert_alive(&agent);
    assert_logged(&agent, &["pod watch failed", "410"]);
    eprintln!("faults-cut-watch: {:?}", proxy.stats());
}

#[test]
fn a_slow_api_still_gets_every_status() {
    let Some(c) = cluster() else { return };
    let node = "faults-slow";
    let (proxy, agent) = agent_via_proxy(c, node);
    let admin = c.admin();
    admin.wait_node_ready(node);
    let before = proxy.stats();
    // every chunk, both ways, 500 ms late: a TLS handshake and a GET + PATCH take seconds
    proxy.delay(Duration::from_millis(500));
    let started = Instant::now();
    let uids = create(&admin, &[pod("slow-0", node, "sleep 3; exit 3", "Never")]);
    let p = admin.wait_for(
        "slow-0's exit code in the API, with every byte late",
        30,
        |k| {
            let p = api_pod(k, "slow-0")?;
            (exit_code(&p).is_some() && phase(&p) == Some("Failed")).then_some(p)
        },
    );
    eprintln!(
        "faults-slow: slow-0's final status reached the API server {:?} after it was created",
        started.elapsed()
    );
    // the delay stays on for 20 s in all: the agent keeps working through it
    std::thread::sleep(Duration::from_secs(20).saturating_sub(started.elapsed()));
    let during = proxy.stats();
    assert_alive(&agent);
    proxy.clear();
    assert_eq!(exit_code(&p), Some(3));
    assert!(
        during.delayed_chunks > before.delayed_chunks,
        "no chunk was delayed: {during:?}"
    );
    assert_eq!(
        during.faulted(),
        before.faulted(),
        "only the delay: {during:?}"
    );
    assert_eq!(starts(&agent, &uids[0]), 1, "slow-0 started once");
    eprintln!("faults-slow: {during:?}");
}
