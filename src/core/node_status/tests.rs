//! The node lifecycle through the real fold: records in, commands and state out.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node as ApiNode, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::conditions::{condition, READY};
use super::register_backoff_ms;
use crate::core::command::{Command, NodeCommand};
use crate::core::config::{CoreConfig, PodSource};
use crate::core::pod_status::time_to_api;
use crate::core::record::event::{
    ConfigApplied, NodeAction, NodeInfoObserved, NodeShutdown, NodeSyncFinished, NodeSyncOutcome,
    RuntimeHealth, TimerFired,
};
use crate::core::record::{Event, Record, Time};
use crate::core::timers::TimerKey;
use crate::core::{fold, Node};

const T0: i64 = 1_800_000_000;

fn at(ms: u64) -> Time {
    Time::from_unix_secs(T0).plus_ms(ms)
}

fn machine() -> NodeInfoObserved {
    let resources: BTreeMap<String, Quantity> = [
        ("cpu", "4"),
        ("memory", "8039920Ki"),
        ("pods", "110"),
        ("ephemeral-storage", "102687672Ki"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
    .collect();
    NodeInfoObserved {
        node: Arc::new(ApiNode {
            metadata: ObjectMeta {
                name: Some("node-a".into()),
                labels: Some(BTreeMap::from([
                    ("kubernetes.io/hostname".into(), "node-a".into()),
                    ("kubernetes.io/os".into(), "linux".into()),
                ])),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                capacity: Some(resources.clone()),
                allocatable: Some(resources),
                ..NodeStatus::default()
            }),
            ..ApiNode::default()
        }),
    }
}

/// A runtime health report: runtime ready, network ready, PLEG healthy, message.
fn health(
    runtime_ready: bool,
    network_ready: bool,
    pleg_healthy: bool,
    msg: &str,
) -> RuntimeHealth {
    RuntimeHealth {
        runtime_ready,
        network_ready,
        pleg_healthy,
        message: msg.into(),
        network_message: String::new(),
    }
}

fn healthy() -> RuntimeHealth {
    health(true, true, true, "")
}

fn finished(action: NodeAction, ok: bool) -> Event {
    Event::NodeSyncFinished(NodeSyncFinished {
        action,
        uid: None,
        outcome: if ok {
            NodeSyncOutcome::Ok
        } else {
            NodeSyncOutcome::Failed {
                code: Some(503),
                message: "the server is currently unable to handle the request".into(),
            }
        },
    })
}

/// A node folded record by record, the test playing the shell.
struct World {
    node: Node,
    seq: u64,
}

impl World {
    fn new(sources: Vec<PodSource>) -> World {
        let mut w = World {
            node: Node::default(),
            seq: 0,
        };
        let config = CoreConfig {
            node_name: "node-a".into(),
            sources,
            ..CoreConfig::default()
        };
        let config = Box::new(config);
        w.feed(0, Event::ConfigApplied(ConfigApplied { config }));
        w
    }

    fn feed(&mut self, ms: u64, event: Event) -> Vec<Command> {
        self.seq += 1;
        let record = Record {
            seq: self.seq,
            at: at(ms),
            cause: None,
            trace: None,
            event,
        };
        fold(&mut self.node, &record)
    }

    /// Fires `key` at its due time; returns that time (ms after T0) and the commands.
    fn fire(&mut self, key: TimerKey) -> (u64, Vec<Command>) {
        let armed = self.node.timers.get(&key).expect("timer armed");
        let ms = armed.due.since(at(0)).as_millis() as u64;
        let out = self.feed(
            ms,
            Event::TimerFired(TimerFired {
                key,
                generation: armed.generation,
            }),
        );
        (ms, out)
    }

    fn health(&mut self, ms: u64, h: RuntimeHealth) -> Vec<Command> {
        self.feed(ms, Event::RuntimeHealth(h))
    }

    fn due_ms(&self, key: &TimerKey) -> Option<u64> {
        self.node
            .timers
            .get(key)
            .map(|t| t.due.since(at(0)).as_millis() as u64)
    }

    /// Registered at `ms` with a healthy runtime; the first patch and renewal acknowledged.
    fn registered(ms: u64) -> World {
        let mut w = World::new(vec![PodSource::Api]);
        w.feed(0, Event::RuntimeHealth(healthy()));
        w.feed(0, Event::NodeInfoObserved(machine()));
        w.feed(ms, finished(NodeAction::Register, true));
        w.feed(ms, finished(NodeAction::PatchStatus, true));
        w.feed(ms, finished(NodeAction::RenewLease, true));
        w
    }
}

/// The node commands are one `Register`.
fn registers(out: &[Command]) -> bool {
    matches!(node_commands(out)[..], [NodeCommand::Register { .. }])
}

fn node_commands(out: &[Command]) -> Vec<&NodeCommand> {
    out.iter()
        .filter_map(|c| match c {
            Command::Node(n) => Some(n),
            _ => None,
        })
        .collect()
}

fn patched(out: &[Command]) -> Option<Arc<NodeStatus>> {
    node_commands(out).into_iter().find_map(|c| match c {
        NodeCommand::PatchStatus { status, .. } => Some(status.clone()),
        _ => None,
    })
}

fn ready(status: &NodeStatus) -> &NodeCondition {
    condition(status, READY).expect("Ready condition")
}

fn api_secs(ms: u64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    time_to_api(at(ms).truncated_to_secs())
}

fn events(out: &[Command]) -> Vec<String> {
    out.iter()
        .filter_map(|c| match c {
            Command::RecordEvent(e) => Some(e.reason.clone()),
            _ => None,
        })
        .collect()
}

mod lifecycle;
mod status;
