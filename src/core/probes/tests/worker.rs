//! The worker state machine on its own (prober/worker_test.go's scenarios): PR-01…PR-12.

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::pod_status::time_to_api;
use crate::core::probe_results::ProbeOutcome::{self, Failure, Success, Unknown};
use crate::core::probes::records::{ResultReason, RunResult};
use crate::core::probes::spec::{ProbeSettings, ProbeType};
use crate::core::probes::worker::{Change, ProbeWorker, Tick, TickInput, WorkerPhase};
use crate::core::record::Time;

const T0: i64 = 1_800_000_000;

fn at(s: i64) -> Time {
    Time::from_unix_secs(T0 + s)
}

fn pod(policy: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.into()),
            containers: vec![Container {
                name: "c".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn state_running(started_s: i64) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(time_to_api(at(started_s))),
        }),
        ..ContainerState::default()
    }
}

/// A pod status with container `c` as instance `id` in `state`.
fn status(id: &str, state: ContainerState, started: Option<bool>) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        container_statuses: Some(vec![ContainerStatus {
            name: "c".into(),
            container_id: (!id.is_empty()).then(|| format!("test://{id}")),
            state: Some(state),
            started,
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    }
}

fn running(id: &str) -> PodStatus {
    status(id, state_running(0), Some(true))
}

fn settings(initial_delay_s: i32, success: i32, failure: i32) -> ProbeSettings {
    ProbeSettings {
        initial_delay_s,
        period_s: 1,
        timeout_s: 1,
        success_threshold: success,
        failure_threshold: failure,
    }
}

struct W {
    w: ProbeWorker,
    pod: Pod,
    seq: u64,
    now_s: i64,
}

impl W {
    fn new(probe: ProbeType, s: ProbeSettings) -> W {
        W {
            w: ProbeWorker::new(probe, s),
            pod: pod("Always"),
            seq: 100,
            now_s: 100,
        }
    }

    fn tick(&mut self, st: Option<&PodStatus>) -> Tick {
        self.now_s += 1;
        self.w.tick(&TickInput {
            now: at(self.now_s),
            pod: &self.pod,
            status: st,
            container: "c",
        })
    }

    /// Ticks against `st`, expects a run, finishes it with `r`, returns the change.
    fn probe(&mut self, st: &PodStatus, r: RunResult) -> Option<Change> {
        let t = self.tick(Some(st));
        let id = t.run.expect("a run");
        self.seq += 1;
        self.w.in_flight = Some(self.seq);
        self.seq += 1;
        self.w.finish(&id, r, self.seq)
    }

    /// Runs `results` and returns the cached result after each (what was last reported).
    fn results(&mut self, st: &PodStatus, results: &[RunResult]) -> Vec<Option<ProbeOutcome>> {
        results
            .iter()
            .map(|r| {
                self.probe(st, *r);
                self.w.reported
            })
            .collect()
    }
}

fn outcome(c: &Change) -> Option<ProbeOutcome> {
    c.result
}

use RunResult::{Failure as F, Success as S};

#[test]
fn pr_01_initial_values_are_set_when_a_new_container_is_first_seen() {
    for (probe, want) in [
        (ProbeType::Liveness, Success),
        (ProbeType::Readiness, Failure),
        (ProbeType::Startup, Unknown),
    ] {
        // initial delay keeps the probe itself from running: only the initial value is set
        let mut w = W::new(probe, settings(1000, 1, 3));
        let t = w.tick(Some(&running("a")));
        assert_eq!(t.run, None);
        assert_eq!(t.changes.len(), 1, "{probe}: {t:?}");
        assert_eq!(t.changes[0].container_id, "a");
        assert_eq!(outcome(&t.changes[0]), Some(want), "{probe}");
        assert_eq!(t.changes[0].reason, ResultReason::Initial);
        // the same instance again: nothing new
        assert!(w.tick(Some(&running("a"))).changes.is_empty());
    }
    assert_eq!(ProbeType::Readiness.initial_value(), Failure);
}

#[test]
fn pr_02_nothing_runs_before_initial_delay_seconds_then_success() {
    let mut w = W::new(ProbeType::Readiness, settings(10, 1, 3));
    w.now_s = 0; // the container started at T0
    let st = running("a");
    for _ in 0..9 {
        let t = w.tick(Some(&st));
        assert_eq!(t.run, None, "at {}s", w.now_s);
    }
    assert_eq!(w.w.reported, Some(Failure), "the initial value stays");
    // at 10 s the probe runs and succeeds
    let c = w.probe(&st, S).expect("a change");
    assert_eq!(outcome(&c), Some(Success));
    assert_eq!(w.now_s, 10);
}

/// The outcome a run of `S` or `F` stands for.
fn o(r: RunResult) -> Option<ProbeOutcome> {
    Some(if r == S { Success } else { Failure })
}

#[test]
fn pr_03_readiness_failure_threshold_3() {
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 3));
    let got = w.results(&running("a"), &[S, S, S, F, F, F, F, S, F, F, F]);
    assert_eq!(got, [S, S, S, S, S, F, F, S, S, S, F].map(o));
}

