//! The ledger: NDJSON codec, bounded retention, snapshots and followers.

mod support;

use std::sync::Arc;

use ledgerlet::core::command::WorkType;
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::record::event::*;
use ledgerlet::core::record::{Event, Record, Time};
use ledgerlet::core::runtime_status::{RunningPod, RuntimePodStatus};
use ledgerlet::core::timers::TimerKey;
use ledgerlet::core::update::{KillPodOptions, UpdatePod, UpdateType};
use ledgerlet::core::{fold, Node, Uid};
use ledgerlet::ledger::{codec, Ledger, LedgerConfig, Line, Reader};
use ledgerlet::sim::{Sim, SimConfig};
use support::core_harness::pod;

fn one_of_each_kind() -> Vec<Event> {
    let p = pod("u1", "web", "ns").label("app", "web").build();
    let source = PodSource::File;
    let change = PodConfigChange {
        source,
        pod: p.clone(),
    };
    let mut kill = UpdatePod::for_pod(UpdateType::Kill, p.clone());
    kill.kill = Some(KillPodOptions {
        evict: true,
        grace_period_override_s: Some(5),
        status_override: None,
        wait_for_completion: true,
    });
    kill.start_time = Some(Time::from_unix_nanos(1_700_000_000_123_456_789));
    vec![
        Event::ConfigApplied(ConfigApplied {
            config: Box::new(CoreConfig {
                node_name: "n".into(),
                sources: vec![PodSource::File, PodSource::Api],
                ..CoreConfig::default()
            }),
        }),
        Event::SourceReady(SourceReady { source }),
        Event::PodAdded(change.clone()),
        Event::PodUpdated(change.clone()),
        Event::PodRemoved(change.clone()),
        Event::PodDeleted(change.clone()),
        Event::PodReconcile(change),
        Event::UpdatePod(kill),
        Event::PlegEvent(PlegEvent {
            uid: Uid::new("u1"),
            kind: PlegEventKind::ContainerDied,
            container_id: Some("abc".into()),
        }),
        Event::RuntimeStatusObserved(RuntimeStatusObserved {
            uid: Uid::new("u1"),
            status: Some(Arc::new(RuntimePodStatus {
                name: "web".into(),
                namespace: "ns".into(),
                ..RuntimePodStatus::default()
            })),
            error: None,
            read_after_seq: Some(3),
        }),
        Event::SyncFinished(SyncFinished {
            uid: Uid::new("u1"),
            sync_id: 7,
            work: WorkType::Terminating,
            outcome: SyncOutcome::Failed {
                message: "rpc error: \"quoted\"\nnewline".into(),
            },
        }),
        Event::TimerFired(TimerFired {
            key: TimerKey::KillDeadline {
                uid: Uid::new("u1"),
                request: 3,
            },
            generation: 9,
        }),
        Event::SyncKnownPods(SyncKnownPods {
            desired: Some(vec![Uid::new("a"), Uid::new("b")]),
        }),
        Event::KillCompleted(KillCompleted {
            uid: Uid::new("u1"),
            requests: vec![3],
            timed_out: true,
        }),
        Event::PodRejected(PodRejected {
            uid: Uid::new("u1"),
            reason: "OutOfpods".into(),
            message: "Pod was rejected: no room".into(),
        }),
        Event::RuntimeActionFinished(RuntimeActionFinished {
            uid: Uid::new("u1"),
            sync_id: 4,
            action: RuntimeAction::StartContainer {
                container: "web".into(),
                kind: ledgerlet::core::command::ContainerKind::Regular,
                id: "abc".into(),
            },
            outcome: ActionOutcome::Failed {
                reason: "RunContainerError".into(),
                message: "no such file".into(),
                detail: Some("container web of pod default/web".into()),
            },
            duration_ms: 12,
        }),
        Event::NodeShutdown(NodeShutdown {}),
        Event::AgentRestarted(ledgerlet::core::record::event::AgentRestarted {
            previous_seq: 41,
            dropped: Some("segment-00000000000000000001.ndjson line 42: torn".into()),
        }),
        Event::StatusSyncFinished(StatusSyncFinished {
            uid: Uid::new("u1"),
            version: 3,
            outcome: StatusSyncOutcome::Failed {
                code: Some(500),
                message: "the server has received too many requests".into(),
            },
        }),
        Event::NodeInfoObserved(NodeInfoObserved {
            node: Arc::new(k8s_openapi::api::core::v1::Node {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some("node-a".into()),
                    ..Default::default()
                },
                ..Default::default()
            }),
        }),
        Event::RuntimeHealth(RuntimeHealth {
            runtime_ready: false,
            network_ready: true,
            pleg_healthy: true,
            message: "container runtime is down".into(),
            network_message: String::new(),
        }),
        Event::NodeSyncFinished(NodeSyncFinished {
            action: NodeAction::CreateMirrorPod,
            uid: Some(Uid::new("u1")),
            outcome: NodeSyncOutcome::Ok,
        }),
        Event::ManifestRejected(ManifestRejected {
            path: "/etc/kubernetes/manifests/web.yaml".into(),
            error: "/etc/kubernetes/manifests/web.yaml: spec.containers[0].image: Required value"
                .into(),
        }),
        Event::ProbeFinished(ledgerlet::core::probes::ProbeFinished {
            uid: Uid::new("u1"),
            container: "web".into(),
            container_id: "abc".into(),
            probe: ledgerlet::core::probes::ProbeType::Liveness,
            run: 41,
            result: ledgerlet::core::probes::RunResult::Failure,
            output: "HTTP probe failed with statuscode: 500".into(),
            duration_ms: 3,
        }),
        Event::ProbeResult(ledgerlet::core::probes::ProbeResult {
            uid: Uid::new("u1"),
            container: "web".into(),
            container_id: "abc".into(),
            probe: ledgerlet::core::probes::ProbeType::Liveness,
            result: Some(ledgerlet::core::probe_results::ProbeOutcome::Failure),
            reason: ledgerlet::core::probes::ResultReason::Threshold,
            consecutive: 3,
            since_seq: Some(30),
        }),
        Event::NodeObserved(ledgerlet::core::record::event::NodeObserved {
            labels: [("disk".to_string(), "ssd".to_string())].into(),
            taints: vec![k8s_openapi::api::core::v1::Taint {
                key: "dedicated".into(),
                value: Some("db".into()),
                effect: "NoExecute".into(),
                ..Default::default()
            }],
            extended_capacity: [(
                "example.com/widget".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
            )]
            .into(),
            extended_allocatable: Default::default(),
        }),
        Event::VolumeUsageObserved(ledgerlet::core::record::event::VolumeUsageObserved {
            uid: Uid::new("u-9"),
            volume: "scratch".into(),
            used_bytes: 4 << 20,
        }),
    ]
}

