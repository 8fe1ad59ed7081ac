//! Liveness, readiness and startup probes (exec, HTTP, TCP, gRPC) on the
//! embedded runtime, with real processes and sockets, driven through the real `ledgerlet
//! run` binary. The probe targets are `ledgerlet-probe-target` processes (built from this
//! repository). Periods are 1 s; every assertion about counts and order reads the ledger.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use ledgerlet::core::probe_results::ProbeOutcome;
use ledgerlet::core::probes::{ProbeFinished, ProbeResult, ProbeType, ResultReason, RunResult};
use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction};
use ledgerlet::core::record::{Event, Record};
use ledgerlet::core::runtime_status::ContainerState;
use support::agent::{processes_with, Agent};

const TARGET: &str = env!("CARGO_BIN_EXE_ledgerlet-probe-target");

/// A port nothing listens on right now (the test's processes bind it later, or never).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A static pod `name` with one container `main` running `command`, plus `extra` YAML
/// (indented for the container) and `pod_extra` (for the spec).
fn manifest(name: &str, command: &[&str], extra: &str, pod_extra: &str) -> String {
    let cmd: Vec<String> = command.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n{pod_extra}  containers:\n    - name: main\n      image: busybox\n      command: [{}]\n{extra}",
        cmd.join(", ")
    )
}

fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)
}

