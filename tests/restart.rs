//! The durable ledger across an agent restart. Pods run on a separately
//! started `ledgerlet runtime serve`, so they survive when the agent is killed with SIGKILL.
//! The restarted agent, on the same `--ledger-dir`, continues the seq, adopts the running
//! containers (none is started twice), keeps the completed job completed, reports correct
//! statuses, and the directory replays across both lifetimes. A torn last record (added to
//! the segment after the kill) is reported and dropped, and the start still succeeds.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction};
use ledgerlet::core::record::{Event, Record};
use ledgerlet::ledger::{Line, Reader};
use support::agent::{processes_with, Agent};
use support::runtime_process::RuntimeProcess;

fn sleeper(name: &str, marker: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: main\n      image: busybox\n      command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 1; done # {marker}\"]\n"
    )
}

fn job(runs: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: job\nspec:\n  restartPolicy: Never\n  containers:\n    - name: main\n      image: busybox\n      command: [sh, -c, \"echo run >> {}\"]\n",
        runs.display()
    )
}

fn main_status(p: &Pod) -> Option<&ContainerStatus> {
    p.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// (container id, started at) of a running, ready pod.
fn running(a: &Agent, name: &str) -> Option<(String, String)> {
    let p = a.pod(name)?;
    let c = main_status(&p)?;
    let r = c.state.as_ref()?.running.as_ref()?;
    (phase(&p) == "Running" && ready(&p) && c.ready).then(|| {
        (
            c.container_id.clone().unwrap_or_default(),
            format!("{:?}", r.started_at),
        )
    })
}

fn durable_records(dir: &Path) -> Vec<Record> {
    Reader::<_, ledgerlet::core::Node>::new(ledgerlet::ledger::durable::open_dir(dir).unwrap())
        .filter_map(|l| match l.expect("a valid line") {
            Line::Record(r) => Some(r),
            Line::Snapshot(_) => None,
        })
        .collect()
}

fn starts_of(records: &[Record], pod_name: &str, uid_of: &dyn Fn(&str) -> String) -> usize {
    let uid = uid_of(pod_name);
    records
        .iter()
        .filter(|r| match &r.event {
            Event::RuntimeActionFinished(f) => {
                f.uid.as_str() == uid
                    && matches!(f.action, RuntimeAction::StartContainer { .. })
                    && matches!(f.outcome, ActionOutcome::Ok { .. })
            }
            _ => false,
        })
        .count()
}

#[test]
fn sigkill_and_restart_on_the_same_ledger_dir_continues_the_seq_and_adopts_the_pods() {
    let root = tempfile::tempdir().unwrap();
    let rt = RuntimeProcess::start(root.path());
    let ledger_dir: PathBuf = root.path().join("ledger");
    let runs = root.path().join("job-runs.txt");
    let marker = format!("ledgerlet-restart-{}", std::process::id());
    let args = [
        "--container-runtime-endpoint",
        rt.endpoint.as_str(),
        "--ledger-dir",
        ledger_dir.to_str().unwrap(),
        // small segments, so the restart resumes from a snapshot
        "--ledger-segment-max-bytes",
        "4096",
        "--ledger-dir-max-bytes",
        "67108864",
    ];
    let agent = Agent::start_in(root, &args, &[]);
    agent.write_manifest("web.yaml", &sleeper("web", &marker));
    agent.write_manifest("api.yaml", &sleeper("api", &marker));
    agent.write_manifest("job.yaml", &job(&runs));
    let web = agent.wait_for("web running", 60, |a| running(a, "web"));
    let api = agent.wait_for("api running", 60, |a| running(a, "api"));
    agent.wait_for("job Succeeded", 60, |a| {
        (phase(&a.pod("job")?) == "Succeeded").then_some(())
    });
    let pids = processes_with(&marker);
    assert_eq!(pids.len(), 2, "{pids:?}");
    let uid_of = {
        let pods = agent.pods();
        move |name: &str| {
            pods.iter()
                .find(|p| p.metadata.name.as_deref() == Some(&format!("{name}-test-node")))
                .and_then(|p| p.metadata.uid.clone())
                .unwrap_or_default()
        }
    };
    let before = agent.state().last_seq;
    // the writer hands records to the kernel whenever its queue runs dry
    agent.wait_for("the records so far on disk", 30, |_| {
        (durable_records(&ledger_dir).last()?.seq >= before).then_some(())
    });

    // SIGKILL: no shutdown, no flush; the pods live on in the runtime
    let root = agent.kill_hard();
    // a torn last record, as a kill in the middle of a write leaves it
    let segs = ledgerlet::ledger::durable::list_segments(&ledger_dir).unwrap();
    assert!(segs.len() > 1, "the ledger rotated: {segs:?}");
    let newest = &segs.last().unwrap().1;
    std::fs::OpenOptions::new()
        .append(true)
        .open(newest)
        .unwrap()
        .write_all(b"{\"seq\":999999,\"at\":\"2026-01-01T00:")
        .unwrap();
    let on_disk = durable_records(&ledger_dir).last().unwrap().seq;
    assert!(on_disk >= before);

    let agent = Agent::start_in(root, &args, &[]);
    assert_eq!(
        agent.wait_for("web adopted", 60, |a| running(a, "web")),
        web,
        "the same container, started once"
    );
    assert_eq!(
        agent.wait_for("api adopted", 60, |a| running(a, "api")),
        api
    );
    agent.wait_for("job still Succeeded", 60, |a| {
        let p = a.pod("job")?;
        (phase(&p) == "Succeeded"
            && main_status(&p)?
                .state
                .as_ref()?
                .terminated
                .as_ref()?
                .exit_code
                == 0)
            .then_some(())
    });
    for name in ["web", "api"] {
        let p = agent.pod(name).unwrap();
        assert_eq!(main_status(&p).unwrap().restart_count, 0, "{name}");
    }
    assert_eq!(processes_with(&marker), pids, "the same processes run");
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        1,
        "the completed job did not run again"
    );

    // the seq continues: the first record of the new lifetime says where the old one ended
    let records = agent.ledger();
    let restarted: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r.event, Event::AgentRestarted(_)))
        .collect();
    assert_eq!(restarted.len(), 1);
    let Event::AgentRestarted(a) = &restarted[0].event else {
        unreachable!()
    };
    assert_eq!(a.previous_seq, on_disk);
    assert_eq!(restarted[0].seq, on_disk + 1);
    let dropped = a.dropped.as_deref().expect("the torn record is reported");
    assert!(dropped.contains("torn"), "{dropped}");
    assert!(agent.log().contains("dropped a torn or unreadable tail"));
    // the in-memory ledger resumed from the newest snapshot on disk (it holds records of the
    // first lifetime only if some followed that snapshot: a kill right after a rotation
    // leaves none, so that is not asserted); an export replays to the live state
    let state = agent.state();
    let export = agent.root.path().join("export.ndjson");
    let o = agent.cli(&[
        "ledger",
        "export",
        "--root-dir",
        agent.state_dir().to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let replayed = ledgerlet::postmortem::replay::replay(
        ledgerlet::ledger::export::open_file(&export).unwrap(),
        Some(ledgerlet::postmortem::replay::Until::Seq(state.last_seq)),
    )
    .unwrap();
    assert_eq!(replayed.node, state);

    // the directory replays across both lifetimes; no container was started twice
    let state = agent.state();
    std::thread::sleep(Duration::from_millis(300));
    let all = durable_records(&ledger_dir);
    assert!(all.first().unwrap().seq == 1, "the whole history is kept");
    assert!(all
        .iter()
        .any(|r| matches!(r.event, Event::AgentRestarted(_))));
    for name in ["web", "api", "job"] {
        assert_eq!(starts_of(&all, name, &uid_of), 1, "{name} started once");
    }
    let replayed = ledgerlet::postmortem::replay::replay(
        ledgerlet::ledger::durable::open_dir(&ledger_dir).unwrap(),
        Some(ledgerlet::postmortem::replay::Until::Seq(state.last_seq)),
    )
    .unwrap();
    assert_eq!(replayed.base_seq, 0);
    assert_eq!(
        replayed.node, state,
        "the durable ledger replays to the live state"
    );
    let o = agent.cli(&["replay", ledger_dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // and the node did what its code says, in both lifetimes
    let o = agent.cli(&["replay", "--verify", ledger_dir.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("verify: OK"), "{out}");
    drop(agent);
    drop(rt);
}
