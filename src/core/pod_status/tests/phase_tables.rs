//! BEHAVIOUR §D: the getPhase tables PH-01…PH-09, in full.

use k8s_openapi::api::core::v1::{ContainerStatus as S, Pod};

use super::fixtures::*;
use crate::core::pod_status::get_phase;

/// One row: init statuses, regular statuses, podIsTerminal, expected phase.
type Row = (&'static str, Vec<S>, Vec<S>, bool, &'static str);

fn check(pod: &Pod, rows: Vec<Row>) {
    for (what, init, regular, terminal, want) in rows {
        assert_eq!(
            get_phase(pod, &regular, &init, terminal, false),
            want,
            "{what}"
        );
        // The upstream calling convention (one list holding every status) agrees.
        let all: Vec<S> = init.iter().chain(&regular).cloned().collect();
        assert_eq!(
            get_phase(pod, &all, &[], terminal, false),
            want,
            "{what} (one list)"
        );
    }
}

fn ab() -> Vec<k8s_openapi::api::core::v1::Container> {
    vec![container("A"), container("B")]
}

#[test]
fn ph_01_restart_always_table() {
    let p = pod("Always", vec![], ab());
    check(
        &p,
        vec![
            ("no statuses", vec![], vec![], false, "Pending"),
            (
                "all running",
                vec![],
                vec![running("A"), running("B")],
                false,
                "Running",
            ),
            (
                "all stopped",
                vec![],
                vec![stopped("A"), stopped("B")],
                false,
                "Running",
            ),
            (
                "terminal, all succeeded",
                vec![],
                vec![succeeded("A"), succeeded("B")],
                true,
                "Succeeded",
            ),
            (
                "terminal, one failed",
                vec![],
                vec![succeeded("A"), failed("B")],
                true,
                "Failed",
            ),
            (
                "running + stopped",
                vec![],
                vec![running("A"), stopped("B")],
                false,
                "Running",
            ),
            ("B missing", vec![], vec![running("A")], false, "Pending"),
            (
                "running + waiting",
                vec![],
                vec![running("A"), waiting("B")],
                false,
                "Pending",
            ),
            (
                "crash loop",
                vec![],
                vec![running("A"), waiting_last_zero("B")],
                false,
                "Running",
            ),
        ],
    );
}

