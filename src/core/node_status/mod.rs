//! The node's lifecycle towards the API server: registration, the node Lease, and the node
//! status with its conditions (kubelet `kubelet_node_status.go` and the node lease
//! controller).
//!
//! Owns `NodeLifecycle`: the machine as observed (`NodeInfoObserved`), the runtime health
//! (`RuntimeHealth`), the registration state and its backoff, the Lease renewal, the last
//! node status the API server accepted and the one in flight. It emits `Command::Node`
//! (`Register`, `RenewLease`, `PatchStatus`), node Events and its three timers
//! (`NodeRegister`, `LeaseRenew`, `NodeStatusUpdate`). Must stay pure: no I/O, no clock (time
//! is the record's `at`), and no write to the API server unless `PodSource::Api` is
//! configured and, for the Lease and the status, the node is registered.
//!
//! Timing, as the kubelet: registration is retried after 100 ms, doubling up to 7 s; once
//! registered, the status is patched and the Lease renewed at once, then every 10 s the
//! status is computed and patched if it changed since the last *successful* write or if
//! 5 min passed since it (a heartbeat), and the Lease is renewed every 10 s. Differences:
//! the first registration attempt is immediate (upstream sleeps 100 ms first); timers are
//! not jittered (upstream adds up to 4 %); at most one write of each kind is in flight, and
//! a failed status patch or Lease renewal is retried at the next tick rather than at once
//! (upstream retries a patch 5 times and a lease update with backoff) — the 40 s Lease
//! survives three missed renewals. A readiness change is reported at the next tick, except
//! the first time the node becomes ready after registration, which is patched at once
//! (`fastStatusUpdateOnce`), and a node shutdown, patched at once as upstream does.

pub mod conditions;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node as ApiNode, NodeCondition, NodeStatus};
use serde::{Deserialize, Serialize};

use super::command::{Command, EventType, KubeEvent, NodeCommand, ObjectRef};
use super::config::{CoreConfig, NodeLifecycleConfig, PodSource};
use super::timers::{TimerKey, Timers};
use crate::core::record::event::{
    NodeAction, NodeInfoObserved, NodeObserved, NodeSyncFinished, NodeSyncOutcome, RuntimeHealth,
};
use crate::core::record::Time;
use conditions::{compute_status, condition_events, is_ready, status_changed, StatusInputs};

/// A node status written (or being written) to the API server, with the record time it was
/// computed at (its conditions' `lastHeartbeatTime`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    /// The status.
    pub status: Arc<NodeStatus>,
    /// When it was computed.
    pub at: Time,
}

/// Where registration stands (`registrationCompleted`, and the retry loop around it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Registration {
    /// Nothing sent yet (no node info, or no API source).
    #[default]
    NotStarted,
    /// A `Register` is in flight with this status.
    InFlight {
        /// The status in the Node sent.
        status: Arc<NodeStatus>,
        /// When it was sent.
        at: Time,
    },
    /// The last attempt failed; `NodeRegister` fires the next one.
    RetryPending,
    /// The Node exists in the API server.
    Registered,
}

/// The node lifecycle state (held in `Node::node_status`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeLifecycle {
    /// The machine as the shell observed it (no conditions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<Arc<ApiNode>>,
    /// The last runtime health record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<RuntimeHealth>,
    /// Registration.
    pub registration: Registration,
    /// Failed registration attempts in a row (drives the backoff).
    pub register_failures: u32,
    /// The `renew_time` of the `RenewLease` in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_in_flight: Option<Time>,
    /// The `renew_time` of the last successful renewal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_renewed: Option<Time>,
    /// The `PatchStatus` in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_in_flight: Option<Sent>,
    /// The last status the API server accepted (by registration or patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<Sent>,
    /// A status with `Ready=True` has been written once (ends the fast first update).
    pub ready_reported: bool,
    /// The next status update must patch even without a change: set at registration (the
    /// Node may have existed with an old status), cleared by a successful patch.
    pub patch_required: bool,
}