#[test]
fn pr_04_readiness_success_threshold_3_failure_threshold_1() {
    let mut w = W::new(ProbeType::Readiness, settings(0, 3, 1));
    let got = w.results(&running("a"), &[S, S, S, F, S, S, S]);
    assert_eq!(got, [F, F, S, F, F, F, S].map(o));
}

#[test]
fn pr_05_liveness_failure_counting_then_on_hold() {
    let mut w = W::new(ProbeType::Liveness, settings(0, 1, 3));
    let st = running("a");
    assert_eq!(w.probe(&st, S), None, "already Success (initial)");
    assert_eq!((w.w.last_result, w.w.result_run), (Success, 1));
    assert_eq!(w.probe(&st, F), None);
    assert_eq!((w.w.last_result, w.w.result_run), (Failure, 1));
    assert_eq!(w.probe(&st, F), None);
    assert_eq!(w.w.reported, Some(Success));
    let c = w.probe(&st, F);
    let c = c.expect("the third failure changes the result");
    assert_eq!(outcome(&c), Some(Failure));
    assert_eq!(c.reason, ResultReason::Threshold);
    assert_eq!(c.consecutive, 3);
    assert_eq!(w.w.result_run, 0, "run reset");
    assert_eq!(w.w.phase, WorkerPhase::OnHold);
    // on hold: no more probing for this container
    for _ in 0..5 {
        assert_eq!(w.tick(Some(&st)), Tick::default());
    }
}

#[test]
fn pr_05_the_failure_run_names_its_first_record() {
    let mut w = W::new(ProbeType::Liveness, settings(0, 1, 2));
    let st = running("a");
    w.probe(&st, S);
    w.probe(&st, F);
    let first = w.seq;
    let c = w.probe(&st, F).unwrap();
    assert_eq!(c.since_seq, Some(first));
}

#[test]
fn pr_06_startup_failure_threshold_and_success_then_on_hold() {
    let mut w = W::new(ProbeType::Startup, settings(0, 1, 3));
    let st = status("a", state_running(0), Some(false));
    let got = w.results(&st, &[F, F]);
    assert_eq!(got, vec![Some(Unknown), Some(Unknown)]);
    let c = w.probe(&st, F).unwrap();
    assert_eq!(outcome(&c), Some(Failure));
    assert_eq!((w.w.phase, w.w.result_run), (WorkerPhase::OnHold, 0));

    let mut w = W::new(ProbeType::Startup, settings(0, 1, 3));
    let c = w.probe(&st, S).unwrap();
    assert_eq!(outcome(&c), Some(Success));
    assert_eq!(w.w.phase, WorkerPhase::OnHold, "not run again");
    assert_eq!(w.tick(Some(&st)).run, None);
}

