//! The status syncer (the shell half of the status manager's `syncPod`) against the real
//! kube-apiserver (`tests/support/real_cluster.rs`), with a node's own credentials: the
//! requests it makes, in order, for each case of docs/behaviour.md §SM (SM-06, SM-09 …
//! SM-12, SM-14), read from the apiserver's audit log, and the objects it leaves. The
//! faults a real server does not produce on demand (a GET answered 500, a DELETE held in
//! flight) come from the fault proxy (`tests/support/fault_proxy.rs`).

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use ledgerlet::core::command::SyncPodStatusCommand;
use ledgerlet::core::record::event::StatusSyncOutcome;
use ledgerlet::core::record::Time;
use ledgerlet::core::Uid;
use ledgerlet::shell::api::status_sync::sync_pod_status;
use ledgerlet::shell::api::{ApiClient, ApiLimits};
use support::fault_proxy::FaultProxy;
use support::real_cluster::{Kube, RealCluster};

/// One test's view: the cluster admin, and the syncer's client with the credentials of a
/// node of the test's own (every pod of the test is bound to it).
struct Setup {
    c: &'static RealCluster,
    admin: Kube,
    node: String,
    rt: tokio::runtime::Runtime,
    client: ApiClient,
    /// Audit entries of the node seen before the current step.
    mark: usize,
}

fn setup(node: &str) -> Option<Setup> {
    let c = RealCluster::shared()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = client_for(&rt, &c.node_kubeconfig(node));
    Some(Setup {
        c,
        admin: c.admin(),
        node: node.to_string(),
        rt,
        client,
        mark: 0,
    })
}

fn client_for(rt: &tokio::runtime::Runtime, kubeconfig: &Path) -> ApiClient {
    rt.block_on(ApiClient::from_kubeconfig(kubeconfig, ApiLimits::default()))
        .expect("client")
}

fn api_pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn condition(type_: &str, status: &str) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        ..PodCondition::default()
    }
}

fn running_status() -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![condition("Ready", "True")]),
        container_statuses: Some(vec![ContainerStatus {
            name: "main".into(),
            ready: true,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]),
        // what the apiserver sets at creation for a pod without resources
        qos_class: Some("BestEffort".into()),
        ..PodStatus::default()
    }
}