/// What a node lifecycle reducer works with.
pub struct NodeCx<'a> {
    /// The record time.
    pub now: Time,
    /// The configuration in force.
    pub config: &'a CoreConfig,
    /// A graceful node shutdown is under way.
    pub shutting_down: bool,
    /// The Node as the node watch last saw it (its extended resources).
    pub api_node: Option<&'a NodeObserved>,
    /// The node's timers.
    pub timers: &'a mut Timers,
    /// Commands out.
    pub out: &'a mut Vec<Command>,
}

impl NodeCx<'_> {
    fn api(&self) -> bool {
        self.config.sources.contains(&PodSource::Api)
    }
}

/// The delay before registration attempt `failures + 1` (`failures` ≥ 1): the initial step,
/// doubled per further failure, capped (100 ms, 200 ms, … 6.4 s, then 7 s).
pub fn register_backoff_ms(config: &NodeLifecycleConfig, failures: u32) -> u64 {
    let doublings = failures.saturating_sub(1).min(40);
    config
        .node_register_backoff_initial_ms
        .saturating_mul(1u64 << doublings)
        .min(config.node_register_backoff_max_ms)
}

impl NodeLifecycle {
    /// True once the Node exists in the API server.
    pub fn is_registered(&self) -> bool {
        self.registration == Registration::Registered
    }

    /// The node's name: the observed Node's, else the configured one.
    pub fn node_name(&self, config: &CoreConfig) -> String {
        self.machine
            .as_ref()
            .and_then(|n| n.metadata.name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| config.node_name.clone())
    }

    /// The status as it would be computed at `now` (`None` before the machine is known).
    pub fn status_at(
        &self,
        now: Time,
        shutting_down: bool,
        previous: Option<&[NodeCondition]>,
        api_node: Option<&NodeObserved>,
    ) -> Option<NodeStatus> {
        let machine = self.machine.as_ref()?;
        let empty = NodeStatus::default();
        Some(compute_status(StatusInputs {
            machine: machine.status.as_ref().unwrap_or(&empty),
            extended_capacity: api_node.map(|n| &n.extended_capacity),
            health: self.health.as_ref(),
            shutting_down,
            previous,
            now,
        }))
    }

    fn compute(&self, cx: &NodeCx<'_>) -> Option<NodeStatus> {
        let previous = self
            .reported
            .as_ref()
            .and_then(|r| r.status.conditions.as_deref());
        self.status_at(cx.now, cx.shutting_down, previous, cx.api_node)
    }

    /// `ConfigApplied`: start (or resume) once an API source is configured.
    pub fn on_config(&mut self, cx: &mut NodeCx<'_>) {
        if !cx.api() {
            return;
        }
        match self.registration {
            Registration::NotStarted => self.try_register(cx),
            Registration::RetryPending if !cx.timers.is_armed(&TimerKey::NodeRegister) => {
                self.try_register(cx)
            }
            Registration::Registered
                if !cx.timers.is_armed(&TimerKey::NodeStatusUpdate)
                    || !cx.timers.is_armed(&TimerKey::LeaseRenew) =>
            {
                self.start_heartbeats(cx)
            }
            _ => {}
        }
    }

    /// `NodeInfoObserved`: remember the machine; register if this was the missing piece.
    /// A later observation reaches the API with the next status update.
    pub fn on_node_info(&mut self, cx: &mut NodeCx<'_>, info: &NodeInfoObserved) {
        self.machine = Some(info.node.clone());
        if cx.api() && self.registration == Registration::NotStarted {
            self.try_register(cx);
        }
    }

    /// `RuntimeHealth`: remember it; the first time the node turns ready after
    /// registration, patch at once (`fastStatusUpdateOnce`).
    pub fn on_runtime_health(&mut self, cx: &mut NodeCx<'_>, health: &RuntimeHealth) {
        self.health = Some(health.clone());
        if !self.is_registered() || !cx.api() || self.ready_reported {
            return;
        }
        if self.compute(cx).is_some_and(|s| is_ready(&s)) {
            self.update_status(cx);
        }
    }

