//! Named, reproducible simulations: the source of `examples/ledgers/*.ndjson` and of the
//! benchmark workloads.
//!
//! Owns the scripts only; the world is `Sim`. Must stay deterministic: changing a script
//! changes the committed example ledgers, and the test that pins them says how to
//! regenerate them.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Sim, SimConfig, COMPLETE_AFTER_SYNCS, FAIL_SYNCS};
use crate::core::config::{CoreConfig, PodSource};
use crate::core::record::event::{PodConfigChange, SourceReady};
use crate::core::record::Event;
use crate::core::uid::Uid;

/// A static pod as the file source would deliver it (source and hash annotations set).
pub fn static_pod(uid: &str, name: &str, node: &str, extra: &[(&str, &str)]) -> Arc<Pod> {
    let mut annotations = BTreeMap::from([
        (
            "kubernetes.io/config.source".to_string(),
            "file".to_string(),
        ),
        ("kubernetes.io/config.hash".to_string(), uid.to_string()),
    ]);
    for (k, v) in extra {
        annotations.insert(k.to_string(), v.to_string());
    }
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{node}")),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: name.into(),
                image: Some("busybox".into()),
                command: Some(vec!["sleep".into(), "3600".into()]),
                ..Container::default()
            }],
            termination_grace_period_seconds: Some(30),
            restart_policy: Some("Always".into()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        }),
    })
}

/// Static pods on a node: a web server that runs and is later removed, a job that
/// completes, a pod whose first syncs fail, and a leftover runtime pod from a previous run
/// that housekeeping kills. About four minutes of node life.
pub fn static_pods_example() -> Sim {
    let node = "node-a";
    let mut sim = Sim::new(SimConfig {
        seed: 7,
        core: CoreConfig {
            node_name: node.into(),
            sources: vec![PodSource::File],
            ..CoreConfig::default()
        },
        ..SimConfig::default()
    });
    sim.seed_runtime_pod(
        &Uid::new("0f0e0d0c-0000-4000-8000-000000000099"),
        "leftover",
        "default",
    );
    let web = static_pod("5a1e0c1d-0000-4000-8000-000000000001", "web", node, &[]);
    let job = static_pod(
        "5a1e0c1d-0000-4000-8000-000000000002",
        "job",
        node,
        &[(COMPLETE_AFTER_SYNCS, "2")],
    );
    let flaky = static_pod(
        "5a1e0c1d-0000-4000-8000-000000000003",
        "flaky",
        node,
        &[(FAIL_SYNCS, "2")],
    );
    for p in [&web, &job, &flaky] {
        sim.input(Event::PodAdded(PodConfigChange {
            source: PodSource::File,
            pod: p.clone(),
        }));
    }
    sim.input(Event::SourceReady(SourceReady {
        source: PodSource::File,
    }));
    sim.input_after(
        150_000,
        Event::PodRemoved(PodConfigChange {
            source: PodSource::File,
            pod: web,
        }),
    );
    sim.run_for(240_000);
    sim
}

/// A UUIDv4-shaped UID derived from `n` (the API server's UIDs are random UUIDv4s).
pub fn uuid_v4(n: u64) -> String {
    let mut rng = super::SimRng::new(n ^ 0x5eed_0000_0000_0000);
    let (a, b) = (rng.next_u64(), rng.next_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// A busy node for benchmarks: `pods` API pods added over the first minute, synced and
/// resynced; every tenth pod is deleted after five minutes, every seventh fails its first
/// sync, every thirteenth is a job that completes. Runs for `duration_ms` of virtual time.
pub fn busy_node(pods: usize, duration_ms: u64) -> Sim {
    let node = "bench-node";
    let mut sim = Sim::new(SimConfig {
        seed: 42,
        core: CoreConfig {
            node_name: node.into(),
            sources: vec![PodSource::Api],
            max_pods: (pods as u32).max(110),
            ..CoreConfig::default()
        },
        ledger: crate::ledger::LedgerConfig {
            max_records: 10_000_000,
            max_bytes: 16 * 1024 * 1024 * 1024,
            snapshot_every_records: 1_000_000,
            ..crate::ledger::LedgerConfig::default()
        },
        ..SimConfig::default()
    });
    sim.input(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    for i in 0..pods {
        let mut extra: Vec<(&str, &str)> = Vec::new();
        if i % 7 == 0 {
            extra.push((FAIL_SYNCS, "1"));
        }
        if i % 13 == 0 {
            extra.push((COMPLETE_AFTER_SYNCS, "3"));
        }
        let mut p = (*static_pod(&uuid_v4(i as u64), "app", node, &extra)).clone();
        p.metadata.name = Some(format!("app-{i}"));
        if let Some(a) = p.metadata.annotations.as_mut() {
            a.insert("kubernetes.io/config.source".into(), "api".into());
            a.remove("kubernetes.io/config.hash");
        }
        let p = Arc::new(p);
        sim.input_after(
            (i as u64 * 60_000) / pods as u64,
            Event::PodAdded(PodConfigChange {
                source: PodSource::Api,
                pod: p.clone(),
            }),
        );
        if i % 10 == 0 {
            let mut deleted = (*p).clone();
            deleted.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-01-01T00:05:00Z".parse().expect("valid"),
                ));
            deleted.metadata.deletion_grace_period_seconds = Some(30);
            sim.input_after(
                300_000 + i as u64,
                Event::PodDeleted(PodConfigChange {
                    source: PodSource::Api,
                    pod: Arc::new(deleted),
                }),
            );
        }
    }
    sim.run_for(duration_ms);
    sim
}