fn failed_status() -> PodStatus {
    PodStatus {
        phase: Some("Failed".into()),
        conditions: Some(vec![condition("Ready", "False")]),
        container_statuses: Some(vec![ContainerStatus {
            name: "main".into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("Error".into()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]),
        // what the apiserver sets at creation for a pod without resources
        qos_class: Some("BestEffort".into()),
        ..PodStatus::default()
    }
}

fn command(p: &Pod, status: PodStatus) -> SyncPodStatusCommand {
    SyncPodStatusCommand {
        uid: Uid::new(p.metadata.uid.clone().unwrap()),
        version: 1,
        namespace: "default".into(),
        name: p.metadata.name.clone().unwrap(),
        api_uid: Uid::new(p.metadata.uid.clone().unwrap()),
        status: Arc::new(status),
        could_have_running_containers: false,
        pod_is_finished: false,
        is_mirror: false,
        changed_at: Time::ZERO,
    }
}

impl Setup {
    /// Creates pod `name` bound to the test's node, with `status` written by the admin
    /// (a created pod's status is reset to Pending).
    fn create(&self, name: &str, status: Option<PodStatus>) -> Pod {
        let name = &self.name(name);
        let pods = self.admin.api::<Pod>("default");
        let created = self
            .admin
            .run(pods.create(&PostParams::default(), &api_pod(name, &self.node)))
            .unwrap();
        let Some(status) = status else {
            return created;
        };
        self.admin
            .run(pods.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": status })),
            ))
            .unwrap()
    }

    /// Pod `name` of this test (names are prefixed with the test's node: one namespace).
    fn name(&self, name: &str) -> String {
        format!("{}-{name}", self.node)
    }

    fn pod(&self, name: &str) -> Option<Pod> {
        self.admin
            .run(self.admin.api::<Pod>("default").get_opt(&self.name(name)))
            .unwrap()
    }

    /// A user's DELETE with `grace_s` (a bound pod stays, marked, until its node deletes it).
    fn delete_as_user(&self, name: &str, grace_s: u32) {
        self.admin
            .run(self.admin.api::<Pod>("default").delete(
                &self.name(name),
                &DeleteParams::default().grace_period(grace_s),
            ))
            .unwrap();
    }

    /// The node's audit entries so far (the apiserver writes each just after answering, so
    /// this waits until no new one has come for 500 ms).
    fn audit(&self) -> Vec<serde_json::Value> {
        let user = format!("system:node:{}", self.node);
        let read = || -> Vec<serde_json::Value> {
            self.c
                .audit()
                .into_iter()
                .filter(|e| e["user"]["username"] == user.as_str())
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = read();
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = read();
            if now.len() == last.len() || Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    }

    /// Runs one sync with `client` and says how it ended; what it sent is then `requests`.
    fn sync_with(&mut self, client: &ApiClient, cmd: &SyncPodStatusCommand) -> StatusSyncOutcome {
        self.mark = self.audit().len();
        let done = self.rt.block_on(sync_pod_status(client, cmd));
        assert_eq!(
            (done.uid.as_str(), done.version),
            (cmd.uid.as_str(), cmd.version)
        );
        done.outcome
    }

    fn sync(&mut self, cmd: &SyncPodStatusCommand) -> StatusSyncOutcome {
        let client = self.client.clone();
        self.sync_with(&client, cmd)
    }

    /// The audit entries of the last sync's requests, in order.
    fn requests(&self) -> Vec<serde_json::Value> {
        self.audit().split_off(self.mark)
    }

    /// `VERB resource[/subresource]` of each request of the last sync, e.g. `get pods`.
    fn calls(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|e| {
                let r = &e["objectRef"];
                let mut what = r["resource"].as_str().unwrap_or_default().to_string();
                if let Some(sub) = r["subresource"].as_str() {
                    what = format!("{what}/{sub}");
                }
                format!("{} {what}", e["verb"].as_str().unwrap_or_default())
            })
            .collect()
    }
}

#[test]
fn sm_09_get_then_patch_of_the_status_subresource_with_the_uid_precondition() {
    let Some(mut s) = setup("ss-09") else { return };
    // a condition of another writer's: a strategic merge keeps it (merge by type)
    let foreign = PodStatus {
        conditions: Some(vec![condition("example.com/gate", "True")]),
        ..PodStatus::default()
    };
    let p = s.create("web", Some(foreign));
    let out = s.sync(&command(&p, running_status()));
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(s.calls(), ["get pods", "patch pods/status"]);
    let patch = s.requests()[1].clone();
    assert_eq!(patch["objectRef"]["name"], s.name("web").as_str());
    assert_eq!(
        patch["requestObject"]["metadata"]["uid"],
        p.metadata.uid.clone().unwrap().as_str()
    );
    let stored = s.pod("web").unwrap().status.unwrap();
    assert_eq!(stored.phase.as_deref(), Some("Running"));
    assert!(stored.container_statuses.unwrap()[0].ready);
    let conditions = stored.conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "example.com/gate" && c.status == "True"),
        "the foreign condition survived the strategic merge: {conditions:?}"
    );
}

#[test]
fn sm_06_no_patch_when_the_merged_status_equals_the_api_status() {
    let Some(mut s) = setup("ss-06") else { return };
    let p = s.create("web", None);
    let cmd = command(&p, running_status());
    assert!(matches!(s.sync(&cmd), StatusSyncOutcome::Patched { .. }));
    // the same status again (e.g. apiStatusVersions made stale): GET only
    let out = s.sync(&cmd);
    assert_eq!(out, StatusSyncOutcome::Unchanged { deleted: false });
    assert_eq!(s.calls(), ["get pods"]);
}

