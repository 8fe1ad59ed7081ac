//! One prober worker (kubelet `prober/worker.go`) as pure state: one container, one probe
//! type.
//!
//! Owns `doProbe`'s decisions: which container instance is probed, its initial value, the
//! initial delay, startup gating, results counted against the thresholds, "on hold" after a
//! liveness or startup verdict, what a non-running container or a deleted pod means, and
//! when the worker exits. Must not run probes, arm timers or touch other state: `tick`
//! returns what to record and whether to start a run; `finish` folds a run's outcome.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};
use serde::{Deserialize, Serialize};

use super::records::{ResultReason, RunResult};
use super::spec::{ProbeSettings, ProbeType};
use crate::core::pod_status::containers::runtime_id;
use crate::core::pod_status::spec::{is_sidecar, restart_policy, RestartPolicy};
use crate::core::pod_status::time_from_api;
use crate::core::probe_results::ProbeOutcome;
use crate::core::record::Time;

/// Where a worker is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerPhase {
    /// Probing the current container instance at every tick (subject to the initial delay
    /// and startup gating), or waiting for an instance to appear (PR-10).
    #[default]
    Active,
    /// A liveness or startup failure was reported (or startup succeeded): nothing is probed
    /// until a new container instance appears (PR-05, PR-06, PR-07).
    OnHold,
    /// The pod is terminating: readiness stays at failure and nothing is probed until the
    /// worker is removed (upstream keeps probing readiness, PR-22).
    Pinned,
}

/// A result to record for a container instance (`resultsManager.Set` / `Remove`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Runtime container ID (no prefix).
    pub container_id: String,
    /// The new result, or `None` to forget it.
    pub result: Option<ProbeOutcome>,
    /// Why.
    pub reason: ResultReason,
    /// Consecutive runs behind a threshold change.
    pub consecutive: u32,
    /// Seq of the first of those runs.
    pub since_seq: Option<u64>,
}

impl Change {
    fn new(container_id: &str, result: Option<ProbeOutcome>, reason: ResultReason) -> Change {
        Change {
            container_id: container_id.to_string(),
            result,
            reason,
            consecutive: 0,
            since_seq: None,
        }
    }
}

/// What a tick decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// Results to record, in order.
    pub changes: Vec<Change>,
    /// Start a probe run against this container instance (runtime ID, no prefix).
    pub run: Option<String>,
    /// The worker exits: its results are forgotten and it is removed (PR-09, PR-11, PR-12).
    pub stop: bool,
}

/// What a tick looks at: the status manager's cached status (as the kubelet's worker reads
/// `statusManager.GetPodStatus`) and the pod as the node has it now.
pub struct TickInput<'a> {
    /// The folded record's time.
    pub now: Time,
    /// The pod.
    pub pod: &'a Pod,
    /// The cached API status, if the status manager has one.
    pub status: Option<&'a PodStatus>,
    /// The container's name.
    pub container: &'a str,
}

/// One worker's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeWorker {
    /// Which probe.
    pub probe: ProbeType,
    /// Timings and thresholds, taken from the spec when the worker was created.
    pub settings: ProbeSettings,
    /// Where the worker is.
    #[serde(default)]
    pub phase: WorkerPhase,
    /// The container instance being probed (runtime ID, no prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// What the worker last recorded for `container_id` (the cached result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<ProbeOutcome>,
    /// `lastResult` (Go's zero value is `Success`).
    pub last_result: ProbeOutcome,
    /// `resultRun`: consecutive runs with `last_result`.
    #[serde(default)]
    pub result_run: u32,
    /// Seq of the first `ProbeFinished` of the current run of results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_since_seq: Option<u64>,
    /// The probe run in flight (the seq that started it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u64>,
    /// A tick came while a run was in flight: tick again when it ends (Go's ticker keeps one
    /// tick buffered while `doProbe` runs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tick_pending: bool,
}

/// The container status named `name`: regular containers first, then init containers, and
/// only one that has a container ID.
fn find_container<'s>(status: &'s PodStatus, name: &str) -> Option<&'s ContainerStatus> {
    let with_id = |list: Option<&'s Vec<ContainerStatus>>| {
        list.into_iter()
            .flatten()
            .find(|c| c.name == name)
            .filter(|c| c.container_id.as_deref().is_some_and(|id| !id.is_empty()))
    };
    with_id(status.container_statuses.as_ref())
        .or_else(|| with_id(status.init_container_statuses.as_ref()))
}

impl ProbeWorker {
    /// A new worker (no container instance seen yet).
    pub fn new(probe: ProbeType, settings: ProbeSettings) -> ProbeWorker {
        ProbeWorker {
            probe,
            settings,
            phase: WorkerPhase::Active,
            container_id: None,
            reported: None,
            last_result: ProbeOutcome::Success,
            result_run: 0,
            run_since_seq: None,
            in_flight: None,
            tick_pending: false,
        }
    }

    /// Records `result` for the current instance if it differs from what was recorded
    /// (`resultsManager.Set` only reports changes).
    fn set(&mut self, result: ProbeOutcome, reason: ResultReason, out: &mut Vec<Change>) {
        let Some(id) = &self.container_id else {
            return;
        };
        if self.reported == Some(result) {
            return;
        }
        self.reported = Some(result);
        out.push(Change::new(id, Some(result), reason));
    }

