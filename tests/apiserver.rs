//! The fake API server, exercised over real HTTP with the kube 5 client the agent uses.

#[path = "support/apiserver.rs"]
mod apiserver;

use std::time::Duration;

use apiserver::{FaultConfig, ServerConfig, TestApiServer};
use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Container, Event as CoreEvent, Node, NodeCondition, NodeStatus, ObjectReference, Pod,
    PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent,
    WatchParams,
};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

fn client(server: &TestApiServer) -> Client {
    let url = server.url().parse().expect("server url is a valid URI");
    Client::try_from(Config::new(url)).expect("kube client for the test server")
}

fn pod(namespace: &str, name: &str, node: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_owned),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox:1.36".into()),
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

fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn api_reason(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.reason.clone(),
        other => format!("not an API error: {other}"),
    }
}

/// The next watcher event, skipping (and counting) errors; panics after [`WAIT`].
async fn next_event<S>(stream: &mut S, errors: &mut Vec<watcher::Error>) -> watcher::Event<Pod>
where
    S: Stream<Item = watcher::Result<watcher::Event<Pod>>> + Unpin,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let item = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("watcher event within the deadline")
            .expect("watcher stream does not end");
        match item {
            Ok(event) => return event,
            Err(err) => errors.push(err),
        }
    }
}

fn describe(event: &watcher::Event<Pod>) -> String {
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    match event {
        watcher::Event::Apply(p) => format!("Apply({})", name(p)),
        watcher::Event::Delete(p) => format!("Delete({})", name(p)),
        watcher::Event::Init => "Init".into(),
        watcher::Event::InitApply(p) => format!("InitApply({})", name(p)),
        watcher::Event::InitDone => "InitDone".into(),
    }
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn create_sets_server_owned_metadata_and_resets_pod_status_to_pending() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut input = pod("ns1", "p", Some("node-a"));
    input.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    let created = pods.create(&PostParams::default(), &input).await.unwrap();

    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(uid.len(), 36, "uid looks like a UUID: {uid}");
    assert_eq!(
        created.metadata.resource_version.as_deref(),
        Some(server.resource_version().to_string().as_str())
    );
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let spec = created.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    assert_eq!(server.pod("ns1", "p").unwrap().metadata.uid, Some(uid));

    let again = pods
        .create(&PostParams::default(), &input)
        .await
        .unwrap_err();
    assert_eq!(api_code(&again), Some(409));
    assert_eq!(api_reason(&again), "AlreadyExists");
}

#[tokio::test]
async fn list_filters_by_spec_node_name_and_reports_the_global_resource_version() {
    let server = TestApiServer::start().await;
    let client = client(&server);
    for (ns, name, node) in [
        ("ns1", "a1", "node-a"),
        ("ns2", "a2", "node-a"),
        ("ns1", "b1", "node-b"),
    ] {
        Api::<Pod>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &pod(ns, name, Some(node)))
            .await
            .unwrap();
    }
    let all: Api<Pod> = Api::all(client.clone());
    let on_a = all
        .list(&ListParams::default().fields("spec.nodeName=node-a"))
        .await
        .unwrap();
    let names: Vec<_> = on_a
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a1", "a2"]);
    assert_eq!(
        on_a.metadata.resource_version,
        Some(server.resource_version().to_string())
    );

    let ns1: Api<Pod> = Api::namespaced(client.clone(), "ns1");
    let in_ns1 = ns1
        .list(&ListParams::default().fields("spec.nodeName=node-a"))
        .await
        .unwrap();
    assert_eq!(in_ns1.items.len(), 1);
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=b1,metadata.namespace=ns1"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let by_label = all
        .list(&ListParams::default().labels("app=web,app notin (db)"))
        .await
        .unwrap();
    assert_eq!(by_label.items.len(), 3);
    let got = ns1.get("b1").await.unwrap();
    assert_eq!(got.spec.unwrap().node_name.as_deref(), Some("node-b"));

    let missing = ns1.get("nope").await.unwrap_err();
    assert_eq!(api_code(&missing), Some(404));
    assert_eq!(api_reason(&missing), "NotFound");
    let bad = all
        .list(&ListParams::default().fields("spec.unknownField=x"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&bad), Some(400));
}

