//! `TerminatePod` (SM-25 … SM-28), after upstream's TestTerminatePod* tests.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use crate::core::pod_status::containers::{
    CONTAINER_STATUS_UNKNOWN, MSG_LOST_WHEN_TERMINATED, UNKNOWN_EXIT_CODE,
};
use crate::core::pod_status::tests::fixtures::{
    container, find, pod, running, sidecar, simple_pod, started, succeeded, terminated_state,
    waiting, waiting_last_zero, with_api_status,
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
    assert_eq!(
        store.terminate_pod(&uid(), &stale, None, at(30)),
        StatusUpdate::Recorded { version: 3 }
    );
}

fn init_pod(inits: &[&str]) -> Pod {
    pod(
        "Always",
        inits.iter().map(|n| container(n)).collect(),
        vec![container("app")],
    )
}

/// `TerminatePod` of a pod whose status is `status` and that the node has no cache for.
fn terminate(p: &Pod, status: PodStatus) -> PodStatus {
    let mut store = StatusStore::default();
    let p = with_api_status(p.clone(), status);
    store.terminate_pod(&uid(), &p, None, at(1));
    (*store.get(&uid()).unwrap().status).clone()
}

fn statuses(inits: Vec<ContainerStatus>, app: ContainerStatus) -> PodStatus {
    PodStatus {
        phase: Some("Pending".into()),
        init_container_statuses: Some(inits),
        container_statuses: Some(vec![app]),
        ..PodStatus::default()
    }
}

#[test]
fn sm_26_terminate_pod_with_init_containers() {
    // one init, waiting: it is the one that tried; the app container never did
    let got = terminate(
        &init_pod(&["init-0"]),
        statuses(vec![waiting("init-0")], waiting("app")),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert!(is_waiting(&got.container_statuses, "app"));

    // two inits, both waiting: only the first
    let got = terminate(
        &init_pod(&["init-0", "init-1"]),
        statuses(vec![waiting("init-0"), waiting("init-1")], waiting("app")),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert!(is_waiting(&got.init_container_statuses, "init-1"));
    assert!(is_waiting(&got.container_statuses, "app"));

    // [W, W, Term(1), W]: up to the one that failed
    let p = init_pod(&["init-0", "init-1", "init-2", "init-3"]);
    let got = terminate(
        &p,
        statuses(
            vec![
                waiting("init-0"),
                waiting("init-1"),
                exited("init-2", 1),
                waiting("init-3"),
            ],
            waiting("app"),
        ),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert!(is_unknown(&got.init_container_statuses, "init-1"));
    assert_eq!(exit_of(&got.init_container_statuses, "init-2"), Some(1));
    assert!(is_waiting(&got.init_container_statuses, "init-3"));
    assert!(is_waiting(&got.container_statuses, "app"));

    // [W, W, Term(0)]: the last init succeeded, so the pod initialized and the app container
    // is unknown too
    let p = init_pod(&["init-0", "init-1", "init-2"]);
    let got = terminate(
        &p,
        statuses(
            vec![waiting("init-0"), waiting("init-1"), exited("init-2", 0)],
            waiting("app"),
        ),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert!(is_unknown(&got.init_container_statuses, "init-1"));
    assert_eq!(exit_of(&got.init_container_statuses, "init-2"), Some(0));
    assert!(is_unknown(&got.container_statuses, "app"));

    // the last init waiting after a zero exit: initialized, everything unknown
    let got = terminate(
        &init_pod(&["init-0"]),
        statuses(vec![waiting_last_zero("init-0")], waiting("app")),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert!(is_unknown(&got.container_statuses, "app"));

    // the app container running: initialized, both unknown
    let got = terminate(
        &init_pod(&["init-0"]),
        statuses(vec![waiting("init-0")], running("app")),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert!(is_unknown(&got.container_statuses, "app"));

    // the app container exited 0: it keeps its exit, the init is unknown
    let got = terminate(
        &init_pod(&["init-0"]),
        statuses(vec![waiting("init-0")], succeeded("app")),
    );
    assert!(is_unknown(&got.init_container_statuses, "init-0"));
    assert_eq!(exit_of(&got.container_statuses, "app"), Some(0));

    // the app container waiting with a previous termination: unknown, its last state kept
    let got = terminate(
        &init_pod(&["init-0"]),
        statuses(vec![waiting("init-0")], waiting_last_zero("app")),
    );
    assert!(is_unknown(&got.container_statuses, "app"));
    assert_eq!(
        find(&got.container_statuses, "app").last_state,
        Some(terminated_state(0))
    );
}

#[test]
fn sm_26_initialized_containers_are_those_up_to_the_last_that_tried() {
    assert_eq!(initialized_containers(&[]), 0);
    assert_eq!(initialized_containers(&[waiting("a"), waiting("b")]), 1);
    assert_eq!(
        initialized_containers(&[waiting("a"), exited("b", 1), waiting("c")]),
        2
    );
    assert_eq!(
        initialized_containers(&[waiting("a"), waiting("b"), waiting_last_zero("c")]),
        3
    );
}

#[test]
fn sm_27_terminate_pod_makes_the_phase_terminal_except_for_static_pods() {
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

        let mut static_pod = simple_pod(&["a"]);
        static_pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("kubernetes.io/config.source".into(), "file".into());
        let got = terminated_status(&static_pod, &base, true);
        assert_eq!(
            got.phase.as_deref(),
            Some(from),
            "a static pod keeps {from} (TODO #116484 upstream)"
        );
    }
}

#[test]
fn sm_28_has_pod_initialized() {
    let no_inits = simple_pod(&["app"]);
    assert!(has_pod_initialized(&no_inits, &PodStatus::default()));

    let p = init_pod(&["init-0"]);
    let with = |inits: Vec<ContainerStatus>, app: ContainerStatus| statuses(inits, app);
    // a regular container that left Waiting, or has a previous termination
    assert!(has_pod_initialized(
        &p,
        &with(vec![waiting("init-0")], running("app"))
    ));
    assert!(has_pod_initialized(
        &p,
        &with(vec![waiting("init-0")], waiting_last_zero("app"))
    ));
    // the last regular init exited 0, now or last time
    assert!(has_pod_initialized(
        &p,
        &with(vec![exited("init-0", 0)], waiting("app"))
    ));
    assert!(has_pod_initialized(
        &p,
        &with(vec![waiting_last_zero("init-0")], waiting("app"))
    ));
    // otherwise not
    assert!(!has_pod_initialized(
        &p,
        &with(vec![exited("init-0", 1)], waiting("app"))
    ));
    assert!(!has_pod_initialized(
        &p,
        &with(vec![running("init-0")], waiting("app"))
    ));
    assert!(!has_pod_initialized(&p, &PodStatus::default()));

    // a sidecar last: running and started
    let with_sidecar = pod("Always", vec![sidecar("side")], vec![container("app")]);
    assert!(has_pod_initialized(
        &with_sidecar,
        &with(vec![started("side")], waiting("app"))
    ));
    assert!(!has_pod_initialized(
        &with_sidecar,
        &with(vec![running("side")], waiting("app"))
    ));
}
