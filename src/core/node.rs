//! The node's folded state and the fold itself.
//!
//! Owns `Node` (everything the core knows) and `fold(&mut Node, &Record) -> Vec<Command>`,
//! which routes each record to the reducer that owns it. Must stay pure: no I/O, no clock
//! (time is `record.at`), no randomness, no hash-map iteration reaching the output. Same
//! records in ⇒ same state and same commands out.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::command::Command;
use super::config::{CoreConfig, PodSource};
use super::pod_manager::PodManager;
use super::pod_workers::{Cx, PodWorkers};
use super::runtime_status::RuntimeCache;
use super::timers::{TimerKey, Timers};
use super::uid::Uid;
use crate::core::record::event::{NodeAction, SyncOutcome};
use crate::core::record::{Event, Record, Time};

/// Everything the core knows about the node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The configuration in force (from the last `ConfigApplied`).
    pub config: CoreConfig,
    /// Sources that have delivered their initial state.
    pub sources_ready: BTreeSet<PodSource>,
    /// Desired pods.
    pub pod_manager: PodManager,
    /// Pod workers.
    pub pod_workers: PodWorkers,
    /// The runtime cache.
    pub runtime: RuntimeCache,
    /// Armed timers.
    pub timers: Timers,
    /// Probe results by container ID (filled by the prober from `ProbeResult` records).
    pub probes: super::probe_results::ProbeResults,
    /// The probe workers.
    #[serde(default)]
    pub probers: super::probes::Probers,
    /// CrashLoopBackOff state per container key.
    pub backoff: super::backoff::Backoff,
    /// ImagePullBackOff state per `<pod uid>_<image>` (the kubelet's image puller backoff).
    #[serde(default)]
    pub image_pull_backoff: super::backoff::Backoff,
    /// The last failed pull's error per image pull backoff key (`prevPullErrMsg`:
    /// `ErrImagePull: <message>`), appended to the back-off message while it lasts; forgotten
    /// with the backoff entry.
    #[serde(default)]
    pub image_pull_errors: std::collections::BTreeMap<String, String>,
    /// The last start failure per pod and container (`reasonCache`).
    pub reasons: super::reason_cache::ReasonCache,
    /// Pod API statuses (the status manager's local state).
    pub statuses: super::status::StatusStore,
    /// Mirror-pod writes in flight.
    #[serde(default)]
    pub mirror: super::mirror::MirrorState,
    /// Registration, Lease and node status towards the API server.
    #[serde(default)]
    pub node_status: super::node_status::NodeLifecycle,
    /// The node is shutting down: new pods are rejected.
    #[serde(default)]
    pub shutting_down: bool,
    /// Where a graceful node shutdown is (`core::node_shutdown`).
    #[serde(default)]
    pub shutdown: super::node_shutdown::Stage,
    /// The Node as the API server last showed it (labels and taints admission reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_node: Option<crate::core::record::event::NodeObserved>,
    /// Pods rejected at admission (they count as terminal).
    pub rejected: BTreeSet<Uid>,
    /// Housekeeping's remembered set differences (not state: never serialised, always equal).
    #[serde(skip)]
    pub housekeeping_memo: super::housekeeping_memo::HousekeepingMemo,
    /// Seq of the last folded record.
    pub last_seq: u64,
    /// `at` of the last folded record.
    pub last_at: Time,
}

/// Folds one record into the node and returns the commands it asks for.
pub fn fold(node: &mut Node, record: &Record) -> Vec<Command> {
    let mut out = Vec::new();
    node.fold_into(record, &mut out);
    out
}

macro_rules! cx {
    ($node:ident, $record:ident, $out:ident) => {
        &mut Cx {
            seq: $record.seq,
            now: $record.at,
            config: &$node.config,
            pods: &$node.pod_manager,
            runtime: &$node.runtime,
            timers: &mut $node.timers,
            out: $out,
        }
    };
}

/// The context of a node lifecycle reducer (`core::node_status`).
macro_rules! ncx {
    ($node:ident, $now:ident, $out:ident) => {
        &mut super::node_status::NodeCx {
            now: $now,
            config: &$node.config,
            shutting_down: $node.shutting_down,
            api_node: $node.api_node.as_ref(),
            timers: &mut $node.timers,
            out: $out,
        }
    };
}

