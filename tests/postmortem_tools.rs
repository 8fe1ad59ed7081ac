//! Postmortems, the offline tools: `replay --verify` passes on ledgers of real runs
//! and fails on an edited one; `explain` on a crash-loop ledger names the causing records
//! (restarts with their exits and back-offs) and on a cluster ledger the failed status
//! writes; `diff` shows what changed in a pod between two records.

mod support;

use std::path::{Path, PathBuf};

use ledgerlet::core::record::{Event, Record};
use ledgerlet::ledger::{Line, Reader};
use support::agent::{cli, Agent};

fn export(agent: &Agent, name: &str) -> PathBuf {
    let out = agent.root.path().join(name);
    let o = cli(&[
        "ledger",
        "export",
        "--root-dir",
        agent.state_dir().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = cli(args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn records(path: &Path) -> Vec<Record> {
    Reader::<_, ledgerlet::core::Node>::new(ledgerlet::ledger::export::open_file(path).unwrap())
        .filter_map(|l| match l.unwrap() {
            Line::Record(r) => Some(r),
            Line::Snapshot(_) => None,
        })
        .collect()
}

/// The seqs a sentence names after "record"/"records".
fn named_records(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for part in text.split("record").skip(1) {
        let part = part.strip_prefix('s').unwrap_or(part);
        for tok in part.trim_start().split(", ") {
            let digits: String = tok.chars().take_while(|c| c.is_ascii_digit()).collect();
            match digits.parse() {
                Ok(n) => out.push(n),
                Err(_) => break,
            }
            if digits.len() != tok.len() {
                break;
            }
        }
    }
    out
}

const CRASHER: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crasher\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: main\n      image: busybox\n      command: [sh, -c, \"exit 3\"]\n";

#[test]
fn explain_a_crash_loop_names_the_exits_and_back_offs_and_verify_passes_then_fails_when_edited() {
    let agent = Agent::start(&[]);
    agent.write_manifest("crasher.yaml", CRASHER);
    agent.wait_for("two restarts", 60, |a| {
        let p = a.pod("crasher")?;
        let c = p.status?.container_statuses?.into_iter().next()?;
        (c.restart_count >= 2).then_some(())
    });
    let file = export(&agent, "crash.ndjson");
    let path = file.to_str().unwrap();

    // verify passes on the real ledger
    let (code, out, err) = run(&["replay", "--verify", path]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verify: OK"), "{out}");

    // explain names the restarts, the exits and the back-off records
    let (code, out, err) = run(&["explain", path, "--pod", "default/crasher-test-node"]);
    assert_eq!(code, 0, "{err}");
    println!("{out}");
    let all = records(&file);
    let restart = out
        .lines()
        .find(|l| l.contains("container main restarted") && l.contains("restart 2"))
        .unwrap_or_else(|| panic!("no second restart in:\n{out}"));
    assert!(restart.contains("exited with code 3"), "{restart}");
    // the first restart is immediate, the second waits the initial back-off (1 s here)
    assert!(
        restart.contains("back-off 1 s (CrashLoopBackOff"),
        "{restart}"
    );
    // the records the sentence names: the exit, the back-off decision and its expiry
    let named = named_records(restart);
    assert!(named.len() >= 5, "{restart}");
    let kind_of = |n: u64| all.iter().find(|r| r.seq == n).map(|r| r.event.kind());
    assert!(
        named.iter().any(|n| kind_of(*n) == Some("PlegEvent")),
        "{restart}"
    );
    assert!(
        named
            .iter()
            .any(|n| kind_of(*n) == Some("RuntimeStatusObserved")),
        "{restart}"
    );
    let expired: u64 = restart
        .split("expired at record ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|t| t.parse().ok())
        .expect("the expiry record");
    assert!(
        matches!(&all.iter().find(|r| r.seq == expired).unwrap().event, Event::TimerFired(t) if matches!(t.key, ledgerlet::core::timers::TimerKey::BackoffExpiry { .. })),
        "record {expired} is the back-off timer"
    );
    // the start record it names is the second restart's StartContainer
    let start_seq: u64 = restart
        .split("(record ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .and_then(|t| t.parse().ok())
        .unwrap();
    let start = all.iter().find(|r| r.seq == start_seq).unwrap();
    assert!(
        matches!(&start.event, Event::RuntimeActionFinished(f) if matches!(f.action, ledgerlet::core::record::event::RuntimeAction::StartContainer { .. })),
        "{start:?}"
    );
    assert!(
        out.contains("statuses are not written to an API server"),
        "{out}"
    );

    // diff between the first start and the end shows the restart count going up
    let first_start = all
        .iter()
        .find(|r| matches!(&r.event, Event::RuntimeActionFinished(f) if matches!(f.action, ledgerlet::core::record::event::RuntimeAction::StartContainer { .. })))
        .unwrap()
        .seq;
    let last = all.last().unwrap().seq;
    let (code, out, err) = run(&[
        "diff",
        path,
        &first_start.to_string(),
        &last.to_string(),
        "--pod",
        "default/crasher-test-node",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("restartCount"), "{out}");
    assert!(out.contains("records about the pod in between"), "{out}");

    // an outcome no command caused: a SyncFinished pointing at the first record
    let text = std::fs::read_to_string(&file).unwrap();
    let victim = all
        .iter()
        .find(|r| matches!(r.event, Event::SyncFinished(_)) && r.cause.is_some_and(|c| c > 2))
        .unwrap();
    let line = ledgerlet::ledger::codec::encode_record(victim);
    let mut edited_rec = victim.clone();
    edited_rec.cause = Some(1);
    let edited = text.replace(&line, &ledgerlet::ledger::codec::encode_record(&edited_rec));
    assert_ne!(edited, text);
    let bad = agent.root.path().join("edited.ndjson");
    std::fs::write(&bad, edited).unwrap();
    let (code, out, _) = run(&["replay", "--verify", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("verify: FAILED"), "{out}");
    assert!(out.contains(&format!("record {}", victim.seq)), "{out}");
}

#[test]
fn explain_names_the_failed_status_writes_that_made_a_status_late() {
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::api::PostParams;
    use std::time::Duration;
    use support::fault_proxy::FaultProxy;
    use support::real_cluster::RealCluster;

    let Some(c) = RealCluster::shared() else {
        return;
    };
    const NODE: &str = "postmortem-node";
    // the agent reaches the real apiserver through a proxy that can answer 500
    let (proxy, kubeconfig) = FaultProxy::for_node(c, NODE);
    let agent = Agent::start(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node-name",
        NODE,
        "--status-sync-period-ms",
        "300",
    ]);
    let gate = agent.root.path().join("gate");
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("job".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(NODE.into()),
            automount_service_account_token: Some(false),
            restart_policy: Some("Never".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display()),
                ]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus::default()),
    };
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let phase = || {
        admin
            .run(pods.get_opt("job"))
            .ok()
            .flatten()
            .and_then(|p| p.status)
            .and_then(|s| s.phase)
            .unwrap_or_default()
    };
    // the agent has seen its Running status acknowledged (the API showing it is not enough:
    // cutting the connection whose response is still on its way would make the agent retry
    // it, and explain would rightly name the Running status as the late one)
    agent.wait_for(
        "job Running in the API, acknowledged to the agent",
        60,
        |a| {
            let node = a.state();
            let caught_up = node.statuses.iter().any(|(_, v)| {
                v.status.phase.as_deref() == Some("Running") && v.unsynced_since.is_none()
            });
            (caught_up && phase() == "Running").then_some(())
        },
    );
    // every request answered 500 until three status syncs have failed
    proxy.status_500(true);
    std::fs::write(&gate, b"").unwrap();
    // three failed writes of the Succeeded status itself (under load the container may exit
    // only after earlier writes of the Running status have failed)
    agent.wait_for("three failed writes of the Succeeded status", 60, |a| {
        let node = a.state();
        let (_, succeeded) = node
            .statuses
            .iter()
            .find(|(_, v)| v.status.phase.as_deref() == Some("Succeeded"))?;
        let n = a
            .ledger()
            .iter()
            .filter(|r| matches!(&r.event, Event::StatusSyncFinished(s) if s.version == succeeded.version && matches!(s.outcome, ledgerlet::core::record::event::StatusSyncOutcome::Failed { code: Some(500), .. })))
            .count();
        (n >= 3).then_some(())
    });
    // and long enough failing that explain lists the status rather than summarising it
    std::thread::sleep(Duration::from_millis(
        ledgerlet::postmortem::explain::QUICK_STATUS_MS + 500,
    ));
    proxy.clear();
    agent.wait_for("job Succeeded in the API", 60, |_| {
        (phase() == "Succeeded").then_some(())
    });
    std::thread::sleep(Duration::from_millis(100));
    let file = export(&agent, "status.ndjson.gz");
    let path = file.to_str().unwrap();
    let (code, out, err) = run(&["replay", "--verify", path]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(&["explain", path, "--pod", "default/job"]);
    assert_eq!(code, 0, "{err}");
    println!("{out}");
    let line = out
        .lines()
        .find(|l| l.contains("(phase Succeeded) reached the API"))
        .unwrap_or_else(|| panic!("no late Succeeded status in:\n{out}"));
    assert!(line.contains("status writes failed with 500"), "{line}");
    let all = records(&file);
    let failed: Vec<u64> = named_records(line.split("failed with 500").nth(1).unwrap());
    assert!(failed.len() >= 3, "{line}");
    for n in &failed {
        let r = all.iter().find(|r| r.seq == *n).expect("a named record");
        assert!(
            matches!(&r.event, Event::StatusSyncFinished(s) if matches!(s.outcome, ledgerlet::core::record::event::StatusSyncOutcome::Failed { code: Some(500), .. })),
            "record {n} is a failed status write: {r:?}"
        );
    }
    drop(agent);
    drop(proxy);
}
