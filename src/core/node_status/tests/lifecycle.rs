//! Registration, its backoff, the Lease, and the API-source gate.

use super::*;

#[test]
fn registers_then_renews_the_lease_and_patches_the_status() {
    let mut w = World::new(vec![PodSource::Api]);
    // No machine yet: nothing to register.
    assert!(node_commands(&w.health(0, healthy())).is_empty());

    let out = w.feed(1_000, Event::NodeInfoObserved(machine()));
    let cmds = node_commands(&out);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    let NodeCommand::Register { node } = cmds[0] else {
        panic!("expected Register, got {cmds:?}");
    };
    assert_eq!(node.metadata.name.as_deref(), Some("node-a"));
    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "node-a");
    let status = node.status.as_ref().unwrap();
    let conditions = status.conditions.iter().flatten();
    let types: Vec<&str> = conditions.map(|c| c.type_.as_str()).collect();
    let want = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];
    assert_eq!(types, want, "Ready is last, as upstream keeps it");
    let r = ready(status);
    assert_eq!(r.status, "True");
    assert_eq!(r.reason.as_deref(), Some("KubeletReady"));
    let msg = "kubelet is posting ready status";
    assert_eq!(r.message.as_deref(), Some(msg));
    assert_eq!(status.capacity.as_ref().unwrap()["cpu"].0, "4");
    let want = [
        "NodeHasSufficientMemory",
        "NodeHasNoDiskPressure",
        "NodeHasSufficientPID",
    ];
    assert_eq!(events(&out), want);
    // Until the Node exists: no Lease, no status, no timers for them.
    assert!(w.due_ms(&TimerKey::LeaseRenew).is_none());
    assert!(w.due_ms(&TimerKey::NodeStatusUpdate).is_none());
    assert!(node_commands(&w.health(1_500, healthy())).is_empty());

    let out = w.feed(2_000, finished(NodeAction::Register, true));
    let cmds = node_commands(&out);
    assert!(matches!(cmds[0], NodeCommand::PatchStatus { name, .. } if name == "node-a"));
    let renew = NodeCommand::RenewLease {
        name: "node-a".into(),
        duration_s: 40,
        renew_time: at(2_000),
    };
    assert_eq!(cmds[1], &renew);
    assert_eq!(cmds.len(), 2);
    assert!(w.node.node_status.is_registered());
    assert_eq!(w.due_ms(&TimerKey::NodeStatusUpdate), Some(12_000));
    assert_eq!(w.due_ms(&TimerKey::LeaseRenew), Some(12_000));

    w.feed(2_000, finished(NodeAction::RenewLease, true));
    assert_eq!(w.node.node_status.lease_renewed, Some(at(2_000)));
    let mut renewals = Vec::new();
    for _ in 0..3 {
        let (ms, out) = w.fire(TimerKey::LeaseRenew);
        for c in node_commands(&out) {
            if let NodeCommand::RenewLease { renew_time, .. } = c {
                renewals.push((ms, *renew_time));
            }
        }
        w.feed(ms, finished(NodeAction::RenewLease, true));
    }
    let want = [12_000, 22_000, 32_000].map(|ms| (ms, at(ms)));
    assert_eq!(renewals, want);
}

#[test]
fn failed_registration_is_retried_with_the_kubelet_backoff() {
    let mut w = World::new(vec![PodSource::Api]);
    w.feed(0, Event::NodeInfoObserved(machine()));
    let mut now = 0;
    let mut delays = Vec::new();
    for _ in 0..10 {
        let out = w.feed(now, finished(NodeAction::Register, false));
        assert!(node_commands(&out).is_empty(), "no write until the timer");
        let due = w.due_ms(&TimerKey::NodeRegister).expect("retry armed");
        delays.push(due - now);
        let (ms, out) = w.fire(TimerKey::NodeRegister);
        assert!(registers(&out));
        now = ms;
    }
    let want = [100, 200, 400, 800, 1_600, 3_200, 6_400, 7_000, 7_000, 7_000];
    assert_eq!(delays, want);
    let lease = w.due_ms(&TimerKey::LeaseRenew);
    assert!(lease.is_none(), "no lease before registration");

    w.feed(now, finished(NodeAction::Register, true));
    assert!(w.node.node_status.is_registered());
    assert_eq!(w.node.node_status.register_failures, 0);
}

#[test]
fn register_backoff_follows_upstream_steps() {
    let c = CoreConfig::default().node_lifecycle;
    let steps: Vec<u64> = (1..=9).map(|n| register_backoff_ms(&c, n)).collect();
    assert_eq!(steps, [100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
    assert_eq!(register_backoff_ms(&c, u32::MAX), 7000);
}

#[test]
fn without_an_api_source_nothing_is_written() {
    let mut w = World::new(vec![PodSource::File]);
    let mut out = w.feed(0, Event::NodeInfoObserved(machine()));
    out.extend(w.health(5_000, healthy()));
    out.extend(w.feed(6_000, Event::NodeShutdown(NodeShutdown {})));
    assert!(node_commands(&out).is_empty(), "{out:?}");
    use TimerKey::{LeaseRenew, NodeRegister, NodeStatusUpdate};
    for key in [NodeRegister, LeaseRenew, NodeStatusUpdate] {
        assert!(w.due_ms(&key).is_none(), "{key:?} armed");
    }

    // Adding the API source starts registration.
    let config = Box::new(CoreConfig {
        sources: vec![PodSource::File, PodSource::Api],
        ..w.node.config.clone()
    });
    let out = w.feed(7_000, Event::ConfigApplied(ConfigApplied { config }));
    assert!(registers(&out));
}

#[test]
fn a_failed_renewal_is_retried_at_the_next_tick() {
    let mut w = World::registered(0);
    let (ms, out) = w.fire(TimerKey::LeaseRenew);
    assert_eq!(ms, 10_000);
    assert_eq!(node_commands(&out).len(), 1);
    w.feed(ms, finished(NodeAction::RenewLease, false));
    assert_eq!(w.node.node_status.lease_renewed, Some(at(0)));
    let (ms, out) = w.fire(TimerKey::LeaseRenew);
    assert_eq!(ms, 20_000);
    assert!(matches!(
        node_commands(&out)[..],
        [NodeCommand::RenewLease { renew_time, .. }] if *renew_time == at(20_000)
    ));
}

#[test]
fn a_tick_while_a_renewal_is_in_flight_sends_no_second_one() {
    let mut w = World::registered(0);
    let (_, out) = w.fire(TimerKey::LeaseRenew);
    assert_eq!(node_commands(&out).len(), 1);
    let (ms, out) = w.fire(TimerKey::LeaseRenew);
    assert!(node_commands(&out).is_empty());
    assert_eq!(w.due_ms(&TimerKey::LeaseRenew), Some(ms + 10_000));
}

#[test]
fn lifecycle_state_round_trips_through_json() {
    let w = World::registered(3_000);
    let json = serde_json::to_string(&w.node).unwrap();
    let back: Node = serde_json::from_str(&json).unwrap();
    assert_eq!(back, w.node);
    // a snapshot from before this field existed still loads
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v.as_object_mut().unwrap().remove("node_status");
    let old: Node = serde_json::from_value(v).unwrap();
    assert!(!old.node_status.is_registered());
}
