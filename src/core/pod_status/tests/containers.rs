//! GS-01…GS-07: container statuses from the runtime, the old statuses and the reason cache.

use k8s_openapi::api::core::v1::{ContainerStatus as S, PodStatus};

use super::fixtures::*;
use crate::core::pod_status::containers::{
    CONTAINER_STATUS_UNKNOWN, MSG_LOST_AFTER_RUNNING, MSG_LOST_WHEN_TERMINATED,
};
use crate::core::pod_status::time_to_api;
use crate::core::record::time::Time;
use crate::core::runtime_status::{ContainerState as RtState, ContainerStatus as RtContainer};

fn cached(containers: Vec<S>) -> Option<PodStatus> {
    Some(PodStatus {
        container_statuses: Some(containers),
        ..PodStatus::default()
    })
}

#[test]
fn gs_01_default_waiting_reason_is_container_creating() {
    let s = Fixture::new(simple_pod(&["A"]), runtime(vec![], vec![])).generate();
    let a = find(&s.container_statuses, "A");
    assert_eq!(waiting_reason_of(a), Some("ContainerCreating"));
    assert_eq!(a.image, "A-image");
    assert_eq!(a.container_id, None);
    assert_eq!(a.restart_count, 0);
    assert!(!a.ready);
}

#[test]
fn gs_01_default_waiting_reason_is_pod_initializing_with_init_containers() {
    let p = pod("Always", vec![container("X")], vec![container("A")]);
    let s = Fixture::new(p, runtime(vec![], vec![])).generate();
    assert_eq!(
        waiting_reason_of(find(&s.container_statuses, "A")),
        Some("PodInitializing")
    );
    assert_eq!(
        waiting_reason_of(find(&s.init_container_statuses, "X")),
        Some("PodInitializing")
    );
}

#[test]
fn gs_02_old_terminated_status_is_kept_when_runtime_has_no_entry() {
    let mut old = failed("A");
    old.restart_count = 2;
    old.container_id = Some("containerd://gone".into());
    let mut f = Fixture::new(simple_pod(&["A"]), runtime(vec![], vec![]));
    f.cached = cached(vec![old.clone()]);
    let a = find(&f.generate().container_statuses, "A").clone();
    assert_eq!(a.state, old.state);
    assert_eq!(a.restart_count, 2);
    assert_eq!(a.container_id.as_deref(), Some("containerd://gone"));
}

#[test]
fn gs_02_restart_count_and_last_state_carry_over_from_a_non_terminated_status() {
    let mut old = waiting_last_failed("A");
    old.restart_count = 4;
    let mut f = Fixture::new(simple_pod(&["A"]), runtime(vec![], vec![]));
    f.cached = cached(vec![old.clone()]);
    let a = find(&f.generate().container_statuses, "A").clone();
    assert_eq!(waiting_reason_of(&a), Some("ContainerCreating"));
    assert_eq!(a.restart_count, 4);
    assert_eq!(a.last_state, old.last_state);
}

fn lost_running_fixture(p: k8s_openapi::api::core::v1::Pod) -> Fixture {
    let mut was = running("A");
    was.restart_count = 1;
    let p = with_api_status(
        p,
        PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![was]),
            ..PodStatus::default()
        },
    );
    Fixture::new(p, runtime(vec![], vec![]))
}

#[test]
fn gs_03_lost_running_container_gets_unknown_last_termination_and_a_restart() {
    let s = lost_running_fixture(simple_pod(&["A"])).generate();
    let a = find(&s.container_statuses, "A");
    assert_eq!(waiting_reason_of(a), Some("ContainerCreating"));
    let t = term(&a.last_state).expect("last termination");
    assert_eq!(t.reason.as_deref(), Some(CONTAINER_STATUS_UNKNOWN));
    assert_eq!(
        t.message.as_deref(),
        Some("The container could not be located when the pod was deleted.  The container used to be Running")
    );
    assert_eq!(t.message.as_deref(), Some(MSG_LOST_AFTER_RUNNING));
    assert_eq!(t.exit_code, 137);
    assert_eq!(a.restart_count, 2);
    // A stopped container, not a pending one.
    assert_eq!(s.phase.as_deref(), Some("Running"));
}

#[test]
fn gs_03_deleted_pod_does_not_count_a_restart() {
    let s = lost_running_fixture(deleted(simple_pod(&["A"]))).generate();
    let a = find(&s.container_statuses, "A");
    assert_eq!(term(&a.last_state).map(|t| t.exit_code), Some(137));
    assert_eq!(a.restart_count, 1);
}

