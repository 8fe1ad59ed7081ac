//! GS-12…GS-15 (the kubelet's conditions) and SM-04 (transition times kept by the caller).

use k8s_openapi::api::core::v1::{ContainerStatus as S, PodCondition, PodReadinessGate, PodStatus};

use super::fixtures::*;
use crate::core::pod_status::conditions::*;
use crate::core::pod_status::pod_sandbox_changed;
use crate::core::pod_status::time_to_api;
use crate::core::record::time::Time;
use crate::core::runtime_status::{SandboxState, SandboxStatus};

#[test]
fn gs_12_conditions_copied_and_appended_in_order() {
    let api_disruption = PodCondition {
        reason: Some("EvictionByEvictionAPI".into()),
        ..cond(DISRUPTION_TARGET, "True")
    };
    let cached_disruption = PodCondition {
        reason: Some("TerminationByKubelet".into()),
        last_transition_time: Some(time_to_api(Time::from_unix_secs(500))),
        ..cond(DISRUPTION_TARGET, "True")
    };
    let custom = PodCondition {
        last_transition_time: Some(time_to_api(Time::from_unix_secs(400))),
        ..cond("example.com/feature", "True")
    };
    let p = with_api_status(
        simple_pod(&["A"]),
        PodStatus {
            conditions: Some(vec![
                custom.clone(),
                cond(READY, "True"), // kubelet-owned: regenerated, not copied
                api_disruption,
                cond(POD_RESIZE_PENDING, "True"),
            ]),
            ..PodStatus::default()
        },
    );
    let mut f = Fixture::new(
        p,
        runtime(
            vec![rt_running("A", "a1", 10)],
            vec![ready_sandbox("10.0.0.2")],
        ),
    );
    f.cached = Some(PodStatus {
        conditions: Some(vec![cached_disruption.clone()]),
        ..PodStatus::default()
    });
    let s = f.generate();
    assert_eq!(
        condition_types(&s),
        [
            "example.com/feature",
            DISRUPTION_TARGET,
            POD_READY_TO_START_CONTAINERS,
            INITIALIZED,
            READY,
            CONTAINERS_READY,
            POD_SCHEDULED
        ]
    );
    assert_eq!(condition(&s, "example.com/feature"), &custom);
    assert_eq!(condition(&s, DISRUPTION_TARGET), &cached_disruption);
    assert_eq!(condition(&s, POD_SCHEDULED).status, TRUE);
    // Kubelet-generated conditions are stamped with `now`; the caller keeps old times.
    let now = Some(time_to_api(now()));
    for t in [
        POD_READY_TO_START_CONTAINERS,
        INITIALIZED,
        READY,
        CONTAINERS_READY,
        POD_SCHEDULED,
    ] {
        assert_eq!(condition(&s, t).last_transition_time, now, "{t}");
    }
}

/// Sandboxes from `STATE IP CREATED [hostnet], …`: STATE `ready` or `notready`, IP `-`
/// for none; the ID is `sb-CREATED`.
fn sandboxes(spec: &str) -> Vec<SandboxStatus> {
    let one = |s: &str| {
        let w: Vec<&str> = s.split_whitespace().collect();
        let state = match w[0] {
            "ready" => SandboxState::SandboxReady,
            "notready" => SandboxState::SandboxNotready,
            other => panic!("bad sandbox state {other}"),
        };
        let created: i64 = w[2].parse().unwrap();
        // `-`: a network status without an IP; `none`: no network status
        let ip = match w[1] {
            "none" => None,
            "-" => Some(""),
            ip => Some(ip),
        };
        SandboxStatus {
            host_network: w.get(3) == Some(&"hostnet"),
            ..sandbox(&format!("sb-{created}"), state, ip, created)
        }
    };
    spec.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(one)
        .collect()
}

#[test]
fn gs_12_pod_ready_to_start_containers_is_true_iff_no_new_sandbox_is_needed() {
    let mut host = simple_pod(&["A"]);
    host.spec.as_mut().unwrap().host_network = Some(true);
    // label | pod (plain or host network) | sandboxes | PodReadyToStartContainers
    for row in [
        "no sandbox | plain | | False",
        "ready with IP | plain | ready 10.0.0.1 1 | True",
        "newest not ready | plain | notready 10.0.0.2 2, ready 10.0.0.1 1 | False",
        "newest ready, older dead | plain | notready - 1, ready 10.0.0.2 2 | True",
        "ready with an empty IP | plain | ready - 1 | False",
        "ready without a network status | plain | ready none 1 | True",
        "two ready | plain | ready 10.0.0.2 2, ready 10.0.0.1 1 | False",
        "host network without IP | host | ready - 1 hostnet | True",
        "network namespace changed | plain | ready 10.0.0.1 1 hostnet | False",
        "network namespace changed (host) | host | ready 10.0.0.1 1 | False",
    ] {
        let f: Vec<&str> = row.split('|').map(str::trim).collect();
        let (what, want) = (f[0], f[3]);
        let p = if f[1] == "host" {
            host.clone()
        } else {
            simple_pod(&["A"])
        };
        let rt = runtime(vec![], sandboxes(f[2]));
        assert_eq!(!pod_sandbox_changed(&p, &rt), want == TRUE, "{what}");
        let s = Fixture::new(p, rt).generate();
        let got = &condition(&s, POD_READY_TO_START_CONTAINERS).status;
        assert_eq!(got, want, "{what}");
    }
}

