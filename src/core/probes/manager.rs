//! The prober manager (kubelet `prober_manager.go`) and the probe branches of
//! `syncLoopIteration`, as node reducers.
//!
//! Owns worker creation (`AddPod`, at each `SyncPod`), the termination steps
//! (`StopLivenessAndStartup` with readiness pinned to failure, then `RemovePod` once the
//! containers are stopped), `CleanupPods` at housekeeping, ticks (timer or manual trigger),
//! the fold of `ProbeFinished` and `ProbeResult`, and the probe Events (`Unhealthy`,
//! `ProbeWarning`). Must not run probes: a tick emits `RunProbe` and the outcome comes back
//! as a record.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::records::{ProbeCommand, ProbeFinished, ProbeResult, RunResult};
use super::spec::{probed_containers, ProbeSettings, ProbeType};
use super::worker::{Change, ProbeWorker, TickInput, WorkerPhase};
use super::WorkerKey;
use crate::core::command::{Command, EventType, KubeEvent, ObjectRef};
use crate::core::jitter;
use crate::core::node::Node;
use crate::core::pod_status::containers::runtime_id;
use crate::core::pod_status::{container_id as api_container_id, spec as pod_spec};
use crate::core::pod_workers::PodWorkerState;
use crate::core::probe_results::{ContainerProbes, ProbeOutcome};
use crate::core::record::{Event, Time};
use crate::core::uid::Uid;

/// The `ProbeResult` record of a worker's change.
fn record(key: &WorkerKey, c: Change) -> Command {
    Command::Append(Event::ProbeResult(ProbeResult {
        uid: key.uid.clone(),
        container: key.container.clone(),
        container_id: c.container_id,
        probe: key.probe,
        result: c.result,
        reason: c.reason,
        consecutive: c.consecutive,
        since_seq: c.since_seq,
    }))
}

fn probe_event(p: &Pod, event_type: EventType, reason: &str, message: String) -> Command {
    Command::RecordEvent(KubeEvent {
        object: ObjectRef::pod(p),
        event_type,
        reason: reason.into(),
        message,
    })
}

impl Node {
    /// The pod a worker probes: as the pod manager has it, else the pod worker's last copy
    /// (a static pod removed from its manifest while it terminates).
    fn probe_pod(&self, uid: &Uid) -> Option<Arc<Pod>> {
        self.pod_manager.get(uid).cloned().or_else(|| {
            self.pod_workers
                .status(uid)
                .and_then(|s| s.last_pod().cloned())
        })
    }

    /// The keys of a pod's workers, in order.
    fn probe_keys_of(&self, uid: &Uid) -> Vec<WorkerKey> {
        self.probers.of_pod(uid).map(|(k, _)| k.clone()).collect()
    }

    /// Tells `ProbeResults` which workers a container has now.
    fn refresh_probe_registry(&mut self, uid: &Uid, container: &str) {
        let has = |t: ProbeType| {
            let key = WorkerKey {
                uid: uid.clone(),
                container: container.to_string(),
                probe: t,
            };
            self.probers
                .workers
                .contains_key(&key)
                .then(|| t.initial_value())
        };
        let initial = ContainerProbes {
            liveness: has(ProbeType::Liveness),
            readiness: has(ProbeType::Readiness),
            startup: has(ProbeType::Startup),
        };
        self.probes.set_workers(uid, container, initial);
    }

    /// `AddPod`: a worker for every configured probe of the pod's containers and sidecars
    /// that has none yet, each with its timer. The first tick comes at once, or, while the
    /// agent started less than one period ago, after a jitter in `[0, period)` derived from
    /// the record (PR-14).
    pub(in crate::core) fn probes_add_pod(
        &mut self,
        uid: &Uid,
        p: &Pod,
        seq: u64,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let mut touched: Vec<String> = Vec::new();
        for c in probed_containers(p) {
            for t in ProbeType::ALL {
                let Some(probe) = t.of(c) else {
                    continue;
                };
                let key = WorkerKey {
                    uid: uid.clone(),
                    container: c.name.clone(),
                    probe: t,
                };
                if self.probers.workers.contains_key(&key) {
                    continue;
                }
                let settings = ProbeSettings::of(t, probe);
                let period_ms = settings.period_ms();
                let recently_started =
                    now.since(self.probers.started_at).as_millis() < u128::from(period_ms);
                let delay_ms = if recently_started {
                    (jitter::unit_interval(seq, &key.jitter_key()) * period_ms as f64) as u64
                } else {
                    0
                };
                self.timers.set(key.timer(), now.plus_ms(delay_ms), out);
                self.probers
                    .workers
                    .insert(key, ProbeWorker::new(t, settings));
                if !touched.contains(&c.name) {
                    touched.push(c.name.clone());
                }
            }
        }
        for name in touched {
            self.refresh_probe_registry(uid, &name);
        }
    }