#[test]
fn ndjson_round_trips_every_event_kind() {
    let events = one_of_each_kind();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        Event::KINDS,
        "one sample per kind, in declaration order"
    );
    for (i, event) in events.into_iter().enumerate() {
        let r = Record {
            seq: i as u64 + 1,
            at: Time::from_unix_nanos(1_800_000_000_000_000_001 + i as i64),
            cause: (i % 2 == 0).then_some(i as u64),
            trace: Some(
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
                    .parse()
                    .unwrap(),
            ),
            event,
        };
        let line = codec::encode_record(&r);
        assert!(!line.contains('\n'), "one line per record");
        assert!(
            line.starts_with(&format!("{{\"seq\":{},\"at\":\"", r.seq)),
            "{line}"
        );
        assert!(line.contains(&format!("\"kind\":\"{}\",\"event\":", r.event.kind())));
        match codec::decode_line::<Node>(&line, 1).unwrap() {
            Line::Record(back) => assert_eq!(back, r, "{line}"),
            Line::Snapshot(_) => panic!("not a snapshot"),
        }
        // Record's own Deserialize agrees with the codec
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
    }
}

#[test]
fn a_runtime_status_written_before_read_after_seq_counts_as_read_just_before_itself() {
    let line = r#"{"seq":9,"at":"2026-01-01T00:00:00Z","kind":"RuntimeStatusObserved","event":{"uid":"u1"}}"#;
    let Line::Record(r) = codec::decode_line::<Node>(line, 1).unwrap() else {
        panic!("not a record");
    };
    let Event::RuntimeStatusObserved(o) = &r.event else {
        panic!("{:?}", r.event);
    };
    assert_eq!(o.read_after_seq, None);
    assert_eq!(
        o.fresh_as_of(r.seq),
        8,
        "the rule before the field: its own seq"
    );
    let stamped = RuntimeStatusObserved {
        read_after_seq: Some(3),
        ..o.clone()
    };
    assert_eq!(stamped.fresh_as_of(r.seq), 3);
}

#[test]
fn a_runtime_health_written_before_network_message_names_the_network_generically() {
    let line = r#"{"seq":4,"at":"2026-01-01T00:00:00Z","kind":"RuntimeHealth","event":{"runtime_ready":true,"network_ready":false,"pleg_healthy":true,"message":"container runtime network not ready: NetworkReady=false"}}"#;
    let Line::Record(r) = codec::decode_line::<Node>(line, 1).unwrap() else {
        panic!("not a record");
    };
    let Event::RuntimeHealth(h) = &r.event else {
        panic!("{:?}", r.event);
    };
    assert_eq!(
        h.network_error(),
        Some("container runtime network not ready")
    );
    let ready = RuntimeHealth {
        network_ready: true,
        ..h.clone()
    };
    assert_eq!(ready.network_error(), None);
}