fn cr(
    pod: &k8s_openapi::api::core::v1::Pod,
    statuses: Option<&[S]>,
    phase: &str,
) -> (String, Option<String>, Option<String>) {
    let c = containers_ready_condition(pod, statuses, phase);
    assert_eq!(c.type_, CONTAINERS_READY);
    (c.status, c.reason, c.message)
}

fn owned(
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
) -> (String, Option<String>, Option<String>) {
    (
        status.into(),
        reason.map(Into::into),
        message.map(Into::into),
    )
}

#[test]
fn gs_13_containers_ready_condition() {
    let p = pod(
        "Always",
        vec![container("I"), sidecar("X")],
        vec![container("A"), container("B"), container("C")],
    );
    let all_ready = vec![
        ready(running("X")),
        ready(running("A")),
        ready(running("B")),
        ready(running("C")),
        waiting("I"),
    ];
    assert_eq!(
        cr(&p, None, "Running"),
        owned(FALSE, Some(UNKNOWN_CONTAINER_STATUSES), None)
    );
    assert_eq!(
        cr(&p, Some(&all_ready), "Running"),
        owned(TRUE, None, None),
        "regular init containers do not count"
    );
    let sidecar_unready = vec![
        running("X"),
        ready(running("A")),
        ready(running("B")),
        ready(running("C")),
    ];
    assert_eq!(
        cr(&p, Some(&sidecar_unready), "Running"),
        owned(
            FALSE,
            Some(CONTAINERS_NOT_READY),
            Some("containers with unready status: [X]")
        )
    );
    let mixed = vec![ready(running("X")), ready(running("A")), running("C")];
    assert_eq!(
        cr(&p, Some(&mixed), "Running"),
        owned(
            FALSE,
            Some(CONTAINERS_NOT_READY),
            Some("containers with unknown status: [B], containers with unready status: [C]")
        )
    );
    let two_unknown = vec![ready(running("X")), ready(running("A"))];
    assert_eq!(
        cr(&p, Some(&two_unknown), "Running").2.as_deref(),
        Some("containers with unknown status: [B C]")
    );
    let done = vec![
        succeeded("X"),
        succeeded("A"),
        succeeded("B"),
        succeeded("C"),
    ];
    assert_eq!(
        cr(&p, Some(&done), "Succeeded"),
        owned(FALSE, Some(POD_COMPLETED), None)
    );
    assert_eq!(
        cr(&p, Some(&mixed), "Succeeded").1.as_deref(),
        Some(CONTAINERS_NOT_READY),
        "unknown containers: not completed"
    );
    assert_eq!(
        cr(&p, Some(&all_ready), "Failed"),
        owned(FALSE, Some(POD_FAILED), None)
    );
}

#[test]
fn gs_14_ready_condition_follows_containers_ready_then_readiness_gates() {
    let mut p = simple_pod(&["A"]);
    let unready = [running("A")];
    let c = ready_condition(&p, &[], Some(&unready), "Running");
    assert_eq!(c.type_, READY);
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        (FALSE, Some(CONTAINERS_NOT_READY))
    );
    assert_eq!(
        c.message.as_deref(),
        Some("containers with unready status: [A]")
    );

    p.spec.as_mut().unwrap().readiness_gates = Some(vec![
        PodReadinessGate {
            condition_type: "g1".into(),
        },
        PodReadinessGate {
            condition_type: "g2".into(),
        },
    ]);
    let ok = [ready(running("A"))];
    let c = ready_condition(&p, &[cond("g2", "False")], Some(&ok), "Running");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        (FALSE, Some(READINESS_GATES_NOT_READY))
    );
    assert_eq!(
        c.message.as_deref(),
        Some("corresponding condition of pod readiness gate \"g1\" does not exist., the status of pod readiness gate \"g2\" is not \"True\", but False")
    );
    let c = ready_condition(
        &p,
        &[cond("g1", "True"), cond("g2", "True")],
        Some(&ok),
        "Running",
    );
    assert_eq!((c.status.as_str(), c.reason), (TRUE, None));
}

#[test]
fn gs_14_readiness_gate_from_the_api_status_through_generate() {
    let mut p = simple_pod(&["A"]);
    p.spec.as_mut().unwrap().readiness_gates = Some(vec![PodReadinessGate {
        condition_type: "lb/ready".into(),
    }]);
    let rt = || {
        runtime(
            vec![rt_running("A", "a1", 10)],
            vec![ready_sandbox("10.0.0.3")],
        )
    };
    let s = Fixture::new(p.clone(), rt()).generate();
    assert_eq!(
        condition(&s, READY).reason.as_deref(),
        Some(READINESS_GATES_NOT_READY)
    );
    assert_eq!(condition(&s, CONTAINERS_READY).status, TRUE);
    let p = with_api_status(
        p,
        PodStatus {
            conditions: Some(vec![cond("lb/ready", "True")]),
            ..PodStatus::default()
        },
    );
    assert_eq!(
        condition(&Fixture::new(p, rt()).generate(), READY).status,
        TRUE
    );
}