#[test]
fn gs_04_unknown_runtime_state_after_running_is_terminated_unknown() {
    let mut was = running("A");
    was.restart_count = 3;
    let rt = runtime(vec![rt("A", "a1", RtState::Unknown, 10)], vec![]);
    let mut f = Fixture::new(simple_pod(&["A"]), rt);
    f.cached = cached(vec![was]);
    let a = find(&f.generate().container_statuses, "A").clone();
    let t = term(&a.state).expect("terminated");
    assert_eq!(t.reason.as_deref(), Some(CONTAINER_STATUS_UNKNOWN));
    assert_eq!(
        t.message.as_deref(),
        Some("The container could not be located when the pod was terminated")
    );
    assert_eq!(t.message.as_deref(), Some(MSG_LOST_WHEN_TERMINATED));
    assert_eq!(t.exit_code, 137);
    assert_eq!(a.restart_count, 4);
    assert_eq!(a.container_id.as_deref(), Some("containerd://a1"));
}

#[test]
fn gs_05_runtime_state_maps_to_api_state() {
    let mut exited = rt_exited("C", "c1", 10, 2);
    exited.message = "boom".into();
    let rt = runtime(
        vec![
            rt_running("A", "a1", 10),
            rt("B", "b1", RtState::Created, 10),
            exited,
            rt("D", "d1", RtState::Unknown, 10),
        ],
        vec![],
    );
    let s = Fixture::new(simple_pod(&["A", "B", "C", "D"]), rt).generate();

    let a = find(&s.container_statuses, "A");
    let running = a
        .state
        .as_ref()
        .and_then(|st| st.running.as_ref())
        .expect("running");
    assert_eq!(
        running.started_at,
        Some(time_to_api(Time::from_unix_secs(11)))
    );
    assert_eq!(a.container_id.as_deref(), Some("containerd://a1"));
    assert_eq!(a.image, "A-image");
    assert_eq!(a.image_id, "sha256:A");

    let b = find(&s.container_statuses, "B");
    let w = waiting_of(b);
    assert_eq!((w.reason.as_deref(), w.message.as_deref()), (None, None));

    let c = term(&find(&s.container_statuses, "C").state)
        .expect("terminated")
        .clone();
    assert_eq!(c.exit_code, 2);
    assert_eq!(c.reason.as_deref(), Some("Error"));
    assert_eq!(c.message.as_deref(), Some("boom"));
    assert_eq!(c.started_at, Some(time_to_api(Time::from_unix_secs(11))));
    assert_eq!(c.finished_at, Some(time_to_api(Time::from_unix_secs(15))));
    assert_eq!(c.container_id.as_deref(), Some("containerd://c1"));

    // Unknown with no previous Running status collapses to Waiting{}.
    let d = find(&s.container_statuses, "D");
    assert_eq!(waiting_of(d).reason, None);
}

#[test]
fn gs_06_newest_instance_is_state_second_is_last_state_older_ignored() {
    let newest = RtContainer {
        restart_count: 2,
        ..rt_running("A", "a3", 30)
    };
    let second = rt_exited("A", "a2", 20, 1);
    let oldest = rt_exited("A", "a1", 10, 7);
    for order in [
        vec![newest.clone(), second.clone(), oldest.clone()],
        vec![oldest.clone(), newest.clone(), second.clone()],
    ] {
        let s = Fixture::new(simple_pod(&["A"]), runtime(order, vec![])).generate();
        let a = find(&s.container_statuses, "A");
        assert!(a.state.as_ref().is_some_and(|st| st.running.is_some()));
        assert_eq!(a.container_id.as_deref(), Some("containerd://a3"));
        let last = term(&a.last_state).expect("last state");
        assert_eq!(last.exit_code, 1);
        assert_eq!(last.container_id.as_deref(), Some("containerd://a2"));
        assert_eq!(a.restart_count, 2);
    }
}

const BACKOFF_MSG: &str = "back-off 20s restarting failed container=A pod=my-pod_ns(uid-1)";