impl Node {
    /// A mirror pod came or changed: its static pod's status may be written now.
    fn mirror_seen(&mut self, p: &k8s_openapi::api::core::v1::Pod) {
        if super::pod::is_mirror(p) {
            self.statuses.signal();
        }
    }

    /// The `Uid` the node already holds for this pod, or `uid` itself: every map then shares
    /// one allocation per pod, and comparisons between them are a pointer check.
    pub(super) fn canonical_uid(&self, uid: &Uid) -> Uid {
        // searched by `Uid` (its prefix decides most comparisons), not by `&str`
        self.pod_workers
            .uid_key(uid)
            .or_else(|| self.pod_manager.uid_key(uid))
            .or_else(|| self.runtime.uid_key(uid))
            .cloned()
            .unwrap_or_else(|| uid.clone())
    }

    /// Folds `record`, appending the commands it asks for to `out`.
    pub fn fold_into(&mut self, record: &Record, out: &mut Vec<Command>) {
        self.pod_workers.clear_phase_log();
        self.statuses.clear_recorded();
        let from = out.len();
        self.fold_event(record, out);
        if self.shutdown != super::node_shutdown::Stage::Idle {
            self.advance_node_shutdown(false, record.at, out);
        }
        // the kubelet's sync methods: statuses and runtime plans for the syncs just issued
        self.prepare_syncs(from, out, record.at);
        // the status manager's channel: new statuses go to the API server now
        if self.statuses.is_signalled() {
            self.status_sync_batch(super::status::SyncTrigger::Changed, out);
        }
    }