    /// `NodeShutdown`: the Ready condition turns false ("node is shutting down"); patch at
    /// once, as the shutdown manager's `syncNodeStatus` does.
    pub fn on_node_shutdown(&mut self, cx: &mut NodeCx<'_>) {
        if self.is_registered() && cx.api() {
            self.update_status(cx);
        }
    }

    /// A node lifecycle timer fired (its generation already checked).
    pub fn on_timer(&mut self, cx: &mut NodeCx<'_>, key: &TimerKey) {
        if !cx.api() {
            return; // resumed by `on_config` if an API source comes back
        }
        match key {
            TimerKey::NodeRegister if self.registration == Registration::RetryPending => {
                self.try_register(cx)
            }
            TimerKey::LeaseRenew if self.is_registered() => {
                if self.lease_in_flight.is_none() {
                    self.renew_lease(cx);
                }
                let due = cx
                    .now
                    .plus_ms(cx.config.node_lifecycle.lease_renew_interval_ms);
                cx.timers.set(TimerKey::LeaseRenew, due, cx.out);
            }
            TimerKey::NodeStatusUpdate if self.is_registered() => {
                self.update_status(cx);
                let due = cx
                    .now
                    .plus_ms(cx.config.node_lifecycle.node_status_update_frequency_ms);
                cx.timers.set(TimerKey::NodeStatusUpdate, due, cx.out);
            }
            _ => {}
        }
    }

    /// `NodeSyncFinished` for `register`, `renew_lease` or `patch_status` (mirror pod
    /// actions are not this module's and are ignored).
    pub fn on_sync_finished(&mut self, cx: &mut NodeCx<'_>, f: &NodeSyncFinished) {
        let ok = f.outcome == NodeSyncOutcome::Ok;
        match f.action {
            NodeAction::Register => {
                let Registration::InFlight { status, at } = std::mem::take(&mut self.registration)
                else {
                    return; // not ours to answer: stale or duplicate
                };
                if !ok {
                    self.register_failures = self.register_failures.saturating_add(1);
                    self.registration = Registration::RetryPending;
                    let delay =
                        register_backoff_ms(&cx.config.node_lifecycle, self.register_failures);
                    cx.timers
                        .set(TimerKey::NodeRegister, cx.now.plus_ms(delay), cx.out);
                    return;
                }
                self.registration = Registration::Registered;
                self.register_failures = 0;
                self.ready_reported |= is_ready(&status);
                self.reported = Some(Sent { status, at });
                if cx.api() {
                    self.start_heartbeats(cx);
                }
            }
            NodeAction::RenewLease => {
                if let Some(t) = self.lease_in_flight.take() {
                    if ok {
                        self.lease_renewed = Some(t);
                    }
                }
            }
            NodeAction::PatchStatus => {
                if let Some(sent) = self.patch_in_flight.take() {
                    if ok {
                        self.ready_reported |= is_ready(&sent.status);
                        self.patch_required = false;
                        self.reported = Some(sent);
                    }
                }
            }
            NodeAction::CreateMirrorPod | NodeAction::DeleteMirrorPod => {}
        }
    }

    /// After registration (`syncNodeStatus` right after `registerWithAPIServer`): patch the
    /// status now (the Node may have existed with an old status), renew the Lease now, and
    /// arm both periodic timers.
    fn start_heartbeats(&mut self, cx: &mut NodeCx<'_>) {
        self.patch_required = true;
        self.update_status(cx);
        if self.lease_in_flight.is_none() {
            self.renew_lease(cx);
        }
        let status_due = cx
            .now
            .plus_ms(cx.config.node_lifecycle.node_status_update_frequency_ms);
        cx.timers
            .set(TimerKey::NodeStatusUpdate, status_due, cx.out);
        let lease_due = cx
            .now
            .plus_ms(cx.config.node_lifecycle.lease_renew_interval_ms);
        cx.timers.set(TimerKey::LeaseRenew, lease_due, cx.out);
    }