#[test]
fn sm_12_not_found_recreated_and_get_error_stop_after_the_get() {
    let Some(mut s) = setup("ss-12") else { return };
    // a pod that is gone: NotFound -> [get] for a client that may read any pod …
    let gone = api_pod(&s.name("gone"), "ss-12");
    let mut gone_cmd = command(
        &Pod {
            metadata: ObjectMeta {
                uid: Some("uid-gone".into()),
                ..gone.metadata.clone()
            },
            ..gone
        },
        running_status(),
    );
    gone_cmd.version = 3;
    let admin_client = client_for(&s.rt, &s.c.admin_kubeconfig());
    let done = s.rt.block_on(sync_pod_status(&admin_client, &gone_cmd));
    assert_eq!(done.outcome, StatusSyncOutcome::NotFound);
    // … while the Node authorizer answers a node's GET of a pod not bound to it with 403
    // (no relationship), a failure the status manager retries until the pod's status is
    // dropped, as the kubelet's does
    let out = s.sync(&gone_cmd);
    assert!(
        matches!(
            out,
            StatusSyncOutcome::Failed {
                code: Some(403),
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(s.calls(), ["get pods"]);

    // a pod recreated under the same name with another UID -> [get]
    let p = s.create("web", None);
    let before = s.pod("web").unwrap().status;
    let mut stale = command(&p, running_status());
    stale.uid = Uid::new("the-old-uid");
    stale.api_uid = Uid::new("the-old-uid");
    assert_eq!(
        s.sync(&stale),
        StatusSyncOutcome::UidChanged {
            api_uid: p.metadata.uid.clone().unwrap()
        }
    );
    assert_eq!(s.calls(), ["get pods"]);
    assert_eq!(
        s.pod("web").unwrap().status,
        before,
        "the new pod's status is untouched"
    );

    // GET error -> nothing more, reported as failed with the code (the proxy answers 500)
    let (proxy, kubeconfig) = FaultProxy::for_node(s.c, "ss-12");
    let via_proxy = client_for(&s.rt, &kubeconfig);
    proxy.status_500(true);
    let out = s.sync_with(&via_proxy, &command(&p, running_status()));
    assert!(
        matches!(
            out,
            StatusSyncOutcome::Failed {
                code: Some(500),
                ..
            }
        ),
        "{out:?}"
    );
    assert!(proxy.stats().faulted() >= 1);
    assert_eq!(
        s.calls(),
        Vec::<String>::new(),
        "no PATCH after the failed GET"
    );
    proxy.clear();

    // normal -> [get, patch]
    assert!(matches!(
        s.sync(&command(&p, running_status())),
        StatusSyncOutcome::Patched { .. }
    ));
    assert_eq!(s.calls(), ["get pods", "patch pods/status"]);
}

#[test]
fn sm_10_a_terminal_pod_is_deleted_only_once_finished_with_grace_0_and_its_uid() {
    let Some(mut s) = setup("ss-10") else { return };
    let p = s.create("web", Some(running_status()));
    s.delete_as_user("web", 30);
    assert!(s.pod("web").is_some(), "graceful delete keeps the pod");

    // deletion requested, containers stopped, but the worker has not finished: no DELETE
    let mut cmd = command(&p, failed_status());
    let out = s.sync(&cmd);
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(s.calls(), ["get pods", "patch pods/status"]);
    assert!(s.pod("web").is_some());

    // TerminatePod: finished -> GET, (PATCH if anything changed), DELETE grace 0 + UID
    cmd.version = 2;
    cmd.pod_is_finished = true;
    let out = s.sync(&cmd);
    assert_eq!(out, StatusSyncOutcome::Unchanged { deleted: true });
    assert_eq!(s.calls(), ["get pods", "delete pods"]);
    let delete = s.requests().pop().unwrap();
    let body = &delete["requestObject"];
    assert_eq!(body["gracePeriodSeconds"], 0);
    assert_eq!(
        body["preconditions"]["uid"],
        p.metadata.uid.clone().unwrap().as_str()
    );
    assert!(s.pod("web").is_none(), "the pod is gone");
}

#[test]
fn sm_11_no_delete_while_the_api_phase_is_not_terminal_and_never_for_a_mirror() {
    let Some(mut s) = setup("ss-11") else { return };
    let p = s.create("web", Some(running_status()));
    s.delete_as_user("web", 30);
    // finished, but containers could still run: the merge keeps Running -> no delete
    let mut cmd = command(&p, failed_status());
    cmd.pod_is_finished = true;
    cmd.could_have_running_containers = true;
    let out = s.sync(&cmd);
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(
        s.pod("web").unwrap().status.unwrap().phase.as_deref(),
        Some("Running"),
        "no terminal phase while containers may run"
    );
    assert!(!s.calls().iter().any(|c| c.starts_with("delete")));

    // a mirror pod is never deleted by the status manager
    let m = s.create("mirror", Some(running_status()));
    s.delete_as_user("mirror", 30);
    let mut cmd = command(&m, failed_status());
    cmd.pod_is_finished = true;
    cmd.is_mirror = true;
    let out = s.sync(&cmd);
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(s.calls(), ["get pods", "patch pods/status"]);
}

#[test]
fn sm_11b_the_delete_precondition_spares_a_new_pod_with_the_same_name() {
    let Some(mut s) = setup("ss-11b") else { return };
    // Running in the API, deletion requested: the sync is GET, PATCH (terminal), DELETE
    let p = s.create("web", Some(running_status()));
    s.delete_as_user("web", 30);
    let mut cmd = command(&p, failed_status());
    cmd.pod_is_finished = true;
    // every chunk through the proxy waits 1.5 s: the DELETE reaches the server about 3 s
    // after the PATCH did; meanwhile the pod is replaced by a new one with the same name
    let (proxy, kubeconfig) = FaultProxy::for_node(s.c, "ss-11b");
    let via_proxy = client_for(&s.rt, &kubeconfig);
    s.mark = s.audit().len();
    proxy.delay(Duration::from_millis(1500));
    let running =
        s.rt.spawn(async move { sync_pod_status(&via_proxy, &cmd).await });
    let user = "system:node:ss-11b";
    let mark = s.mark;
    s.admin.wait_for("the PATCH at the server", 20, |_| {
        s.c.audit()
            .iter()
            .filter(|e| e["user"]["username"] == user)
            .skip(mark)
            .any(|e| e["verb"] == "patch")
            .then_some(())
    });
    let pods = s.admin.api::<Pod>("default");
    s.admin
        .run(pods.delete(&s.name("web"), &DeleteParams::default().grace_period(0)))
        .unwrap();
    s.admin.wait_for("the old pod gone", 10, |_| {
        s.pod("web").is_none().then_some(())
    });
    let replacement = s.create("web", Some(running_status()));
    let done = s.rt.block_on(running).unwrap();
    proxy.clear();
    assert!(
        matches!(
            done.outcome,
            StatusSyncOutcome::Failed {
                code: Some(409),
                ..
            }
        ),
        "the stale UID precondition must fail the delete: {:?}",
        done.outcome
    );
    let delete = s
        .requests()
        .into_iter()
        .find(|e| e["verb"] == "delete")
        .expect("the DELETE reached the server");
    assert_eq!(
        delete["requestObject"]["preconditions"]["uid"],
        p.metadata.uid.clone().unwrap().as_str()
    );
    assert_eq!(
        s.pod("web").unwrap().metadata.uid,
        replacement.metadata.uid,
        "the new pod survives"
    );
}

#[test]
fn sm_14_a_static_pods_status_goes_to_its_mirror_and_a_replaced_mirror_is_skipped() {
    let Some(mut s) = setup("ss-14") else { return };
    let mirror = s.create("static-web", None);
    let mut cmd = command(&mirror, running_status());
    cmd.uid = Uid::new("static-uid");
    cmd.is_mirror = true;
    assert!(matches!(s.sync(&cmd), StatusSyncOutcome::Patched { .. }));
    assert_eq!(
        s.pod("static-web")
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );
    // the mirror is replaced by one with a new UID: GET only, reported as recreated
    let pods = s.admin.api::<Pod>("default");
    s.admin
        .run(pods.delete(
            &s.name("static-web"),
            &DeleteParams::default().grace_period(0),
        ))
        .unwrap();
    s.admin.wait_for("the old mirror gone", 10, |_| {
        s.pod("static-web").is_none().then_some(())
    });
    let new_mirror = s.create("static-web", None);
    cmd.version = 2;
    cmd.status = Arc::new(failed_status());
    assert_eq!(
        s.sync(&cmd),
        StatusSyncOutcome::UidChanged {
            api_uid: new_mirror.metadata.uid.clone().unwrap()
        }
    );
    assert_eq!(s.calls(), ["get pods"]);
}
