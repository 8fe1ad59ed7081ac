//! When the node status is patched, and what its Ready condition says.

use super::*;

/// Fires `NodeStatusUpdate` until `until_ms`, acknowledging each patch; returns the tick
/// times (ms after T0) that patched, with the patched status.
fn ticks(w: &mut World, until_ms: u64) -> Vec<(u64, Arc<NodeStatus>)> {
    let mut patches = Vec::new();
    while w.due_ms(&TimerKey::NodeStatusUpdate).unwrap() <= until_ms {
        let (ms, out) = w.fire(TimerKey::NodeStatusUpdate);
        if let Some(s) = patched(&out) {
            w.feed(ms, finished(NodeAction::PatchStatus, true));
            patches.push((ms, s));
        }
    }
    patches
}

fn patch_times(p: &[(u64, Arc<NodeStatus>)]) -> Vec<u64> {
    p.iter().map(|(ms, _)| *ms).collect()
}

#[test]
fn an_unchanged_status_is_patched_only_every_five_minutes() {
    let mut w = World::registered(0);
    let patches = ticks(&mut w, 700_000);
    assert_eq!(patch_times(&patches), [300_000, 600_000]);
    // each heartbeat refreshes lastHeartbeatTime, never lastTransitionTime
    for (ms, s) in &patches {
        for c in s.conditions.iter().flatten() {
            assert_eq!(c.last_heartbeat_time, Some(api_secs(*ms)), "{}", c.type_);
            assert_eq!(c.last_transition_time, Some(api_secs(0)), "{}", c.type_);
        }
    }
}

#[test]
fn a_change_is_patched_at_the_next_tick_and_restarts_the_report_period() {
    let mut w = World::registered(0);
    assert!(ticks(&mut w, 120_000).is_empty());
    let msg = "container runtime is down: CRI Status on unix:///run/cri.sock failed";
    let out = w.health(125_000, health(false, true, true, msg));
    assert!(node_commands(&out).is_empty(), "reported at the next tick");

    let patches = ticks(&mut w, 500_000);
    assert_eq!(patch_times(&patches), [130_000, 430_000]);
    let r = ready(&patches[0].1);
    assert_eq!(r.status, "False");
    assert_eq!(r.reason.as_deref(), Some("KubeletNotReady"));
    assert_eq!(r.message.as_deref(), Some(msg));
    assert_eq!(r.last_transition_time, Some(api_secs(130_000)));
    let mem = condition(&patches[0].1, "MemoryPressure").unwrap();
    assert_eq!(mem.last_transition_time, Some(api_secs(0)), "unchanged");
    // the heartbeat 5 min later keeps the transition time
    let since = &ready(&patches[1].1).last_transition_time;
    assert_eq!(since, &Some(api_secs(130_000)));
}