    /// Removes a worker: its timer is disarmed and its result forgotten (`worker.stop()`).
    fn remove_probe_worker(&mut self, key: &WorkerKey, out: &mut Vec<Command>) {
        let Some(mut w) = self.probers.workers.remove(key) else {
            return;
        };
        self.timers.disarm(&key.timer());
        if let Some(c) = w.forget() {
            out.push(record(key, c));
        }
        self.refresh_probe_registry(&key.uid, &key.container);
    }

    /// `SyncTerminatingPod` step 2: `StopLivenessAndStartup` (no liveness kill while the pod
    /// terminates, PR-12/RT-43), and readiness forced to failure with no more runs, so the
    /// pod is not Ready before its containers stop.
    pub(in crate::core) fn probes_pod_terminating(&mut self, uid: &Uid, out: &mut Vec<Command>) {
        for key in self.probe_keys_of(uid) {
            match key.probe {
                ProbeType::Liveness | ProbeType::Startup => self.remove_probe_worker(&key, out),
                ProbeType::Readiness => {
                    let Some(w) = self.probers.workers.get_mut(&key) else {
                        continue;
                    };
                    if w.phase == WorkerPhase::Pinned {
                        continue;
                    }
                    let change = w.pin();
                    self.timers.disarm(&key.timer());
                    if let Some(c) = change {
                        out.push(record(&key, c));
                    }
                }
            }
        }
    }

    /// `RemovePod`: the pod's containers are stopped; every worker goes.
    pub(in crate::core) fn probes_remove_pod(&mut self, uid: &Uid, out: &mut Vec<Command>) {
        for key in self.probe_keys_of(uid) {
            self.remove_probe_worker(&key, out);
        }
    }

    /// `CleanupPods` (housekeeping): workers of pods that are neither syncing nor
    /// terminating go.
    pub(in crate::core) fn probes_cleanup(&mut self, out: &mut Vec<Command>) {
        let stale: Vec<WorkerKey> = self
            .probers
            .workers
            .keys()
            .filter(|k| {
                !self.pod_workers.status(&k.uid).is_some_and(|s| {
                    matches!(
                        s.state(),
                        PodWorkerState::Sync | PodWorkerState::Terminating
                    )
                })
            })
            .cloned()
            .collect();
        for key in stale {
            self.remove_probe_worker(&key, out);
        }
    }

    /// A worker's timer fired: tick, then arm the next tick one period later.
    pub(in crate::core) fn probe_timer_fired(
        &mut self,
        key: &WorkerKey,
        seq: u64,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        self.probe_tick(key, seq, now, out);
        self.rearm_probe(key, now, out);
    }

    fn rearm_probe(&mut self, key: &WorkerKey, now: Time, out: &mut Vec<Command>) {
        let Some(w) = self.probers.workers.get(key) else {
            return;
        };
        if w.phase != WorkerPhase::Pinned {
            let due = now.plus_ms(w.settings.period_ms());
            self.timers.set(key.timer(), due, out);
        }
    }

    /// `doProbe`: records what the tick decided and starts the run, if any.
    fn probe_tick(&mut self, key: &WorkerKey, seq: u64, now: Time, out: &mut Vec<Command>) {
        let Some(pod) = self.probe_pod(&key.uid) else {
            self.remove_probe_worker(key, out);
            return;
        };
        let status = self.statuses.get(&key.uid).map(|v| v.status.clone());
        let Some(w) = self.probers.workers.get_mut(key) else {
            return;
        };
        let tick = w.tick(&TickInput {
            now,
            pod: &pod,
            status: status.as_deref(),
            container: &key.container,
        });
        if tick.run.is_some() && !tick.stop {
            w.in_flight = Some(seq);
        }
        for c in tick.changes {
            out.push(record(key, c));
        }
        if tick.stop {
            self.remove_probe_worker(key, out);
            return;
        }
        if let Some(container_id) = tick.run {
            let pod_ip = status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default();
            out.push(Command::RunProbe(ProbeCommand {
                uid: key.uid.clone(),
                pod,
                container: key.container.clone(),
                container_id,
                probe: key.probe,
                pod_ip,
                run: seq,
            }));
        }
    }

