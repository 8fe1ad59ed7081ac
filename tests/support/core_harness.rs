//! A hand-driven node for scenario tests: the real engine (ledger + core) with the test
//! playing the shell, step by step.
//!
//! It owns nothing but bookkeeping: every answer it gives (runtime status, sync outcome,
//! timer firing) is an ordinary ledger record, exactly what the real shell would append.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as KTime};

use ledgerlet::core::command::{Command, WorkType};
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::pod_workers::{PodSyncStatus, PodWorkers, WorkerActivity};
use ledgerlet::core::record::event::{
    ConfigApplied, RuntimeStatusObserved, SourceReady, SyncFinished, SyncOutcome, TimerFired,
};
use ledgerlet::core::record::{Event, Time};
use ledgerlet::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState, SandboxStatus,
};
use ledgerlet::core::timers::TimerKey;
use ledgerlet::core::update::{KillPodOptions, PodStatusOverride, UpdatePod, UpdateType};
use ledgerlet::core::{Node, Uid};
use ledgerlet::engine::Engine;
use ledgerlet::ledger::LedgerConfig;

/// Builds test pods.
#[derive(Clone)]
pub struct PodBuilder(Pod);

pub fn pod(uid: &str, name: &str, namespace: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            uid: Some(uid.into()),
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/config.source".to_string(),
                "api".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            termination_grace_period_seconds: Some(30),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        }),
    })
}

impl PodBuilder {
    /// A static pod (config source `file`).
    pub fn static_pod(mut self) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("kubernetes.io/config.source".into(), "file".into());
        self
    }
    pub fn tgps(mut self, s: Option<i64>) -> Self {
        self.0
            .spec
            .as_mut()
            .unwrap()
            .termination_grace_period_seconds = s;
        self
    }
    /// Marked for deletion with `deletionGracePeriodSeconds`.
    pub fn deleted(mut self, grace_s: i64) -> Self {
        self.0.metadata.deletion_timestamp =
            Some(KTime("2026-01-01T00:00:00Z".parse().expect("timestamp")));
        self.0.metadata.deletion_grace_period_seconds = Some(grace_s);
        self
    }
    pub fn phase(mut self, p: &str) -> Self {
        self.0.status.as_mut().unwrap().phase = Some(p.into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(k.into(), v.into());
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(k.into(), v.into());
        self
    }
    pub fn build(self) -> Arc<Pod> {
        Arc::new(self.0)
    }
}

/// One sync method call seen by the "shell".
#[derive(Clone, Debug, PartialEq)]
pub struct SyncCall {
    pub sync_id: u64,
    pub work: WorkType,
    pub update_type: Option<UpdateType>,
    pub grace_s: Option<i64>,
    pub pod_name: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub status_override: Option<PodStatusOverride>,
}

pub struct Harness {
    pub engine: Engine,
    pub now: Time,
    /// Every non-append command, with the seq of the record that caused it.
    pub commands: Vec<(u64, Command)>,
    /// What `respond` reports for each pod (absent: nothing in the runtime).
    pub runtime: BTreeMap<Uid, RuntimePodStatus>,
}

