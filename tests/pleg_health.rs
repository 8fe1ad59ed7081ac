//! PLEG health (PL-10) on the real agent, with shortened periods: the threshold in force is
//! the one of the PLEG's mode, as the kubelet pairs them. A quiet node on the runtime's event
//! stream relists only every evented period and stays healthy; a generic PLEG whose relists
//! stop (a runtime that no longer answers) turns `/healthz` red, and green again once the
//! runtime answers.

mod support;

use std::time::{Duration, Instant};

use ledgerlet::core::record::Event;
use support::agent::Agent;
use support::runtime_process::RuntimeProcess;

/// `/healthz` polled every 100 ms for `secs`: every answer that was not `200 ok`.
fn healthz_failures(agent: &Agent, secs: u64) -> Vec<(u16, String)> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut failures = Vec::new();
    while Instant::now() < deadline {
        let (status, body) = agent.get("/healthz");
        if status != 200 {
            failures.push((status, body));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    failures
}

fn wait_healthz(agent: &Agent, what: &str, want: impl Fn(u16, &str) -> bool) -> String {
    agent.wait_for(what, 30, |a| {
        let (status, body) = a.get("/healthz");
        want(status, &body).then_some(body)
    })
}

#[test]
fn pl_10_a_quiet_evented_node_stays_healthy_across_several_fallback_relists() {
    // generic threshold 400 ms, far below the evented relist period of 1.5 s: judged by the
    // generic threshold, this node would be unhealthy for most of every period
    let agent = Agent::start(&[
        "--relist-period-ms",
        "200",
        "--relist-threshold-ms",
        "400",
        "--evented-relist-period-ms",
        "1500",
        "--evented-relist-threshold-ms",
        "3000",
    ]);
    agent.wait_for("the PLEG in evented mode", 30, |a| {
        let (_, metrics) = a.get("/metrics");
        metrics
            .lines()
            .any(|l| l.starts_with("ledgerlet_pleg_mode{mode=\"evented\"} 1"))
            .then_some(())
    });
    wait_healthz(&agent, "/healthz ok", |s, _| s == 200);
    // four fallback periods with no pod and no container event
    let failures = healthz_failures(&agent, 6);
    assert!(failures.is_empty(), "/healthz failed: {failures:?}");
    let unhealthy: Vec<_> = agent
        .ledger()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::RuntimeHealth(h) if !h.pleg_healthy => Some(h.message),
            _ => None,
        })
        .skip(1) // the first check may run before the first relist
        .collect();
    assert!(
        unhealthy.is_empty(),
        "PLEG reported unhealthy: {unhealthy:?}"
    );
}

#[test]
fn pl_10_a_generic_pleg_whose_relists_stall_turns_unhealthy_until_they_resume() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = RuntimeProcess::start(dir.path());
    let agent = Agent::start(&[
        "--container-runtime-endpoint",
        &runtime.endpoint,
        "--runtime-request-timeout-ms",
        "2000",
        "--evented-pleg",
        "false",
        "--relist-period-ms",
        "200",
        "--relist-threshold-ms",
        "1000",
    ]);
    wait_healthz(&agent, "/healthz ok", |s, _| s == 200);
    assert!(healthz_failures(&agent, 2).is_empty());
    runtime.pause();
    let body = wait_healthz(&agent, "/healthz failing", |s, _| s == 500);
    assert!(
        body.contains("[-]pleg failed: pleg was last seen active")
            && body.contains("; threshold is 1s"),
        "{body}"
    );
    runtime.resume();
    wait_healthz(&agent, "/healthz ok again", |s, _| s == 200);
}
