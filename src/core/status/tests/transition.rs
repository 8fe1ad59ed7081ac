//! `checkContainerStateTransition` (SM-18) and the termination-message budget (SM-20).

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, PodStatus};

use crate::core::pod_status::tests::fixtures::{
    container, find, pod, running, sidecar, terminated_state,
};
use crate::core::record::Time;
use crate::core::status::{
    check_container_state_transition, normalize_status, termination_message_bytes_per_status,
    IllegalTransition, StatusStore, StatusUpdate, MAX_POD_TERMINATION_MESSAGE_BYTES,
};
use crate::core::uid::Uid;

fn exited(name: &str, code: i32) -> ContainerStatus {
    ContainerStatus {
        state: Some(terminated_state(code)),
        ..running(name)
    }
}

fn regular(statuses: Vec<ContainerStatus>) -> PodStatus {
    PodStatus {
        container_statuses: Some(statuses),
        ..PodStatus::default()
    }
}

fn inits(statuses: Vec<ContainerStatus>) -> PodStatus {
    PodStatus {
        init_container_statuses: Some(statuses),
        ..PodStatus::default()
    }
}

#[test]
fn sm_18_regular_containers_under_each_restart_policy() {
    let always = pod("Always", vec![], vec![container("c")]);
    let on_failure = pod("OnFailure", vec![], vec![container("c")]);
    let never = pod("Never", vec![], vec![container("c")]);
    let restarted = regular(vec![running("c")]);
    for code in [0, 1] {
        let old = regular(vec![exited("c", code)]);
        assert_eq!(
            check_container_state_transition(&old, &restarted, &always),
            Ok(())
        );
        assert_eq!(
            check_container_state_transition(&old, &restarted, &never),
            Err(IllegalTransition(
                "terminated container c attempted illegal transition to non-terminated state"
                    .into()
            )),
            "Never, exit {code}"
        );
    }
    assert!(check_container_state_transition(
        &regular(vec![exited("c", 0)]),
        &restarted,
        &on_failure
    )
    .is_err());
    assert_eq!(
        check_container_state_transition(&regular(vec![exited("c", 1)]), &restarted, &on_failure),
        Ok(())
    );
    // staying terminated is always fine
    assert_eq!(
        check_container_state_transition(
            &regular(vec![exited("c", 0)]),
            &regular(vec![exited("c", 0)]),
            &never
        ),
        Ok(())
    );
}

#[test]
fn sm_18_init_containers_follow_the_same_rules_and_sidecars_may_restart() {
    let never = pod("Never", vec![container("i")], vec![container("c")]);
    let on_failure = pod("OnFailure", vec![container("i")], vec![container("c")]);
    let restarted = inits(vec![running("i")]);
    assert_eq!(
        check_container_state_transition(&inits(vec![exited("i", 1)]), &restarted, &never),
        Err(IllegalTransition(
            "terminated init container i attempted illegal transition to non-terminated state"
                .into()
        ))
    );
    assert!(check_container_state_transition(
        &inits(vec![exited("i", 0)]),
        &restarted,
        &on_failure
    )
    .is_err());
    assert_eq!(
        check_container_state_transition(&inits(vec![exited("i", 1)]), &restarted, &on_failure),
        Ok(())
    );

    let with_sidecar = pod("Never", vec![sidecar("i")], vec![container("c")]);
    assert_eq!(
        check_container_state_transition(&inits(vec![exited("i", 0)]), &restarted, &with_sidecar),
        Ok(()),
        "a restartable init container always may"
    );

    // the status's init container is not the spec's at that index
    let renamed = pod("Never", vec![container("other")], vec![container("c")]);
    assert!(matches!(
        check_container_state_transition(&inits(vec![exited("i", 1)]), &restarted, &renamed),
        Err(IllegalTransition(m)) if m.contains("mismatch between pod spec and status")
    ));
}

#[test]
fn sm_18_an_illegal_update_is_dropped_and_the_cache_is_unchanged() {
    let mut store = StatusStore::default();
    let uid = Uid::from("uid-1");
    let never = pod("Never", vec![], vec![container("c")]);
    let at = Time::from_unix_secs;
    store.set_pod_status(&uid, &never, None, regular(vec![exited("c", 0)]), at(1));
    let before = store.get(&uid).unwrap().clone();
    let got = store.set_pod_status(&uid, &never, None, regular(vec![running("c")]), at(2));
    assert!(matches!(got, StatusUpdate::Illegal(_)), "{got:?}");
    assert_eq!(store.get(&uid), Some(&before));
}

fn with_message(name: &str, bytes: usize) -> ContainerStatus {
    let mut s = exited(name, 1);
    let t: &mut ContainerStateTerminated = s.state.as_mut().unwrap().terminated.as_mut().unwrap();
    t.message = Some("x".repeat(bytes));
    s.last_state = Some(k8s_openapi::api::core::v1::ContainerState {
        terminated: Some(ContainerStateTerminated {
            message: Some("y".repeat(bytes)),
            ..ContainerStateTerminated::default()
        }),
        ..Default::default()
    });
    s
}

#[test]
fn sm_20_termination_messages_share_a_12_kib_budget() {
    assert_eq!(MAX_POD_TERMINATION_MESSAGE_BYTES, 12_288);
    let empty = pod("Always", vec![], vec![]);
    assert_eq!(termination_message_bytes_per_status(&empty), 12_288);

    let p = pod(
        "Always",
        vec![container("i")],
        vec![container("a"), container("b")],
    );
    assert_eq!(termination_message_bytes_per_status(&p), 4_096);
    let mut s = PodStatus {
        init_container_statuses: Some(vec![with_message("i", 10_000)]),
        container_statuses: Some(vec![with_message("a", 10_000), with_message("b", 100)]),
        ..PodStatus::default()
    };
    normalize_status(&p, &mut s);
    let len = |c: &ContainerStatus, last: bool| {
        let st = if last { &c.last_state } else { &c.state };
        st.as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .message
            .as_ref()
            .unwrap()
            .len()
    };
    for (list, name, want) in [
        (&s.init_container_statuses, "i", 4_096),
        (&s.container_statuses, "a", 4_096),
        (&s.container_statuses, "b", 100),
    ] {
        let c = find(list, name);
        assert_eq!(len(c, false), want, "{name} state");
        assert_eq!(len(c, true), want, "{name} last state");
    }
}
