//! The eviction of a pod whose `emptyDir` outgrew its `sizeLimit`, in the core
//! (`core::empty_dir_eviction`, the kubelet's `emptyDirLimitEviction`): the kill, the
//! status the pod ends with, the event, and what is never evicted. Behaviour EV-01, EV-02.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use ledgerlet::core::command::{Command, EventType, KubeEvent, WorkType};
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::record::event::{PodConfigChange, SourceReady, VolumeUsageObserved};
use ledgerlet::core::record::Event;
use support::core_harness::{pod, uid, Harness};

const MESSAGE: &str = "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ";

fn node() -> Harness {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        ..CoreConfig::default()
    });
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    h
}

/// A running pod with an `emptyDir` `scratch` limited to 1Mi, and `spec.priority`.
fn run(h: &mut Harness, name: &str, priority: Option<i32>) -> Arc<Pod> {
    let mut p = (*pod(name, name, "ns").tgps(Some(300)).build()).clone();
    let spec = p.spec.as_mut().unwrap();
    spec.priority = priority;
    spec.volumes = Some(vec![serde_json::from_value(
        serde_json::json!({"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}),
    )
    .unwrap()]);
    let p = Arc::new(p);
    h.submit(Event::PodAdded(PodConfigChange {
        source: PodSource::Api,
        pod: p.clone(),
    }));
    h.drain();
    p
}

fn measured(h: &mut Harness, name: &str, used_bytes: u64) -> Vec<Command> {
    h.submit(Event::VolumeUsageObserved(VolumeUsageObserved {
        uid: uid(name),
        volume: "scratch".into(),
        used_bytes,
    }))
}

fn evicted_events(out: &[Command]) -> Vec<&KubeEvent> {
    out.iter()
        .filter_map(|c| match c {
            Command::RecordEvent(e) if e.reason == "Evicted" => Some(e),
            _ => None,
        })
        .collect()
}

fn api_status(h: &Harness, name: &str) -> PodStatus {
    (*h.node().statuses.get(&uid(name)).expect("a status").status).clone()
}

/// EV-01: over its limit, the pod is killed at once (grace 0, so the minimum of 1 s) and
/// ends Failed/Evicted with the kubelet's message, the DisruptionTarget condition and a
/// Warning `Evicted` event.
#[test]
fn ev_01_an_empty_dir_over_its_size_limit_evicts_the_pod_at_once() {
    let mut h = node();
    run(&mut h, "p", None);
    let out = measured(&mut h, "p", 1024 * 1024);
    assert!(evicted_events(&out).is_empty(), "at the limit: {out:?}");
    let out = measured(&mut h, "p", 4 * 1024 * 1024);
    let events = evicted_events(&out);
    assert_eq!(events.len(), 1, "{out:?}");
    assert_eq!(events[0].event_type, EventType::Warning);
    assert_eq!(events[0].message, MESSAGE);
    h.drain();
    let graces: Vec<Option<i64>> = h
        .sync_calls("p")
        .into_iter()
        .filter(|c| c.work == WorkType::Terminating)
        .map(|c| c.grace_s)
        .collect();
    assert_eq!(graces.first(), Some(&Some(1)), "{graces:?}");
    let s = api_status(&h, "p");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    assert_eq!(s.message.as_deref(), Some(MESSAGE));
    let dt = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget");
    assert_eq!(dt.status, "True");
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
    // a later measurement of the stopping pod changes nothing
    let out = measured(&mut h, "p", 8 * 1024 * 1024);
    assert!(evicted_events(&out).is_empty(), "{out:?}");
}

/// EV-02: a critical pod is never evicted (`evictPod` refuses), nor is a pod the node
/// does not know.
#[test]
fn ev_02_critical_and_unknown_pods_are_not_evicted() {
    let mut h = node();
    run(&mut h, "critical", Some(2_000_001_000));
    let out = measured(&mut h, "critical", u64::MAX);
    assert!(evicted_events(&out).is_empty(), "{out:?}");
    h.drain();
    assert!(h
        .sync_calls("critical")
        .iter()
        .all(|c| c.work != WorkType::Terminating));
    let out = measured(&mut h, "nobody", u64::MAX);
    assert!(evicted_events(&out).is_empty(), "{out:?}");
}
