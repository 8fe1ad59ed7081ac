//! Postmortems, the agent side: export over the ledger stream, and the flight
//! recorder on SIGQUIT, on a panic and on a fatal error. Everything runs the real binary
//! with the embedded runtime; files are read back with the library's replay.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};

use ledgerlet::core::Node;
use ledgerlet::ledger::export::open_file;
use ledgerlet::ledger::{Line, Reader};
use ledgerlet::postmortem::replay::{replay, Until};
use support::agent::{cli, Agent};

fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: main\n      image: busybox\n      command: [sleep, \"3600\"]\n"
    )
}

fn running(agent: &Agent, name: &str) -> bool {
    agent.pod(name).is_some_and(|p| {
        p.status
            .and_then(|s| s.container_statuses)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            })
    })
}

fn lines(path: &Path) -> Vec<Line<Node>> {
    Reader::<_, Node>::new(open_file(path).expect("open"))
        .map(|l| l.expect("a valid line"))
        .collect()
}

fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path)
        .unwrap()
        .read_exact(&mut magic)
        .is_ok()
        && magic == [0x1f, 0x8b]
}

fn recordings(state: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(state.join("postmortem"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn export_writes_a_snapshot_then_records_and_replays_to_the_live_state() {
    // a tiny retention so records are evicted and the export needs its snapshot
    let agent = Agent::start(&["--ledger-max-records", "40"]);
    agent.write_manifest("web.yaml", &sleeper("web"));
    agent.wait_for("web running", 60, |a| running(a, "web").then_some(()));
    agent.wait_for("records evicted", 60, |a| {
        (a.ledger().first().map(|r| r.seq).unwrap_or(1) > 1).then_some(())
    });
    let state = agent.state();
    let out = agent.root.path().join("export.ndjson.gz");
    let root = agent.state_dir();
    let o = cli(&[
        "ledger",
        "export",
        "--root-dir",
        root.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(is_gzip(&out), "a .gz export is gzip");
    let all = lines(&out);
    let Line::Snapshot(snap) = &all[0] else {
        panic!("the first line of an export is a Snapshot")
    };
    assert!(snap.seq >= 1);
    let Line::Record(first) = &all[1] else {
        panic!("records follow the snapshot")
    };
    assert_eq!(first.seq, snap.seq + 1, "records continue the snapshot");
    // the export replays to exactly the live state at the seq /debug/state reported
    let replayed = replay(open_file(&out).unwrap(), Some(Until::Seq(state.last_seq))).unwrap();
    assert_eq!(replayed.base_seq, snap.seq);
    assert_eq!(replayed.node, state, "the export replays to the live node");

    // --since: starts at the newest snapshot at or before it, and still replays
    let since = state.last_seq - 3;
    let plain = agent.root.path().join("since.ndjson");
    let o = cli(&[
        "ledger",
        "export",
        "--root-dir",
        root.to_str().unwrap(),
        "--out",
        plain.to_str().unwrap(),
        "--since",
        &since.to_string(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!is_gzip(&plain), "a plain name is plain NDJSON");
    let part = lines(&plain);
    let Line::Snapshot(s2) = &part[0] else {
        panic!("a --since export starts with a snapshot")
    };
    assert!(
        s2.seq < since && s2.seq >= snap.seq,
        "snapshot {} for since {since}",
        s2.seq
    );
    let replayed = replay(open_file(&plain).unwrap(), Some(Until::Seq(state.last_seq))).unwrap();
    assert_eq!(replayed.node, state);
}

#[test]
fn export_from_an_agent_that_is_not_running_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let o = cli(&[
        "ledger",
        "export",
        "--root-dir",
        dir.path().to_str().unwrap(),
        "--out",
        dir.path().join("x.ndjson").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ledger.sock") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn sigquit_writes_the_flight_recording_then_exits() {
    let mut agent = Agent::start(&[]);
    agent.write_manifest("web.yaml", &sleeper("web"));
    agent.wait_for("web running", 60, |a| running(a, "web").then_some(()));
    let state = agent.state();
    let status = agent.signal_and_wait(libc::SIGQUIT);
    assert_eq!(status.code(), Some(2), "{}", agent.log());
    let files = recordings(&agent.state_dir());
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("ledger-") && name.ends_with(".ndjson.gz"),
        "{name}"
    );
    assert!(is_gzip(&files[0]));
    let replayed = replay(open_file(&files[0]).unwrap(), None).unwrap();
    assert!(replayed.node.last_seq >= state.last_seq);
    let replayed = replay(
        open_file(&files[0]).unwrap(),
        Some(Until::Seq(state.last_seq)),
    )
    .unwrap();
    assert_eq!(
        replayed.node, state,
        "the recording replays to the live node"
    );
    assert!(agent.log().contains("flight recorder"), "{}", agent.log());
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs the fault-injection feature: cargo test --features fault-injection"
)]
fn a_panic_in_the_fold_path_writes_the_flight_recording_before_the_agent_exits() {
    // the fault fires while the engine lock is held, as a panic inside a fold would
    let mut agent = Agent::start_with_env(
        &[],
        &[("LEDGERLET_FAULT_PANIC_ON_KIND", "ManifestRejected")],
    );
    agent.write_manifest("web.yaml", &sleeper("web"));
    agent.wait_for("web running", 60, |a| running(a, "web").then_some(()));
    let before = agent.state();
    agent.write_manifest("bad.yaml", "kind: Pod\nmetadata: [not, a, map]\n");
    let status = agent.wait_exit(60);
    assert_eq!(status.code(), Some(101), "{}", agent.log());
    let files = recordings(&agent.state_dir());
    assert_eq!(files.len(), 1, "{files:?}\n{}", agent.log());
    let all = lines(&files[0]);
    assert!(all
        .iter()
        .any(|l| matches!(l, Line::Record(r) if r.event.kind() == "PodAdded")));
    assert!(
        !all.iter()
            .any(|l| matches!(l, Line::Record(r) if r.event.kind() == "ManifestRejected")),
        "the record being submitted when the agent panicked was never appended"
    );
    let replayed = replay(
        open_file(&files[0]).unwrap(),
        Some(Until::Seq(before.last_seq)),
    )
    .unwrap();
    assert_eq!(replayed.node, before);
    assert!(agent.log().contains("fault injection"), "{}", agent.log());
}

#[test]
fn a_fatal_error_after_start_up_writes_the_flight_recording() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args([
            "run",
            "--read-only-port",
            "0",
            "--port",
            "0",
            "--node-name",
            "n1",
        ])
        .arg("--root-dir")
        .arg(&state)
        .arg("--pod-logs-dir")
        .arg(dir.path().join("logs"))
        // not loopback: the ledger stream has no authentication, so this is fatal
        .args(["--ledger-grpc-address", "192.0.2.1:9999"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("must be a loopback address"), "{err}");
    let files = recordings(&state);
    assert_eq!(files.len(), 1, "{err}");
    let all = lines(&files[0]);
    assert!(matches!(&all[0], Line::Record(r) if r.event.kind() == "ConfigApplied"));
}