#[test]
fn gs_07_start_failure_shows_waiting_and_moves_termination_to_last_state() {
    let exited = RtContainer {
        restart_count: 3,
        ..rt_exited("A", "a1", 10, 1)
    };
    let f = Fixture::new(simple_pod(&["A", "B"]), runtime(vec![exited], vec![]))
        .fail_start("A", "CrashLoopBackOff", BACKOFF_MSG)
        .fail_start("B", "ImagePullBackOff", "Back-off pulling image \"b\"");
    let s = f.generate();
    let a = find(&s.container_statuses, "A");
    let w = waiting_of(a);
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(w.message.as_deref(), Some(BACKOFF_MSG));
    let last = term(&a.last_state).expect("last state");
    assert_eq!(
        (last.exit_code, last.container_id.as_deref()),
        (1, Some("containerd://a1"))
    );
    assert_eq!(a.restart_count, 3);
    // A never-started container only changes its waiting reason.
    let b = find(&s.container_statuses, "B");
    assert_eq!(waiting_reason_of(b), Some("ImagePullBackOff"));
    assert_eq!(term(&b.last_state), None);
}

#[test]
fn gs_07_init_container_that_exited_zero_is_never_waiting() {
    let p = pod("Always", vec![container("X")], vec![container("A")]);
    let rt = runtime(vec![rt_exited("X", "x1", 10, 0)], vec![]);
    let s = Fixture::new(p, rt)
        .fail_start("X", "CrashLoopBackOff", "stale")
        .generate();
    let x = find(&s.init_container_statuses, "X");
    assert_eq!(term(&x.state).map(|t| t.exit_code), Some(0));
    // The same exit in a regular container under Always is shown waiting.
    let rt = runtime(vec![rt_exited("A", "a1", 10, 0)], vec![]);
    let s = Fixture::new(simple_pod(&["A"]), rt)
        .fail_start("A", "CrashLoopBackOff", BACKOFF_MSG)
        .generate();
    assert_eq!(
        waiting_reason_of(find(&s.container_statuses, "A")),
        Some("CrashLoopBackOff")
    );
}

#[test]
fn gs_07_no_waiting_reason_for_a_container_that_will_not_restart() {
    let cases = [
        ("Never", rt_exited("A", "a1", 10, 1), false),
        ("OnFailure", rt_exited("A", "a1", 10, 0), false),
        ("Always", rt_exited("A", "a1", 10, 1), true),
        ("Always", rt_running("A", "a1", 10), false),
    ];
    for (policy, instance, deleted_pod) in cases {
        let mut p = pod(policy, vec![], vec![container("A")]);
        if deleted_pod {
            p = deleted(p);
        }
        let s = Fixture::new(p, runtime(vec![instance.clone()], vec![]))
            .fail_start("A", "CrashLoopBackOff", BACKOFF_MSG)
            .generate();
        let a = find(&s.container_statuses, "A");
        assert_eq!(
            waiting_reason_of(a),
            None,
            "{policy} {:?} deleted={deleted_pod}",
            instance.state
        );
    }
    // OnFailure with a failure does restart.
    let p = pod("OnFailure", vec![], vec![container("A")]);
    let s = Fixture::new(p, runtime(vec![rt_exited("A", "a1", 10, 1)], vec![]))
        .fail_start("A", "CrashLoopBackOff", BACKOFF_MSG)
        .generate();
    assert_eq!(
        waiting_reason_of(find(&s.container_statuses, "A")),
        Some("CrashLoopBackOff")
    );
}

#[test]
fn gs_07_sidecar_under_restart_never_shows_its_back_off() {
    let p = pod("Never", vec![sidecar("X")], vec![container("A")]);
    let rt = runtime(
        vec![rt_exited("X", "x1", 10, 137), rt_running("A", "a1", 20)],
        vec![],
    );
    let s = Fixture::new(p, rt)
        .fail_start(
            "X",
            "CrashLoopBackOff",
            "back-off 10s restarting failed container=X pod=my-pod_ns(uid-1)",
        )
        .generate();
    let x = find(&s.init_container_statuses, "X");
    assert_eq!(waiting_reason_of(x), Some("CrashLoopBackOff"));
    assert_eq!(term(&x.last_state).map(|t| t.exit_code), Some(137));
}

#[test]
fn gs_05_containers_not_in_the_spec_are_ignored() {
    let rt = runtime(
        vec![rt_running("A", "a1", 10), rt_running("ghost", "g1", 10)],
        vec![],
    );
    let s = Fixture::new(simple_pod(&["A"]), rt).generate();
    let names = s
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.name.as_str());
    assert_eq!(names.collect::<Vec<_>>(), ["A"]);
    assert_eq!(s.init_container_statuses, None);
}
