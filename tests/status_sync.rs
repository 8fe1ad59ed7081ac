//! The status syncer (the shell half of the status manager's `syncPod`) against the test API
//! server over real HTTP: the requests it makes, in order, for each case of BEHAVIOUR.md §B
//! (SM-06, SM-09 … SM-12, SM-14), asserted on the server's record of requests and objects.

#[path = "support/api_fixture.rs"]
mod api_fixture;
#[path = "support/apiserver.rs"]
mod apiserver;

use std::sync::Arc;

use apiserver::TestApiServer;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ledgerlet::core::command::SyncPodStatusCommand;
use ledgerlet::core::Uid;
use ledgerlet::ledger::event::StatusSyncOutcome;
use ledgerlet::ledger::Time;
use ledgerlet::shell::api::status_sync::sync_pod_status;
use ledgerlet::shell::api::{ApiClient, ApiLimits};

struct Setup {
    rt: tokio::runtime::Runtime,
    api: TestApiServer,
    client: ApiClient,
    _kubeconfig: tempfile::NamedTempFile,
}

fn setup() -> Setup {
    let (rt, api, kubeconfig) = api_fixture::start();
    let client = rt
        .block_on(ApiClient::from_kubeconfig(
            kubeconfig.path(),
            ApiLimits::default(),
        ))
        .expect("client");
    Setup {
        rt,
        api,
        client,
        _kubeconfig: kubeconfig,
    }
}

fn api_pod(name: &str, status: PodStatus) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n".into()),
            containers: vec![Container {
                name: "main".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(status),
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
    fn sync(&self, cmd: &SyncPodStatusCommand) -> StatusSyncOutcome {
        self.api.clear_requests();
        let done = self.rt.block_on(sync_pod_status(&self.client, cmd));
        assert_eq!(
            (done.uid.as_str(), done.version),
            (cmd.uid.as_str(), cmd.version)
        );
        done.outcome
    }

    /// `(method, path)` of every request since the last sync, in order.
    fn calls(&self) -> Vec<(String, String)> {
        self.api
            .requests()
            .into_iter()
            .map(|r| (r.method, r.path))
            .collect()
    }

    fn methods(&self) -> Vec<String> {
        self.calls().into_iter().map(|(m, _)| m).collect()
    }
}

#[test]
fn sm_09_get_then_patch_of_the_status_subresource_with_the_uid_precondition() {
    let s = setup();
    let p = s
        .api
        .create_pod(api_pod("web", PodStatus::default()))
        .unwrap();
    let out = s.sync(&command(&p, running_status()));
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(
        s.calls(),
        vec![
            (
                "GET".to_string(),
                "/api/v1/namespaces/default/pods/web".to_string()
            ),
            (
                "PATCH".to_string(),
                "/api/v1/namespaces/default/pods/web/status".to_string()
            ),
        ]
    );
    let patch = s.api.requests()[1].clone();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/strategic-merge-patch+json")
    );
    let body = patch.body.expect("a JSON body");
    assert_eq!(
        body["metadata"]["uid"],
        p.metadata.uid.clone().unwrap().as_str()
    );
    let stored = s.api.pod("default", "web").unwrap().status.unwrap();
    assert_eq!(stored.phase.as_deref(), Some("Running"));
    assert!(stored.container_statuses.unwrap()[0].ready);
}

#[test]
fn sm_06_no_patch_when_the_merged_status_equals_the_api_status() {
    let s = setup();
    let p = s
        .api
        .create_pod(api_pod("web", PodStatus::default()))
        .unwrap();
    let cmd = command(&p, running_status());
    assert!(matches!(s.sync(&cmd), StatusSyncOutcome::Patched { .. }));
    // the same status again (e.g. apiStatusVersions made stale): GET only
    let out = s.sync(&cmd);
    assert_eq!(out, StatusSyncOutcome::Unchanged { deleted: false });
    assert_eq!(s.methods(), vec!["GET"]);
}

#[test]
fn sm_12_not_found_recreated_and_get_error_stop_after_the_get() {
    let s = setup();
    // NotFound -> [get]
    let gone = api_pod("gone", PodStatus::default());
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
    assert_eq!(s.sync(&gone_cmd), StatusSyncOutcome::NotFound);
    assert_eq!(s.methods(), vec!["GET"]);

    // a pod recreated under the same name with another UID -> [get]
    let p = s
        .api
        .create_pod(api_pod("web", PodStatus::default()))
        .unwrap();
    let mut stale = command(&p, running_status());
    stale.uid = Uid::new("the-old-uid");
    stale.api_uid = Uid::new("the-old-uid");
    assert_eq!(
        s.sync(&stale),
        StatusSyncOutcome::UidChanged {
            api_uid: p.metadata.uid.clone().unwrap()
        }
    );
    assert_eq!(s.methods(), vec!["GET"]);
    assert_eq!(
        s.api.pod("default", "web").unwrap().status,
        Some(PodStatus::default()),
        "the new pod's status is untouched"
    );

    // GET error -> [get], reported as failed with the code
    s.api.fail_next(1, 500);
    let out = s.sync(&command(&p, running_status()));
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
    assert_eq!(s.methods(), vec!["GET"]);

    // normal -> [get, patch]
    assert!(matches!(
        s.sync(&command(&p, running_status())),
        StatusSyncOutcome::Patched { .. }
    ));
    assert_eq!(s.methods(), vec!["GET", "PATCH"]);
}

