//! A node driven by hand through the real engine, with the test playing the shell: a tiny
//! runtime that carries out runtime plans, timers fired on demand, and probe runs answered
//! by the test.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus as ApiContainerStatus, ExecAction, Pod, PodSpec, PodStatus, Probe,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::command::{Command, ContainerKill, KubeEvent, RuntimePlan, WorkType};
use crate::core::config::{CoreConfig, PodSource};
use crate::core::probes::{ProbeCommand, ProbeFinished, ProbeType, RunResult};
use crate::core::record::event::{
    ConfigApplied, PlegEvent, PlegEventKind, PodConfigChange, RuntimeStatusObserved, SourceReady,
    SyncFinished, SyncOutcome, TimerFired,
};
use crate::core::record::{Event, Record, Time};
use crate::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState, SandboxStatus,
};
use crate::core::timers::{ArmedTimer, TimerKey};
use crate::core::{Node, Uid};
use crate::engine::Engine;

pub const T0: i64 = 1_800_000_000;

/// An exec probe with the given timings.
pub fn probe(period_s: i32, initial_delay_s: i32, failure: i32) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec!["true".into()]),
        }),
        period_seconds: Some(period_s),
        initial_delay_seconds: Some(initial_delay_s),
        failure_threshold: Some(failure),
        ..Probe::default()
    }
}

/// A static pod `web` with one container `c`, grace 30 s.
pub fn pod_with(c: Container) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("uid-web".into()),
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![c],
            termination_grace_period_seconds: Some(30),
            ..PodSpec::default()
        }),
        status: Some(PodStatus::default()),
    })
}

pub fn container() -> Container {
    Container {
        name: "c".into(),
        image: Some("busybox".into()),
        command: Some(vec!["sleep".into(), "3600".into()]),
        ..Container::default()
    }
}

/// Stops the running instance `c` (exit 137 at `now`); returns its PLEG event.
fn kill(c: &mut ContainerStatus, now: Time) -> (PlegEventKind, String) {
    c.state = ContainerState::Exited;
    c.exit_code = 137;
    c.finished_at = Some(now);
    (PlegEventKind::ContainerDied, c.id.clone())
}

pub struct Fx {
    pub engine: Engine,
    pub now: Time,
    runtime: BTreeMap<Uid, RuntimePodStatus>,
    next_id: u32,
    pub timers: BTreeMap<TimerKey, (ArmedTimer, u64)>,
    pub probes: Vec<(ProbeCommand, u64)>,
    pub events: Vec<KubeEvent>,
    pub kills: Vec<ContainerKill>,
    /// Every command the core emitted, with its cause.
    pub commands: Vec<(u64, Command)>,
    queue: VecDeque<(Event, Option<u64>)>,
    /// Answer terminating syncs at once (false: the test finishes them).
    pub finish_terminating: bool,
    pending_terminating: Vec<(u64, Uid, u64)>,
}

impl Fx {
    pub fn new() -> Fx {
        let mut fx = Fx {
            engine: Engine::new(Default::default()),
            now: Time::from_unix_secs(T0),
            runtime: BTreeMap::new(),
            next_id: 0,
            timers: BTreeMap::new(),
            probes: Vec::new(),
            events: Vec::new(),
            kills: Vec::new(),
            commands: Vec::new(),
            queue: VecDeque::new(),
            finish_terminating: true,
            pending_terminating: Vec::new(),
        };
        let config = CoreConfig {
            node_name: "n".into(),
            runtime_name: "test".into(),
            sources: vec![PodSource::File],
            ..CoreConfig::default()
        };
        let config = Box::new(config);
        fx.submit(Event::ConfigApplied(ConfigApplied { config }), None);
        let source = PodSource::File;
        fx.submit(Event::SourceReady(SourceReady { source }), None);
        fx
    }

    pub fn node(&self) -> &Node {
        self.engine.node()
    }

    pub fn records(&self) -> Vec<Arc<Record>> {
        self.engine.ledger().since(0).cloned().collect()
    }

    pub fn submit(&mut self, e: Event, cause: Option<u64>) {
        self.queue.push_back((e, cause));
        self.drain();
    }

    /// Submits the queued events and carries out what they emit, until the queue is empty.
    fn drain(&mut self) {
        while let Some((e, cause)) = self.queue.pop_front() {
            for em in self.engine.submit(self.now, cause, None, e) {
                self.carry_out(em.cause.seq, em.command);
            }
        }
    }

