//! BEHAVIOUR §D: the getPhase tables PH-01…PH-09, in full.
//!
//! A row is `"label | init statuses | regular statuses | phase"`. Statuses are
//! space-separated `NAME:KIND`, KIND one of `run` (running), `start` (started), `ok`
//! (succeeded), `stop` (stopped), `fail` (failed), `wait` (waiting), `wait0` (waiting, last
//! exit 0) and `wait1` (waiting, last exit non-zero). A phase written `terminal: P` means
//! podIsTerminal is set.

use k8s_openapi::api::core::v1::{ContainerStatus as S, Pod};

use super::fixtures::*;
use crate::core::pod_status::get_phase;

fn statuses(spec: &str) -> Vec<S> {
    let one = |t: &str| {
        let (name, kind) = t
            .split_once(':')
            .unwrap_or_else(|| panic!("bad status {t}"));
        let build = match kind {
            "run" => running,
            "start" => started,
            "ok" => succeeded,
            "stop" => stopped,
            "fail" => failed,
            "wait" => waiting,
            "wait0" => waiting_last_zero,
            "wait1" => waiting_last_failed,
            _ => panic!("bad status kind {t}"),
        };
        build(name)
    };
    spec.split_whitespace().map(one).collect()
}

fn check(pod: &Pod, rows: &[&str]) {
    for row in rows {
        let f: Vec<&str> = row.split('|').map(str::trim).collect();
        let [what, init, regular, want] = f[..] else {
            panic!("bad row {row}")
        };
        let (terminal, want) = match want.strip_prefix("terminal: ") {
            Some(w) => (true, w),
            None => (false, want),
        };
        let (init, regular) = (statuses(init), statuses(regular));
        let got = get_phase(pod, &regular, &init, terminal, false);
        assert_eq!(got, want, "{what}");
        // The upstream calling convention (one list holding every status) agrees.
        let all: Vec<S> = init.iter().chain(&regular).cloned().collect();
        let got = get_phase(pod, &all, &[], terminal, false);
        assert_eq!(got, want, "{what} (one list)");
    }
}

fn ab() -> Vec<k8s_openapi::api::core::v1::Container> {
    vec![container("A"), container("B")]
}

#[test]
fn ph_01_restart_always_table() {
    check(
        &pod("Always", vec![], ab()),
        &[
            "no statuses | | | Pending",
            "all running | | A:run B:run | Running",
            "all stopped | | A:stop B:stop | Running",
            "terminal, all succeeded | | A:ok B:ok | terminal: Succeeded",
            "terminal, one failed | | A:ok B:fail | terminal: Failed",
            "running + stopped | | A:run B:stop | Running",
            "B missing | | A:run | Pending",
            "running + waiting | | A:run B:wait | Pending",
            "crash loop | | A:run B:wait0 | Running",
        ],
    );
}

#[test]
fn ph_02_restart_always_with_init_container_table() {
    check(
        &pod("Always", vec![container("X")], ab()),
        &[
            "empty | | | Pending",
            "init running | X:run | | Pending",
            "init failed | X:fail | | Pending",
            "init waiting, last exit 0 | X:wait0 | | Pending",
            "init waiting, last exit non-zero | X:wait1 | | Pending",
            "init waiting | X:wait | | Pending",
            "init succeeded | X:ok | A:run B:run | Running",
        ],
    );
}

#[test]
fn ph_03_restart_always_with_sidecar_table() {
    check(
        &pod("Always", vec![sidecar("X")], ab()),
        &[
            "empty | | | Pending",
            "sidecar running | X:run | | Pending",
            "sidecar stopped | X:stop | | Pending",
            "sidecar waiting, last exit 0 | X:wait0 | | Pending",
            "sidecar waiting, last exit non-zero | X:wait1 | | Pending",
            "sidecar waiting | X:wait | | Pending",
            "sidecar started, 1/2 running | X:start | A:run | Pending",
            "sidecar started, all running | X:start | A:run B:run | Running",
            "sidecar running not started, all running | X:run | A:run B:run | Running",
            "sidecar stopped, all running | X:stop | A:run B:run | Running",
            "sidecar crash loop, all running | X:wait0 | A:run B:run | Running",
            "terminal, sidecar failed, all succeeded | X:fail | A:ok B:ok | terminal: Succeeded",
            "terminal, sidecar succeeded, all succeeded | X:ok | A:ok B:ok | terminal: Succeeded",
        ],
    );
}

