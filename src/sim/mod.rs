//! A seeded, single-threaded simulation of a node: the real engine (ledger + core) driven by
//! a simulated shell, runtime and clock.
//!
//! Owns the simulated world: a virtual clock, an ordered queue of future inputs, a toy
//! runtime that "runs" a pod's containers when synced and stops them when terminated, timer
//! delivery, and seeded fault injection. The same seed and script produce the same ledger,
//! byte for byte. Must not be used by the agent itself: it exists for tests, examples and
//! benchmarks, and it never touches real processes or the network.
//!
//! Pods can steer the simulated runtime with annotations (only the simulator reads them):
//! `sim.ledgerlet.dev/complete-after-syncs: "N"` makes the N-th `SyncPod` find every
//! container exited (the pod turns terminal); `sim.ledgerlet.dev/fail-syncs: "N"` makes the
//! first N `SyncPod` calls fail.

pub mod scenarios;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::core::command::{Command, KubeEvent, WorkType};
use crate::core::config::CoreConfig;
use crate::core::pod;
use crate::core::record::event::{
    ConfigApplied, PlegEvent, PlegEventKind, RuntimeStatusObserved, SyncFinished, SyncOutcome,
    TimerFired,
};
use crate::core::record::{Event, Time};
use crate::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState, SandboxStatus,
};
use crate::core::uid::Uid;
use crate::engine::{Emitted, Engine};
use crate::ledger::{codec, LedgerConfig};

/// Annotation: the N-th SyncPod finds the pod's containers exited.
pub const COMPLETE_AFTER_SYNCS: &str = "sim.ledgerlet.dev/complete-after-syncs";
/// Annotation: the first N SyncPod calls fail.
pub const FAIL_SYNCS: &str = "sim.ledgerlet.dev/fail-syncs";

/// Knobs of the simulated world.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed for latencies and faults.
    pub seed: u64,
    /// The virtual clock's start.
    pub start: Time,
    /// The core configuration appended first.
    pub core: CoreConfig,
    /// Ledger limits.
    pub ledger: LedgerConfig,
    /// Latency of a sync command, uniformly in [min, max] ms.
    pub sync_latency_ms: (u64, u64),
    /// Latency of an `InspectPod`, uniformly in [min, max] ms.
    pub inspect_latency_ms: (u64, u64),
    /// Probability (per million) that any sync fails with a transient error.
    pub sync_failure_per_million: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            start: Time::parse_rfc3339("2026-01-01T00:00:00Z").expect("valid"),
            core: CoreConfig {
                node_name: "sim-node".into(),
                ..CoreConfig::default()
            },
            ledger: LedgerConfig::default(),
            sync_latency_ms: (5, 50),
            inspect_latency_ms: (1, 5),
            sync_failure_per_million: 0,
        }
    }
}

/// The simulator's deterministic random source (splitmix64).
#[derive(Clone, Debug)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, (lo, hi): (u64, u64)) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }

    /// True with probability `per_million / 1e6`.
    pub fn chance(&mut self, per_million: u32) -> bool {
        self.next_u64() % 1_000_000 < u64::from(per_million)
    }
}

#[derive(Clone, Debug)]
enum Item {
    /// An event to append.
    Input(Event),
    /// A sync completes; a cancellation that arrived meanwhile turns a successful `SyncPod`
    /// into `Canceled` (its cancellable waits were cut short).
    SyncDone(SyncFinished),
}

#[derive(Clone, Debug)]
struct Scheduled {
    item: Item,
    cause: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct SimPod {
    status: RuntimePodStatus,
    syncs: u32,
    next_container: u64,
}

/// A simulated node.
pub struct Sim {
    config: SimConfig,
    engine: Engine,
    now: Time,
    queue: BTreeMap<(Time, u64), Scheduled>,
    next_order: u64,
    rng: SimRng,
    runtime: BTreeMap<Uid, SimPod>,
    canceled: BTreeSet<(Uid, u64)>,
    /// The last status reported per pod: an unchanged status is reported as the same `Arc`
    /// (as the real shell does), so the ledger shares it.
    reported: BTreeMap<Uid, Arc<RuntimePodStatus>>,
    /// Kubernetes Events the core asked to record, in order.
    pub kube_events: Vec<KubeEvent>,
    /// Every command the shell received, with the seq of the record that caused it.
    pub commands: Vec<(u64, Command)>,
}

impl Sim {
    /// A simulated node whose ledger starts with `ConfigApplied`.
    pub fn new(config: SimConfig) -> Sim {
        let mut sim = Sim {
            engine: Engine::new(config.ledger.clone()),
            now: config.start,
            queue: BTreeMap::new(),
            next_order: 0,
            rng: SimRng::new(config.seed),
            runtime: BTreeMap::new(),
            canceled: BTreeSet::new(),
            reported: BTreeMap::new(),
            kube_events: Vec::new(),
            commands: Vec::new(),
            config,
        };
        let core = sim.config.core.clone();
        sim.input(Event::ConfigApplied(ConfigApplied {
            config: Box::new(core),
        }));
        sim
    }