fn init(
    pod: &k8s_openapi::api::core::v1::Pod,
    statuses: Option<&[S]>,
    phase: &str,
) -> (String, Option<String>, Option<String>) {
    let c = initialized_condition(pod, statuses, phase);
    assert_eq!(c.type_, INITIALIZED);
    (c.status, c.reason, c.message)
}

#[test]
fn gs_15_initialized_condition() {
    let p = pod(
        "Always",
        vec![container("X"), sidecar("Y")],
        vec![container("A")],
    );
    assert_eq!(
        init(&p, None, "Pending"),
        owned(FALSE, Some(UNKNOWN_CONTAINER_STATUSES), None)
    );
    assert_eq!(
        init(&simple_pod(&["A"]), None, "Pending"),
        owned(TRUE, None, None)
    );

    let done = vec![ready(succeeded("X")), started("Y"), waiting("A")];
    assert_eq!(init(&p, Some(&done), "Pending"), owned(TRUE, None, None));
    let incomplete = vec![succeeded("X"), running("Y"), waiting("A")];
    assert_eq!(
        init(&p, Some(&incomplete), "Pending"),
        owned(
            FALSE,
            Some(CONTAINERS_NOT_INITIALIZED),
            Some("containers with incomplete status: [X Y]")
        )
    );
    let unknown = vec![running("Y"), waiting("A")];
    assert_eq!(
        init(&p, Some(&unknown), "Pending").2.as_deref(),
        Some("containers with unknown status: [X], containers with incomplete status: [Y]")
    );
    // A regular container has started: initialized before, whatever the init statuses say.
    let restarted = vec![waiting("X"), waiting_last_failed("Y"), running("A")];
    assert_eq!(
        init(&p, Some(&restarted), "Running"),
        owned(TRUE, None, None)
    );
    // Succeeded with every init status known.
    assert_eq!(
        init(&p, Some(&incomplete), "Succeeded"),
        owned(TRUE, Some(POD_COMPLETED), None)
    );
    assert_eq!(
        init(&p, Some(&unknown), "Succeeded").1.as_deref(),
        Some(CONTAINERS_NOT_INITIALIZED)
    );
}

#[test]
fn sm_21_kubelet_owned_condition_types() {
    for t in [
        POD_SCHEDULED,
        READY,
        INITIALIZED,
        CONTAINERS_READY,
        POD_READY_TO_START_CONTAINERS,
        POD_RESIZE_PENDING,
        POD_RESIZE_IN_PROGRESS,
    ] {
        assert!(is_kubelet_owned(t), "{t}");
    }
    assert!(!is_kubelet_owned(DISRUPTION_TARGET));
    assert!(!is_kubelet_owned("example.com/feature"));
}

#[test]
fn gs_17_a_gate_turning_true_needs_a_readiness_reconcile_until_ready_says_so() {
    let mut p = simple_pod(&["A"]);
    p.spec.as_mut().unwrap().readiness_gates = Some(vec![PodReadinessGate {
        condition_type: "lb/ready".into(),
    }]);
    let ready_container = S {
        name: "A".into(),
        ready: true,
        ..S::default()
    };
    let not_ready = PodCondition {
        message: Some(
            "the status of pod readiness gate \"lb/ready\" is not \"True\", but False".into(),
        ),
        reason: Some(READINESS_GATES_NOT_READY.into()),
        ..cond(READY, "False")
    };
    let status = |gate: &str, ready: PodCondition| PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![cond("lb/ready", gate), ready]),
        container_statuses: Some(vec![ready_container.clone()]),
        ..PodStatus::default()
    };
    // the gate is still False and Ready says so: nothing to reconcile
    let p1 = with_api_status(p.clone(), status("False", not_ready.clone()));
    assert!(!need_to_reconcile_pod_readiness(&p1));
    // a controller set the gate True; Ready still False: sync now
    let p2 = with_api_status(p.clone(), status("True", not_ready));
    assert!(need_to_reconcile_pod_readiness(&p2));
    // once the node wrote Ready True, nothing more
    let p3 = with_api_status(p.clone(), status("True", cond(READY, "True")));
    assert!(!need_to_reconcile_pod_readiness(&p3));
    // no gates, or no Ready condition yet: never
    let p4 = with_api_status(simple_pod(&["A"]), status("True", cond(READY, "False")));
    assert!(!need_to_reconcile_pod_readiness(&p4));
    let mut no_ready = status("True", cond("Other", "True"));
    no_ready.conditions.as_mut().unwrap().pop();
    assert!(!need_to_reconcile_pod_readiness(&with_api_status(
        p, no_ready
    )));
}