#[tokio::test]
async fn list_watch_watcher_sees_added_modified_and_deleted() {
    let server = TestApiServer::start().await;
    let client = client(&server);
    let all: Api<Pod> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client, "ns1");
    server
        .create_pod(pod("ns1", "before", Some("node-a")))
        .unwrap();
    server
        .create_pod(pod("ns1", "elsewhere", Some("node-b")))
        .unwrap();

    let mut stream = watcher(
        all,
        watcher::Config::default().fields("spec.nodeName=node-a"),
    )
    .boxed();
    let mut errors = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next_event(&mut stream, &mut errors).await));
    }
    assert_eq!(seen, ["Init", "InitApply(before)", "InitDone"]);

    let created = pods
        .create(&PostParams::default(), &pod("ns1", "p", Some("node-a")))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(
        describe(&next_event(&mut stream, &mut errors).await),
        "Apply(p)"
    );

    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    match next_event(&mut stream, &mut errors).await {
        watcher::Event::Apply(p) => {
            assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"))
        }
        other => panic!("expected Apply, got {}", describe(&other)),
    }

    pods.delete("p", &DeleteParams::default()).await.unwrap();
    match next_event(&mut stream, &mut errors).await {
        watcher::Event::Apply(p) => assert!(p.metadata.deletion_timestamp.is_some()),
        other => panic!("expected Apply(terminating), got {}", describe(&other)),
    }
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    pods.delete("p", &now).await.unwrap();
    assert_eq!(
        describe(&next_event(&mut stream, &mut errors).await),
        "Delete(p)"
    );
    assert!(errors.is_empty(), "unexpected watcher errors: {errors:?}");
}

#[tokio::test]
async fn watcher_relists_after_compaction_and_dropped_watches_then_continues() {
    let server = TestApiServer::start().await;
    let all: Api<Pod> = Api::all(client(&server));
    server.create_pod(pod("ns1", "p1", Some("node-a"))).unwrap();
    let mut stream = watcher(all, watcher::Config::default()).boxed();
    let mut errors = Vec::new();
    for _ in 0..3 {
        next_event(&mut stream, &mut errors).await;
    }
    // An event after InitDone proves the watch request is open.
    server.create_pod(pod("ns1", "p2", Some("node-a"))).unwrap();
    assert_eq!(
        describe(&next_event(&mut stream, &mut errors).await),
        "Apply(p2)"
    );
    assert_eq!(server.open_watches(), 1);

    server.compact();
    server.drop_watches();
    server.create_pod(pod("ns1", "p3", Some("node-a"))).unwrap();

    let mut seen = Vec::new();
    loop {
        let event = describe(&next_event(&mut stream, &mut errors).await);
        let done = event == "InitDone";
        seen.push(event);
        if done {
            break;
        }
    }
    assert_eq!(
        seen,
        [
            "Init",
            "InitApply(p1)",
            "InitApply(p2)",
            "InitApply(p3)",
            "InitDone"
        ]
    );
    let gone: Vec<_> = errors
        .iter()
        .filter(|e| matches!(e, watcher::Error::WatchError(s) if s.code == 410))
        .collect();
    assert_eq!(
        gone.len(),
        1,
        "exactly one 410 before the relist: {errors:?}"
    );

    server.create_pod(pod("ns1", "p4", Some("node-a"))).unwrap();
    assert_eq!(
        describe(&next_event(&mut stream, &mut errors).await),
        "Apply(p4)"
    );
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_state_then_changes() {
    let server = TestApiServer::start().await;
    let all: Api<Pod> = Api::all(client(&server));
    server.create_pod(pod("ns1", "p1", Some("node-a"))).unwrap();
    let mut stream = watcher(all, watcher::Config::default().streaming_lists()).boxed();
    let mut errors = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next_event(&mut stream, &mut errors).await));
    }
    assert_eq!(seen, ["Init", "InitApply(p1)", "InitDone"]);
    server.create_pod(pod("ns1", "p2", Some("node-a"))).unwrap();
    assert_eq!(
        describe(&next_event(&mut stream, &mut errors).await),
        "Apply(p2)"
    );
    assert!(errors.is_empty(), "{errors:?}");

    let watches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.query_param("watch").as_deref() == Some("true"))
        .collect();
    assert_eq!(watches.len(), 1, "no list call in streaming mode");
    assert_eq!(
        watches[0].query_param("sendInitialEvents").as_deref(),
        Some("true")
    );
    assert!(
        !server.requests().iter().any(|r| r.method == "GET"
            && r.path == "/api/v1/pods"
            && r.query_param("watch").is_none()),
        "streaming lists do not list"
    );
}

