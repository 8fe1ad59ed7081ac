//! The kubelet's sync methods in the pure core, past the pod workers: RT-46's network gate
//! (only host-network pods start while the runtime's network is not ready; the others fail
//! the sync with `NetworkNotReady` and are retried after 1 s), RT-47's ephemeral containers
//! (planned once, before init and regular containers, with their target's runtime ID), and
//! RT-43's terminal status right after a successful kill.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use ledgerlet::core::command::{Command, ContainerKind, ContainerStart, EventType, WorkType};
use ledgerlet::core::config::PodSource;
use ledgerlet::core::record::event::{PodConfigChange, RuntimeHealth, SyncOutcome};
use ledgerlet::core::record::{Event, Time};
use ledgerlet::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState,
};
use ledgerlet::core::timers::TimerKey;
use ledgerlet::core::update::UpdateType;
use support::core_harness::{container_status, pod, runtime_pod, uid, Harness};

fn runtime(containers: Vec<ContainerStatus>) -> RuntimePodStatus {
    runtime_pod("p", "ns", true, Some("10.0.0.1"), containers)
}

fn with_debugger(p: &Arc<Pod>, target: Option<&str>) -> Arc<Pod> {
    let mut p = (**p).clone();
    p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![EphemeralContainer {
        name: "debugger".into(),
        image: Some("busybox".into()),
        target_container_name: target.map(str::to_string),
        ..Default::default()
    }]);
    Arc::new(p)
}

/// The ephemeral starts of the last SyncPod of `u` in `cmds`.
fn ephemeral_starts(cmds: &[Command]) -> Option<Vec<ContainerStart>> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SyncPod(s) => Some(s.plan.start_ephemeral.clone()),
        _ => None,
    })
}

/// Syncs `p` and returns the commands of the sync (answering a status wait first).
fn sync(h: &mut Harness, p: &Arc<Pod>) -> Vec<Command> {
    let mut cmds = h.update(UpdateType::Update, p);
    if h.awaiting_status("1") {
        cmds = h.respond("1");
    }
    cmds
}

/// Pod `1` with its container `main` running (runtime ID `c1`).
fn running_main() -> (Harness, Arc<Pod>) {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    let main = container_status("c1", "main", ContainerState::Running);
    h.runtime.insert(uid("1"), runtime(vec![main]));
    h.update(UpdateType::Create, &p);
    h.drain();
    (h, p)
}

#[test]
fn rt_47_an_added_ephemeral_container_starts_once_in_its_targets_pid_namespace() {
    let (mut h, p) = running_main();
    let debugged = with_debugger(&p, Some("main"));
    let cmds = sync(&mut h, &debugged);
    let starts = ephemeral_starts(&cmds).expect("a SyncPod");
    assert_eq!(starts.len(), 1, "{starts:?}");
    let s = &starts[0];
    assert_eq!(
        (s.kind, s.index, s.name.as_str(), s.restart_count),
        (ContainerKind::Ephemeral, 0, "debugger", 0)
    );
    assert_eq!(s.target_container_id.as_deref(), Some("c1"));
    h.finish("1", SyncOutcome::Ok);
    // once it has an instance, exited or not, it is never started again
    h.runtime.insert(
        uid("1"),
        runtime(vec![
            container_status("e1", "debugger", ContainerState::Exited),
            container_status("c1", "main", ContainerState::Running),
        ]),
    );
    let cmds = sync(&mut h, &debugged);
    let starts = ephemeral_starts(&cmds).expect("a SyncPod");
    assert!(starts.is_empty(), "{starts:?}");
}

#[test]
fn rt_47_an_ephemeral_container_without_a_target_shares_no_pid_namespace() {
    let (mut h, p) = running_main();
    let cmds = sync(&mut h, &with_debugger(&p, None));
    let starts = ephemeral_starts(&cmds).expect("a SyncPod");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].target_container_id, None);
}