    /// The change that forgets this worker's result (when it stops), if it has one.
    pub fn forget(&mut self) -> Option<Change> {
        let id = self.container_id.as_deref()?;
        self.reported.take()?;
        Some(Change::new(id, None, ResultReason::Stopped))
    }

    /// `doProbe` up to the probe itself.
    pub fn tick(&mut self, input: &TickInput<'_>) -> Tick {
        let mut t = Tick::default();
        // PR-10: no status yet (or already gone): wait
        let Some(status) = input.status else {
            return t;
        };
        // PR-11: a terminal pod ends the worker
        if matches!(status.phase.as_deref(), Some("Failed" | "Succeeded")) {
            t.stop = true;
            return t;
        }
        let Some(cs) = find_container(status, input.container) else {
            return t; // PR-10: not created yet, or deleted
        };
        let id = runtime_id(cs.container_id.as_deref().unwrap_or_default()).to_string();
        if self.container_id.as_deref() != Some(id.as_str()) {
            // a new instance: forget the old one's result, set the initial value, resume
            t.changes.extend(self.forget());
            self.container_id = Some(id.clone());
            self.set(
                self.probe.initial_value(),
                ResultReason::Initial,
                &mut t.changes,
            );
            if self.phase == WorkerPhase::OnHold {
                self.phase = WorkerPhase::Active;
            }
        }
        if self.phase != WorkerPhase::Active {
            return t;
        }
        let Some(running) = cs.state.as_ref().and_then(|s| s.running.as_ref()) else {
            // PR-09: not running counts as a failure; the worker ends only if this container
            // will never run again
            self.set(
                ProbeOutcome::Failure,
                ResultReason::NotRunning,
                &mut t.changes,
            );
            let terminated = cs.state.as_ref().is_some_and(|s| s.terminated.is_some());
            let sidecar = crate::core::pod_status::spec::init_containers(input.pod)
                .iter()
                .any(|c| c.name == input.container && is_sidecar(c));
            t.stop = terminated && restart_policy(input.pod) == RestartPolicy::Never && !sidecar;
            return t;
        };
        // PR-12: a deleted pod shuts down quietly, with no liveness kill
        if input.pod.metadata.deletion_timestamp.is_some()
            && matches!(self.probe, ProbeType::Liveness | ProbeType::Startup)
        {
            self.set(
                ProbeOutcome::Success,
                ResultReason::PodDeleting,
                &mut t.changes,
            );
            t.stop = true;
            return t;
        }
        // PR-02: nothing before the initial delay (whole seconds since the container started)
        if let Some(started) = &running.started_at {
            let ran_s = input.now.since(time_from_api(started)).as_secs();
            if ran_s < self.settings.initial_delay_s.max(0) as u64 {
                return t;
            }
        }
        // PR-08: the startup probe gates the others; once started it is not run again
        let started = cs.started == Some(true);
        if started == (self.probe == ProbeType::Startup) {
            return t;
        }
        if self.in_flight.is_some() {
            self.tick_pending = true;
            return t;
        }
        t.run = Some(id);
        t
    }

    /// Folds the outcome of the run in flight (`doProbe` after the probe). `seq` is the
    /// `ProbeFinished` record's. Returns the result change, if the thresholds make one.
    pub fn finish(&mut self, container_id: &str, result: RunResult, seq: u64) -> Option<Change> {
        self.in_flight = None;
        if self.phase != WorkerPhase::Active || self.container_id.as_deref() != Some(container_id) {
            return None; // a stale run (new instance, on hold, pinned): thrown away
        }
        let result = match result {
            RunResult::Success | RunResult::Warning => ProbeOutcome::Success,
            RunResult::Failure => ProbeOutcome::Failure,
            RunResult::Error => return None, // PR-16: errors are discarded
        };
        if self.last_result == result {
            self.result_run = self.result_run.saturating_add(1);
        } else {
            self.last_result = result;
            self.result_run = 1;
        }
        if self.result_run == 1 {
            self.run_since_seq = Some(seq);
        }
        let threshold = match result {
            ProbeOutcome::Failure => self.settings.failure_threshold,
            _ => self.settings.success_threshold,
        };
        if (self.result_run as i64) < i64::from(threshold) {
            return None; // below the threshold: the cached result stays
        }
        let consecutive = self.result_run;
        let since_seq = self.run_since_seq;
        let mut changes = Vec::new();
        self.set(result, ResultReason::Threshold, &mut changes);
        let verdict = matches!(self.probe, ProbeType::Liveness | ProbeType::Startup)
            && result == ProbeOutcome::Failure;
        if verdict {
            // PR-05: stop probing until a new instance appears
            self.phase = WorkerPhase::OnHold;
            self.result_run = 0;
            self.run_since_seq = None;
        } else if self.probe == ProbeType::Startup {
            // PR-06: a started container is not probed for startup again
            self.phase = WorkerPhase::OnHold;
        }
        changes.pop().map(|mut c| {
            c.consecutive = consecutive;
            c.since_seq = since_seq;
            c
        })
    }

    /// The pod started terminating: readiness is forced to failure and probing stops.
    pub fn pin(&mut self) -> Option<Change> {
        self.phase = WorkerPhase::Pinned;
        self.tick_pending = false;
        let mut changes = Vec::new();
        self.set(
            ProbeOutcome::Failure,
            ResultReason::Terminating,
            &mut changes,
        );
        changes.pop()
    }
}