fn read_all(text: &str) -> Result<Vec<Line<Node>>, ledgerlet::ledger::DecodeError> {
    Reader::new(text.as_bytes()).collect()
}

#[test]
fn a_bad_line_is_named_by_its_number_and_what_was_wrong() {
    let good = |seq: u64| {
        codec::encode_record(&Record {
            seq,
            at: Time::from_unix_secs(1),
            cause: None,
            trace: None,
            event: Event::SourceReady(SourceReady {
                source: PodSource::File,
            }),
        })
    };
    let cases = [
        (format!("{}\n{{not json\n", good(1)), 2, "not valid JSON"),
        (
            format!("{}\n\n{}\n{{\"seq\":3}}\n", good(1), good(2)),
            4,
            "not a ledger line",
        ),
        (
            format!(
                "{}\n{{\"seq\":2,\"at\":\"2026-01-01T00:00:00Z\",\"cause\":null,\"trace\":null,\"kind\":\"Nope\",\"event\":{{}}}}\n",
                good(1)
            ),
            2,
            "unknown kind \"Nope\"",
        ),
        (
            "{\"seq\":1,\"at\":\"2026-01-01T00:00:00Z\",\"cause\":null,\"trace\":null,\"kind\":\"SyncFinished\",\"event\":{\"uid\":\"x\"}}\n".to_string(),
            1,
            "bad SyncFinished event",
        ),
        (
            "{\"seq\":1,\"at\":\"yesterday\",\"cause\":null,\"trace\":null,\"kind\":\"SourceReady\",\"event\":{\"source\":\"file\"}}\n".to_string(),
            1,
            "invalid RFC 3339 timestamp",
        ),
        (format!("{}\n{}\n", good(2), good(2)), 2, "seq 2 does not follow seq 2"),
    ];
    for (text, line, what) in cases {
        let err = read_all(&text).unwrap_err();
        assert_eq!(err.line(), line, "{err}");
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("line {line}: ")), "{msg}");
        assert!(msg.contains(what), "{msg} should say {what}");
    }
}

#[test]
fn blank_lines_and_crlf_are_tolerated() {
    let r = Record {
        seq: 1,
        at: Time::from_unix_secs(1),
        cause: None,
        trace: None,
        event: Event::SourceReady(SourceReady {
            source: PodSource::Api,
        }),
    };
    let text = format!("\n{}\r\n\n", codec::encode_record(&r));
    let lines = read_all(&text).unwrap();
    assert_eq!(lines, vec![Line::Record(r)]);
}

fn small_ledger(max_records: usize, snapshot_every: u64) -> LedgerConfig {
    LedgerConfig {
        max_records,
        max_bytes: 64 * 1024 * 1024,
        snapshot_every_records: snapshot_every,
        follower_buffer_records: 16,
    }
}

#[test]
fn retention_keeps_the_record_bound_and_replay_from_the_snapshot_matches_the_live_node() {
    let cfg = small_ledger(300, 100);
    cfg.validate().unwrap();
    let mut sim = Sim::new(SimConfig {
        ledger: cfg.clone(),
        ..SimConfig::default()
    });
    sim.input(Event::SourceReady(SourceReady {
        source: PodSource::File,
    }));
    for i in 0..20 {
        sim.input(Event::PodAdded(PodConfigChange {
            source: PodSource::Api,
            pod: pod(&format!("u{i}"), &format!("p{i}"), "ns").build(),
        }));
    }
    sim.run_for(30 * 60 * 1000);
    let ledger = sim.engine().ledger();
    let stats = ledger.stats();
    assert!(
        stats.evicted_records > 0,
        "the run must exceed retention: {stats:?}"
    );
    assert!(stats.retained_records <= cfg.max_records, "{stats:?}");
    let (snapshot, records) = ledger.replay_base();
    let snapshot = snapshot.expect("evicted history needs a snapshot");
    assert_eq!(records.first().map(|r| r.seq), Some(snapshot.seq + 1));
    let mut node: Node = (*snapshot.state).clone();
    for r in &records {
        fold(&mut node, r);
    }
    assert_eq!(&node, sim.engine().node());
}

#[test]
fn retention_keeps_the_byte_bound() {
    let cfg = LedgerConfig {
        max_records: 1_000_000,
        max_bytes: 256 * 1024,
        snapshot_every_records: 100,
        follower_buffer_records: 16,
    };
    let mut ledger: Ledger<u32> = Ledger::new(cfg.clone(), 0);
    for i in 0..50_000u64 {
        ledger.append(
            Time::from_unix_secs(i as i64),
            None,
            None,
            Event::SyncFinished(SyncFinished {
                uid: Uid::new(format!("pod-{}", i % 100)),
                sync_id: i,
                work: WorkType::Sync,
                outcome: SyncOutcome::Failed {
                    message: "x".repeat(100),
                },
            }),
        );
        if ledger.wants_snapshot() {
            ledger.store_snapshot(Arc::new(i as u32));
        }
        assert!(ledger.stats().retained_bytes <= cfg.max_bytes);
    }
    let stats = ledger.stats();
    assert!(stats.evicted_records > 40_000, "{stats:?}");
}