#[test]
fn ph_02_restart_always_with_init_container_table() {
    let p = pod("Always", vec![container("X")], ab());
    check(
        &p,
        vec![
            ("empty", vec![], vec![], false, "Pending"),
            ("init running", vec![running("X")], vec![], false, "Pending"),
            ("init failed", vec![failed("X")], vec![], false, "Pending"),
            (
                "init waiting, last exit 0",
                vec![waiting_last_zero("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "init waiting, last exit non-zero",
                vec![waiting_last_failed("X")],
                vec![],
                false,
                "Pending",
            ),
            ("init waiting", vec![waiting("X")], vec![], false, "Pending"),
            (
                "init succeeded",
                vec![succeeded("X")],
                vec![running("A"), running("B")],
                false,
                "Running",
            ),
        ],
    );
}

#[test]
fn ph_03_restart_always_with_sidecar_table() {
    let p = pod("Always", vec![sidecar("X")], ab());
    let both_running = || vec![running("A"), running("B")];
    let both_succeeded = || vec![succeeded("A"), succeeded("B")];
    check(
        &p,
        vec![
            ("empty", vec![], vec![], false, "Pending"),
            (
                "sidecar running",
                vec![running("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar stopped",
                vec![stopped("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar waiting, last exit 0",
                vec![waiting_last_zero("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar waiting, last exit non-zero",
                vec![waiting_last_failed("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar waiting",
                vec![waiting("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar started, 1/2 running",
                vec![started("X")],
                vec![running("A")],
                false,
                "Pending",
            ),
            (
                "sidecar started, all running",
                vec![started("X")],
                both_running(),
                false,
                "Running",
            ),
            (
                "sidecar running not started, all running",
                vec![running("X")],
                both_running(),
                false,
                "Running",
            ),
            (
                "sidecar stopped, all running",
                vec![stopped("X")],
                both_running(),
                false,
                "Running",
            ),
            (
                "sidecar crash loop, all running",
                vec![waiting_last_zero("X")],
                both_running(),
                false,
                "Running",
            ),
            (
                "terminal, sidecar failed, all succeeded",
                vec![failed("X")],
                both_succeeded(),
                true,
                "Succeeded",
            ),
            (
                "terminal, sidecar succeeded, all succeeded",
                vec![succeeded("X")],
                both_succeeded(),
                true,
                "Succeeded",
            ),
        ],
    );
}

#[test]
fn ph_04_restart_always_init_sidecar_and_container_table() {
    let p = pod(
        "Always",
        vec![container("X"), sidecar("Y")],
        vec![container("A")],
    );
    check(
        &p,
        vec![
            (
                "X, Y, A running",
                vec![running("X"), running("Y")],
                vec![running("A")],
                false,
                "Pending",
            ),
            (
                "X, Y running, A stopped",
                vec![running("X"), running("Y")],
                vec![stopped("A")],
                false,
                "Pending",
            ),
            (
                "X succeeded, Y running, A stopped",
                vec![succeeded("X"), running("Y")],
                vec![stopped("A")],
                false,
                "Running",
            ),
            (
                "X succeeded, Y, A running",
                vec![succeeded("X"), running("Y")],
                vec![running("A")],
                false,
                "Running",
            ),
        ],
    );
}

#[test]
fn ph_05_restart_never_table() {
    let p = pod("Never", vec![], ab());
    check(
        &p,
        vec![
            ("empty", vec![], vec![], false, "Pending"),
            (
                "all running",
                vec![],
                vec![running("A"), running("B")],
                false,
                "Running",
            ),
            (
                "all succeeded",
                vec![],
                vec![succeeded("A"), succeeded("B")],
                false,
                "Succeeded",
            ),
            (
                "all failed",
                vec![],
                vec![failed("A"), failed("B")],
                false,
                "Failed",
            ),
            (
                "running + succeeded",
                vec![],
                vec![running("A"), succeeded("B")],
                false,
                "Running",
            ),
            ("B missing", vec![], vec![running("A")], false, "Pending"),
            (
                "running + waiting",
                vec![],
                vec![running("A"), waiting("B")],
                false,
                "Pending",
            ),
        ],
    );
}

#[test]
fn ph_06_restart_never_with_init_container_table() {
    let p = pod("Never", vec![container("X")], ab());
    check(
        &p,
        vec![
            ("empty", vec![], vec![], false, "Pending"),
            ("init running", vec![running("X")], vec![], false, "Pending"),
            ("init failed", vec![failed("X")], vec![], false, "Failed"),
            (
                "init waiting, last exit 0",
                vec![waiting_last_zero("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "init waiting, last exit non-zero",
                vec![waiting_last_failed("X")],
                vec![],
                false,
                "Failed",
            ),
            ("init waiting", vec![waiting("X")], vec![], false, "Pending"),
            (
                "init succeeded",
                vec![succeeded("X")],
                vec![running("A"), running("B")],
                false,
                "Running",
            ),
        ],
    );
}

#[test]
fn ph_07_restart_never_with_sidecar_table() {
    let p = pod("Never", vec![sidecar("X")], ab());
    let both_succeeded = || vec![succeeded("A"), succeeded("B")];
    check(
        &p,
        vec![
            ("empty", vec![], vec![], false, "Pending"),
            (
                "sidecar running",
                vec![running("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar stopped",
                vec![stopped("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar waiting, last exit 0",
                vec![waiting_last_zero("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar waiting, last exit non-zero",
                vec![waiting_last_failed("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar waiting",
                vec![waiting("X")],
                vec![],
                false,
                "Pending",
            ),
            (
                "sidecar started, one running",
                vec![started("X")],
                vec![running("A")],
                false,
                "Pending",
            ),
            (
                "sidecar started, all succeeded",
                vec![started("X")],
                both_succeeded(),
                false,
                "Running",
            ),
            (
                "sidecar running, all succeeded",
                vec![running("X")],
                both_succeeded(),
                false,
                "Running",
            ),
            (
                "all succeeded",
                vec![succeeded("X")],
                both_succeeded(),
                false,
                "Succeeded",
            ),
            (
                "sidecar failed, all succeeded",
                vec![failed("X")],
                both_succeeded(),
                false,
                "Succeeded",
            ),
            (
                "sidecar crash loop, all succeeded",
                vec![waiting_last_zero("X")],
                both_succeeded(),
                false,
                "Succeeded",
            ),
            (
                "sidecar crash loop non-zero, all succeeded",
                vec![waiting_last_failed("X")],
                both_succeeded(),
                false,
                "Succeeded",
            ),
        ],
    );
}

#[test]
fn ph_08_restart_on_failure_table() {
    let p = pod("OnFailure", vec![], ab());
    check(
        &p,
        vec![
            ("empty", vec![], vec![], false, "Pending"),
            (
                "all running",
                vec![],
                vec![running("A"), running("B")],
                false,
                "Running",
            ),
            (
                "all succeeded",
                vec![],
                vec![succeeded("A"), succeeded("B")],
                false,
                "Succeeded",
            ),
            (
                "all failed",
                vec![],
                vec![failed("A"), failed("B")],
                false,
                "Running",
            ),
            (
                "running + succeeded",
                vec![],
                vec![running("A"), succeeded("B")],
                false,
                "Running",
            ),
            ("B missing", vec![], vec![running("A")], false, "Pending"),
            (
                "running + waiting",
                vec![],
                vec![running("A"), waiting("B")],
                false,
                "Pending",
            ),
            (
                "crash loop",
                vec![],
                vec![running("A"), waiting_last_zero("B")],
                false,
                "Running",
            ),
        ],
    );
}

#[test]
fn ph_09_static_pods_ignore_pod_is_terminal() {
    let exited = vec![succeeded("A"), failed("B")];
    let always = pod("Always", vec![], ab());
    assert_eq!(get_phase(&always, &exited, &[], true, true), "Running");
    assert_eq!(get_phase(&always, &exited, &[], true, false), "Failed");

    let never = pod("Never", vec![], ab());
    assert_eq!(get_phase(&never, &exited, &[], true, true), "Failed");
    let all_ok = vec![succeeded("A"), succeeded("B")];
    assert_eq!(get_phase(&never, &all_ok, &[], true, true), "Succeeded");
    assert_eq!(get_phase(&never, &all_ok, &[], false, true), "Succeeded");

    let on_failure = pod("OnFailure", vec![], ab());
    assert_eq!(get_phase(&on_failure, &exited, &[], true, true), "Running");
}

#[test]
fn ph_09_static_flag_reaches_get_phase_from_generate() {
    use crate::core::runtime_status::SandboxState;
    let rt = runtime(
        vec![rt_exited("A", "a1", 10, 0), rt_exited("B", "b1", 10, 0)],
        vec![sandbox(
            "sb",
            SandboxState::SandboxNotready,
            Some("10.0.0.1"),
            1,
        )],
    );
    let mut f = Fixture::new(simple_pod(&["A", "B"]), rt);
    f.terminal = true;
    assert_eq!(f.generate().phase.as_deref(), Some("Succeeded"));
    f.is_static = true;
    assert_eq!(f.generate().phase.as_deref(), Some("Running"));
}