fn condition(p: &Pod, t: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

fn uid_of(agent: &Agent, name: &str) -> String {
    agent
        .wait_for(&format!("{name} known"), 60, |a| a.pod(name))
        .metadata
        .uid
        .unwrap()
}

fn finished(records: &[Record], uid: &str, probe: ProbeType) -> Vec<(u64, ProbeFinished)> {
    records
        .iter()
        .filter_map(|r| match &r.event {
            Event::ProbeFinished(f) if f.uid.as_str() == uid && f.probe == probe => {
                Some((r.seq, f.clone()))
            }
            _ => None,
        })
        .collect()
}

fn results(records: &[Record], uid: &str, probe: ProbeType) -> Vec<(u64, ProbeResult)> {
    records
        .iter()
        .filter_map(|r| match &r.event {
            Event::ProbeResult(p) if p.uid.as_str() == uid && p.probe == probe => {
                Some((r.seq, p.clone()))
            }
            _ => None,
        })
        .collect()
}

/// `KillContainer` steps of a pod's containers: (seq, container id, message).
fn kills(records: &[Record], uid: &str) -> Vec<(u64, String, String)> {
    records
        .iter()
        .filter_map(|r| match &r.event {
            Event::RuntimeActionFinished(a) if a.uid.as_str() == uid => match &a.action {
                RuntimeAction::KillContainer { id, message, .. }
                    if matches!(a.outcome, ActionOutcome::Ok { .. }) =>
                {
                    Some((r.seq, id.clone(), message.clone()))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The failing probe's verdict on the first container instance: a `ProbeResult` failure
/// caused by exactly `threshold` consecutive failed runs of that instance, followed by a kill
/// of that instance naming the probe. Returns the verdict's seq.
fn assert_killed_after_exactly(
    records: &[Record],
    uid: &str,
    probe: ProbeType,
    threshold: u32,
) -> u64 {
    let runs = finished(records, uid, probe);
    let (seq, verdict) = results(records, uid, probe)
        .into_iter()
        .find(|(_, r)| r.result == Some(ProbeOutcome::Failure))
        .unwrap_or_else(|| panic!("no {probe} failure for {uid}: {runs:?}"));
    assert_eq!(verdict.reason, ResultReason::Threshold);
    assert_eq!(verdict.consecutive, threshold, "{verdict:?}");
    let cause = records
        .iter()
        .find(|r| r.seq == seq)
        .and_then(|r| r.cause)
        .unwrap();
    let since = verdict.since_seq.unwrap();
    let counted: Vec<&ProbeFinished> = runs
        .iter()
        .filter(|(s, f)| *s >= since && *s <= cause && f.container_id == verdict.container_id)
        .map(|(_, f)| f)
        .collect();
    assert_eq!(counted.len() as u32, threshold, "{counted:?}");
    assert!(counted.iter().all(|f| f.result == RunResult::Failure));
    // nothing for this instance before the run either: the first runs are the failing ones
    let earlier: Vec<&ProbeFinished> = runs
        .iter()
        .filter(|(s, f)| *s < since && f.container_id == verdict.container_id)
        .map(|(_, f)| f)
        .collect();
    assert!(
        earlier.iter().all(|f| f.result != RunResult::Failure),
        "{earlier:?}"
    );
    let what = match probe {
        ProbeType::Startup => "startup",
        _ => "liveness",
    };
    let kill = kills(records, uid)
        .into_iter()
        .find(|(s, id, _)| *s > seq && *id == verdict.container_id)
        .unwrap_or_else(|| panic!("the failed instance was not killed"));
    assert_eq!(
        kill.2,
        format!("Container main failed {what} probe, will be restarted")
    );
    seq
}

#[test]
fn liveness_exec_http_tcp_grpc_pass_without_restarts_and_fail_after_exactly_failure_threshold() {
    let agent = Agent::start(&[]);
    let missing = agent.root.path().join("never-created");
    let missing = missing.to_str().unwrap();
    let (http_ok, http_bad, tcp_ok, tcp_dead, grpc_ok, grpc_bad) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let liveness = |handler: &str, ft: u32| {
        format!("      livenessProbe:\n        {handler}\n        periodSeconds: 1\n        failureThreshold: {ft}\n")
    };
    let pods: Vec<(&str, Vec<String>, String, Option<u32>)> = vec![
        (
            "exec-ok",
            vec!["sleep".into(), "3600".into()],
            liveness("exec: {command: [\"true\"]}", 5),
            None,
        ),
        (
            "exec-bad",
            vec!["sleep".into(), "3600".into()],
            liveness("exec: {command: [sh, -c, \"echo broken; exit 3\"]}", 3),
            Some(3),
        ),
        (
            "http-ok",
            vec![TARGET.into(), "--http".into(), http_ok.to_string()],
            liveness(&format!("httpGet: {{path: /healthz, port: {http_ok}}}"), 5),
            None,
        ),
        (
            "http-bad",
            vec![
                TARGET.into(),
                "--http".into(),
                http_bad.to_string(),
                "--healthy-file".into(),
                missing.into(),
            ],
            liveness(&format!("httpGet: {{path: /healthz, port: {http_bad}}}"), 2),
            Some(2),
        ),
        (
            "tcp-ok",
            vec![TARGET.into(), "--tcp".into(), tcp_ok.to_string()],
            liveness(&format!("tcpSocket: {{port: {tcp_ok}}}"), 5),
            None,
        ),
        (
            "tcp-bad",
            vec!["sleep".into(), "3600".into()],
            liveness(&format!("tcpSocket: {{port: {tcp_dead}}}"), 4),
            Some(4),
        ),
        (
            "grpc-ok",
            vec![TARGET.into(), "--grpc".into(), grpc_ok.to_string()],
            liveness(&format!("grpc: {{port: {grpc_ok}}}"), 5),
            None,
        ),
        (
            "grpc-bad",
            vec![
                TARGET.into(),
                "--grpc".into(),
                grpc_bad.to_string(),
                "--healthy-file".into(),
                missing.into(),
            ],
            liveness(&format!("grpc: {{port: {grpc_bad}, service: db}}"), 3),
            Some(3),
        ),
    ];
    for (name, cmd, extra, _) in &pods {
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        agent.write_manifest(&format!("{name}.yaml"), &manifest(name, &cmd, extra, ""));
    }
    let uids: BTreeMap<&str, String> = pods.iter().map(|(n, ..)| (*n, uid_of(&agent, n))).collect();
    // every failing pod restarts; meanwhile the passing ones keep running
    for (name, _, _, ft) in &pods {
        if ft.is_some() {
            agent.wait_for(&format!("{name} restarted"), 60, |a| {
                (container(&a.pod(name)?, "main")?.restart_count >= 1).then_some(())
            });
        }
    }
    // the passing probes ran over several periods, all successes
    agent.wait_for("five passing runs of each passing probe", 60, |a| {
        let records = a.ledger();
        pods.iter()
            .filter(|(_, _, _, ft)| ft.is_none())
            .all(|(n, ..)| {
                finished(&records, &uids[n], ProbeType::Liveness)
                    .iter()
                    .filter(|(_, f)| f.result == RunResult::Success)
                    .count()
                    >= 5
            })
            .then_some(())
    });
    let records = agent.ledger();
    for (name, _, _, ft) in &pods {
        let uid = &uids[name];
        match ft {
            None => {
                let p = agent.pod(name).unwrap();
                assert_eq!(container(&p, "main").unwrap().restart_count, 0, "{name}");
                assert!(
                    !results(&records, uid, ProbeType::Liveness)
                        .iter()
                        .any(|(_, r)| r.result == Some(ProbeOutcome::Failure)),
                    "{name}"
                );
                assert!(kills(&records, uid).is_empty(), "{name}");
            }
            Some(ft) => {
                assert_killed_after_exactly(&records, uid, ProbeType::Liveness, *ft);
            }
        }
    }
    // the failures say why, as the kubelet words it
    let output = |name: &str| {
        finished(&records, &uids[name], ProbeType::Liveness)
            .into_iter()
            .find(|(_, f)| f.result == RunResult::Failure)
            .map(|(_, f)| f.output)
            .unwrap()
    };
    assert_eq!(output("exec-bad"), "broken\n");
    assert_eq!(output("http-bad"), "HTTP probe failed with statuscode: 500");
    assert_eq!(
        output("tcp-bad"),
        format!("dial tcp 127.0.0.1:{tcp_dead}: connect: connection refused")
    );
    assert_eq!(
        output("grpc-bad"),
        "service unhealthy (responded with \"NOT_SERVING\")"
    );
    // Events: Unhealthy for the failures, Killing for the kill
    let (_, events) = agent.get("/debug/events");
    assert!(
        events.contains("Liveness probe failed: HTTP probe failed with statuscode: 500"),
        "{events}"
    );
    assert!(
        events.contains("Container main failed liveness probe, will be restarted"),
        "{events}"
    );
    // the HTTP probe identified itself as the kubelet's does
    let log = std::fs::read_dir(agent.pod_log_dir("http-ok").unwrap().join("main"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        log.contains("GET /healthz user-agent=kube-probe/1.31"),
        "{log}"
    );
    agent.assert_ledger_replays_to_state();
    assert_replay_explains_restarts(&agent, "http-bad", &uids["http-bad"], 2);
    assert_probe_metrics(&agent, &uids);
}

/// `/metrics/probes` counts the runs the ledger has (read after the ledger, so at least as
/// many) with the kubelet's labels, and times the successful ones.
fn assert_probe_metrics(agent: &Agent, uids: &BTreeMap<&str, String>) {
    let records = agent.ledger();
    let (status, text) = agent.get("/metrics/probes");
    assert_eq!(status, 200);
    let value = |line_start: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {line_start} in\n{text}"))
    };
    for (name, result, want) in [
        ("http-bad", "failed", RunResult::Failure),
        ("grpc-ok", "successful", RunResult::Success),
    ] {
        let uid = &uids[name];
        let series = format!(
            "prober_probe_total{{probe_type=\"Liveness\",result=\"{result}\",container=\"main\",pod=\"{name}-test-node\",namespace=\"default\",pod_uid=\"{uid}\"}}"
        );
        let in_ledger = finished(&records, uid, ProbeType::Liveness)
            .iter()
            .filter(|(_, f)| f.result == want)
            .count() as f64;
        let counted = value(&series);
        assert!(
            counted >= in_ledger && in_ledger > 0.0,
            "{series}: {counted} vs {in_ledger}"
        );
    }
    assert!(
        text.contains("prober_probe_duration_seconds_bucket{probe_type=\"Liveness\",container=\"main\",pod=\"grpc-ok-test-node\",namespace=\"default\",le=\"0.005\"}"),
        "{text}"
    );
    assert!(text.contains("process_start_time_seconds"), "{text}");
    // not on /metrics
    assert!(!agent.get("/metrics").1.contains("prober_probe_total"));
}

/// `ledgerlet replay FILE --pod default/<pod>` of the agent's ledger names, for each kill of
/// the pod's container, the probe verdict and the failed runs behind it.
fn assert_replay_explains_restarts(agent: &Agent, pod: &str, uid: &str, threshold: u32) {
    let file = agent.root.path().join("exported.ndjson");
    std::fs::write(&file, agent.ledger_text()).unwrap();
    let records = agent.ledger();
    let kills = kills(&records, uid);
    assert!(!kills.is_empty());
    let full = format!("default/{pod}-{}", agent.node_name);
    let run = |format: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
            .args([
                "replay",
                file.to_str().unwrap(),
                "--pod",
                &full,
                "--format",
                format,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run("table");
    assert!(
        table.contains(&format!("container kills of {full} ({uid}):")),
        "{table}"
    );
    for (seq, id, message) in &kills {
        assert!(
            table.contains(&format!("seq {seq} ")) && table.contains(id.as_str()),
            "kill {seq} missing:\n{table}"
        );
        assert!(message.contains("failed liveness probe"));
    }
    let verdict_lines = table
        .lines()
        .filter(|l| {
            l.contains(&format!(
                "liveness failure after {threshold} consecutive failed runs"
            ))
        })
        .count();
    assert_eq!(verdict_lines, kills.len(), "{table}");
    let run_lines = table
        .lines()
        .filter(|l| {
            l.contains("ProbeFinished seq")
                && l.contains("failed: HTTP probe failed with statuscode: 500")
        })
        .count();
    assert_eq!(run_lines as u32, threshold * kills.len() as u32, "{table}");
    // the JSON form carries the same, with the records' seqs to look up
    let doc: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    let pods = doc["kills"].as_array().unwrap();
    assert_eq!(pods.len(), 1);
    let json_kills = pods[0]["kills"].as_array().unwrap();
    assert_eq!(json_kills.len(), kills.len());
    // `ledgerlet explain` tells the same story in words, naming the same records
    let explain = std::process::Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args(["explain", file.to_str().unwrap(), "--pod", &full])
        .output()
        .unwrap();
    assert!(
        explain.status.success(),
        "{}",
        String::from_utf8_lossy(&explain.stderr)
    );
    let explain = String::from_utf8(explain.stdout).unwrap();
    for (k, (seq, _, _)) in json_kills.iter().zip(&kills) {
        assert_eq!(k["seq"].as_u64(), Some(*seq));
        let runs = k["verdict"]["runs"].as_array().unwrap();
        assert_eq!(runs.len() as u32, threshold);
        for r in runs {
            let s = r["seq"].as_u64().unwrap();
            assert!(records.iter().any(|rec| rec.seq == s
                && matches!(&rec.event, Event::ProbeFinished(f) if f.result == RunResult::Failure)));
        }
        let seqs: Vec<String> = runs.iter().map(|r| r["seq"].to_string()).collect();
        let because = format!(
            "its liveness probe failed {threshold} times in a row (records {}; verdict record {})",
            seqs.join(", "),
            k["verdict"]["seq"]
        );
        assert!(
            explain.contains(&format!(
                "was stopped (record {seq}): Container main failed liveness probe"
            )) && explain.contains(&because),
            "explain does not name the kill {seq} and {because}:\n{explain}"
        );
    }
}

#[test]
fn readiness_waits_for_initial_delay_and_a_failing_readiness_probe_never_restarts() {
    let agent = Agent::start(&[]);
    agent.write_manifest(
        "delayed.yaml",
        &manifest(
            "delayed",
            &["sleep", "3600"],
            "      readinessProbe:\n        exec: {command: [\"true\"]}\n        initialDelaySeconds: 3\n        periodSeconds: 1\n",
            "",
        ),
    );
    agent.write_manifest(
        "unready.yaml",
        &manifest(
            "unready",
            &["sleep", "3600"],
            "      readinessProbe:\n        exec: {command: [\"false\"]}\n        periodSeconds: 1\n        failureThreshold: 1\n",
            "",
        ),
    );
    let uid = uid_of(&agent, "delayed");
    let unready = uid_of(&agent, "unready");
    // running but not ready during the delay
    let p = agent.wait_for("delayed running", 60, |a| {
        let p = a.pod("delayed")?;
        container(&p, "main")?.state.as_ref()?.running.as_ref()?;
        Some(p)
    });
    assert!(!container(&p, "main").unwrap().ready);
    assert_eq!(condition(&p, "Ready").as_deref(), Some("False"));
    agent.wait_for("delayed Ready", 60, |a| {
        let p = a.pod("delayed")?;
        (condition(&p, "Ready").as_deref() == Some("True")).then_some(())
    });
    let records = agent.ledger();
    let started_at = records
        .iter()
        .find_map(|r| match &r.event {
            Event::RuntimeStatusObserved(o) if o.uid.as_str() == uid => o
                .status
                .as_ref()?
                .containers
                .iter()
                .find(|c| c.state == ContainerState::Running)
                .and_then(|c| c.started_at),
            _ => None,
        })
        .expect("the container's start");
    let runs = finished(&records, &uid, ProbeType::Readiness);
    let first_run_at = records
        .iter()
        .find(|r| r.seq == runs[0].0)
        .map(|r| r.at)
        .unwrap();
    // PR-02 counts from Running.StartedAt as the pod status carries it: in whole seconds (the
    // kubelet's prober reads the normalised status, whose times are RFC 3339 seconds), so a
    // container that started at x.99 s may be probed from about 2.01 s after its precise start
    let status_started_at = started_at.truncated_to_secs();
    assert!(
        first_run_at.since(status_started_at) >= Duration::from_secs(3),
        "no readiness run before initialDelaySeconds: first at {first_run_at}, started {started_at} (status startedAt {status_started_at})"
    );
    let (ready_seq, ready) = results(&records, &uid, ProbeType::Readiness)
        .into_iter()
        .find(|(_, r)| r.result == Some(ProbeOutcome::Success))
        .unwrap();
    assert!(ready_seq > runs[0].0);
    assert_eq!(ready.reason, ResultReason::Threshold);
    // the failing readiness probe: never ready, never restarted
    agent.wait_for("five failed readiness runs", 60, |a| {
        (finished(&a.ledger(), &unready, ProbeType::Readiness).len() >= 5).then_some(())
    });
    let p = agent.pod("unready").unwrap();
    let c = container(&p, "main").unwrap();
    assert_eq!((c.ready, c.restart_count), (false, 0));
    assert!(c.state.as_ref().unwrap().running.is_some());
    assert!(kills(&agent.ledger(), &unready).is_empty());
    agent.assert_ledger_replays_to_state();
}

#[test]
fn startup_gates_liveness_readiness_follows_startup_and_a_failing_startup_probe_restarts() {
    let agent = Agent::start(&[]);
    let dir = agent.root.path().join("flags");
    std::fs::create_dir_all(&dir).unwrap();
    let started = dir.join("started");
    let started = started.to_str().unwrap();
    // a slow starter: the startup probe passes once the container created its flag (after
    // 3 s); a liveness probe that always fails must not count before that
    let slow = format!("sleep 3; touch {started}; exec sleep 3600");
    agent.write_manifest(
        "slow.yaml",
        &manifest(
            "slow",
            &["sh", "-c", &slow],
            &format!(
                "      startupProbe:\n        exec: {{command: [test, -f, {started}]}}\n        periodSeconds: 1\n        failureThreshold: 30\n      livenessProbe:\n        exec: {{command: [\"false\"]}}\n        periodSeconds: 1\n        failureThreshold: 2\n      readinessProbe:\n        exec: {{command: [\"true\"]}}\n        periodSeconds: 10\n"
            ),
            "",
        ),
    );
    agent.write_manifest(
        "never.yaml",
        &manifest(
            "never",
            &["sleep", "3600"],
            "      startupProbe:\n        exec: {command: [\"false\"]}\n        periodSeconds: 1\n        failureThreshold: 3\n",
            "",
        ),
    );
    let slow_uid = uid_of(&agent, "slow");
    let never_uid = uid_of(&agent, "never");
    agent.wait_for("both restarted", 90, |a| {
        let r = |n: &str| container(&a.pod(n)?, "main").map(|c| c.restart_count);
        (r("slow")? >= 1 && r("never")? >= 1).then_some(())
    });
    let records = agent.ledger();
    // the failing startup probe: killed after exactly 3 failures
    assert_killed_after_exactly(&records, &never_uid, ProbeType::Startup, 3);
    // the slow starter: no liveness or readiness run before startup succeeded
    let (startup_ok, first) = results(&records, &slow_uid, ProbeType::Startup)
        .into_iter()
        .find(|(_, r)| r.result == Some(ProbeOutcome::Success))
        .expect("startup succeeded");
    let before: Vec<_> = finished(&records, &slow_uid, ProbeType::Liveness)
        .into_iter()
        .chain(finished(&records, &slow_uid, ProbeType::Readiness))
        .filter(|(s, f)| *s < startup_ok && f.container_id == first.container_id)
        .collect();
    assert!(before.is_empty(), "gated runs happened: {before:?}");
    let startup_failures = finished(&records, &slow_uid, ProbeType::Startup)
        .into_iter()
        .filter(|(s, f)| *s < startup_ok && f.result == RunResult::Failure)
        .count();
    assert!(startup_failures >= 2, "the startup probe failed first");
    // readiness right after startup: its first run comes at the sync the startup result
    // caused (its period is 10 s), before any further startup or liveness run
    let ready = results(&records, &slow_uid, ProbeType::Readiness)
        .into_iter()
        .find(|(_, r)| {
            r.result == Some(ProbeOutcome::Success) && r.container_id == first.container_id
        })
        .expect("ready after startup");
    let first_readiness_run = finished(&records, &slow_uid, ProbeType::Readiness)[0].0;
    let liveness_after: Vec<u64> = finished(&records, &slow_uid, ProbeType::Liveness)
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert!(first_readiness_run > startup_ok);
    // within one liveness period of startup, though its own period is 10 s
    assert!(
        liveness_after
            .get(1)
            .is_none_or(|l| *l > first_readiness_run),
        "readiness ran at once after startup: {first_readiness_run} vs liveness {liveness_after:?}"
    );
    assert!(ready.0 > startup_ok);
    // then liveness applies: the instance is killed after exactly 2 failures
    assert_killed_after_exactly(&records, &slow_uid, ProbeType::Liveness, 2);
    agent.assert_ledger_replays_to_state();
}

#[test]
fn an_exec_probe_that_sleeps_past_timeout_seconds_is_a_failure() {
    let agent = Agent::start(&[]);
    agent.write_manifest(
        "slowprobe.yaml",
        &manifest(
            "slowprobe",
            &["sleep", "3600"],
            "      livenessProbe:\n        exec: {command: [sleep, \"5\"]}\n        timeoutSeconds: 1\n        periodSeconds: 1\n        failureThreshold: 2\n",
            "",
        ),
    );
    let uid = uid_of(&agent, "slowprobe");
    agent.wait_for("restarted after timeouts", 60, |a| {
        (container(&a.pod("slowprobe")?, "main")?.restart_count >= 1).then_some(())
    });
    let records = agent.ledger();
    assert_killed_after_exactly(&records, &uid, ProbeType::Liveness, 2);
    let (_, first) = finished(&records, &uid, ProbeType::Liveness)
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(first.result, RunResult::Failure);
    assert_eq!(first.output, "command \"sleep 5\" timed out");
    assert!(
        first.duration_ms < 4_000,
        "the run ended at its timeout, not when the command did: {} ms",
        first.duration_ms
    );
}

#[test]
fn a_deleted_pod_turns_not_ready_before_its_containers_stop_and_is_not_killed_by_liveness() {
    let agent = Agent::start(&[]);
    let dir = agent.root.path().join("alive");
    std::fs::create_dir_all(&dir).unwrap();
    let (armed, gone) = (dir.join("armed"), dir.join("gone"));
    let (armed, gone) = (armed.to_str().unwrap(), gone.to_str().unwrap());
    let marker = format!("ledgerlet-probe-delete-{}", std::process::id());
    // on SIGTERM the container breaks its liveness probe, then takes 3 s to exit; it says
    // when its trap is set (`armed`), and its liveness probe passes from the start until then
    // (so neither a slow start nor an early probe can race the test)
    let script = format!(
        "trap 'touch {gone}; sleep 3; exit 0' TERM; touch {armed}; while true; do sleep 0.1; done # {marker}"
    );
    agent.write_manifest(
        "leaving.yaml",
        &manifest(
            "leaving",
            &["sh", "-c", &script],
            &format!("      readinessProbe:\n        exec: {{command: [\"true\"]}}\n        periodSeconds: 1\n      livenessProbe:\n        exec: {{command: [sh, -c, \"test ! -f {gone}\"]}}\n        periodSeconds: 1\n        failureThreshold: 1\n"),
            "  terminationGracePeriodSeconds: 10\n",
        ).replace("  terminationGracePeriodSeconds: 2\n", ""),
    );
    let uid = uid_of(&agent, "leaving");
    agent.wait_for("leaving Ready", 60, |a| {
        let p = a.pod("leaving")?;
        (condition(&p, "Ready").as_deref() == Some("True")).then_some(())
    });
    // Ready can come before the shell has set its trap (the readiness probe does not wait
    // for it): a SIGTERM then would kill the shell (143) instead of starting its shutdown
    agent.wait_for("the container's TERM trap set", 60, |_| {
        std::path::Path::new(armed).exists().then_some(())
    });
    agent.remove_manifest("leaving.yaml");
    agent.wait_for("the container gone", 60, |_| {
        processes_with(&marker).is_empty().then_some(())
    });
    agent.wait_for("the exit recorded", 30, |a| {
        a.ledger().iter().any(|r| matches!(&r.event, Event::RuntimeStatusObserved(o)
            if o.uid.as_str() == uid && o.status.as_ref().is_some_and(|s| s.containers.iter().any(|c| c.state == ContainerState::Exited))))
            .then_some(())
    });
    let records = agent.ledger();
    let exited = records
        .iter()
        .find(|r| matches!(&r.event, Event::RuntimeStatusObserved(o)
            if o.uid.as_str() == uid && o.status.as_ref().is_some_and(|s| s.containers.iter().any(|c| c.state == ContainerState::Exited))))
        .unwrap();
    let (pinned, _) = results(&records, &uid, ProbeType::Readiness)
        .into_iter()
        .find(|(_, r)| r.reason == ResultReason::Terminating)
        .expect("readiness forced to failure at termination");
    assert!(pinned < exited.seq);
    // replayed to just before the exit was seen: the pod is not Ready any more
    let text = agent.ledger_text();
    let before_exit = ledgerlet::postmortem::replay::replay(
        text.as_bytes(),
        Some(ledgerlet::postmortem::replay::Until::Seq(exited.seq - 1)),
    )
    .unwrap();
    let status = before_exit
        .node
        .statuses
        .get(&ledgerlet::core::Uid::new(&uid))
        .unwrap()
        .status
        .clone();
    let ready = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        status.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some(),
        "the container was still running then"
    );
    // the liveness probe failed during the 3 s shutdown, but nothing probed or killed it
    let kill_start = records
        .iter()
        .find(|r| matches!(&r.event, Event::PodRemoved(_)))
        .unwrap()
        .seq;
    assert!(finished(&records, &uid, ProbeType::Liveness)
        .iter()
        .all(|(s, f)| *s < kill_start || f.result != RunResult::Failure));
    assert!(!kills(&records, &uid)
        .iter()
        .any(|(_, _, m)| m.contains("liveness")));
    // the container exited by itself (0), within its grace period
    let c = exited.event.clone();
    let Event::RuntimeStatusObserved(o) = c else {
        unreachable!()
    };
    let main = o
        .status
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.state == ContainerState::Exited)
        .unwrap();
    assert_eq!(main.exit_code, 0);
}