#[test]
fn a_pod_shared_by_many_records_is_counted_once() {
    let mut ledger: Ledger<()> = Ledger::new(LedgerConfig::default(), 0);
    let big = pod("u1", "web", "ns")
        .annotation("big", &"x".repeat(100_000))
        .build();
    let append = |ledger: &mut Ledger<()>| {
        ledger.append(
            Time::from_unix_secs(1),
            None,
            None,
            Event::UpdatePod(UpdatePod::for_pod(UpdateType::Sync, big.clone())),
        );
    };
    append(&mut ledger);
    let one = ledger.stats().retained_bytes;
    assert!(one > 100_000, "the pod is counted: {one}");
    for _ in 1..1000 {
        append(&mut ledger);
    }
    let bytes = ledger.stats().retained_bytes;
    assert!(
        bytes < one + 1000 * 512,
        "and only once: {one} then {bytes}"
    );
    // a runtime-only pod (Arc<RunningPod>) too
    let running = Arc::new(RunningPod {
        uid: Uid::new("r"),
        name: "x".repeat(50_000),
        namespace: "ns".into(),
        containers: vec![],
        sandboxes: vec![],
    });
    let before = ledger.stats().retained_bytes;
    for _ in 0..100 {
        ledger.append(
            Time::from_unix_secs(1),
            None,
            None,
            Event::UpdatePod(UpdatePod::kill_running_pod(running.clone(), 1)),
        );
    }
    let added = ledger.stats().retained_bytes - before;
    // counted once, at the heap a runtime type holds per byte of its JSON (size.rs)
    assert!((50_000..3 * 50_000 + 100 * 512).contains(&added), "{added}");
}

#[test]
fn a_million_appends_stay_under_the_byte_cap() {
    let cfg = LedgerConfig {
        max_records: 2_000_000,
        max_bytes: 8 * 1024 * 1024,
        snapshot_every_records: 10_000,
        follower_buffer_records: 16,
    };
    let mut ledger: Ledger<()> = Ledger::new(cfg.clone(), 0);
    let mut peak = 0;
    for i in 0..1_000_000u64 {
        ledger.append(
            Time::from_unix_secs(i as i64),
            None,
            None,
            Event::PlegEvent(PlegEvent {
                uid: Uid::new("pod"),
                kind: PlegEventKind::ContainerStarted,
                container_id: Some(format!("{i:064x}")),
            }),
        );
        if ledger.wants_snapshot() {
            ledger.store_snapshot(Arc::new(()));
        }
        peak = peak.max(ledger.stats().retained_bytes);
    }
    assert!(peak <= cfg.max_bytes, "peak {peak} > cap {}", cfg.max_bytes);
    assert_eq!(ledger.last_seq(), 1_000_000);
}

#[test]
fn a_slow_follower_lags_and_never_blocks_the_append() {
    let mut ledger: Ledger<()> = Ledger::new(small_ledger(10_000, 1000), 0);
    let mut follower = ledger.subscribe();
    for i in 0..100 {
        ledger.append(
            Time::from_unix_secs(i),
            None,
            None,
            Event::SourceReady(SourceReady {
                source: PodSource::File,
            }),
        );
    }
    match follower.try_recv() {
        Err(tokio::sync::broadcast::error::TryRecvError::Lagged(n)) => assert_eq!(n, 84),
        other => panic!("expected a lag report, got {other:?}"),
    }
    // after the lag report it resumes at the oldest record still buffered
    assert_eq!(follower.try_recv().unwrap().seq, 85);
}

#[test]
fn time_never_goes_backwards_in_the_ledger() {
    let mut ledger: Ledger<()> = Ledger::new(LedgerConfig::default(), 0);
    let e = || {
        Event::SourceReady(SourceReady {
            source: PodSource::File,
        })
    };
    let a = ledger.append(Time::from_unix_secs(100), None, None, e());
    let b = ledger.append(Time::from_unix_secs(50), None, None, e());
    assert_eq!(b.at, a.at, "a clock stepped back is clamped");
    assert_eq!(b.seq, a.seq + 1);
}

#[test]
fn retention_settings_that_cannot_work_are_rejected_by_name() {
    let e = small_ledger(100, 80).validate().unwrap_err().to_string();
    assert!(e.contains("snapshot_every_records = 80"), "{e}");
    let e = LedgerConfig {
        max_bytes: 10,
        ..LedgerConfig::default()
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("max_bytes = 10"), "{e}");
    LedgerConfig::default().validate().unwrap();
}
