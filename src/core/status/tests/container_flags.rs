//! `SetContainerReadiness` / `SetContainerStartup` (SM-16, SM-17).

use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};

use crate::core::pod_status::conditions::{CONTAINERS_READY, FALSE, READY, TRUE};
use crate::core::pod_status::tests::fixtures::{condition, find, running, simple_pod};
use crate::core::record::Time;
use crate::core::status::{StatusStore, StatusUpdate};
use crate::core::uid::Uid;

fn at(secs: i64) -> Time {
    Time::from_unix_secs(secs)
}

fn uid() -> Uid {
    Uid::from("uid-flags")
}

fn with_id(name: &str) -> ContainerStatus {
    ContainerStatus {
        container_id: Some(format!("ledgerlet://{name}-id")),
        ..running(name)
    }
}

fn store_with_two_running() -> StatusStore {
    let mut store = StatusStore::default();
    let status = PodStatus {
        phase: Some("Running".into()),
        container_statuses: Some(vec![with_id("c1"), with_id("c2")]),
        ..PodStatus::default()
    };
    let got = store.set_pod_status(&uid(), &simple_pod(&["c1", "c2"]), None, status, at(1));
    assert_eq!(got, StatusUpdate::Recorded { version: 1 });
    store
}

#[test]
fn sm_16_readiness_before_any_status_is_ignored() {
    let mut store = StatusStore::default();
    let p = simple_pod(&["c1"]);
    assert_eq!(
        store.set_container_readiness(&uid(), &p, "ledgerlet://c1-id", true, at(2)),
        StatusUpdate::Unchanged
    );
    assert!(store.get(&uid()).is_none(), "no status is created");
}

#[test]
fn sm_16_readiness_regenerates_ready_and_containers_ready() {
    let mut store = store_with_two_running();
    let p = simple_pod(&["c1", "c2"]);
    // the same readiness: no update
    assert_eq!(
        store.set_container_readiness(&uid(), &p, "ledgerlet://c1-id", false, at(2)),
        StatusUpdate::Unchanged
    );
    // c1 ready, c2 not: one update, pod not ready yet (conditions appended when missing)
    assert_eq!(
        store.set_container_readiness(&uid(), &p, "ledgerlet://c1-id", true, at(3)),
        StatusUpdate::Recorded { version: 2 }
    );
    let s = store.get(&uid()).unwrap().status.clone();
    assert!(find(&s.container_statuses, "c1").ready);
    assert!(!find(&s.container_statuses, "c2").ready);
    assert_eq!(condition(&s, READY).status, FALSE);
    assert_eq!(condition(&s, CONTAINERS_READY).status, FALSE);
    // both ready: Ready=True
    assert_eq!(
        store.set_container_readiness(&uid(), &p, "ledgerlet://c2-id", true, at(4)),
        StatusUpdate::Recorded { version: 3 }
    );
    let s = store.get(&uid()).unwrap().status.clone();
    assert_eq!(condition(&s, READY).status, TRUE);
    assert_eq!(condition(&s, CONTAINERS_READY).status, TRUE);
    // an unknown container ID: ignored
    assert_eq!(
        store.set_container_readiness(&uid(), &p, "ledgerlet://nope", false, at(5)),
        StatusUpdate::Unchanged
    );
    assert_eq!(store.get(&uid()).unwrap().version, 3);
}

#[test]
fn sm_17_startup_unset_to_false_is_a_change_then_true_is_another() {
    let mut store = store_with_two_running();
    let p = simple_pod(&["c1", "c2"]);
    assert_eq!(
        find(&store.get(&uid()).unwrap().status.container_statuses, "c1").started,
        None
    );
    assert_eq!(
        store.set_container_startup(&uid(), &p, "ledgerlet://c1-id", false, at(2)),
        StatusUpdate::Recorded { version: 2 }
    );
    assert_eq!(
        store.set_container_startup(&uid(), &p, "ledgerlet://c1-id", false, at(3)),
        StatusUpdate::Unchanged
    );
    assert_eq!(
        store.set_container_startup(&uid(), &p, "ledgerlet://c1-id", true, at(4)),
        StatusUpdate::Recorded { version: 3 }
    );
    assert_eq!(
        find(&store.get(&uid()).unwrap().status.container_statuses, "c1").started,
        Some(true)
    );
    assert_eq!(
        store.set_container_startup(&uid(), &p, "ledgerlet://unknown", true, at(5)),
        StatusUpdate::Unchanged
    );
}