    pub fn add(&mut self, pod: Arc<Pod>) {
        let source = PodSource::File;
        self.submit(Event::PodAdded(PodConfigChange { source, pod }), None);
    }

    pub fn remove(&mut self, pod: Arc<Pod>) {
        let source = PodSource::File;
        self.submit(Event::PodRemoved(PodConfigChange { source, pod }), None);
    }

    /// Removes the pod `uid` the pod manager has.
    pub fn remove_pod(&mut self, uid: &str) {
        self.remove(self.node().pod_manager.get(&Uid::new(uid)).unwrap().clone());
    }

    fn observe(&mut self, uid: &Uid, cause: u64, events: Vec<(PlegEventKind, String)>) {
        let status = self.runtime.get(uid).cloned().map(Arc::new);
        self.queue.push_back((
            Event::RuntimeStatusObserved(RuntimeStatusObserved {
                uid: uid.clone(),
                status,
                error: None,
                read_after_seq: Some(cause),
            }),
            Some(cause),
        ));
        for (kind, id) in events {
            self.queue.push_back((
                Event::PlegEvent(PlegEvent {
                    uid: uid.clone(),
                    kind,
                    container_id: Some(id),
                }),
                None,
            ));
        }
    }

    fn carry_out(&mut self, cause: u64, c: Command) {
        self.commands.push((cause, c.clone()));
        match c {
            Command::InspectPod { uid } => self.observe(&uid, cause, vec![]),
            Command::SyncPod(s) => {
                let events = self.apply(&s.uid, &s.pod, &s.plan);
                self.finish(cause, &s.uid, s.sync_id, WorkType::Sync);
                self.observe(&s.uid, cause, events);
            }
            Command::SyncTerminatingPod(s) => {
                if self.finish_terminating {
                    let events = self.stop_all(&s.uid, &s.kill.containers);
                    self.finish(cause, &s.uid, s.sync_id, WorkType::Terminating);
                    self.observe(&s.uid, cause, events);
                } else {
                    self.kills.extend(s.kill.containers.iter().cloned());
                    self.pending_terminating.push((cause, s.uid, s.sync_id));
                }
            }
            Command::SyncTerminatedPod(s) => {
                self.finish(cause, &s.uid, s.sync_id, WorkType::Terminated);
            }
            Command::SetTimer(t) => {
                self.timers.insert(t.key.clone(), (t, cause));
            }
            Command::RunProbe(p) => self.probes.push((p, cause)),
            Command::RecordEvent(e) => self.events.push(e),
            _ => {}
        }
    }

    /// Finishes the terminating syncs held back with `finish_terminating = false`.
    pub fn finish_held_terminating(&mut self) {
        for (cause, uid, sync_id) in std::mem::take(&mut self.pending_terminating) {
            let events = self.stop_all(&uid, &[]);
            self.finish(cause, &uid, sync_id, WorkType::Terminating);
            self.observe(&uid, cause, events);
        }
        self.drain();
    }

    fn finish(&mut self, cause: u64, uid: &Uid, sync_id: u64, work: WorkType) {
        self.queue.push_back((
            Event::SyncFinished(SyncFinished {
                uid: uid.clone(),
                sync_id,
                work,
                outcome: SyncOutcome::Ok,
            }),
            Some(cause),
        ));
    }

    fn stop_all(&mut self, uid: &Uid, kills: &[ContainerKill]) -> Vec<(PlegEventKind, String)> {
        self.kills.extend(kills.iter().cloned());
        let now = self.now;
        let mut events = vec![];
        if let Some(rt) = self.runtime.get_mut(uid) {
            for c in &mut rt.containers {
                if c.state == ContainerState::Running {
                    events.push(kill(c, now));
                }
            }
            for s in &mut rt.sandboxes {
                s.state = SandboxState::SandboxNotready;
            }
        }
        events
    }