    /// `UpdatePodStatus`'s manual trigger: after a pod's status is generated, a readiness
    /// worker whose running container is not ready yet probes now, and its ticker starts
    /// over (PR-14).
    pub(in crate::core) fn probes_trigger_readiness(
        &mut self,
        uid: &Uid,
        seq: u64,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let Some(status) = self.statuses.get(uid).map(|v| v.status.clone()) else {
            return;
        };
        for key in self.probe_keys_of(uid) {
            if key.probe != ProbeType::Readiness {
                continue;
            }
            let running = status
                .container_statuses
                .iter()
                .chain(status.init_container_statuses.iter())
                .flatten()
                .find(|c| c.name == key.container && pod_spec::is_running(c));
            let Some(cs) = running else {
                continue;
            };
            let id = runtime_id(cs.container_id.as_deref().unwrap_or_default());
            let ready = self.probes.for_container(uid, &key.container, id).readiness;
            if ready == Some(ProbeOutcome::Success) {
                continue;
            }
            let idle = self
                .probers
                .workers
                .get(&key)
                .is_some_and(|w| w.phase == WorkerPhase::Active && w.in_flight.is_none());
            if idle {
                self.probe_tick(&key, seq, now, out);
                self.rearm_probe(&key, now, out);
            }
        }
    }

    /// Folds a `ProbeFinished`: the probe Events, the thresholds, and a buffered tick.
    pub(in crate::core) fn probe_finished(
        &mut self,
        f: &ProbeFinished,
        seq: u64,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let key = WorkerKey {
            uid: f.uid.clone(),
            container: f.container.clone(),
            probe: f.probe,
        };
        let Some(w) = self.probers.workers.get_mut(&key) else {
            return; // the worker stopped meanwhile
        };
        if w.in_flight != Some(f.run) {
            return; // not this worker's run
        }
        let change = w.finish(&f.container_id, f.result, seq);
        let pending = std::mem::take(&mut w.tick_pending);
        if let Some(p) = self.probe_pod(&f.uid) {
            let label = f.probe.label();
            match f.result {
                RunResult::Success => {}
                RunResult::Warning => out.push(probe_event(
                    &p,
                    EventType::Warning,
                    "ProbeWarning",
                    format!("{label} probe warning: {}", f.output),
                )),
                RunResult::Failure => out.push(probe_event(
                    &p,
                    EventType::Warning,
                    "Unhealthy",
                    format!("{label} probe failed: {}", f.output),
                )),
                RunResult::Error => out.push(probe_event(
                    &p,
                    EventType::Warning,
                    "Unhealthy",
                    format!("{label} probe errored: {}", f.output),
                )),
            }
        }
        if let Some(c) = change {
            out.push(record(&key, c));
        }
        if pending {
            self.probe_tick(&key, seq, now, out);
        }
    }

    /// Folds a `ProbeResult`: the cached result, then what the kubelet's sync loop does with
    /// an update: readiness → `SetContainerReadiness`, startup → `SetContainerStartup`, and
    /// a pod sync for those and for a liveness failure (`handleProbeSync`).
    pub(in crate::core) fn probe_result(
        &mut self,
        r: &ProbeResult,
        now: Time,
        out: &mut Vec<Command>,
    ) {
        let Some(outcome) = r.result else {
            self.probes.remove_one(&r.container_id, r.probe);
            return;
        };
        self.probes.set_one(&r.container_id, r.probe, outcome);
        let Some(p) = self.probe_pod(&r.uid) else {
            return;
        };
        let id = api_container_id(&self.config.runtime_name, &r.container_id);
        let success = outcome == ProbeOutcome::Success;
        match r.probe {
            ProbeType::Readiness => {
                self.statuses
                    .set_container_readiness(&r.uid, &p, &id, success, now);
            }
            ProbeType::Startup => {
                self.statuses
                    .set_container_startup(&r.uid, &p, &id, success, now);
            }
            ProbeType::Liveness => {}
        }
        if r.probe != ProbeType::Liveness || outcome == ProbeOutcome::Failure {
            self.handle_pod_sync(&r.uid, now, out);
        }
    }
}