#[tokio::test]
async fn raw_watch_from_a_compacted_resource_version_gets_410_expired() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let created = server.create_pod(pod("ns1", "p", None)).unwrap();
    let old_rv = created.metadata.resource_version.unwrap();
    server.compact();
    let mut stream = pods
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(WAIT, stream.next()).await.unwrap();
    match first {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!(
            "expected a 410 ERROR event, got {:?}",
            other.map(|r| r.is_ok())
        ),
    }
    // A watch from the current RV is fine and replays nothing.
    let current = server.resource_version().to_string();
    let mut ok = pods
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    server
        .update_pod("ns1", "p", |p| {
            p.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into())
        })
        .unwrap();
    loop {
        match tokio::time::timeout(WAIT, ok.next()).await.unwrap() {
            Some(Ok(WatchEvent::Modified(p))) => {
                assert_eq!(p.metadata.name.as_deref(), Some("p"));
                break;
            }
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            other => panic!("expected MODIFIED, got {:?}", other.map(|r| r.is_ok())),
        }
    }
}

#[tokio::test]
async fn watch_from_before_the_retained_history_gets_410_but_within_it_replays() {
    let server = TestApiServer::start_with(ServerConfig {
        history_capacity: 2,
        ..ServerConfig::default()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let rvs: Vec<String> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            let created = server.create_pod(pod("ns1", name, None)).unwrap();
            created.metadata.resource_version.unwrap()
        })
        .collect();
    // History holds the creations of b and c: a watch from a's RV misses nothing...
    let mut replay = pods
        .watch(&WatchParams::default(), &rvs[0])
        .await
        .unwrap()
        .boxed();
    for expected in ["b", "c"] {
        match tokio::time::timeout(WAIT, replay.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(p))) => {
                assert_eq!(p.metadata.name.as_deref(), Some(expected))
            }
            other => panic!(
                "expected ADDED {expected}, got {:?}",
                other.map(|r| r.is_ok())
            ),
        }
    }
    // ...but one from before a's creation would miss it.
    let before_a = (rvs[0].parse::<u64>().unwrap() - 1).to_string();
    let mut expired = pods
        .watch(&WatchParams::default(), &before_a)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(WAIT, expired.next()).await.unwrap() {
        Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410),
        other => panic!("expected 410, got {:?}", other.map(|r| r.is_ok())),
    }
}

