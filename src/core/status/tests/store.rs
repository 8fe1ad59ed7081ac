//! `SetPodStatus` / `updateStatusInternal` on the store alone (SM-01 … SM-04).

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

use crate::core::pod_status::conditions::{
    CONTAINERS_READY, FALSE, INITIALIZED, POD_SCHEDULED, READY, TRUE,
};
use crate::core::pod_status::tests::fixtures::{cond, simple_pod};
use crate::core::pod_status::time_to_api;
use crate::core::record::Time;
use crate::core::status::{StatusStore, StatusUpdate};
use crate::core::uid::Uid;

fn at(secs: i64) -> Time {
    Time::from_unix_nanos(secs * 1_000_000_000 + 500_000_000)
}

fn uid() -> Uid {
    Uid::from("uid-1")
}

fn with_time(type_: &str, status: &str, secs: i64) -> PodCondition {
    PodCondition {
        last_transition_time: Some(time_to_api(Time::from_unix_secs(secs))),
        ..cond(type_, status)
    }
}

fn status_with(conditions: Vec<PodCondition>) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        conditions: Some(conditions),
        ..PodStatus::default()
    }
}

#[test]
fn sm_01_a_new_status_gets_start_time_now_and_one_version() {
    let mut store = StatusStore::default();
    let p = simple_pod(&["app"]);
    let got = store.set_pod_status(&uid(), &p, None, PodStatus::default(), at(100));
    assert_eq!(got, StatusUpdate::Recorded { version: 1 });
    let v = store.get(&uid()).expect("cached");
    assert_eq!(
        v.status.start_time,
        Some(time_to_api(Time::from_unix_secs(100))),
        "start time is now, in whole seconds"
    );
    assert!(store.is_signalled());
}

#[test]
fn sm_02_an_existing_start_time_is_kept_whatever_the_new_status_says() {
    let mut store = StatusStore::default();
    let p = simple_pod(&["app"]);
    store.set_pod_status(&uid(), &p, None, PodStatus::default(), at(100));
    let other = PodStatus {
        start_time: Some(time_to_api(Time::from_unix_secs(5))),
        phase: Some("Running".into()),
        ..PodStatus::default()
    };
    store.set_pod_status(&uid(), &p, None, other, at(200));
    assert_eq!(
        store.get(&uid()).unwrap().status.start_time,
        Some(time_to_api(Time::from_unix_secs(100)))
    );

    // with no cached status, the API object's start time is the old one
    let mut fresh = StatusStore::default();
    let mut from_api = simple_pod(&["app"]);
    from_api.status = Some(PodStatus {
        start_time: Some(time_to_api(Time::from_unix_secs(42))),
        ..PodStatus::default()
    });
    fresh.set_pod_status(&uid(), &from_api, None, PodStatus::default(), at(300));
    assert_eq!(
        fresh.get(&uid()).unwrap().status.start_time,
        Some(time_to_api(Time::from_unix_secs(42)))
    );
}

#[test]
fn sm_03_only_real_changes_make_versions_and_foreign_conditions_do_not_count() {
    let mut store = StatusStore::default();
    let p = simple_pod(&["app"]);
    let a = status_with(vec![cond(READY, FALSE)]);
    let b = status_with(vec![cond(READY, TRUE)]);
    assert_eq!(
        store.set_pod_status(&uid(), &p, None, a.clone(), at(1)),
        StatusUpdate::Recorded { version: 1 }
    );
    assert_eq!(
        store.set_pod_status(&uid(), &p, None, b.clone(), at(2)),
        StatusUpdate::Recorded { version: 2 }
    );
    assert_eq!(
        store.set_pod_status(&uid(), &p, None, b.clone(), at(3)),
        StatusUpdate::Unchanged
    );
    let mut foreign = b.clone();
    foreign
        .conditions
        .as_mut()
        .unwrap()
        .push(cond("example.com/feature", TRUE));
    assert_eq!(
        store.set_pod_status(&uid(), &p, None, foreign, at(4)),
        StatusUpdate::Unchanged,
        "a non-kubelet condition is not the node's to change"
    );
    assert_eq!(store.get(&uid()).unwrap().version, 2);
}

#[test]
fn sm_04_unchanged_condition_keeps_its_transition_time_changed_one_takes_now() {
    let mut store = StatusStore::default();
    let p = simple_pod(&["app"]);
    let old = status_with(vec![
        with_time(READY, TRUE, 100),
        with_time(CONTAINERS_READY, TRUE, 100),
        with_time(INITIALIZED, TRUE, 50),
    ]);
    store.set_pod_status(&uid(), &p, None, old, at(150));
    let new = status_with(vec![
        with_time(READY, TRUE, 900),
        with_time(CONTAINERS_READY, FALSE, 900),
        with_time(INITIALIZED, TRUE, 900),
        with_time(POD_SCHEDULED, TRUE, 900),
    ]);
    store.set_pod_status(&uid(), &p, None, new, at(1000));
    let got: Vec<_> = store
        .get(&uid())
        .unwrap()
        .status
        .conditions
        .clone()
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.last_transition_time))
        .collect();
    let t = |s| Some(time_to_api(Time::from_unix_secs(s)));
    assert_eq!(
        got,
        vec![
            // first seen at 150 (a new condition transitions now), unchanged since
            (READY.to_string(), t(150)),
            (CONTAINERS_READY.to_string(), t(1000)),
            (INITIALIZED.to_string(), t(150)),
            (POD_SCHEDULED.to_string(), t(1000)),
        ]
    );
}