    /// Carries out a runtime plan: kills, then starts (each start is a new running instance).
    fn apply(&mut self, uid: &Uid, p: &Pod, plan: &RuntimePlan) -> Vec<(PlegEventKind, String)> {
        let now = self.now;
        let mut events = vec![];
        self.kills.extend(plan.kill_containers.iter().cloned());
        let rt = self.runtime.entry(uid.clone()).or_default();
        rt.name = p.metadata.name.clone().unwrap_or_default();
        rt.namespace = p.metadata.namespace.clone().unwrap_or_default();
        for k in &plan.kill_containers {
            if let Some(c) = rt.containers.iter_mut().find(|c| c.id == k.id) {
                events.push(kill(c, now));
            }
        }
        if plan.create_sandbox.is_some() {
            rt.sandboxes.insert(
                0,
                SandboxStatus {
                    id: format!("sandbox-{uid}"),
                    state: SandboxState::SandboxReady,
                    created_at: now,
                    attempt: plan.create_sandbox.unwrap_or(0),
                    ip: Some("10.0.0.2".into()),
                    host_network: false,
                },
            );
            rt.ips = vec!["10.0.0.2".into()];
        }
        for s in &plan.start {
            self.next_id += 1;
            let id = format!("ctr-{}", self.next_id);
            rt.containers.insert(
                0,
                ContainerStatus {
                    id: id.clone(),
                    name: s.name.clone(),
                    state: ContainerState::Running,
                    created_at: now,
                    started_at: Some(now),
                    finished_at: None,
                    exit_code: 0,
                    reason: String::new(),
                    message: String::new(),
                    image: "busybox".into(),
                    image_ref: String::new(),
                    hash: s.hash.clone(),
                    restart_count: s.restart_count,
                },
            );
            events.push((PlegEventKind::ContainerStarted, id));
        }
        events
    }

    /// Advances the clock by `ms`, firing every timer that comes due on the way, in order.
    pub fn advance(&mut self, ms: u64) {
        let until = self.now.plus_ms(ms);
        loop {
            let next = self
                .timers
                .values()
                .filter(|(t, _)| t.due <= until)
                .min_by_key(|(t, _)| (t.due, t.generation))
                .map(|(t, c)| (t.clone(), *c));
            let Some((t, cause)) = next else { break };
            self.timers.remove(&t.key);
            self.now = self.now.max(t.due);
            self.submit(
                Event::TimerFired(TimerFired {
                    key: t.key,
                    generation: t.generation,
                }),
                Some(cause),
            );
        }
        self.now = until;
    }

    /// Answers every pending run of `probe` with `result` (output `out`).
    pub fn answer(&mut self, probe: ProbeType, result: RunResult, out: &str) -> usize {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.probes)
            .into_iter()
            .partition(|(p, _)| p.probe == probe);
        self.probes = rest;
        let n = mine.len();
        for (p, cause) in mine {
            self.submit(
                Event::ProbeFinished(ProbeFinished {
                    uid: p.uid,
                    container: p.container,
                    container_id: p.container_id,
                    probe: p.probe,
                    run: p.run,
                    result,
                    output: out.into(),
                    duration_ms: 1,
                }),
                Some(cause),
            );
        }
        n
    }

    /// Advances one second (period 1 s) and answers the runs of `probe` that came.
    pub fn period(&mut self, probe: ProbeType, result: RunResult) -> usize {
        self.advance(1000);
        self.answer(probe, result, "out")
    }

    /// The cached API status of the pod.
    pub fn status(&self, uid: &str) -> Arc<PodStatus> {
        let cached = self.node().statuses.get(&Uid::new(uid));
        cached.expect("a status").status.clone()
    }

    /// The API status of container `c`.
    pub fn container(&self, uid: &str) -> ApiContainerStatus {
        self.status(uid).container_statuses.as_ref().unwrap()[0].clone()
    }

    /// `ready` of container `c`.
    pub fn ready(&self, uid: &str) -> bool {
        self.container(uid).ready
    }

    /// The pod's Ready condition.
    pub fn pod_ready(&self, uid: &str) -> Option<String> {
        let s = self.status(uid);
        s.conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.clone())
    }

    /// Restart count of container `c`.
    pub fn restarts(&self, uid: &str) -> i32 {
        self.container(uid).restart_count
    }

    /// The first command emitted so far that `f` picks something from.
    pub fn find_command<T>(&self, f: impl FnMut(&Command) -> Option<T>) -> Option<T> {
        self.commands.iter().map(|(_, c)| c).find_map(f)
    }

    /// The `ProbeResult` records so far.
    pub fn results(&self) -> Vec<crate::core::probes::ProbeResult> {
        self.records()
            .iter()
            .filter_map(|r| match &r.event {
                Event::ProbeResult(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }
}