#[tokio::test]
async fn field_selected_watch_sees_objects_enter_and_leave_the_selection() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut stream = pods
        .watch(
            &WatchParams::default()
                .fields("status.phase=Running")
                .disable_bookmarks(),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    server.create_pod(pod("ns1", "p", Some("node-a"))).unwrap();
    for phase in ["Running", "Succeeded"] {
        server
            .update_pod("ns1", "p", |p| {
                p.status = Some(PodStatus {
                    phase: Some(phase.into()),
                    ..PodStatus::default()
                })
            })
            .unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..2 {
        match tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(p))) => {
                seen.push(format!("ADDED {:?}", p.status.unwrap().phase))
            }
            Some(Ok(WatchEvent::Deleted(p))) => {
                seen.push(format!("DELETED {:?}", p.status.unwrap().phase))
            }
            other => panic!("unexpected {:?}", other.map(|r| r.is_ok())),
        }
    }
    assert_eq!(
        seen,
        ["ADDED Some(\"Running\")", "DELETED Some(\"Succeeded\")"]
    );
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let started = tokio::time::Instant::now();
    let mut stream = pods
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(WAIT, stream.next()).await.unwrap();
    assert!(end.is_none(), "the stream ends without events");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn bookmarks_carry_the_current_resource_version_when_requested() {
    let server = TestApiServer::start_with(ServerConfig {
        bookmark_interval: Duration::from_millis(50),
        ..ServerConfig::default()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut stream = pods
        .watch(&WatchParams::default().timeout(30), "0")
        .await
        .unwrap()
        .boxed();
    server.create_pod(pod("ns1", "p", None)).unwrap();
    let rv = server.resource_version().to_string();
    let mut saw_added = false;
    loop {
        match tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(_))) => saw_added = true,
            Some(Ok(WatchEvent::Bookmark(b))) if saw_added => {
                assert_eq!(b.metadata.resource_version, rv);
                break;
            }
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            other => panic!("unexpected watch item: {:?}", other.map(|r| r.is_ok())),
        }
    }
}

#[tokio::test]
async fn strategic_status_patch_merges_conditions_by_type_and_changes_only_status() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut fixture = pod("ns1", "p", Some("node-a"));
    fixture.status = Some(PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(vec![
            condition("PodScheduled", "True"),
            condition("Ready", "False"),
        ]),
        ..PodStatus::default()
    });
    let before = server.create_pod(fixture).unwrap();
    let uid = before.metadata.uid.clone().unwrap();

    // What the kubelet's PatchPodStatus sends: uid as a precondition, only changed fields,
    // plus a $setElementOrder directive. The spec/label changes must be ignored.
    let patch = json!({
        "metadata": {"uid": uid, "labels": {"sneaky": "yes"}},
        "spec": {"nodeName": "node-z"},
        "status": {
            "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    });
    let after = pods
        .patch_status("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let status = after.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let conditions: Vec<_> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        [
            ("PodScheduled".to_owned(), "True".to_owned()),
            ("Ready".to_owned(), "True".to_owned())
        ]
    );
    assert_eq!(
        after.spec, before.spec,
        "a status patch leaves the spec alone"
    );
    assert_eq!(after.metadata.labels, before.metadata.labels);
    assert_eq!(after.metadata.generation, before.metadata.generation);
    assert_ne!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(server.pod("ns1", "p").unwrap(), after);
}

#[tokio::test]
async fn merge_status_patch_replaces_lists_and_changes_only_status() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut fixture = pod("ns1", "p", Some("node-a"));
    fixture.status = Some(PodStatus {
        conditions: Some(vec![
            condition("PodScheduled", "True"),
            condition("Ready", "False"),
        ]),
        ..PodStatus::default()
    });
    let before = server.create_pod(fixture).unwrap();
    let patch = json!({
        "spec": {"nodeName": "node-z"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.7"},
    });
    let after = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let status = after.status.unwrap();
    assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(status.conditions.unwrap(), vec![condition("Ready", "True")]);
    assert_eq!(after.spec, before.spec);
}

#[tokio::test]
async fn status_patch_with_a_different_uid_is_a_conflict_and_changes_nothing() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let before = server.create_pod(pod("ns1", "p", Some("node-a"))).unwrap();
    for patch in [
        Patch::Strategic(json!({
            "metadata": {"uid": "00000000-0000-4000-8000-000000000000"},
            "status": {"phase": "Failed"},
        })),
        Patch::Merge(json!({
            "metadata": {"uid": "00000000-0000-4000-8000-000000000000"},
            "status": {"phase": "Failed"},
        })),
    ] {
        let err = pods
            .patch_status("p", &PatchParams::default(), &patch)
            .await
            .unwrap_err();
        assert_eq!(api_code(&err), Some(409), "{err}");
        assert_eq!(api_reason(&err), "Conflict");
    }
    assert_eq!(server.pod("ns1", "p").unwrap(), before);
}