    /// The engine (ledger and folded node).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The virtual clock.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Submits an external input now.
    pub fn input(&mut self, event: Event) {
        let emitted = self.engine.submit(self.now, None, None, event);
        self.carry_out(emitted);
        self.idle_unless_due();
    }

    /// Ends the engine's turn when nothing else is due at the current virtual time, as the
    /// daemon does when its inbox is empty: the fold-duration histogram then holds the
    /// engine's time on each record, not the simulator's own work between inputs.
    fn idle_unless_due(&mut self) {
        let due_now = self
            .queue
            .first_key_value()
            .is_some_and(|((at, _), _)| *at <= self.now);
        if !due_now {
            self.engine.idle();
        }
    }

    /// Schedules an external input `after_ms` from now.
    pub fn input_after(&mut self, after_ms: u64, event: Event) {
        let at = self.now.plus_ms(after_ms);
        self.schedule(at, event, None);
    }

    fn schedule(&mut self, at: Time, event: Event, cause: Option<u64>) {
        self.schedule_item(at, Item::Input(event), cause);
    }

    fn schedule_item(&mut self, at: Time, item: Item, cause: Option<u64>) {
        self.next_order += 1;
        self.queue
            .insert((at, self.next_order), Scheduled { item, cause });
    }

    /// Runs the world until the clock reaches `until` (inputs due then included).
    pub fn run_until(&mut self, until: Time) {
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > until {
                break;
            }
            let ((at, _), scheduled) = entry.remove_entry();
            self.now = self.now.max(at);
            let event = match scheduled.item {
                Item::Input(e) => e,
                Item::SyncDone(mut f) => {
                    let canceled = self.canceled.remove(&(f.uid.clone(), f.sync_id));
                    if canceled && f.work == WorkType::Sync && f.outcome == SyncOutcome::Ok {
                        f.outcome = SyncOutcome::Canceled;
                    }
                    Event::SyncFinished(f)
                }
            };
            let emitted = self.engine.submit(self.now, scheduled.cause, None, event);
            self.carry_out(emitted);
            self.idle_unless_due();
        }
        self.now = self.now.max(until);
    }

    /// Runs the world for `ms` of virtual time.
    pub fn run_for(&mut self, ms: u64) {
        let until = self.now.plus_ms(ms);
        self.run_until(until);
    }

