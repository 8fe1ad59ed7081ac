//! Streaming: `ledgerlet.v1.Ledger/Watch` over a real unix socket (and
//! loopback TCP), `ledgerlet ledger tail` with its filters and `--follow`, and
//! `/debug/ledger?follow=true`. A follower that stops reading never slows the fold; when it
//! falls behind retention it is told which records it missed and where it resumes.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use ledgerlet::core::record::event::ManifestRejected;
use ledgerlet::core::record::{Event, Time};
use ledgerlet::engine::Engine;
use ledgerlet::ledger::LedgerConfig;
use ledgerlet::stream::client::{self, Target};
use ledgerlet::stream::pb::WatchRequest;
use ledgerlet::stream::server::{bind_unix, serve, LedgerService};
use support::agent::{cli, Agent};

fn noise(i: u64) -> Event {
    Event::ManifestRejected(ManifestRejected {
        path: format!("/m/{i}.yaml"),
        error: "bad".into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_stops_reading_never_slows_the_fold_and_is_told_where_to_resume() {
    let engine = Arc::new(Mutex::new(Engine::new(LedgerConfig {
        max_records: 1_000,
        max_bytes: 1 << 30,
        snapshot_every_records: 100,
        follower_buffer_records: 16,
    })));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("ledger.sock");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let unix = bind_unix(&sock).await.unwrap();
    let server = tokio::spawn(serve(
        LedgerService::new(engine.clone(), stop_rx.clone()),
        unix,
        None,
        stop_rx,
    ));
    let submit = |n: u64| {
        let mut e = engine.lock().unwrap();
        for i in 0..n {
            e.submit(Time::from_unix_secs(i as i64), None, None, noise(i));
        }
    };
    submit(10);
    let target = Target::Unix(sock.clone());
    let mut stream = client::watch(
        &target,
        WatchRequest {
            follow: true,
            ..WatchRequest::default()
        },
    )
    .await
    .unwrap();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.records.len(), 10);
    assert!(first.lagged.is_none());
    // the follower reads nothing while the fold appends 100,000 records: the appends
    // complete (nothing waits for the follower) and retention stays at 1,000
    submit(100_000);
    let (first_retained, last) = {
        let e = engine.lock().unwrap();
        (e.ledger().first_seq().unwrap(), e.ledger().last_seq())
    };
    assert_eq!(last, 100_010);
    assert!(first_retained > 99_000);
    // reading again: what was already in flight, then the notice, then the retained rest
    let mut next = 11;
    let lagged = loop {
        let m = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("a message")
            .unwrap()
            .expect("the stream goes on");
        if let Some(l) = m.lagged {
            assert!(m.records.is_empty());
            break l;
        }
        for r in m.records {
            assert_eq!(r.seq, next);
            next += 1;
        }
    };
    assert_eq!(lagged.missed_from, next);
    assert!(lagged.missed_to + 1 >= first_retained && lagged.missed_to < last);
    assert_eq!(lagged.resume_from, lagged.missed_to + 1);
    assert!(lagged.message.contains("evicted"), "{}", lagged.message);
    let mut next = lagged.resume_from;
    while next <= last {
        let m = stream.message().await.unwrap().unwrap();
        for r in m.records {
            assert_eq!(r.seq, next, "dense after the notice");
            next += 1;
        }
    }
    // a kind that does not exist is refused, naming the known ones
    let Err(err) = client::watch(
        &target,
        WatchRequest {
            kinds: vec!["SyncFinishd".into()],
            ..WatchRequest::default()
        },
    )
    .await
    else {
        panic!("an unknown kind is refused")
    };
    assert!(err.to_string().contains("SyncFinished"), "{err}");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
}

fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: main\n      image: busybox\n      command: [sleep, \"3600\"]\n"
    )
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn ledger_tail_filters_by_pod_and_kind_over_the_socket_and_tcp_and_follows() {
    let agent = Agent::start(&["--ledger-grpc-address", "127.0.0.1:0"]);
    agent.write_manifest("web.yaml", &sleeper("web"));
    agent.write_manifest("api.yaml", &sleeper("api"));
    let web_uid = agent.wait_for("web running", 60, |a| {
        let p = a.pod("web")?;
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .running
            .as_ref()?;
        p.metadata.uid.clone()
    });
    let root = agent.state_dir();
    let root = root.to_str().unwrap();

    let o = cli(&[
        "ledger",
        "tail",
        "--root-dir",
        root,
        "--pod",
        "default/web-test-node",
        "--kind",
        "SyncFinished",
        "--kind",
        "RuntimeActionFinished",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = json_lines(&o.stdout);
    assert!(lines.iter().any(|l| l["kind"] == "SyncFinished"));
    assert!(lines.iter().any(|l| l["kind"] == "RuntimeActionFinished"));
    for l in &lines {
        assert!(
            l["kind"] == "SyncFinished" || l["kind"] == "RuntimeActionFinished",
            "{l}"
        );
        assert_eq!(l["event"]["uid"], web_uid.as_str(), "{l}");
    }
    // the lines are the ledger's own lines, byte for byte
    let debug = agent.ledger_text();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        assert!(debug.contains(l), "{l}");
    }

    // the same over loopback TCP
    let log = agent.log();
    let i = log
        .find("tcp=127.0.0.1:")
        .expect("the TCP address in the log");
    let port: String = log[i + 14..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let o = cli(&[
        "ledger",
        "tail",
        "--server",
        &format!("127.0.0.1:{port}"),
        "--kind",
        "PodAdded",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json_lines(&o.stdout).len(), 2, "two pods were added");

    // a typo in a kind is an error that names the known kinds
    let o = cli(&["ledger", "tail", "--root-dir", root, "--kind", "PodAddd"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PodAdded"));

    // --follow prints records appended after it started
    let mut tail = Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args([
            "ledger",
            "tail",
            "--root-dir",
            root,
            "--follow",
            "--kind",
            "PodAdded",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            if tx.send(l.unwrap()).is_err() {
                return;
            }
        }
    });
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the existing PodAdded records");
    }
    agent.write_manifest("late.yaml", &sleeper("late"));
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a followed record");
    assert!(line.contains("late-test-node"), "{line}");
    let _ = tail.kill();
    let _ = tail.wait();
}

#[test]
fn debug_ledger_follow_streams_new_records_as_ndjson() {
    let agent = Agent::start(&[]);
    let mut s = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
    write!(
        s,
        "GET /debug/ledger?follow=true&kind=PodAdded HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    agent.write_manifest("web.yaml", &sleeper("web"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while !got.contains("web-test-node") {
        assert!(Instant::now() < deadline, "nothing streamed:\n{got}");
        if let Ok(n) = s.read(&mut buf) {
            got.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    assert!(got.contains("application/x-ndjson"), "{got}");
    assert!(got.contains("\"kind\":\"PodAdded\""), "{got}");
}