#[tokio::test]
async fn main_resource_patch_keeps_status_and_noop_patch_keeps_resource_version() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut fixture = pod("ns1", "p", Some("node-a"));
    fixture.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    server.create_pod(fixture).unwrap();
    let patched = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"tier": "x"}}, "status": {"phase": "Failed"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(
        patched
            .metadata
            .labels
            .unwrap()
            .get("tier")
            .map(String::as_str),
        Some("x")
    );
    let rv = server.resource_version();
    let same = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"tier": "x"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        server.resource_version(),
        rv,
        "a no-op patch is not a write"
    );
    assert_eq!(same.metadata.resource_version, Some(rv.to_string()));

    let unsupported = pods
        .patch(
            "p",
            &PatchParams::apply("test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod"})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&unsupported), Some(415));
}

#[tokio::test]
async fn graceful_delete_marks_the_pod_and_a_shorter_grace_shortens_it() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let created = server.create_pod(pod("ns1", "p", Some("node-a"))).unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    let first = pods.delete("p", &DeleteParams::default()).await.unwrap();
    let terminating = first.left().expect("a graceful delete returns the pod");
    let first_deadline = terminating.metadata.deletion_timestamp.clone().unwrap();
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert_eq!(terminating.metadata.generation, Some(2));

    let shorter = pods
        .delete("p", &DeleteParams::default().grace_period(10))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(shorter.metadata.deletion_grace_period_seconds, Some(10));
    let shortened_by = first_deadline
        .0
        .duration_since(shorter.metadata.deletion_timestamp.unwrap().0);
    assert_eq!(shortened_by.as_secs(), 20);

    let longer = pods
        .delete("p", &DeleteParams::default().grace_period(20))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        longer.metadata.deletion_grace_period_seconds,
        Some(10),
        "never lengthened"
    );

    let wrong_uid = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-4000-8000-000000000000".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let err = pods.delete("p", &wrong_uid).await.unwrap_err();
    assert_eq!(api_code(&err), Some(409));
    assert!(server.pod("ns1", "p").is_some());

    let right_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..wrong_uid
    };
    let gone = pods.delete("p", &right_uid).await.unwrap();
    assert!(gone.is_left(), "pods answer a delete with the pod");
    assert!(server.pod("ns1", "p").is_none());
    let err = pods.delete("p", &right_uid).await.unwrap_err();
    assert_eq!(api_code(&err), Some(404));
}

