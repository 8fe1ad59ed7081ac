//! RT-47 in the pure core: an ephemeral container added to a running pod (`kubectl debug`)
//! is planned once, before init and regular containers, with its target's runtime ID; once
//! it has an instance it is never started again, whatever its exit.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use ledgerlet::core::command::{Command, ContainerKind, ContainerStart};
use ledgerlet::core::record::event::SyncOutcome;
use ledgerlet::core::record::Time;
use ledgerlet::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState, SandboxStatus,
};
use ledgerlet::core::update::UpdateType;
use support::core_harness::{pod, uid, Harness};

fn container(id: &str, name: &str, state: ContainerState) -> ContainerStatus {
    let t = Time::from_unix_secs(1);
    ContainerStatus {
        id: id.into(),
        name: name.into(),
        state,
        created_at: t,
        started_at: Some(t),
        finished_at: None,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        image: String::new(),
        image_ref: String::new(),
        hash: String::new(),
        restart_count: 0,
    }
}

fn runtime(containers: Vec<ContainerStatus>) -> RuntimePodStatus {
    RuntimePodStatus {
        name: "p".into(),
        namespace: "ns".into(),
        ips: vec!["10.0.0.1".into()],
        sandboxes: vec![SandboxStatus {
            id: "sb".into(),
            state: SandboxState::SandboxReady,
            created_at: Time::from_unix_secs(1),
            attempt: 0,
            ip: Some("10.0.0.1".into()),
            host_network: false,
        }],
        containers,
    }
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

#[test]
fn rt_47_an_added_ephemeral_container_starts_once_in_its_targets_pid_namespace() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    h.runtime.insert(
        uid("1"),
        runtime(vec![container("c1", "main", ContainerState::Running)]),
    );
    h.update(UpdateType::Create, &p);
    h.drain();
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
            container("e1", "debugger", ContainerState::Exited),
            container("c1", "main", ContainerState::Running),
        ]),
    );
    let cmds = sync(&mut h, &debugged);
    let starts = ephemeral_starts(&cmds).expect("a SyncPod");
    assert!(starts.is_empty(), "{starts:?}");
}

#[test]
fn rt_47_an_ephemeral_container_without_a_target_shares_no_pid_namespace() {
    let mut h = Harness::new();
    let p = pod("1", "p", "ns").build();
    h.runtime.insert(
        uid("1"),
        runtime(vec![container("c1", "main", ContainerState::Running)]),
    );
    h.update(UpdateType::Create, &p);
    h.drain();
    let cmds = sync(&mut h, &with_debugger(&p, None));
    let starts = ephemeral_starts(&cmds).expect("a SyncPod");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].target_container_id, None);
}