#[test]
fn ready_follows_the_runtime_and_the_pleg_with_upstream_messages() {
    let mut w = World::registered(0);
    let msg = "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s";
    w.health(5_000, health(true, true, false, msg));
    let (ms, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert_eq!(ms, 10_000);
    let s = patched(&out).expect("patched");
    assert_eq!(ready(&s).status, "False");
    assert_eq!(ready(&s).message.as_deref(), Some(msg));
    assert_eq!(events(&out), ["NodeNotReady"]);
    w.feed(ms, finished(NodeAction::PatchStatus, true));

    // Without a message, the flags speak in upstream's order (runtime checks, then network).
    w.health(15_000, health(false, false, false, ""));
    let (ms, out) = w.fire(TimerKey::NodeStatusUpdate);
    let s = patched(&out).expect("message changed");
    let msg =
        "[PLEG is not healthy, container runtime not ready, container runtime network not ready]";
    assert_eq!(ready(&s).message.as_deref(), Some(msg));
    assert_eq!(ready(&s).last_transition_time, Some(api_secs(10_000)));
    assert!(events(&out).is_empty(), "still not ready: no event");
    w.feed(ms, finished(NodeAction::PatchStatus, true));

    w.health(25_000, healthy());
    let (ms, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert_eq!(ms, 30_000);
    let s = patched(&out).expect("ready again");
    assert_eq!(ready(&s).status, "True");
    assert_eq!(ready(&s).reason.as_deref(), Some("KubeletReady"));
    assert_eq!(ready(&s).last_transition_time, Some(api_secs(30_000)));
    assert_eq!(events(&out), ["NodeReady"]);
}

#[test]
fn the_first_ready_after_registration_is_patched_at_once() {
    let mut w = World::new(vec![PodSource::Api]);
    w.feed(0, Event::NodeInfoObserved(machine()));
    let out = w.feed(1_000, finished(NodeAction::Register, true));
    let s = patched(&out).expect("patch after registration");
    assert_eq!(ready(&s).status, "False");
    let msg = "[container runtime status check may not have completed yet, network state unknown]";
    assert_eq!(ready(&s).message.as_deref(), Some(msg));
    w.feed(1_000, finished(NodeAction::PatchStatus, true));

    let out = w.health(3_000, healthy());
    let s = patched(&out).expect("fast update");
    assert_eq!(ready(&s).status, "True");
    assert_eq!(ready(&s).last_transition_time, Some(api_secs(3_000)));
    w.feed(3_000, finished(NodeAction::PatchStatus, true));

    // only once: later changes wait for the tick
    assert!(patched(&w.health(4_000, health(false, true, true, ""))).is_none());
    assert!(patched(&w.health(5_000, healthy())).is_none());
}

#[test]
fn a_failed_patch_is_retried_at_the_next_tick() {
    let mut w = World::new(vec![PodSource::Api]);
    w.health(0, healthy());
    w.feed(0, Event::NodeInfoObserved(machine()));
    let out = w.feed(0, finished(NodeAction::Register, true));
    assert!(patched(&out).is_some());
    w.feed(0, finished(NodeAction::PatchStatus, false));
    // the status equals the registered one, but the first patch must still land
    let (ms, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert_eq!(ms, 10_000);
    assert!(patched(&out).is_some());
    w.feed(ms, finished(NodeAction::PatchStatus, true));
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert!(patched(&out).is_none());
}

#[test]
fn a_tick_while_a_patch_is_in_flight_waits_for_it() {
    let mut w = World::registered(0);
    w.health(5_000, health(true, false, true, ""));
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert!(patched(&out).is_some());
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert!(patched(&out).is_none(), "one patch in flight at a time");
    w.feed(20_000, finished(NodeAction::PatchStatus, false));
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert!(patched(&out).is_some(), "retried after the failure");
}

#[test]
fn node_shutdown_reports_not_ready_at_once() {
    let mut w = World::registered(0);
    let out = w.feed(12_000, Event::NodeShutdown(NodeShutdown {}));
    let s = patched(&out).expect("patched at once");
    assert_eq!(ready(&s).status, "False");
    assert_eq!(ready(&s).message.as_deref(), Some("node is shutting down"));
}

#[test]
fn missing_capacity_makes_the_node_not_ready() {
    let mut w = World::new(vec![PodSource::Api]);
    w.health(0, healthy());
    let mut info = machine();
    let node = Arc::make_mut(&mut info.node);
    node.status
        .as_mut()
        .unwrap()
        .capacity
        .as_mut()
        .unwrap()
        .remove("ephemeral-storage");
    let out = w.feed(0, Event::NodeInfoObserved(info));
    let Some(NodeCommand::Register { node }) = node_commands(&out).first().copied() else {
        panic!("no Register");
    };
    let r = ready(node.status.as_ref().unwrap());
    assert_eq!(r.status, "False");
    let msg = "missing node capacity for resources: ephemeral-storage";
    assert_eq!(r.message.as_deref(), Some(msg));
}

#[test]
fn replaying_the_same_records_gives_the_same_commands() {
    let run = || {
        let mut w = World::registered(0);
        w.health(5_000, health(true, true, false, ""));
        let mut all = Vec::new();
        for _ in 0..40 {
            let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
            all.extend(out);
            let (_, out) = w.fire(TimerKey::LeaseRenew);
            all.extend(out);
        }
        (serde_json::to_string(&all).unwrap(), w.node)
    };
    let (a, na) = run();
    let (b, nb) = run();
    assert_eq!(a, b);
    assert_eq!(na, nb);
}

/// The Node as the API server has it after an admin advertised `example.com/widget` in
/// capacity (and, once the node status derived it, in allocatable).
fn widget_node(capacity: Option<&str>, allocatable: Option<&str>) -> Event {
    let list = |q: Option<&str>| {
        q.map(|q| ("example.com/widget".to_string(), Quantity(q.into())))
            .into_iter()
            .collect()
    };
    Event::NodeObserved(crate::core::record::event::NodeObserved {
        extended_capacity: list(capacity),
        extended_allocatable: list(allocatable),
        ..Default::default()
    })
}

fn remove_allocatable(out: &[Command]) -> Option<Vec<String>> {
    node_commands(out).into_iter().find_map(|c| match c {
        NodeCommand::PatchStatus {
            remove_allocatable, ..
        } => Some(remove_allocatable.clone()),
        _ => None,
    })
}

#[test]
fn an_extended_resource_an_admin_put_in_capacity_is_kept_and_made_allocatable() {
    let mut w = World::registered(0);
    w.feed(5_000, widget_node(Some("2"), None));
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    let status = patched(&out).expect("the change is patched at the next tick");
    let allocatable = status.allocatable.as_ref().unwrap();
    assert_eq!(allocatable["example.com/widget"], Quantity("2".into()));
    assert_eq!(
        allocatable["cpu"],
        Quantity("4".into()),
        "the machine's stay"
    );
    assert!(
        !status
            .capacity
            .as_ref()
            .unwrap()
            .contains_key("example.com/widget"),
        "capacity is the admin's: the patch leaves it alone"
    );
    assert_eq!(remove_allocatable(&out), Some(vec![]));
    w.feed(10_000, finished(NodeAction::PatchStatus, true));
    // the API server now has it in both: nothing more to write
    w.feed(10_500, widget_node(Some("2"), Some("2")));
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    assert_eq!(patched(&out), None);
    // the admin removes it from capacity: the next patch deletes it from allocatable
    w.feed(25_000, widget_node(None, Some("2")));
    let (_, out) = w.fire(TimerKey::NodeStatusUpdate);
    let status = patched(&out).expect("patched");
    assert!(!status
        .allocatable
        .as_ref()
        .unwrap()
        .contains_key("example.com/widget"));
    assert_eq!(
        remove_allocatable(&out),
        Some(vec!["example.com/widget".to_string()])
    );
}
