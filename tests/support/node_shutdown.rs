//! What the graceful node shutdown tests (NS-xx) share, whatever runs the node (the embedded
//! runtime in `tests/node_shutdown.rs`, containerd in `tests/node_shutdown_containerd.rs`):
//! a pod only the grace period ends, and how the API server shows a node that shut down
//! (its pods' NS-04 statuses, the Ready condition, the Shutdown event). Reads only: it
//! starts and signals nothing.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Pod};
use kube::api::ListParams;

use super::real_cluster::Kube;

/// NS-04's message, in the pod's status and its DisruptionTarget condition.
pub const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

/// A pod bound to `node` whose container (image `image`) ignores SIGTERM, so only the end
/// of its grace period stops it; in priority class `priority_class` when given.
pub fn stubborn_pod(
    node: &str,
    image: &str,
    name: &str,
    ns: &str,
    grace_s: i64,
    priority_class: Option<&str>,
) -> Pod {
    let class = priority_class.map_or(String::new(), |c| format!("priorityClassName: {c}\n  "));
    serde_yaml::from_str(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  nodeName: {node}\n  {class}automountServiceAccountToken: false\n  terminationGracePeriodSeconds: {grace_s}\n  containers:\n  - name: main\n    image: {image}\n    command: [sh, -c, \"trap '' TERM; while true; do sleep 1; done\"]\n"
    ))
    .unwrap()
}

/// The pod's phase is Running.
pub fn is_running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// When the pod's container ended (`state.terminated.finishedAt`, whole seconds).
pub fn finished_at(p: &Pod) -> SystemTime {
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

/// NS-04: phase Failed, reason Terminated, the shutdown message and a DisruptionTarget
/// condition (True, TerminationByKubelet, the same message).
pub fn assert_ended_by_the_shutdown(p: &Pod) {
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

/// NS-05: waits (at most `secs`) for node `node`'s Ready condition to turn False and checks
/// it says "node is shutting down"; returns the condition.
pub fn wait_node_shutting_down(admin: &Kube, node: &str, secs: u64) -> NodeCondition {
    let ready = admin.wait_for("the node reports it is shutting down", secs, |k| {
        let n = k.run(k.all::<Node>().get(node)).ok()?;
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
    ready
}

/// NS-01: the critical pod was killed only after the normal one stopped, and the normal
/// one stopped at the end of its group's budget (`normal_budget`, not its own longer
/// grace period) after `signalled`; the critical one had at least `critical_grace`.
pub fn assert_normal_then_critical(
    signalled: SystemTime,
    normal: &Pod,
    normal_budget: Duration,
    critical: &Pod,
    critical_grace: Duration,
) {
    let normal_done = finished_at(normal);
    let critical_done = finished_at(critical);
    // finishedAt is in whole seconds: one second of slack on each lower bound
    let normal_took = normal_done
        .duration_since(signalled - Duration::from_secs(1))
        .unwrap_or_default();
    assert!(
        normal_took >= normal_budget - Duration::from_secs(1)
            && normal_took < Duration::from_secs(60),
        "the normal pod stopped {normal_took:?} after SIGTERM (budget {normal_budget:?})"
    );
    let after = critical_done
        .duration_since(normal_done)
        .unwrap_or_else(|_| panic!("the critical pod stopped before the normal one"));
    assert!(
        after >= critical_grace - Duration::from_secs(1),
        "the critical pod stopped {after:?} after the normal one (grace {critical_grace:?})"
    );
}

/// NS-09: the Normal `Shutdown` event on node `node` (node events live in `default`).
pub fn assert_shutdown_event_on_the_node(admin: &Kube, node: &str) {
    let params = ListParams::default().fields(&format!("involvedObject.name={node}"));
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