    fn fold_event(&mut self, record: &Record, out: &mut Vec<Command>) {
        self.last_seq = record.seq;
        self.last_at = record.at;
        let now = record.at;
        match &record.event {
            Event::ConfigApplied(c) => {
                self.config = (*c.config).clone();
                self.statuses.memo.clear();
                self.probers.started_at = now;
                if !self.timers.is_armed(&TimerKey::Housekeeping) {
                    let due = now.plus_ms(self.config.housekeeping_period_ms);
                    self.timers.set(TimerKey::Housekeeping, due, out);
                }
                self.node_status.on_config(ncx!(self, now, out));
                self.arm_status_sync(now, out);
            }
            Event::SourceReady(s) => self.source_seen(s.source),
            Event::PodAdded(c) => {
                self.handle_pod_addition(&c.pod, now, out);
                self.source_seen(c.source);
                self.mirror_seen(&c.pod);
            }
            Event::PodUpdated(c) | Event::PodDeleted(c) => {
                self.handle_pod_update(&c.pod, now, out);
                self.source_seen(c.source);
                self.mirror_seen(&c.pod);
            }
            Event::PodRemoved(c) => {
                self.handle_pod_removal(&c.pod, now, out);
                self.source_seen(c.source);
            }
            Event::PodReconcile(c) => {
                self.handle_pod_reconcile(&c.pod, now, out);
                self.source_seen(c.source);
            }
            Event::UpdatePod(u) => {
                self.pod_workers
                    .update_pod(cx!(self, record, out), u.clone(), record.seq);
            }
            Event::PlegEvent(e) => self.handle_pleg_event(e, now, out),
            Event::RuntimeStatusObserved(o) => {
                let uid = self.canonical_uid(&o.uid);
                let fresh_as_of = o.fresh_as_of(record.seq);
                if self
                    .runtime
                    .observe(&uid, o.status.clone(), o.error.clone(), fresh_as_of)
                {
                    self.pod_workers
                        .on_runtime_status(cx!(self, record, out), &o.uid);
                }
            }
            Event::SyncFinished(f) => {
                let terminated = f.work == super::command::WorkType::Terminated
                    && matches!(f.outcome, SyncOutcome::Ok | SyncOutcome::Terminal)
                    && self.pod_workers.is_sync_in_flight(&f.uid, f.sync_id);
                if terminated {
                    // the last step of SyncTerminatedPod (RT-44): the status is final and the
                    // pod may be deleted from the API; its content goes beside that
                    self.terminate_pod_status(&f.uid, now);
                    self.on_pod_finished(&f.uid, now, out);
                }
                let containers_stopped = f.work == super::command::WorkType::Terminating
                    && f.outcome == SyncOutcome::Ok
                    && self.pod_workers.is_sync_in_flight(&f.uid, f.sync_id);
                if containers_stopped {
                    // SyncTerminatingPod steps 4–5 (RT-43): probeManager.RemovePod, then the
                    // stopped pod's terminal status
                    self.probes_remove_pod(&f.uid, out);
                    self.report_stopped_pod(&f.uid, now);
                }
                self.pod_workers.on_sync_finished(cx!(self, record, out), f);
            }
            Event::TimerFired(t) => {
                if !self.timers.fire(&t.key, t.generation) {
                    return; // re-armed or disarmed since: stale
                }
                match &t.key {
                    TimerKey::Housekeeping => self.housekeeping_tick(now, out),
                    TimerKey::PodWork { uid }
                    | TimerKey::BackoffExpiry { uid }
                    | TimerKey::ActiveDeadline { uid } => self.handle_pod_sync(uid, now, out),
                    TimerKey::StatusSync => self.status_sync_tick(now, out),
                    TimerKey::NodeStatusUpdate | TimerKey::LeaseRenew | TimerKey::NodeRegister => {
                        self.node_status.on_timer(ncx!(self, now, out), &t.key)
                    }
                    TimerKey::NodeShutdownGroup => self.advance_node_shutdown(true, now, out),
                    TimerKey::PodContentRemoval { uid } => {
                        self.on_pod_content_removal_timer(uid, now, out)
                    }
                    TimerKey::KillDeadline { uid, request } => {
                        self.pod_workers
                            .on_kill_deadline(cx!(self, record, out), uid, *request);
                    }
                    TimerKey::Probe {
                        uid,
                        container,
                        probe,
                    } => {
                        let key = super::probes::WorkerKey {
                            uid: uid.clone(),
                            container: container.clone(),
                            probe: *probe,
                        };
                        self.probe_timer_fired(&key, record.seq, now, out);
                    }
                }
            }
            Event::SyncKnownPods(s) => self.handle_sync_known_pods(s, record.seq, now, out),
            Event::KillCompleted(_) => {}
            Event::PodRejected(r) => self.on_pod_rejected(r, now),
            Event::RuntimeActionFinished(a) => self.handle_runtime_action(a, now, out),
            Event::NodeShutdown(_) => {
                self.handle_node_shutdown(now, out);
                self.node_status.on_node_shutdown(ncx!(self, now, out));
            }
            // For operators: the source keeps the file's last valid pods, so nothing changes.
            Event::ManifestRejected(_) => {}
            // a restarted agent knows nothing it did not observe again (kubelet restart)
            Event::AgentRestarted(_) => {
                *self = Node {
                    last_seq: record.seq,
                    last_at: record.at,
                    ..Node::default()
                };
            }
            Event::StatusSyncFinished(f) => self.on_status_sync_finished(f, out),
            Event::NodeObserved(n) => self.api_node = Some(n.clone()),
            Event::VolumeUsageObserved(u) => self.handle_volume_usage(u, now, out),
            Event::NodeInfoObserved(n) => self.node_status.on_node_info(ncx!(self, now, out), n),
            Event::RuntimeHealth(h) => self.node_status.on_runtime_health(ncx!(self, now, out), h),
            Event::ProbeFinished(f) => self.probe_finished(f, record.seq, now, out),
            Event::ProbeResult(r) => self.probe_result(r, now, out),
            Event::NodeSyncFinished(f) => match f.action {
                NodeAction::Register | NodeAction::RenewLease | NodeAction::PatchStatus => {
                    self.node_status.on_sync_finished(ncx!(self, now, out), f)
                }
                NodeAction::CreateMirrorPod | NodeAction::DeleteMirrorPod => {
                    self.mirror_write_finished(f)
                }
            },
        }
    }
}
