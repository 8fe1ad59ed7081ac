//! Issue 4 acceptance: the real `ledgerlet run` binary joins a cluster served by the test API
//! server over real HTTP, runs the pods bound to its node on the embedded runtime, and
//! reports their status, its Node, its Lease and its mirror pods the way the kubelet does.
//! Assertions read the API server's objects and its record of requests, and the agent's
//! ledger.

#[path = "support/api_fixture.rs"]
mod api_fixture;
#[path = "support/apiserver.rs"]
mod apiserver;
mod support;

use std::time::{Duration, Instant};

use apiserver::{FaultConfig, TestApiServer};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ledgerlet::ledger::event::{ActionOutcome, RuntimeAction};
use ledgerlet::ledger::Event;
use support::agent::Agent;

const NODE: &str = "test-node";

struct Cluster {
    /// Runs the API server; kept alive for the test's duration.
    _rt: tokio::runtime::Runtime,
    api: TestApiServer,
    kubeconfig: tempfile::NamedTempFile,
}

impl Cluster {
    fn start() -> Cluster {
        let (rt, api, kubeconfig) = api_fixture::start();
        Cluster {
            _rt: rt,
            api,
            kubeconfig,
        }
    }

    fn agent(&self, extra: &[&str]) -> Agent {
        let mut args = vec!["--kubeconfig", self.kubeconfig.path().to_str().unwrap()];
        args.extend_from_slice(extra);
        Agent::start(&args)
    }

    fn create_pod(&self, name: &str, script: &str, grace_s: i64) -> Pod {
        self.create_pod_with(name, script, grace_s, "Always")
    }