fn network(ready: bool) -> Event {
    let message = "container runtime network not ready: NetworkReady=false \
                   reason:NetworkPluginNotReady message:cni plugin not initialized";
    Event::RuntimeHealth(RuntimeHealth {
        runtime_ready: true,
        network_ready: ready,
        pleg_healthy: true,
        message: if ready { "" } else { message }.into(),
        network_message: if ready { "" } else { message }.into(),
    })
}

fn add(h: &mut Harness, p: &Arc<Pod>) -> Vec<Command> {
    h.submit(Event::PodAdded(PodConfigChange {
        source: PodSource::File,
        pod: p.clone(),
    }))
}

fn has_sync_pod(cmds: &[Command]) -> bool {
    cmds.iter().any(|c| matches!(c, Command::SyncPod(_)))
}

#[test]
fn rt_46_while_the_network_is_not_ready_only_host_network_pods_start() {
    // pods from the file source, so the pod manager has them for the retry
    let mut h = Harness::with_file_source();
    h.submit(network(false));
    let plain = pod("1", "p", "ns").static_pod().build();
    let mut host = (*pod("2", "h", "ns").static_pod().build()).clone();
    host.spec.as_mut().unwrap().host_network = Some(true);
    let host = Arc::new(host);
    add(&mut h, &plain);
    let t = h.now;
    let cmds = h.respond("1");
    assert!(
        !has_sync_pod(&cmds),
        "no runtime plan for a pod without network"
    );
    let ev = cmds
        .iter()
        .find_map(|c| match c {
            Command::RecordEvent(e) if e.reason == "NetworkNotReady" => Some(e),
            _ => None,
        })
        .expect("a NetworkNotReady event");
    assert_eq!(ev.event_type, EventType::Warning);
    assert_eq!(
        ev.message,
        "network is not ready: container runtime network not ready: NetworkReady=false \
         reason:NetworkPluginNotReady message:cni plugin not initialized"
    );
    let (_, due) = h.timer(&TimerKey::PodWork { uid: uid("1") }).unwrap();
    let retry_ms = due.since(t).as_millis();
    assert!(
        (1_000..1_500).contains(&retry_ms),
        "retried after {retry_ms} ms"
    );
    add(&mut h, &host);
    assert!(has_sync_pod(&h.respond("2")), "a host-network pod starts");
    // the network comes up: the retry starts the pod
    h.submit(network(true));
    let mut cmds = h.fire(TimerKey::PodWork { uid: uid("1") });
    if h.awaiting_status("1") {
        cmds = h.respond("1");
    }
    assert!(has_sync_pod(&cmds), "{cmds:#?}");
}

#[test]
fn rt_43_the_stopped_pods_terminal_phase_is_recorded_when_the_kill_succeeds() {
    let (mut h, _) = running_main();
    let deleted = pod("1", "p", "ns").deleted(30).build();
    h.update(UpdateType::Update, &deleted);
    for _ in 0..5 {
        if h.syncing("1").is_some() {
            break;
        }
        h.respond("1");
    }
    assert_eq!(h.syncing("1").map(|(_, w)| w), Some(WorkType::Terminating));
    // the shell reads the stopped pod after the kill, then reports the sync finished
    let mut killed = container_status("c1", "main", ContainerState::Exited);
    killed.exit_code = 137;
    killed.finished_at = Some(Time::from_unix_secs(2));
    let mut stopped = runtime(vec![killed]);
    stopped.sandboxes[0].state = SandboxState::SandboxNotready;
    h.runtime.insert(uid("1"), stopped);
    h.respond("1");
    h.finish("1", SyncOutcome::Ok);
    assert!(
        h.syncing("1").is_none(),
        "SyncTerminatedPod has not run yet"
    );
    let status = &h.node().statuses.get(&uid("1")).expect("a status").status;
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let main = &status.container_statuses.as_ref().unwrap()[0];
    let exit = main.state.as_ref().and_then(|s| s.terminated.as_ref());
    assert_eq!(exit.map(|t| t.exit_code), Some(137));
}