pub const START: &str = "2026-01-01T00:00:00Z";

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(CoreConfig {
            node_name: "node".into(),
            ..CoreConfig::default()
        })
    }

    /// A harness whose only config source (`file`) has reported.
    pub fn with_file_source() -> Harness {
        let mut h = Harness::with_config(CoreConfig {
            node_name: "node".into(),
            sources: vec![PodSource::File],
            ..CoreConfig::default()
        });
        h.submit(Event::SourceReady(SourceReady {
            source: PodSource::File,
        }));
        h
    }

    pub fn with_config(config: CoreConfig) -> Harness {
        let mut h = Harness {
            engine: Engine::new(LedgerConfig::default()),
            now: Time::parse_rfc3339(START).unwrap(),
            commands: Vec::new(),
            runtime: BTreeMap::new(),
        };
        h.submit(Event::ConfigApplied(ConfigApplied {
            config: Box::new(config),
        }));
        h
    }

    pub fn node(&self) -> &Node {
        self.engine.node()
    }

    pub fn workers(&self) -> &PodWorkers {
        &self.engine.node().pod_workers
    }

    pub fn status(&self, uid: &str) -> &PodSyncStatus {
        self.workers()
            .status(&Uid::new(uid))
            .unwrap_or_else(|| panic!("no worker status for {uid}"))
    }

    pub fn has_status(&self, uid: &str) -> bool {
        self.workers().status(&Uid::new(uid)).is_some()
    }

    pub fn advance(&mut self, ms: u64) {
        self.now = self.now.plus_ms(ms);
    }

    /// Appends an external event now; returns the commands it (and what it derived) emitted.
    pub fn submit(&mut self, e: Event) -> Vec<Command> {
        let emitted = self.engine.submit(self.now, None, None, e);
        let cmds: Vec<Command> = emitted.iter().map(|e| e.command.clone()).collect();
        self.commands
            .extend(emitted.into_iter().map(|e| (e.cause.seq, e.command)));
        cmds
    }

    /// The seq the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.engine.ledger().last_seq() + 1
    }

    pub fn update(&mut self, t: UpdateType, p: &Arc<Pod>) -> Vec<Command> {
        self.submit(Event::UpdatePod(UpdatePod::for_pod(t, p.clone())))
    }

    /// Sends a kill; returns the seq of the UpdatePod record (the kill request's id).
    pub fn kill(&mut self, p: &Arc<Pod>, opts: KillPodOptions) -> (u64, Vec<Command>) {
        let seq = self.next_seq();
        let mut u = UpdatePod::for_pod(UpdateType::Kill, p.clone());
        u.kill = Some(opts);
        (seq, self.submit(Event::UpdatePod(u)))
    }

    pub fn activity(&self, uid: &str) -> WorkerActivity {
        self.status(uid).activity.clone()
    }

    /// The running sync of `uid`, if any.
    pub fn syncing(&self, uid: &str) -> Option<(u64, WorkType)> {
        match self.workers().status(&Uid::new(uid))?.activity {
            WorkerActivity::Syncing {
                sync_id, work_type, ..
            } => Some((sync_id, work_type)),
            _ => None,
        }
    }

    pub fn awaiting_status(&self, uid: &str) -> bool {
        matches!(
            self.workers().status(&Uid::new(uid)).map(|s| &s.activity),
            Some(WorkerActivity::AwaitingRuntimeStatus { .. })
        )
    }

    /// Reports the runtime status of `uid` (from `self.runtime`), read now.
    pub fn respond(&mut self, uid: &str) -> Vec<Command> {
        let read_after = self.engine.ledger().last_seq();
        self.respond_read_after(uid, read_after)
    }

    /// Reports the runtime status of `uid` (from `self.runtime`) as read just after record
    /// `read_after_seq`: a read that began then and is appended only now.
    pub fn respond_read_after(&mut self, uid: &str, read_after_seq: u64) -> Vec<Command> {
        let u = Uid::new(uid);
        let status = self.runtime.get(&u).cloned().map(Arc::new);
        self.submit(Event::RuntimeStatusObserved(RuntimeStatusObserved {
            uid: u,
            status,
            error: None,
            read_after_seq: Some(read_after_seq),
        }))
    }

    pub fn respond_error(&mut self, uid: &str, error: &str) -> Vec<Command> {
        self.submit(Event::RuntimeStatusObserved(RuntimeStatusObserved {
            uid: Uid::new(uid),
            status: None,
            error: Some(error.into()),
            read_after_seq: Some(self.engine.ledger().last_seq()),
        }))
    }

    /// Finishes the running sync of `uid` with `outcome`.
    pub fn finish(&mut self, uid: &str, outcome: SyncOutcome) -> Vec<Command> {
        let (sync_id, work) = self
            .syncing(uid)
            .unwrap_or_else(|| panic!("{uid} has no running sync: {:?}", self.activity(uid)));
        self.submit(Event::SyncFinished(SyncFinished {
            uid: Uid::new(uid),
            sync_id,
            work,
            outcome,
        }))
    }

    /// Runs `uid`'s worker until it is idle, answering every status wait and finishing
    /// every sync with `Ok` (a `SyncPod` of a pod listed in `terminal` ends `Terminal`).
    pub fn drain_pod(&mut self, uid: &str) {
        for _ in 0..100 {
            if !self.has_status(uid) {
                return;
            }
            if self.awaiting_status(uid) {
                self.respond(uid);
            } else if self.syncing(uid).is_some() {
                self.finish(uid, SyncOutcome::Ok);
            } else {
                return;
            }
        }
        panic!("{uid} did not go idle in 100 steps");
    }

    /// Drains every known worker until all are idle.
    pub fn drain(&mut self) {
        for _ in 0..1000 {
            let busy: Vec<String> = self
                .workers()
                .statuses()
                .filter(|(_, s)| !s.activity.is_idle())
                .map(|(u, _)| u.to_string())
                .collect();
            if busy.is_empty() {
                return;
            }
            for uid in busy {
                self.drain_pod(&uid);
            }
        }
        panic!("workers did not drain");
    }

    /// Every sync method call for `uid`, in order.
    pub fn sync_calls(&self, uid: &str) -> Vec<SyncCall> {
        let u = Uid::new(uid);
        self.commands
            .iter()
            .filter_map(|(_, c)| {
                let labels = |p: &Pod| p.metadata.labels.clone().unwrap_or_default();
                let name = |p: &Pod| p.metadata.name.clone();
                match c {
                    Command::SyncPod(s) if s.uid == u => Some(SyncCall {
                        sync_id: s.sync_id,
                        work: WorkType::Sync,
                        update_type: Some(s.update_type),
                        grace_s: None,
                        pod_name: name(&s.pod),
                        labels: labels(&s.pod),
                        status_override: None,
                    }),
                    Command::SyncTerminatingPod(s) if s.uid == u => Some(SyncCall {
                        sync_id: s.sync_id,
                        work: WorkType::Terminating,
                        update_type: None,
                        grace_s: s.grace_period_s,
                        pod_name: name(&s.pod),
                        labels: labels(&s.pod),
                        status_override: s.status_override.clone(),
                    }),
                    Command::SyncTerminatingRuntimePod(s) if s.uid == u => Some(SyncCall {
                        sync_id: s.sync_id,
                        work: WorkType::TerminatingRuntime,
                        update_type: None,
                        grace_s: None,
                        pod_name: Some(s.running_pod.name.clone()),
                        labels: BTreeMap::new(),
                        status_override: None,
                    }),
                    Command::SyncTerminatedPod(s) if s.uid == u => Some(SyncCall {
                        sync_id: s.sync_id,
                        work: WorkType::Terminated,
                        update_type: None,
                        grace_s: None,
                        pod_name: name(&s.pod),
                        labels: labels(&s.pod),
                        status_override: None,
                    }),
                    _ => None,
                }
            })
            .collect()
    }

    /// The kinds of work of every sync call for `uid`.
    pub fn sync_kinds(&self, uid: &str) -> Vec<WorkType> {
        self.sync_calls(uid).into_iter().map(|c| c.work).collect()
    }

    /// The armed timer for `key`: (generation, due).
    pub fn timer(&self, key: &TimerKey) -> Option<(u64, Time)> {
        self.node().timers.get(key).map(|t| (t.generation, t.due))
    }

    /// Fires the armed timer `key` now.
    pub fn fire(&mut self, key: TimerKey) -> Vec<Command> {
        let (generation, _) = self
            .timer(&key)
            .unwrap_or_else(|| panic!("timer {key:?} is not armed"));
        self.submit(Event::TimerFired(TimerFired { key, generation }))
    }

    /// The UpdatePod events appended (derived) so far, as (update type, uid).
    pub fn derived_updates(&self) -> Vec<(UpdateType, Uid)> {
        self.engine
            .ledger()
            .since(0)
            .filter(|r| r.cause.is_some())
            .filter_map(|r| match &r.event {
                Event::UpdatePod(u) => Some((u.update_type, u.uid().unwrap())),
                _ => None,
            })
            .collect()
    }
}

pub fn uid(s: &str) -> Uid {
    Uid::new(s)
}

/// A runtime container `id` named `name` in `state`, created and started at 1 s.
pub fn container_status(id: &str, name: &str, state: ContainerState) -> ContainerStatus {
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

/// A runtime pod `name` in `ns` with one sandbox `sb` (ready or not, created at 1 s, with
/// `ip` as its network status's IP) and `containers`.
pub fn runtime_pod(
    name: &str,
    ns: &str,
    sandbox_ready: bool,
    ip: Option<&str>,
    containers: Vec<ContainerStatus>,
) -> RuntimePodStatus {
    RuntimePodStatus {
        name: name.into(),
        namespace: ns.into(),
        ips: ip.iter().map(|i| i.to_string()).collect(),
        sandboxes: vec![SandboxStatus {
            id: "sb".into(),
            state: if sandbox_ready {
                SandboxState::SandboxReady
            } else {
                SandboxState::SandboxNotready
            },
            created_at: Time::from_unix_secs(1),
            attempt: 0,
            ip: ip.map(str::to_string),
            host_network: false,
        }],
        containers,
    }
}
