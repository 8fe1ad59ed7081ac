//! Lifecycle hooks: preStop before SIGTERM within the grace period, a
//! sleeping preStop cut short when the grace period is shortened (a second, shorter DELETE
//! through a real kube-apiserver), and a failing postStart that kills and restarts the
//! container. Real processes on the embedded runtime; order and times from the ledger and
//! from what the processes wrote.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, Lifecycle, LifecycleHandler, Pod, PodSpec, PodStatus, SleepAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction, SyncOutcome};
use ledgerlet::core::record::{Event, Record, Time};
use ledgerlet::core::runtime_status::{ContainerState, ContainerStatus};
use support::agent::{processes_with, Agent};
use support::real_cluster::RealCluster;

/// The `RuntimeActionFinished` records of a pod: (seq, at, action, outcome).
fn actions(records: &[Record], uid: &str) -> Vec<(u64, Time, RuntimeAction, ActionOutcome)> {
    records
        .iter()
        .filter_map(|r| match &r.event {
            Event::RuntimeActionFinished(a) if a.uid.as_str() == uid => {
                Some((r.seq, r.at, a.action.clone(), a.outcome.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The first exited instance of container `name` the runtime reported.
fn first_exit(records: &[Record], uid: &str, name: &str) -> Option<ContainerStatus> {
    records.iter().find_map(|r| match &r.event {
        Event::RuntimeStatusObserved(o) if o.uid.as_str() == uid => o
            .status
            .as_ref()?
            .containers
            .iter()
            .find(|c| c.name == name && c.state == ContainerState::Exited)
            .cloned(),
        _ => None,
    })
}

fn uid_of(agent: &Agent, name: &str) -> String {
    agent
        .wait_for(&format!("{name} known"), 60, |a| a.pod(name))
        .metadata
        .uid
        .unwrap()
}

#[test]
fn pre_stop_runs_before_sigterm_within_the_grace_period() {
    let agent = Agent::start(&[]);
    let out = agent.root.path().join("effects");
    let out = out.to_str().unwrap();
    let marker = format!("ledgerlet-prestop-{}", std::process::id());
    agent.write_manifest(
        "polite.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: polite
spec:
  terminationGracePeriodSeconds: 10
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c", "trap 'echo term >> {out}; exit 0' TERM; while true; do sleep 0.1; done # {marker}"]
      lifecycle:
        preStop:
          exec: {{command: [sh, -c, "echo prestop >> {out}; sleep 1; echo prestop-done >> {out}"]}}
"#
        ),
    );
    let uid = uid_of(&agent, "polite");
    agent.wait_for("polite running", 60, |_| {
        (!processes_with(&marker).is_empty()).then_some(())
    });
    agent.remove_manifest("polite.yaml");
    agent.wait_for("polite stopped", 60, |a| {
        first_exit(&a.ledger(), &uid, "main").map(|_| ())
    });
    // the process saw the hook finish, then SIGTERM
    let effects = std::fs::read_to_string(out).unwrap();
    assert_eq!(effects, "prestop\nprestop-done\nterm\n");
    let records = agent.ledger();
    let acts = actions(&records, &uid);
    let hook = acts
        .iter()
        .position(|(_, _, a, _)| matches!(a, RuntimeAction::PreStopHook { .. }))
        .expect("the preStop hook ran");
    let kill = acts
        .iter()
        .position(|(_, _, a, _)| matches!(a, RuntimeAction::KillContainer { .. }))
        .unwrap();
    assert!(hook < kill, "preStop is reported before StopContainer");
    assert!(matches!(
        acts[hook].3,
        ActionOutcome::Ok { detail: None, .. }
    ));
    // exited on its own (0) well within the 10 s grace, counted from the kill request
    let exit = first_exit(&records, &uid, "main").unwrap();
    assert_eq!(exit.exit_code, 0);
    let removed = records
        .iter()
        .find(|r| matches!(&r.event, Event::PodRemoved(_)))
        .unwrap()
        .at;
    assert!(exit.finished_at.unwrap().since(removed) < Duration::from_secs(10));
}

#[test]
fn a_failing_post_start_kills_and_restarts_the_container_and_a_passing_one_does_not() {
    let agent = Agent::start(&[]);
    let out = agent.root.path().join("poststart");
    let out = out.to_str().unwrap();
    agent.write_manifest(
        "bad.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: bad-hook
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: busybox
      command: ["sleep", "3600"]
      lifecycle:
        postStart:
          exec: {command: [sh, -c, "echo nope; exit 7"]}
"#,
    );
    agent.write_manifest(
        "good.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: good-hook
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: busybox
      command: ["sleep", "3600"]
      lifecycle:
        postStart:
          exec: {{command: [sh, -c, "echo started >> {out}"]}}
"#
        ),
    );
    let bad = uid_of(&agent, "bad-hook");
    let good = uid_of(&agent, "good-hook");
    agent.wait_for("bad-hook restarted twice", 60, |a| {
        let p = a.pod("bad-hook")?;
        let c = p.status?.container_statuses?.into_iter().next()?;
        (c.restart_count >= 2).then_some(())
    });
    let records = agent.ledger();
    let acts = actions(&records, &bad);
    // StartContainer ok, the hook failed, the instance was killed with FailedPostStartHook
    let (i, id, message) = acts
        .iter()
        .enumerate()
        .find_map(|(i, (_, _, a, o))| match (a, o) {
            (
                RuntimeAction::PostStartHook { id, .. },
                ActionOutcome::Failed {
                    reason, message, ..
                },
            ) => {
                assert_eq!(reason, "PostStartHookError");
                Some((i, id.clone(), message.clone()))
            }
            _ => None,
        })
        .expect("a failed postStart");
    assert!(
        message
            .starts_with("Exec lifecycle hook ([sh -c echo nope; exit 7]) for Container \"main\""),
        "{message}"
    );
    assert!(message.contains("exited with 7"), "{message}");
    assert!(matches!(&acts[i - 1].2, RuntimeAction::StartContainer { id: s, .. } if *s == id));
    assert!(matches!(
        &acts[i + 1].2,
        RuntimeAction::KillContainer { id: k, message, .. } if *k == id && message == "FailedPostStartHook"
    ));
    // the sync that started it failed with the hook's error
    assert!(records.iter().any(|r| matches!(&r.event, Event::SyncFinished(f)
        if f.uid.as_str() == bad && matches!(&f.outcome, SyncOutcome::Failed { message: m } if m.contains("Exec lifecycle hook")))));
    let (_, events) = agent.get("/debug/events");
    assert!(events.contains("FailedPostStartHook"), "{events}");
    assert!(events.contains("PostStartHook failed"), "{events}");
    assert!(
        !events.contains("echo nope"),
        "the hook's output stays out of Events"
    );
    // the passing hook ran once, in the container, and nothing restarted
    let p = agent.pod("good-hook").unwrap();
    let c = p.status.unwrap().container_statuses.unwrap().remove(0);
    assert_eq!(c.restart_count, 0);
    assert!(c.state.unwrap().running.is_some());
    assert_eq!(std::fs::read_to_string(out).unwrap(), "started\n");
    assert!(actions(&agent.ledger(), &good)
        .iter()
        .any(
            |(_, _, a, o)| matches!(a, RuntimeAction::PostStartHook { .. })
                && matches!(o, ActionOutcome::Ok { .. })
        ));
    agent.assert_ledger_replays_to_state();
}

#[test]
fn shortening_the_grace_period_cuts_a_sleeping_pre_stop_short() {
    let Some(c) = RealCluster::shared() else {
        return;
    };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let agent = c.agent("hooks-node", &[]);
    let marker = format!("ledgerlet-cut-{}", std::process::id());
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("sleepy".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("hooks-node".into()),
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(60),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    format!("trap 'exit 0' TERM; while true; do sleep 0.1; done # {marker}"),
                ]),
                lifecycle: Some(Lifecycle {
                    pre_stop: Some(LifecycleHandler {
                        sleep: Some(SleepAction { seconds: 40 }),
                        ..LifecycleHandler::default()
                    }),
                    ..Lifecycle::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus::default()),
    };
    let created = admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    agent.wait_for("sleepy running", 60, |_| {
        (!processes_with(&marker).is_empty()).then_some(())
    });
    admin
        .run(pods.delete("sleepy", &DeleteParams::default()))
        .unwrap();
    // the first kill is under way: its preStop sleeps (up to 40 s of a 60 s grace)
    agent.wait_for("the first kill started", 30, |a| {
        a.ledger()
            .iter()
            .any(|r| matches!(&r.event, Event::PodDeleted(_)))
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(!processes_with(&marker).is_empty(), "still in its preStop");
    admin
        .run(pods.delete("sleepy", &DeleteParams::default().grace_period(3)))
        .unwrap();
    agent.wait_for("sleepy stopped", 60, |_| {
        processes_with(&marker).is_empty().then_some(())
    });
    agent.wait_for("the exit recorded", 30, |a| {
        first_exit(&a.ledger(), &uid, "main").map(|_| ())
    });
    let records = agent.ledger();
    let deletions: Vec<Time> = records
        .iter()
        .filter(|r| matches!(&r.event, Event::PodDeleted(_)))
        .map(|r| r.at)
        .collect();
    assert!(deletions.len() >= 2, "two deletions reached the node");
    let exit = first_exit(&records, &uid, "main").unwrap();
    let finished = exit.finished_at.unwrap();
    assert_eq!(
        exit.exit_code, 0,
        "stopped by SIGTERM after the hook, not killed"
    );
    // cut short: gone within the shortened grace (3 s, + 2 s minimum stop, + slack), far
    // sooner than the 40 s the hook wanted
    let after_shortening = finished.since(*deletions.last().unwrap());
    assert!(
        after_shortening < Duration::from_secs(10),
        "stopped {after_shortening:?} after the grace was shortened"
    );
    assert!(finished.since(deletions[0]) < Duration::from_secs(30));
    // the first terminating sync was cancelled; the second ran preStop with the new budget
    assert!(records
        .iter()
        .any(|r| matches!(&r.event, Event::SyncFinished(f)
        if f.uid.as_str() == uid && f.outcome == SyncOutcome::Canceled)));
    let hook = actions(&records, &uid)
        .into_iter()
        .find_map(|(_, _, a, o)| match (a, o) {
            (RuntimeAction::PreStopHook { .. }, ActionOutcome::Ok { detail, .. }) => detail,
            _ => None,
        })
        .expect("the second preStop was reported");
    assert_eq!(
        hook,
        "not completed within the grace period (3 s)",
        "what the node saw of the pod:\n{}",
        pod_history(&records, &uid)
    );
}

/// One line per record about pod `uid` that bears on its grace period: updates (with their
/// deletion grace and kill override), syncs and runtime actions; for a failure message.
fn pod_history(records: &[Record], uid: &str) -> String {
    let line = |r: &Record| -> Option<String> {
        let grace = |p: &k8s_openapi::api::core::v1::Pod| p.metadata.deletion_grace_period_seconds;
        let what = match &r.event {
            Event::UpdatePod(u) if u.uid().is_some_and(|u| u.as_str() == uid) => format!(
                "UpdatePod {:?} deletion grace {:?} kill {:?} runtime-only {}",
                u.update_type,
                u.pod.as_deref().and_then(grace),
                u.kill.as_ref().map(|k| k.grace_period_override_s),
                u.running_pod.is_some()
            ),
            Event::PodDeleted(c) | Event::PodUpdated(c) | Event::PodRemoved(c)
                if c.pod.metadata.uid.as_deref() == Some(uid) =>
            {
                format!("{} deletion grace {:?}", r.event.kind(), grace(&c.pod))
            }
            Event::SyncFinished(f) if f.uid.as_str() == uid => {
                format!("SyncFinished {} {:?} {:?}", f.sync_id, f.work, f.outcome)
            }
            Event::RuntimeActionFinished(a) if a.uid.as_str() == uid => {
                format!("{:?} {:?}", a.action, a.outcome)
            }
            _ => return None,
        };
        Some(format!("{} {:?} {what}", r.seq, r.at))
    };
    records
        .iter()
        .filter_map(line)
        .collect::<Vec<_>>()
        .join("\n")
}