#[tokio::test]
async fn unbound_pods_and_user_grace_zero_are_deleted_immediately() {
    let server = TestApiServer::start().await;
    server.create_pod(pod("ns1", "unbound", None)).unwrap();
    assert!(server
        .delete_pod_as_user("ns1", "unbound", None)
        .unwrap()
        .is_none());
    assert!(server.pod("ns1", "unbound").is_none());

    server
        .create_pod(pod("ns1", "bound", Some("node-a")))
        .unwrap();
    let pending = server.delete_pod_as_user("ns1", "bound", Some(5)).unwrap();
    assert_eq!(
        pending.unwrap().metadata.deletion_grace_period_seconds,
        Some(5)
    );
    assert!(server
        .delete_pod_as_user("ns1", "bound", Some(0))
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn node_create_and_status_patch_merge_conditions() {
    let server = TestApiServer::start().await;
    let nodes: Api<Node> = Api::all(client(&server));
    let node = Node {
        metadata: ObjectMeta {
            name: Some("node-a".into()),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    };
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    assert!(
        created.status.is_some(),
        "nodes keep the status they are created with"
    );
    let patched = nodes
        .patch_status(
            "node-a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]}})),
        )
        .await
        .unwrap();
    let conditions: Vec<_> = patched
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        [
            ("Ready".to_owned(), "True".to_owned()),
            ("MemoryPressure".to_owned(), "False".to_owned())
        ]
    );
    assert_eq!(
        server.node("node-a").unwrap().metadata.uid,
        created.metadata.uid
    );
    let nodes_path = server
        .requests()
        .iter()
        .any(|r| r.path == "/api/v1/nodes/node-a/status" && r.method == "PATCH");
    assert!(nodes_path);
}

#[tokio::test]
async fn lease_replace_with_a_stale_resource_version_is_a_conflict() {
    let server = TestApiServer::start().await;
    let leases: Api<Lease> = Api::namespaced(client(&server), "kube-node-lease");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("node-a".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("node-a".into()),
            lease_duration_seconds: Some(40),
            ..LeaseSpec::default()
        }),
    };
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().lease_duration_seconds = Some(41);
    let replaced = leases
        .replace("node-a", &PostParams::default(), &renewed)
        .await
        .unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );

    // `renewed` still carries the resource version that `replace` just superseded.
    let err = leases
        .replace("node-a", &PostParams::default(), &renewed)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(409));
    assert_eq!(api_reason(&err), "Conflict");
    assert_eq!(
        server
            .lease("kube-node-lease", "node-a")
            .unwrap()
            .spec
            .unwrap()
            .lease_duration_seconds,
        Some(41)
    );
}

#[tokio::test]
async fn events_are_created_through_core_v1_and_the_kube_recorder() {
    let server = TestApiServer::start().await;
    let client = client(&server);
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "ns1");
    let event = CoreEvent {
        metadata: ObjectMeta {
            generate_name: Some("p.".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some("p".into()),
            namespace: Some("ns1".into()),
            ..ObjectReference::default()
        },
        reason: Some("Started".into()),
        ..CoreEvent::default()
    };
    let created = core.create(&PostParams::default(), &event).await.unwrap();
    assert!(created.metadata.name.unwrap().starts_with("p."));
    let listed = core
        .list(&ListParams::default().fields("involvedObject.name=p,reason=Started"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(server.events().len(), 1);

    let recorder = kube::runtime::events::Recorder::new(client, "ledgerlet-test".into());
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("p".into()),
        namespace: Some("ns1".into()),
        ..ObjectReference::default()
    };
    let ev = kube::runtime::events::Event {
        type_: kube::runtime::events::EventType::Normal,
        reason: "Pulled".into(),
        note: Some("image pulled".into()),
        action: "Pull".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    // The second identical event is a merge patch of the series on the same object.
    recorder.publish(&ev, &reference).await.unwrap();
    let v1 = server.events_v1();
    assert_eq!(v1.len(), 1);
    assert_eq!(v1[0].reason.as_deref(), Some("Pulled"));
    assert_eq!(v1[0].series.as_ref().map(|s| s.count), Some(2));
}

#[tokio::test]
async fn fail_next_fails_exactly_the_next_two_requests() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    server.create_pod(pod("ns1", "p", None)).unwrap();
    server.fail_next(2, 500);
    for _ in 0..2 {
        let err = pods.get("p").await.unwrap_err();
        assert_eq!(api_code(&err), Some(500));
    }
    pods.get("p").await.unwrap();
    let log = server.requests();
    let injected: Vec<_> = log.iter().map(|r| (r.injected_fault, r.status)).collect();
    assert_eq!(
        injected,
        [(true, Some(500)), (true, Some(500)), (false, Some(200))]
    );
}

#[tokio::test]
async fn fault_config_fails_every_second_matching_request_and_spares_the_rest() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    server.create_pod(pod("ns1", "p", None)).unwrap();
    server.set_fault(FaultConfig {
        error_rate_per_million: 500_000,
        error_status: 500,
        only_methods: vec!["PATCH".into()],
        ..FaultConfig::default()
    });
    let mut outcomes = Vec::new();
    for i in 0..4 {
        pods.get("p").await.unwrap();
        let patch = Patch::Merge(json!({"metadata": {"labels": {"n": i.to_string()}}}));
        let result = pods.patch("p", &PatchParams::default(), &patch).await;
        outcomes.push(result.err().and_then(|e| api_code(&e)));
    }
    assert_eq!(outcomes, [None, Some(500), None, Some(500)]);
    server.clear_fault();
}