#[test]
fn pr_07_a_new_container_lifts_the_hold() {
    let mut w = W::new(ProbeType::Liveness, settings(0, 1, 1));
    let c = w.probe(&running("a"), F).unwrap();
    assert_eq!(outcome(&c), Some(Failure));
    // a probe that would now succeed is ignored while on hold
    assert_eq!(w.tick(Some(&running("a"))).run, None);
    // the restarted container: the old result is forgotten, the initial value set, and the
    // next probe runs
    let t = w.tick(Some(&running("b")));
    let changes: Vec<_> = t
        .changes
        .iter()
        .map(|c| (&*c.container_id, c.result))
        .collect();
    assert_eq!(changes, [("a", None), ("b", Some(Success))], "{t:?}");
    assert_eq!(t.run.as_deref(), Some("b"));
    assert_eq!(w.w.phase, WorkerPhase::Active);
    w.w.in_flight = Some(1);
    assert_eq!(w.w.finish("b", S, 2), None, "stays Success");

    // startup goes on hold again after its success on the new instance
    let mut w = W::new(ProbeType::Startup, settings(0, 1, 1));
    let not_started = |id: &str| status(id, state_running(0), Some(false));
    w.probe(&not_started("a"), F);
    assert_eq!(w.w.phase, WorkerPhase::OnHold);
    let c = w.probe(&not_started("b"), S).unwrap();
    assert_eq!(outcome(&c), Some(Success));
    assert_eq!(w.w.phase, WorkerPhase::OnHold);
}

#[test]
fn pr_08_startup_gates_liveness_and_readiness() {
    let not_started = status("a", state_running(0), Some(false));
    for probe in [ProbeType::Liveness, ProbeType::Readiness] {
        let mut w = W::new(probe, settings(0, 1, 1));
        for _ in 0..3 {
            assert_eq!(w.tick(Some(&not_started)).run, None, "{probe} gated");
        }
        assert_eq!(w.w.reported, Some(probe.initial_value()));
        // once started, failures count
        w.probe(&running("a"), F);
        assert_eq!(w.w.last_result, Failure, "{probe}: the failure was counted");
        assert_eq!(w.w.reported, Some(Failure), "{probe}");
    }
    // a started container's startup probe is not run
    let mut w = W::new(ProbeType::Startup, settings(0, 1, 1));
    assert_eq!(w.tick(Some(&running("a"))).run, None);
}

#[test]
fn pr_09_a_container_that_is_not_running_is_a_failure() {
    let waiting = ContainerState {
        waiting: Some(ContainerStateWaiting::default()),
        ..ContainerState::default()
    };
    let exited = ContainerState {
        terminated: Some(ContainerStateTerminated::default()),
        ..ContainerState::default()
    };
    for policy in ["Always", "OnFailure", "Never"] {
        let mut w = W::new(ProbeType::Liveness, settings(0, 1, 1));
        w.pod = pod(policy);
        let t = w.tick(Some(&status("a", waiting.clone(), None)));
        let last = t.changes.last().unwrap();
        assert_eq!(outcome(last), Some(Failure), "{policy}");
        assert_eq!(last.reason, ResultReason::NotRunning, "{policy}");
        assert!(!t.stop, "waiting: keep going under {policy}");
        let t = w.tick(Some(&status("a", exited.clone(), None)));
        assert_eq!(t.stop, policy == "Never", "terminated under {policy}");
    }
    // a sidecar keeps going even under Never
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
    w.pod = pod("Never");
    let spec = w.pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![Container {
        name: "c".into(),
        restart_policy: Some("Always".into()),
        ..Container::default()
    }]);
    spec.containers[0].name = "main".into();
    let mut st = status("a", exited, None);
    st.init_container_statuses = st.container_statuses.take();
    assert!(!w.tick(Some(&st)).stop);
}

#[test]
fn pr_10_no_status_or_no_container_id_sets_nothing() {
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
    assert_eq!(w.tick(None), Tick::default());
    let mut other = running("a");
    other.container_statuses.as_mut().unwrap()[0].name = "other".into();
    assert_eq!(w.tick(Some(&other)), Tick::default());
    assert_eq!(w.tick(Some(&running(""))), Tick::default());
    assert_eq!(w.w.container_id, None);
}

