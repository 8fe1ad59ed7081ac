//! `TerminatePod` (SM-25 … SM-28), after upstream's TestTerminatePod* tests.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use crate::core::pod_status::containers::{
    CONTAINER_STATUS_UNKNOWN, MSG_LOST_WHEN_TERMINATED, UNKNOWN_EXIT_CODE,
};
use crate::core::pod_status::tests::fixtures::{
    container, find, pod, running, sidecar, simple_pod, started, terminated_state, waiting,
    waiting_last_zero, with_api_status,
};
use crate::core::record::Time;
use crate::core::status::{
    has_pod_initialized, initialized_containers, terminated_status, StatusStore, StatusUpdate,
};
use crate::core::uid::Uid;

fn at(secs: i64) -> Time {
    Time::from_unix_secs(secs)
}

fn uid() -> Uid {
    Uid::from("uid-1")
}

fn exited(name: &str, code: i32) -> ContainerStatus {
    ContainerStatus {
        state: Some(terminated_state(code)),
        ..running(name)
    }
}

/// Exit code of `name`'s current state, or `None` if it is not terminated.
fn exit_of(statuses: &Option<Vec<ContainerStatus>>, name: &str) -> Option<i32> {
    find(statuses, name)
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

fn is_unknown(statuses: &Option<Vec<ContainerStatus>>, name: &str) -> bool {
    let s = find(statuses, name);
    s.state
        .as_ref()
        .and_then(|st| st.terminated.as_ref())
        .is_some_and(|t| {
            t.reason.as_deref() == Some(CONTAINER_STATUS_UNKNOWN)
                && t.message.as_deref() == Some(MSG_LOST_WHEN_TERMINATED)
                && t.exit_code == UNKNOWN_EXIT_CODE
        })
}

fn is_waiting(statuses: &Option<Vec<ContainerStatus>>, name: &str) -> bool {
    find(statuses, name)
        .state
        .as_ref()
        .is_some_and(|s| s.waiting.is_some())
}

#[test]
fn sm_25_terminate_pod_fills_in_unknown_states_and_keeps_the_cached_phase() {
    let mut store = StatusStore::default();
    let p = simple_pod(&["a", "b"]);
    let first = PodStatus {
        phase: Some("Failed".into()),
        message: Some("first".into()),
        container_statuses: Some(vec![running("a"), exited("b", 2)]),
        ..PodStatus::default()
    };
    store.set_pod_status(&uid(), &p, None, first, at(10));

    // the pod object handed in is stale: it still says Running
    let stale = with_api_status(
        p.clone(),
        PodStatus {
            phase: Some("Running".into()),
            message: Some("stale".into()),
            container_statuses: Some(vec![running("a"), running("b")]),
            ..PodStatus::default()
        },
    );
    let got = store.terminate_pod(&uid(), &stale, None, at(20));
    assert_eq!(got, StatusUpdate::Recorded { version: 2 });
    let v = store.get(&uid()).unwrap();
    assert!(v.pod_is_finished);
    assert!(is_unknown(&v.status.container_statuses, "a"));
    assert_eq!(exit_of(&v.status.container_statuses, "b"), Some(2));
    assert_eq!(v.status.phase.as_deref(), Some("Failed"));
    assert_eq!(v.status.message.as_deref(), Some("first"));

    // forced: the same terminal status is recorded again
    let got = store.terminate_pod(&uid(), &stale, None, at(30));
    assert_eq!(got, StatusUpdate::Recorded { version: 3 });
}

/// A container status from a code: `W` waiting, `Z` waiting after a zero exit, `R` running,
/// `S` running and started, `X<n>` exited with `n`.
fn code(c: &str, name: &str) -> ContainerStatus {
    match c {
        "W" => waiting(name),
        "Z" => waiting_last_zero(name),
        "R" => running(name),
        "S" => started(name),
        _ => exited(name, c.strip_prefix('X').unwrap().parse().unwrap()),
    }
}

/// Statuses `init-0`, `init-1`, … from space-separated codes.
fn inits(codes: &str) -> Vec<ContainerStatus> {
    let codes = codes.split_whitespace().enumerate();
    codes.map(|(i, c)| code(c, &format!("init-{i}"))).collect()
}

/// A pod with `n` regular init containers `init-0`, … and the container `app`.
fn init_pod(n: usize) -> Pod {
    let inits = (0..n).map(|i| container(&format!("init-{i}"))).collect();
    pod("Always", inits, vec![container("app")])
}

/// `TerminatePod` of a pod whose status is `status` and that the node has no cache for.
fn terminate(p: &Pod, status: PodStatus) -> PodStatus {
    let mut store = StatusStore::default();
    let p = with_api_status(p.clone(), status);
    store.terminate_pod(&uid(), &p, None, at(1));
    (*store.get(&uid()).unwrap().status).clone()
}

/// A pending pod's status: init containers from `init_codes`, `app` from `app_code`.
fn statuses(init_codes: &str, app_code: &str) -> PodStatus {
    PodStatus {
        phase: Some("Pending".into()),
        init_container_statuses: Some(inits(init_codes)),
        container_statuses: Some(vec![code(app_code, "app")]),
        ..PodStatus::default()
    }
}

/// Checks each of `wants` (`U` unknown, `W` waiting, `-` not checked, a number: that exit)
/// against `names[i]` in `got`.
fn check(case: &str, got: &Option<Vec<ContainerStatus>>, names: &[String], wants: &str) {
    let wants: Vec<&str> = wants.split_whitespace().collect();
    assert_eq!(names.len(), wants.len(), "{case}: a want per name");
    for (name, want) in names.iter().zip(wants) {
        match want {
            "U" => assert!(is_unknown(got, name), "{case}: {name} unknown"),
            "W" => assert!(is_waiting(got, name), "{case}: {name} waiting"),
            "-" => {}
            n => assert_eq!(exit_of(got, name), n.parse().ok(), "{case}: {name}"),
        }
    }
}

#[test]
fn sm_26_terminate_pod_with_init_containers() {
    // (case, init codes, app code, wanted init states, wanted app state)
    #[rustfmt::skip]
    let cases = [
        ("one init, waiting: it is the one that tried; the app container never did", "W", "W", "U", "W"),
        ("two inits, both waiting: only the first", "W W", "W", "U W", "W"),
        ("[W, W, Term(1), W]: up to the one that failed", "W W X1 W", "W", "U U 1 W", "W"),
        ("[W, W, Term(0)]: the last init succeeded, so the pod initialized and the app container \
          is unknown too", "W W X0", "W", "U U 0", "U"),
        ("the last init waiting after a zero exit: initialized, everything unknown", "Z", "W", "U", "U"),
        ("the app container running: initialized, both unknown", "W", "R", "U", "U"),
        ("the app container exited 0: it keeps its exit, the init is unknown", "W", "X0", "U", "0"),
        ("the app container waiting with a previous termination: unknown", "W", "Z", "-", "U"),
    ];
    for (case, init_codes, app_code, want_inits, want_app) in cases {
        let n = init_codes.split_whitespace().count();
        let got = terminate(&init_pod(n), statuses(init_codes, app_code));
        let names: Vec<String> = (0..n).map(|i| format!("init-{i}")).collect();
        check(case, &got.init_container_statuses, &names, want_inits);
        check(case, &got.container_statuses, &["app".into()], want_app);
    }
    // the app container waiting with a previous termination: its last state kept
    let got = terminate(&init_pod(1), statuses("W", "Z"));
    let app = find(&got.container_statuses, "app");
    assert_eq!(app.last_state, Some(terminated_state(0)));
}

#[test]
fn sm_26_initialized_containers_are_those_up_to_the_last_that_tried() {
    for (codes, want) in [("", 0), ("W W", 1), ("W X1 W", 2), ("W W Z", 3)] {
        assert_eq!(initialized_containers(&inits(codes)), want, "[{codes}]");
    }
}

#[test]
fn sm_27_terminate_pod_makes_the_phase_terminal_except_for_static_pods() {
    let mut static_pod = simple_pod(&["a"]);
    let a = static_pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    a.insert("kubernetes.io/config.source".into(), "file".into());
    for (from, to) in [
        ("Pending", "Failed"),
        ("Running", "Failed"),
        ("Unknown", "Failed"),
        ("SomethingElse", "Failed"),
        ("Succeeded", "Succeeded"),
        ("Failed", "Failed"),
    ] {
        let base = PodStatus {
            phase: Some(from.into()),
            ..PodStatus::default()
        };
        let got = terminated_status(&simple_pod(&["a"]), &base, true);
        assert_eq!(got.phase.as_deref(), Some(to), "{from}");
        let got = terminated_status(&static_pod, &base, true);
        let why = "(TODO #116484 upstream)";
        assert_eq!(
            got.phase.as_deref(),
            Some(from),
            "a static pod keeps {from} {why}"
        );
    }
}

#[test]
fn sm_28_has_pod_initialized() {
    let no_inits = simple_pod(&["app"]);
    assert!(has_pod_initialized(&no_inits, &PodStatus::default()));
    let p = init_pod(1);
    assert!(!has_pod_initialized(&p, &PodStatus::default()));
    // the last init a sidecar: running and started
    let with_sidecar = pod("Always", vec![sidecar("init-0")], vec![container("app")]);
    // (case, pod, init code, app code, initialized)
    #[rustfmt::skip]
    let cases = [
        ("a regular container that left Waiting", &p, "W", "R", true),
        ("a regular container with a previous termination", &p, "W", "Z", true),
        ("the last regular init exited 0 now", &p, "X0", "W", true),
        ("the last regular init exited 0 last time", &p, "Z", "W", true),
        ("otherwise not: the init failed", &p, "X1", "W", false),
        ("otherwise not: the init runs", &p, "R", "W", false),
        ("a sidecar running and started", &with_sidecar, "S", "W", true),
        ("a sidecar running, not started", &with_sidecar, "R", "W", false),
    ];
    for (case, pod, init, app, want) in cases {
        let got = has_pod_initialized(pod, &statuses(init, app));
        assert_eq!(got, want, "{case}");
    }
}