#[tokio::test]
async fn kube_client_retries_injected_503_by_default() {
    // kube 5's `Config::new` sets `default_retry: true`: 429/503/504 are retried with backoff,
    // so a test that wants the agent to *see* an error must inject 500 (or disable retries).
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    server.create_pod(pod("ns1", "p", None)).unwrap();
    server.fail_next(1, 503);
    pods.get("p").await.unwrap();
    let statuses: Vec<_> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(503), Some(200)]);
}

#[tokio::test]
async fn malformed_and_oversized_bodies_are_rejected_with_a_status() {
    let server = TestApiServer::start_with(ServerConfig {
        max_body_bytes: 2048,
        request_log_capacity: 2,
        ..ServerConfig::default()
    })
    .await;
    let client = client(&server);
    let raw = |body: &str| {
        hyper::Request::post("/api/v1/namespaces/ns1/pods")
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
            .unwrap()
    };
    let err = client.request::<Pod>(raw("{not json")).await.unwrap_err();
    assert_eq!(api_code(&err), Some(400));
    assert_eq!(api_reason(&err), "BadRequest");
    let wrong_type =
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":"no"}}"#;
    let err = client.request::<Pod>(raw(wrong_type)).await.unwrap_err();
    assert_eq!(api_code(&err), Some(400));
    let wrong_kind = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}"#;
    let err = client.request::<Pod>(raw(wrong_kind)).await.unwrap_err();
    assert_eq!(api_code(&err), Some(400));

    let err = client
        .request::<Pod>(raw(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"other"}}"#,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        api_code(&err),
        Some(400),
        "body namespace must match the URL"
    );
    let err = client
        .request::<Pod>(raw(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","resourceVersion":"5"}}"#,
        ))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(500), "like the real storage layer");

    let mut big = pod("ns1", "big", None);
    big.metadata.annotations = Some([("blob".to_owned(), "x".repeat(4096))].into());
    let pods: Api<Pod> = Api::namespaced(client, "ns1");
    let err = pods.create(&PostParams::default(), &big).await.unwrap_err();
    assert_eq!(api_code(&err), Some(413));
    assert!(server.pod("ns1", "big").is_none());

    let log = server.requests();
    assert_eq!(log.len(), 2, "the log keeps only its capacity");
    assert_eq!(server.requests_dropped(), 4);
    assert_eq!(
        log[0].body.as_ref().unwrap()["metadata"]["resourceVersion"],
        "5"
    );
    assert_eq!(log[0].status, Some(500));
    assert_eq!(log[0].content_type.as_deref(), Some("application/json"));
    assert_eq!(log[1].status, Some(413));
    server.clear_requests();
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn version_endpoint_answers_the_client_probe() {
    let server = TestApiServer::start().await;
    let info = client(&server).apiserver_version().await.unwrap();
    assert_eq!(info.major, "1");
    let log = server.requests();
    assert_eq!(log[0].path, "/version");
    assert_eq!(log[0].query, "");
}

#[tokio::test]
async fn dropped_watch_streams_end_and_are_no_longer_counted() {
    let server = TestApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns1");
    let mut stream = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    wait_for("the watch to open", || server.open_watches() == 1).await;
    server.drop_watches();
    loop {
        match tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
            None => break,
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            Some(other) => panic!("unexpected item after drop: {:?}", other.is_ok()),
        }
    }
    assert_eq!(server.open_watches(), 0);
}