#[test]
fn sm_10_a_terminal_pod_is_deleted_only_once_finished_with_grace_0_and_its_uid() {
    let s = setup();
    let p = s.api.create_pod(api_pod("web", running_status())).unwrap();
    s.api
        .delete_pod_as_user("default", "web", Some(30))
        .unwrap()
        .expect("graceful delete keeps the pod");

    // deletion requested, containers stopped, but the worker has not finished: no DELETE
    let mut cmd = command(&p, failed_status());
    let out = s.sync(&cmd);
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(s.methods(), vec!["GET", "PATCH"]);
    assert!(s.api.pod("default", "web").is_some());

    // TerminatePod: finished -> GET, (PATCH if anything changed), DELETE grace 0 + UID
    cmd.version = 2;
    cmd.pod_is_finished = true;
    let out = s.sync(&cmd);
    assert_eq!(out, StatusSyncOutcome::Unchanged { deleted: true });
    assert_eq!(s.methods(), vec!["GET", "DELETE"]);
    let delete = s.api.requests().pop().unwrap();
    let body = delete.body.expect("DeleteOptions");
    assert_eq!(body["gracePeriodSeconds"], 0);
    assert_eq!(
        body["preconditions"]["uid"],
        p.metadata.uid.clone().unwrap().as_str()
    );
    assert!(s.api.pod("default", "web").is_none(), "the pod is gone");
}

#[test]
fn sm_11_no_delete_while_the_api_phase_is_not_terminal_and_never_for_a_mirror() {
    let s = setup();
    let p = s.api.create_pod(api_pod("web", running_status())).unwrap();
    s.api
        .delete_pod_as_user("default", "web", Some(30))
        .unwrap();
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
        s.api
            .pod("default", "web")
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running"),
        "no terminal phase while containers may run"
    );
    assert!(!s.methods().contains(&"DELETE".to_string()));

    // a mirror pod is never deleted by the status manager
    let m = s
        .api
        .create_pod(api_pod("mirror", running_status()))
        .unwrap();
    s.api
        .delete_pod_as_user("default", "mirror", Some(30))
        .unwrap();
    let mut cmd = command(&m, failed_status());
    cmd.pod_is_finished = true;
    cmd.is_mirror = true;
    let out = s.sync(&cmd);
    assert!(
        matches!(out, StatusSyncOutcome::Patched { deleted: false, .. }),
        "{out:?}"
    );
    assert_eq!(s.methods(), vec!["GET", "PATCH"]);
}

#[test]
fn sm_11b_the_delete_precondition_spares_a_new_pod_with_the_same_name() {
    let s = setup();
    let p = s.api.create_pod(api_pod("web", running_status())).unwrap();
    s.api
        .delete_pod_as_user("default", "web", Some(30))
        .unwrap();
    let mut cmd = command(&p, failed_status());
    cmd.pod_is_finished = true;
    // the DELETE is held for a while; meanwhile the pod is replaced by a new one
    s.api.set_fault(apiserver::FaultConfig {
        latency_ms: 1500,
        only_methods: vec!["DELETE".into()],
        ..apiserver::FaultConfig::default()
    });
    s.api.clear_requests();
    let client = s.client.clone();
    let running =
        s.rt.spawn(async move { sync_pod_status(&client, &cmd).await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !s.api.requests().iter().any(|r| r.method == "DELETE") {
        assert!(std::time::Instant::now() < deadline, "no DELETE was sent");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    s.api.clear_fault();
    s.api.delete_pod_as_user("default", "web", Some(0)).unwrap();
    let replacement = s.api.create_pod(api_pod("web", running_status())).unwrap();
    let done = s.rt.block_on(running).unwrap();
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
        .api
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE")
        .unwrap();
    assert_eq!(
        delete.body.unwrap()["preconditions"]["uid"],
        p.metadata.uid.clone().unwrap().as_str()
    );
    assert_eq!(
        s.api.pod("default", "web").unwrap().metadata.uid,
        replacement.metadata.uid,
        "the new pod survives"
    );
}

#[test]
fn sm_14_a_static_pods_status_goes_to_its_mirror_and_a_replaced_mirror_is_skipped() {
    let s = setup();
    let mirror = s
        .api
        .create_pod(api_pod("static-web", PodStatus::default()))
        .unwrap();
    let mut cmd = command(&mirror, running_status());
    cmd.uid = Uid::new("static-uid");
    cmd.is_mirror = true;
    assert!(matches!(s.sync(&cmd), StatusSyncOutcome::Patched { .. }));
    assert_eq!(
        s.api
            .pod("default", "static-web")
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );
    // the mirror is replaced by one with a new UID: GET only, reported as recreated
    s.api
        .delete_pod_as_user("default", "static-web", Some(0))
        .unwrap();
    let new_mirror = s
        .api
        .create_pod(api_pod("static-web", PodStatus::default()))
        .unwrap();
    cmd.version = 2;
    cmd.status = Arc::new(failed_status());
    assert_eq!(
        s.sync(&cmd),
        StatusSyncOutcome::UidChanged {
            api_uid: new_mirror.metadata.uid.clone().unwrap()
        }
    );
    assert_eq!(s.methods(), vec!["GET"]);
}