    /// The ledger as NDJSON (every retained record, no snapshot).
    pub fn export_ndjson(&self) -> String {
        let mut out = Vec::new();
        for r in self.engine.ledger().since(0) {
            codec::write_record(&mut out, r).expect("writing to a Vec cannot fail");
        }
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// The simulated runtime's current view of a pod.
    pub fn runtime_status(&self, uid: &Uid) -> Option<&RuntimePodStatus> {
        self.runtime.get(uid).map(|p| &p.status)
    }

    /// Places a pod in the simulated runtime as if a previous agent had started it.
    pub fn seed_runtime_pod(&mut self, uid: &Uid, name: &str, namespace: &str) {
        let now = self.now;
        let sp = self.runtime.entry(uid.clone()).or_default();
        sp.status.name = name.into();
        sp.status.namespace = namespace.into();
        sp.status.sandboxes = vec![ready_sandbox(uid, "10.0.0.9", now)];
        sp.status.containers = vec![running_container(
            format!("{uid}-leftover"),
            "leftover",
            now,
        )];
    }

    fn carry_out(&mut self, emitted: Vec<Emitted>) {
        for e in emitted {
            let cause = e.cause.seq;
            self.commands.push((cause, e.command.clone()));
            match e.command {
                Command::Append(_) => unreachable!("the engine folds derived events"),
                Command::SetTimer(t) => {
                    let at = t.due.max(self.now);
                    self.schedule(
                        at,
                        Event::TimerFired(TimerFired {
                            key: t.key,
                            generation: t.generation,
                        }),
                        Some(cause),
                    );
                }
                Command::RecordEvent(ev) => self.kube_events.push(ev),
                Command::Node(_) | Command::SyncPodStatus(_) => {}
                Command::InspectPod { uid } => {
                    let delay = self.rng.range(self.config.inspect_latency_ms);
                    let status = self.observed(&uid);
                    self.schedule(
                        self.now.plus_ms(delay),
                        Event::RuntimeStatusObserved(RuntimeStatusObserved {
                            uid,
                            status,
                            error: None,
                            read_after_seq: Some(self.engine.ledger().last_seq()),
                        }),
                        Some(cause),
                    );
                }
                Command::CancelSync { uid, sync_id } => {
                    self.canceled.insert((uid, sync_id));
                }
                Command::RunProbe(p) => {
                    // simulated containers are healthy: every probe passes
                    let delay = self.rng.range(self.config.inspect_latency_ms);
                    self.schedule(
                        self.now.plus_ms(delay),
                        Event::ProbeFinished(crate::core::probes::ProbeFinished {
                            uid: p.uid,
                            container: p.container,
                            container_id: p.container_id,
                            probe: p.probe,
                            run: p.run,
                            result: crate::core::probes::RunResult::Success,
                            output: String::new(),
                            duration_ms: delay,
                        }),
                        Some(cause),
                    );
                }
                Command::SyncPod(c) => {
                    let outcome = self.sim_sync_pod(&c.uid, &c.pod);
                    self.finish(cause, c.uid, c.sync_id, WorkType::Sync, outcome);
                }
                Command::SyncTerminatingPod(c) => {
                    self.stop_containers(&c.uid);
                    let outcome = self.maybe_fail(SyncOutcome::Ok);
                    self.finish(cause, c.uid, c.sync_id, WorkType::Terminating, outcome);
                }
                Command::SyncTerminatingRuntimePod(c) => {
                    self.runtime.remove(&c.uid);
                    self.finish(
                        cause,
                        c.uid,
                        c.sync_id,
                        WorkType::TerminatingRuntime,
                        SyncOutcome::Ok,
                    );
                }
                Command::RemovePodContent(c) => {
                    // what the next relist sees: what was removed is gone
                    self.runtime.remove(&c.uid);
                    let ids = c.containers.into_iter().chain(c.sandboxes).collect();
                    self.relist(&c.uid, ids, PlegEventKind::ContainerRemoved);
                }
                Command::SyncTerminatedPod(c) => {
                    let outcome = self.maybe_fail(SyncOutcome::Ok);
                    self.finish(cause, c.uid, c.sync_id, WorkType::Terminated, outcome);
                }
            }
        }
    }

    fn observed(&mut self, uid: &Uid) -> Option<Arc<RuntimePodStatus>> {
        let current = self.runtime.get(uid).filter(|p| !p.status.is_empty())?;
        match self.reported.get(uid) {
            Some(last) if **last == current.status => Some(last.clone()),
            _ => {
                let status = Arc::new(current.status.clone());
                self.reported.insert(uid.clone(), status.clone());
                Some(status)
            }
        }
    }

    fn maybe_fail(&mut self, outcome: SyncOutcome) -> SyncOutcome {
        if self.rng.chance(self.config.sync_failure_per_million) {
            SyncOutcome::Failed {
                message: "simulated runtime error: connection reset".into(),
            }
        } else {
            outcome
        }
    }

    fn finish(&mut self, cause: u64, uid: Uid, sync_id: u64, work: WorkType, outcome: SyncOutcome) {
        let delay = self.rng.range(self.config.sync_latency_ms);
        self.schedule_item(
            self.now.plus_ms(delay),
            Item::SyncDone(SyncFinished {
                uid,
                sync_id,
                work,
                outcome,
            }),
            Some(cause),
        );
    }

    fn sim_sync_pod(&mut self, uid: &Uid, p: &Pod) -> SyncOutcome {
        let annotation = |key: &str| -> Option<u32> {
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .and_then(|v| v.parse().ok())
        };
        let fail_syncs = annotation(FAIL_SYNCS).unwrap_or(0);
        let complete_after = annotation(COMPLETE_AFTER_SYNCS);
        let now = self.now;
        let names: Vec<String> = p
            .spec
            .as_ref()
            .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        let sp = self.runtime.entry(uid.clone()).or_default();
        sp.syncs += 1;
        if sp.syncs <= fail_syncs {
            return SyncOutcome::Failed {
                message: format!("simulated failure {} of {fail_syncs}", sp.syncs),
            };
        }
        sp.status.name = pod::name(p).into();
        sp.status.namespace = pod::namespace(p).into();
        if sp.status.sandboxes.is_empty() {
            sp.status
                .sandboxes
                .push(ready_sandbox(uid, "10.0.0.2", now));
            sp.status.ips = vec!["10.0.0.2".into()];
        }
        let mut started = Vec::new();
        for name in &names {
            if !sp.status.containers.iter().any(|c| &c.name == name) {
                sp.next_container += 1;
                let id = format!("{uid}-{}", sp.next_container);
                started.push(id.clone());
                sp.status
                    .containers
                    .insert(0, running_container(id, name, now));
            }
        }
        let terminal = complete_after.is_some_and(|n| sp.syncs >= n);
        let died = if terminal {
            exit_all(&mut sp.status, now, 0, "Completed")
        } else {
            Vec::new()
        };
        self.relist(uid, started, PlegEventKind::ContainerStarted);
        self.relist(uid, died, PlegEventKind::ContainerDied);
        let outcome = if terminal {
            SyncOutcome::Terminal
        } else {
            SyncOutcome::Ok
        };
        self.maybe_fail(outcome)
    }

    fn stop_containers(&mut self, uid: &Uid) {
        let now = self.now;
        let Some(sp) = self.runtime.get_mut(uid) else {
            return;
        };
        let died = exit_all(&mut sp.status, now, 143, "Error");
        self.relist(uid, died, PlegEventKind::ContainerDied);
    }

    /// What a PLEG relist would report after the change: the new status, then an event per
    /// changed container (1 s later, the generic relist period).
    fn relist(&mut self, uid: &Uid, ids: Vec<String>, kind: PlegEventKind) {
        if ids.is_empty() {
            return;
        }
        let at = self.now.plus_ms(1_000);
        let status = self.observed(uid);
        self.schedule(
            at,
            Event::RuntimeStatusObserved(RuntimeStatusObserved {
                uid: uid.clone(),
                status,
                error: None,
                read_after_seq: Some(self.engine.ledger().last_seq()),
            }),
            None,
        );
        for id in ids {
            self.schedule(
                at,
                Event::PlegEvent(PlegEvent {
                    uid: uid.clone(),
                    kind,
                    container_id: Some(id),
                }),
                None,
            );
        }
    }
}

/// The simulated runtime's ready sandbox of a pod.
fn ready_sandbox(uid: &Uid, ip: &str, now: Time) -> SandboxStatus {
    SandboxStatus {
        id: format!("sandbox-{uid}"),
        state: SandboxState::SandboxReady,
        created_at: now,
        attempt: 0,
        ip: Some(ip.into()),
        host_network: false,
    }
}

/// A container of the simulated runtime, running since `now`.
fn running_container(id: String, name: &str, now: Time) -> ContainerStatus {
    ContainerStatus {
        id,
        name: name.into(),
        state: ContainerState::Running,
        created_at: now,
        started_at: Some(now),
        finished_at: None,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        image: "busybox".into(),
        image_ref: String::new(),
        hash: String::new(),
        restart_count: 0,
    }
}

/// Every running container exits at `now` with `exit_code` and `reason`, and every sandbox
/// is no longer ready; the IDs of the containers that exited.
fn exit_all(status: &mut RuntimePodStatus, now: Time, exit_code: i32, reason: &str) -> Vec<String> {
    for s in &mut status.sandboxes {
        s.state = SandboxState::SandboxNotready;
    }
    let running = status
        .containers
        .iter_mut()
        .filter(|c| c.state == ContainerState::Running);
    running
        .map(|c| {
            c.state = ContainerState::Exited;
            c.finished_at = Some(now);
            c.exit_code = exit_code;
            c.reason = reason.into();
            c.id.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::observe::fold::{FOLD_DURATION_SECONDS, RECORDS_TOTAL};
    use crate::observe::metrics::testing::{recorded, total};

    #[test]
    fn the_simulated_engine_is_idle_between_inputs_so_every_folded_record_is_timed() {
        let (sim, text) = recorded(|h| {
            let sim = super::scenarios::busy_node(5, 60 * 1000);
            (sim, h.render())
        });
        let records = total(&text, RECORDS_TOTAL);
        let timed = total(&text, &format!("{FOLD_DURATION_SECONDS}_count"));
        assert_eq!(records, sim.engine().ledger().since(0).count() as f64);
        // a turn still running would be counted in records_total but not yet timed
        assert_eq!(timed, records, "records folded but not timed");
    }
}