#[test]
fn pr_11_a_terminal_pod_ends_the_worker() {
    for phase in ["Failed", "Succeeded"] {
        let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
        let mut st = running("a");
        st.phase = Some(phase.into());
        assert!(w.tick(Some(&st)).stop);
    }
}

#[test]
fn pr_12_a_deleted_pod_stops_liveness_and_startup_with_success_but_not_readiness() {
    let deleted = |mut p: Pod| {
        p.metadata.deletion_timestamp = Some(time_to_api(at(50)));
        p
    };
    for probe in [ProbeType::Liveness, ProbeType::Startup] {
        let mut w = W::new(probe, settings(0, 1, 1));
        let st = status("a", state_running(0), Some(probe == ProbeType::Liveness));
        w.tick(Some(&st));
        w.pod = deleted(pod("Always"));
        let t = w.tick(Some(&st));
        assert!(t.stop, "{probe}");
        assert_eq!(t.run, None);
        if probe == ProbeType::Startup {
            assert_eq!(t.changes[0].result, Some(Success));
            assert_eq!(t.changes[0].reason, ResultReason::PodDeleting);
        }
    }
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
    w.pod = deleted(pod("Always"));
    let t = w.tick(Some(&running("a")));
    assert!(!t.stop);
    assert!(t.run.is_some(), "readiness keeps probing");
}

#[test]
fn pr_16_errors_do_not_count_toward_the_thresholds() {
    let mut w = W::new(ProbeType::Liveness, settings(0, 1, 2));
    let st = running("a");
    w.probe(&st, F);
    assert_eq!(w.probe(&st, RunResult::Error), None);
    assert_eq!((w.w.last_result, w.w.result_run), (Failure, 1));
    assert!(w.probe(&st, F).is_some(), "the second real failure decides");
}

#[test]
fn pr_17_a_warning_counts_as_a_success() {
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
    let c = w.probe(&running("a"), RunResult::Warning).unwrap();
    assert_eq!(outcome(&c), Some(Success));
}

#[test]
fn a_run_against_an_old_instance_is_thrown_away() {
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
    let t = w.tick(Some(&running("a")));
    assert_eq!(t.run.as_deref(), Some("a"));
    w.w.in_flight = Some(7);
    // the container restarts before the run ends: the tick is buffered
    let t = w.tick(Some(&running("b")));
    assert_eq!(t.run, None);
    assert!(w.w.tick_pending);
    assert_eq!(w.w.finish("a", S, 8), None);
    assert_eq!(w.w.reported, Some(Failure), "b's initial value stands");
}

#[test]
fn pinned_readiness_is_failure_and_does_not_probe() {
    let mut w = W::new(ProbeType::Readiness, settings(0, 1, 1));
    w.probe(&running("a"), S);
    assert_eq!(w.w.reported, Some(Success));
    let c = w.w.pin().unwrap();
    assert_eq!(c.result, Some(Failure));
    assert_eq!(c.reason, ResultReason::Terminating);
    assert_eq!(w.tick(Some(&running("a"))), Tick::default());
    assert_eq!(w.w.pin(), None, "pinning twice changes nothing");
}

#[test]
fn workers_of_a_pod_are_found_by_a_range_over_sorted_keys() {
    use crate::core::probes::{Probers, WorkerKey};
    use crate::core::Uid;
    let mut p = Probers::default();
    for uid in ["a", "ab", "b"] {
        for probe in [ProbeType::Readiness, ProbeType::Liveness] {
            for c in ["", "x"] {
                p.workers_mut().insert(
                    WorkerKey {
                        uid: Uid::new(uid),
                        container: c.into(),
                        probe,
                    },
                    ProbeWorker::new(probe, settings(0, 1, 1)),
                );
            }
        }
    }
    let ab = Uid::new("ab");
    let got: Vec<_> = p.of_pod(&ab).map(|(k, _)| k.clone()).collect();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|k| k.uid == ab));
}