    fn try_register(&mut self, cx: &mut NodeCx<'_>) {
        let (Some(machine), Some(status)) = (self.machine.clone(), self.compute(cx)) else {
            return;
        };
        let name = self.node_name(cx.config);
        let mut node = (*machine).clone();
        node.metadata.name = Some(name.clone());
        node.status = Some(status.clone());
        record_events(cx, &name, None, &status);
        self.registration = Registration::InFlight {
            status: Arc::new(status),
            at: cx.now,
        };
        cx.out.push(Command::Node(NodeCommand::Register {
            node: Arc::new(node),
        }));
    }

    fn renew_lease(&mut self, cx: &mut NodeCx<'_>) {
        self.lease_in_flight = Some(cx.now);
        cx.out.push(Command::Node(NodeCommand::RenewLease {
            name: self.node_name(cx.config),
            duration_s: cx.config.node_lifecycle.node_lease_duration_s,
            renew_time: cx.now,
        }));
    }

    /// `tryUpdateNodeStatus`: compute, and patch if required, changed since the last
    /// successful write, or that write is `node_status_report_frequency_ms` old. Skipped
    /// while a patch is in flight (the next tick looks again).
    fn update_status(&mut self, cx: &mut NodeCx<'_>) {
        if self.patch_in_flight.is_some() {
            return;
        }
        let Some(status) = self.compute(cx) else {
            return;
        };
        let previous = self.reported.as_ref();
        let changed = previous.is_none_or(|p| status_changed(&p.status, &status));
        let remove_allocatable = stale_extended_allocatable(cx.api_node, &status);
        let report_due = previous.is_none_or(|p| {
            cx.now
                >= p.at
                    .plus_ms(cx.config.node_lifecycle.node_status_report_frequency_ms)
        });
        if !(self.patch_required || changed || report_due || !remove_allocatable.is_empty()) {
            return;
        }
        let name = self.node_name(cx.config);
        record_events(cx, &name, previous.map(|p| &*p.status), &status);
        let status = Arc::new(status);
        self.patch_in_flight = Some(Sent {
            status: status.clone(),
            at: cx.now,
        });
        cx.out.push(Command::Node(NodeCommand::PatchStatus {
            name,
            status,
            remove_allocatable,
        }));
    }
}

/// The extended resources the API server's Node still has in `status.allocatable` although
/// they left `status.capacity` (an admin removed them): the kubelet's MachineInfo setter
/// deletes them from allocatable.
fn stale_extended_allocatable(api_node: Option<&NodeObserved>, status: &NodeStatus) -> Vec<String> {
    let Some(n) = api_node else {
        return Vec::new();
    };
    let computed = status.allocatable.as_ref();
    n.extended_allocatable
        .keys()
        .filter(|k| !n.extended_capacity.contains_key(*k))
        .filter(|k| !computed.is_some_and(|a| a.contains_key(*k)))
        .cloned()
        .collect()
}

/// `recordNodeStatusEvent` for each condition that changes with this write.
fn record_events(cx: &mut NodeCx<'_>, name: &str, previous: Option<&NodeStatus>, new: &NodeStatus) {
    for event in condition_events(previous, new) {
        cx.out.push(Command::RecordEvent(KubeEvent {
            // the kubelet's nodeRef uses the node name as its UID
            object: ObjectRef {
                kind: "Node".into(),
                namespace: String::new(),
                name: name.to_string(),
                uid: name.to_string(),
            },
            event_type: EventType::Normal,
            reason: event.to_string(),
            message: format!("Node {name} status is now: {event}"),
        }));
    }
}

#[cfg(test)]
mod tests;