    fn create_pod_with(&self, name: &str, script: &str, grace_s: i64, restart: &str) -> Pod {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some(NODE.into()),
                termination_grace_period_seconds: Some(grace_s),
                restart_policy: Some(restart.into()),
                containers: vec![Container {
                    name: "main".into(),
                    image: Some("busybox".into()),
                    command: Some(vec!["sh".into(), "-c".into(), script.into()]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: Some(PodStatus::default()),
        };
        self.api.create_pod(pod).expect("create pod")
    }

    fn pod(&self, name: &str) -> Option<Pod> {
        self.api.pod("default", name)
    }

    fn wait_for<T>(&self, what: &str, secs: u64, mut f: impl FnMut(&Cluster) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {secs}s waiting for {what}; pods: {:#?}",
                self.api
                    .pods()
                    .iter()
                    .map(|p| (p.metadata.name.clone(), p.status.clone()))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn main_container(p: &Pod) -> Option<&ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "main")
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
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

#[test]
fn a_bound_pod_runs_and_its_status_reaches_the_api() {
    let c = Cluster::start();
    let agent = c.agent(&[]);
    c.create_pod("web", "while true; do sleep 0.2; done", 2);
    c.create_pod("crasher", "exit 1", 2);
    let p = c.wait_for("web Running and Ready in the API", 60, |c| {
        let p = c.pod("web")?;
        (phase(&p) == "Running"
            && condition(&p, "Ready").as_deref() == Some("True")
            && main_container(&p)?.state.as_ref()?.running.is_some())
        .then_some(p)
    });
    let s = p.status.clone().unwrap();
    assert!(s.start_time.is_some(), "startTime");
    assert!(s.pod_ip.is_some(), "podIP");
    for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(condition(&p, t).as_deref(), Some("True"), "{t}");
    }
    assert!(main_container(&p)
        .unwrap()
        .container_id
        .as_deref()
        .unwrap_or("")
        .contains("://"));
    let crasher = c.wait_for("the crash loop's restarts in the API", 60, |c| {
        let p = c.pod("crasher")?;
        let m = main_container(&p)?;
        (m.restart_count >= 2 && m.last_state.as_ref()?.terminated.is_some()).then_some(p)
    });
    let m = main_container(&crasher).unwrap();
    assert_eq!(
        m.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    // what `kubectl describe pod` shows: the kubelet's event reasons, about the right pod
    let reasons = |name: &str| -> Vec<String> {
        c.api
            .events()
            .iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .filter_map(|e| e.reason.clone())
            .collect()
    };
    let web = reasons("web");
    for r in ["Pulling", "Pulled", "Created", "Started"] {
        assert!(web.contains(&r.to_string()), "{r} in {web:?}");
    }
    c.wait_for("a BackOff event for the crash loop", 60, |_| {
        reasons("crasher")
            .iter()
            .any(|r| r == "BackOff")
            .then_some(())
    });
    // every status PATCH carried the UID precondition
    for r in
        c.api.requests().iter().filter(|r| {
            r.method == "PATCH" && r.path.ends_with("/status") && r.path.contains("/pods/")
        })
    {
        let body = r.body.as_ref().expect("a JSON body");
        assert!(
            body["metadata"]["uid"].is_string(),
            "uid precondition in {body}"
        );
    }
    agent.assert_ledger_replays_to_state();
}

#[test]
fn a_graceful_delete_kills_with_its_grace_writes_a_terminal_phase_then_deletes_with_the_uid() {
    let c = Cluster::start();
    let agent = c.agent(&[]);
    let created = c.create_pod(
        "polite",
        "trap 'exit 0' TERM; while true; do sleep 0.1; done",
        30,
    );
    let uid = created.metadata.uid.clone().unwrap();
    c.wait_for("polite running", 60, |c| {
        let p = c.pod("polite")?;
        main_container(&p)?
            .state
            .as_ref()?
            .running
            .as_ref()
            .map(|_| ())
    });
    c.api.clear_requests();
    c.api
        .delete_pod_as_user("default", "polite", Some(7))
        .unwrap();
    c.wait_for("the pod deleted by the node", 60, |c| {
        c.pod("polite").is_none().then_some(())
    });
    // the worker terminated the pod with the deletion's grace period: replay the ledger up
    // to the deletion's derived update and read the worker's effective grace period
    let records = agent.ledger();
    let deleted_at = records
        .iter()
        .find(|r| matches!(&r.event, Event::PodDeleted(_)))
        .expect("the deletion reached the node")
        .seq;
    let text = agent.ledger_text();
    let replayed = ledgerlet::replay::replay(
        text.as_bytes(),
        Some(ledgerlet::replay::Until::Seq(deleted_at + 1)),
    )
    .unwrap();
    let worker = replayed
        .node
        .pod_workers
        .status(&ledgerlet::core::Uid::new(&uid))
        .expect("the worker");
    assert_eq!(worker.grace_period_s, 7);
    assert!(worker.deleted);
    let killed = records.iter().any(|r| {
        matches!(&r.event, Event::RuntimeActionFinished(a)
            if matches!(&a.action, RuntimeAction::KillContainer { name, .. } if name == "main")
            && matches!(a.outcome, ActionOutcome::Ok { .. }))
    });
    assert!(killed, "the container was stopped");
    let killing = c.api.events().into_iter().any(|e| {
        e.involved_object.name.as_deref() == Some("polite")
            && e.reason.as_deref() == Some("Killing")
            && e.message.as_deref() == Some("Stopping container main")
    });
    assert!(killing, "a Killing event: {:#?}", c.api.events());
    // requests: a PATCH with a terminal phase, then DELETE grace 0 with the UID precondition
    let reqs = c.api.requests();
    let pod_path = "/api/v1/namespaces/default/pods/polite";
    let terminal_patch = reqs.iter().position(|r| {
        r.method == "PATCH"
            && r.path == format!("{pod_path}/status")
            && r.body.as_ref().is_some_and(|b| {
                matches!(b["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
            })
    });
    let delete = reqs.iter().position(|r| {
        r.method == "DELETE"
            && r.path == pod_path
            && !r.injected_fault
            && r.body
                .as_ref()
                .is_some_and(|b| b["gracePeriodSeconds"] == 0)
    });
    let (Some(p), Some(d)) = (terminal_patch, delete) else {
        panic!(
            "expected a terminal PATCH then a DELETE: {:#?}",
            reqs.iter()
                .map(|r| (&r.method, &r.path, &r.body))
                .collect::<Vec<_>>()
        );
    };
    assert!(p < d, "the terminal phase is written before the delete");
    let body = reqs[d].body.clone().unwrap();
    assert_eq!(body["preconditions"]["uid"], uid.as_str());
    agent.assert_ledger_replays_to_state();
}

#[test]
fn deleted_pods_end_failed_137_when_ignoring_sigterm_and_succeeded_when_exiting_0() {
    let c = Cluster::start();
    let _agent = c.agent(&[]);
    c.create_pod(
        "stubborn",
        "trap '' TERM; while true; do sleep 0.1; done",
        2,
    );
    c.create_pod(
        "polite",
        "trap 'exit 0' TERM; while true; do sleep 0.1; done",
        30,
    );
    for name in ["stubborn", "polite"] {
        c.wait_for(&format!("{name} running"), 60, |c| {
            let p = c.pod(name)?;
            main_container(&p)?
                .state
                .as_ref()?
                .running
                .as_ref()
                .map(|_| ())
        });
    }
    c.api.clear_requests();
    c.api
        .delete_pod_as_user("default", "stubborn", Some(2))
        .unwrap();
    c.api
        .delete_pod_as_user("default", "polite", Some(30))
        .unwrap();
    c.wait_for("both gone", 60, |c| {
        (c.pod("stubborn").is_none() && c.pod("polite").is_none()).then_some(())
    });
    // the last status each pod had in the API: its last PATCH before the delete
    let last_status = |name: &str| -> serde_json::Value {
        c.api
            .requests()
            .iter()
            .rev()
            .find(|r| {
                r.method == "PATCH"
                    && r.path == format!("/api/v1/namespaces/default/pods/{name}/status")
            })
            .and_then(|r| r.body.clone())
            .unwrap_or_else(|| panic!("no status patch for {name}"))
    };
    let s = last_status("stubborn");
    assert_eq!(s["status"]["phase"], "Failed", "{s}");
    assert_eq!(
        s["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137,
        "{s}"
    );
    let s = last_status("polite");
    assert_eq!(s["status"]["phase"], "Succeeded", "{s}");
    assert_eq!(
        s["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0,
        "{s}"
    );
}

#[test]
fn no_patch_without_a_change_and_foreign_conditions_survive() {
    let c = Cluster::start();
    let _agent = c.agent(&[]);
    c.create_pod("steady", "while true; do sleep 0.2; done", 2);
    c.wait_for("steady Ready", 60, |c| {
        let p = c.pod("steady")?;
        (condition(&p, "Ready").as_deref() == Some("True")).then_some(())
    });
    // another client sets a readiness-gate style condition
    c.api
        .update_pod("default", "steady", |p| {
            p.status
                .get_or_insert_with(Default::default)
                .conditions
                .get_or_insert_with(Vec::new)
                .push(k8s_openapi::api::core::v1::PodCondition {
                    type_: "example.com/gate".into(),
                    status: "True".into(),
                    ..Default::default()
                });
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    c.api.clear_requests();
    // more than one periodic status pass (10 s) and many housekeeping passes
    std::thread::sleep(Duration::from_secs(12));
    let patches = c
        .api
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/pods/"))
        .count();
    assert_eq!(patches, 0, "no PATCH when nothing changed");
    let p = c.pod("steady").unwrap();
    assert_eq!(condition(&p, "example.com/gate").as_deref(), Some("True"));
}

#[test]
fn statuses_converge_after_30_s_of_errors_and_no_exit_code_is_lost() {
    let c = Cluster::start();
    let _agent = c.agent(&[]);
    for i in 0..3 {
        c.create_pod_with(
            &format!("job{i}"),
            &format!("sleep {}; exit {i}", 5 + i),
            2,
            "Never",
        );
    }
    c.wait_for("jobs running", 60, |c| {
        (0..3)
            .all(|i| {
                c.pod(&format!("job{i}"))
                    .is_some_and(|p| phase(&p) == "Running")
            })
            .then_some(())
    });
    c.api.set_fault(FaultConfig {
        error_rate_per_million: 1_000_000,
        error_status: 500,
        only_paths: vec!["/api/v1/namespaces/default/pods".into()],
        ..FaultConfig::default()
    });
    std::thread::sleep(Duration::from_secs(30));
    c.api.clear_fault();
    for i in 0..3 {
        let p = c.wait_for(&format!("job{i}'s final status"), 60, |c| {
            let p = c.pod(&format!("job{i}"))?;
            main_container(&p)?.state.as_ref()?.terminated.as_ref()?;
            Some(p)
        });
        let t = main_container(&p)
            .unwrap()
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(t.exit_code, i, "job{i}'s exit code");
        assert_eq!(phase(&p), if i == 0 { "Succeeded" } else { "Failed" });
    }
}

#[test]
fn a_dropped_watch_relists_without_starting_any_container_twice() {
    let c = Cluster::start();
    let agent = c.agent(&[]);
    c.create_pod("stable", "while true; do sleep 0.2; done", 2);
    c.wait_for("stable running", 60, |c| {
        let p = c.pod("stable")?;
        main_container(&p)?
            .state
            .as_ref()?
            .running
            .as_ref()
            .map(|_| ())
    });
    c.api.compact();
    c.api.drop_watches();
    c.wait_for("a new watch", 30, |c| {
        (c.api.open_watches() > 0).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let starts = agent
        .ledger()
        .iter()
        .filter(|r| matches!(&r.event, Event::RuntimeActionFinished(a) if matches!(a.action, RuntimeAction::StartContainer { .. })))
        .count();
    assert_eq!(starts, 1, "the container started once");
    let relisted = agent
        .ledger()
        .iter()
        .filter(|r| matches!(&r.event, Event::PodAdded(_)))
        .count();
    assert_eq!(relisted, 1, "the relist did not re-add the pod");
}

#[test]
fn a_static_pod_gets_a_mirror_pod_and_deleting_it_recreates_it() {
    let c = Cluster::start();
    let agent = c.agent(&[]);
    agent.write_manifest(
        "static.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n    - name: main\n      image: busybox\n      command: [\"sh\", \"-c\", \"while true; do sleep 0.2; done\"]\n",
    );
    let name = format!("static-web-{NODE}");
    let mirror = c.wait_for("a mirror pod", 60, |c| c.api.pod("default", &name));
    let ann = mirror.metadata.annotations.clone().unwrap_or_default();
    assert!(ann.contains_key("kubernetes.io/config.mirror"), "{ann:?}");
    c.wait_for("the mirror's status Running", 60, |c| {
        let p = c.api.pod("default", &name)?;
        (phase(&p) == "Running").then_some(())
    });
    let first_uid = mirror.metadata.uid.clone();
    c.api.delete_pod_as_user("default", &name, Some(0)).unwrap();
    let again = c.wait_for("the mirror recreated", 60, |c| {
        c.api
            .pod("default", &name)
            .filter(|p| p.metadata.uid != first_uid)
    });
    assert!(again
        .metadata
        .annotations
        .unwrap()
        .contains_key("kubernetes.io/config.mirror"));
}

/// A `ledgerlet runtime serve` process on a socket in `dir`.
fn start_runtime(dir: &std::path::Path) -> std::process::Child {
    let sock = dir.join("rt.sock");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args(["runtime", "serve", "--listen"])
        .arg(format!("unix://{}", sock.display()))
        .arg("--root-dir")
        .arg(dir.join("rt-state"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the runtime");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "the runtime did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn node_ready(c: &Cluster) -> Option<String> {
    c.api
        .node(NODE)?
        .status?
        .conditions?
        .into_iter()
        .find(|x| x.type_ == "Ready")
        .map(|x| x.status)
}

#[test]
fn the_node_registers_renews_its_lease_and_follows_runtime_health() {
    let c = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = start_runtime(dir.path());
    let endpoint = format!("unix://{}", dir.path().join("rt.sock").display());
    let _agent = c.agent(&["--container-runtime-endpoint", &endpoint]);
    let node = c.wait_for("the Node", 30, |c| c.api.node(NODE));
    let cap = node.status.clone().unwrap().capacity.unwrap();
    for r in ["cpu", "memory", "pods"] {
        assert!(cap.contains_key(r), "capacity {r}: {cap:?}");
    }
    assert_eq!(cap["pods"].0, "110");
    let labels = node.metadata.labels.clone().unwrap();
    assert!(!labels["kubernetes.io/hostname"].is_empty());
    assert_eq!(labels["kubernetes.io/os"], "linux");
    c.wait_for("Ready", 30, |c| {
        (node_ready(c).as_deref() == Some("True")).then_some(())
    });
    // the lease is renewed every 10 s
    let renew = |c: &Cluster| {
        c.api
            .lease("kube-node-lease", NODE)
            .and_then(|l| l.spec)
            .and_then(|s| s.renew_time)
    };
    let first = c.wait_for("a lease", 30, renew);
    let lease = c.api.lease("kube-node-lease", NODE).unwrap();
    assert_eq!(
        lease.spec.as_ref().unwrap().lease_duration_seconds,
        Some(40)
    );
    assert_eq!(
        lease.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some(NODE)
    );
    c.wait_for("a renewal", 30, |c| {
        renew(c).filter(|t| t.0 > first.0).map(|_| ())
    });
    // the runtime stops answering: NotReady; it comes back: Ready
    runtime.kill().unwrap();
    runtime.wait().unwrap();
    let _ = std::fs::remove_file(dir.path().join("rt.sock"));
    c.wait_for("NotReady", 40, |c| {
        (node_ready(c).as_deref() == Some("False")).then_some(())
    });
    let message = c
        .api
        .node(NODE)
        .and_then(|n| {
            n.status?
                .conditions?
                .into_iter()
                .find(|x| x.type_ == "Ready")?
                .message
        })
        .unwrap_or_default();
    assert!(message.contains("container runtime"), "{message}");
    let mut runtime = start_runtime(dir.path());
    c.wait_for("Ready again", 40, |c| {
        (node_ready(c).as_deref() == Some("True")).then_some(())
    });
    runtime.kill().unwrap();
    runtime.wait().unwrap();
}