#[test]
fn ph_04_restart_always_init_sidecar_and_container_table() {
    check(
        &pod(
            "Always",
            vec![container("X"), sidecar("Y")],
            vec![container("A")],
        ),
        &[
            "X, Y, A running | X:run Y:run | A:run | Pending",
            "X, Y running, A stopped | X:run Y:run | A:stop | Pending",
            "X succeeded, Y running, A stopped | X:ok Y:run | A:stop | Running",
            "X succeeded, Y, A running | X:ok Y:run | A:run | Running",
        ],
    );
}

#[test]
fn ph_05_restart_never_table() {
    check(
        &pod("Never", vec![], ab()),
        &[
            "empty | | | Pending",
            "all running | | A:run B:run | Running",
            "all succeeded | | A:ok B:ok | Succeeded",
            "all failed | | A:fail B:fail | Failed",
            "running + succeeded | | A:run B:ok | Running",
            "B missing | | A:run | Pending",
            "running + waiting | | A:run B:wait | Pending",
        ],
    );
}

#[test]
fn ph_06_restart_never_with_init_container_table() {
    check(
        &pod("Never", vec![container("X")], ab()),
        &[
            "empty | | | Pending",
            "init running | X:run | | Pending",
            "init failed | X:fail | | Failed",
            "init waiting, last exit 0 | X:wait0 | | Pending",
            "init waiting, last exit non-zero | X:wait1 | | Failed",
            "init waiting | X:wait | | Pending",
            "init succeeded | X:ok | A:run B:run | Running",
        ],
    );
}

#[test]
fn ph_07_restart_never_with_sidecar_table() {
    check(
        &pod("Never", vec![sidecar("X")], ab()),
        &[
            "empty | | | Pending",
            "sidecar running | X:run | | Pending",
            "sidecar stopped | X:stop | | Pending",
            "sidecar waiting, last exit 0 | X:wait0 | | Pending",
            "sidecar waiting, last exit non-zero | X:wait1 | | Pending",
            "sidecar waiting | X:wait | | Pending",
            "sidecar started, one running | X:start | A:run | Pending",
            "sidecar started, all succeeded | X:start | A:ok B:ok | Running",
            "sidecar running, all succeeded | X:run | A:ok B:ok | Running",
            "all succeeded | X:ok | A:ok B:ok | Succeeded",
            "sidecar failed, all succeeded | X:fail | A:ok B:ok | Succeeded",
            "sidecar crash loop, all succeeded | X:wait0 | A:ok B:ok | Succeeded",
            "sidecar crash loop non-zero, all succeeded | X:wait1 | A:ok B:ok | Succeeded",
        ],
    );
}

#[test]
fn ph_08_restart_on_failure_table() {
    check(
        &pod("OnFailure", vec![], ab()),
        &[
            "empty | | | Pending",
            "all running | | A:run B:run | Running",
            "all succeeded | | A:ok B:ok | Succeeded",
            "all failed | | A:fail B:fail | Running",
            "running + succeeded | | A:run B:ok | Running",
            "B missing | | A:run | Pending",
            "running + waiting | | A:run B:wait | Pending",
            "crash loop | | A:run B:wait0 | Running",
        ],
    );
}

#[test]
fn ph_09_static_pods_ignore_pod_is_terminal() {
    // (policy, statuses, podIsTerminal, isStatic, phase)
    for (policy, st, terminal, is_static, want) in [
        ("Always", "A:ok B:fail", true, true, "Running"),
        ("Always", "A:ok B:fail", true, false, "Failed"),
        ("Never", "A:ok B:fail", true, true, "Failed"),
        ("Never", "A:ok B:ok", true, true, "Succeeded"),
        ("Never", "A:ok B:ok", false, true, "Succeeded"),
        ("OnFailure", "A:ok B:fail", true, true, "Running"),
    ] {
        let got = get_phase(
            &pod(policy, vec![], ab()),
            &statuses(st),
            &[],
            terminal,
            is_static,
        );
        let case = format!("{policy} {st} terminal={terminal} static={is_static}");
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn ph_09_static_flag_reaches_get_phase_from_generate() {
    use crate::core::runtime_status::SandboxState::SandboxNotready;
    let exited = vec![rt_exited("A", "a1", 10, 0), rt_exited("B", "b1", 10, 0)];
    let sb = sandbox("sb", SandboxNotready, Some("10.0.0.1"), 1);
    let mut f = Fixture::new(simple_pod(&["A", "B"]), runtime(exited, vec![sb]));
    f.terminal = true;
    assert_eq!(f.generate().phase.as_deref(), Some("Succeeded"));
    f.is_static = true;
    assert_eq!(f.generate().phase.as_deref(), Some("Running"));
}
