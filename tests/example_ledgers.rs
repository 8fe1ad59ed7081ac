//! The example ledgers under examples/ledgers/ are produced by the simulator, never written
//! by hand, and `ledgerlet replay` prints them reproducibly.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use ledgerlet::postmortem::replay::{render_table, replay};
use ledgerlet::sim::scenarios::static_pods_example;

const EXAMPLE: &str = "examples/ledgers/static-pods.ndjson";

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn ledgerlet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args(args)
        .output()
        .expect("run ledgerlet")
}

#[test]
fn the_example_ledger_is_reproduced_by_its_simulation() {
    let sim = static_pods_example();
    let produced = sim.export_ndjson();
    if std::env::var_os("UPDATE_EXAMPLES").is_some() {
        std::fs::write(repo(EXAMPLE), &produced).unwrap();
    }
    let committed = std::fs::read_to_string(repo(EXAMPLE)).unwrap_or_default();
    assert!(
        committed == produced,
        "{EXAMPLE} differs from what sim::scenarios::static_pods_example produces; \
         regenerate it with `UPDATE_EXAMPLES=1 cargo test --test example_ledgers` and review the diff"
    );
    // and replaying it gives the simulated node's state
    let replayed = replay(committed.as_bytes(), None).unwrap();
    assert_eq!(&replayed.node, sim.engine().node());
}

#[test]
fn replay_prints_the_state_and_two_runs_print_identical_bytes() {
    let a = ledgerlet(&["replay", repo(EXAMPLE).to_str().unwrap()]);
    let b = ledgerlet(&["replay", repo(EXAMPLE).to_str().unwrap()]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let text = String::from_utf8(a.stdout).unwrap();
    assert!(text.starts_with("ledger: "), "{text}");
    assert!(text.contains("UID"), "a header row");
    // the job completed, the web pod was removed, the flaky pod runs after its failures
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"))
            .to_string()
    };
    assert!(line("default/job-node-a").contains("terminated"), "{text}");
    assert!(line("default/job-node-a").contains("finished"), "{text}");
    assert!(line("default/flaky-node-a").contains(" sync "), "{text}");
    assert!(
        !text.contains("default/web-node-a"),
        "the removed web pod was purged by housekeeping:\n{text}"
    );
    // the library renders the same bytes
    let file = std::fs::read_to_string(repo(EXAMPLE)).unwrap();
    let replayed = replay(file.as_bytes(), None).unwrap();
    assert_eq!(render_table(&replayed, None), text);
}

#[test]
fn replay_filters_by_pod_stops_at_a_seq_and_speaks_json() {
    let path = repo(EXAMPLE);
    let p = path.to_str().unwrap();
    let out = ledgerlet(&[
        "replay",
        p,
        "--pod",
        "default/job-node-a",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let workers = doc["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0]["pod"], "default/job-node-a");
    assert_eq!(workers[0]["state"], "terminated");
    let by_uid = ledgerlet(&[
        "replay",
        p,
        "--pod",
        "5a1e0c1d-0000-4000-8000-000000000002",
        "--format",
        "json",
    ]);
    assert_eq!(
        by_uid.stdout, out.stdout,
        "UID and NAMESPACE/NAME select the same pod"
    );

    // just after the web pod's removal was turned into a kill, it is terminating
    let file = std::fs::read_to_string(&path).unwrap();
    let removed_seq = file
        .lines()
        .find(|l| l.contains("\"kind\":\"PodRemoved\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v["seq"].as_u64())
        .expect("the example removes a pod");
    let until = (removed_seq + 1).to_string();
    let out = ledgerlet(&[
        "replay",
        p,
        "--until",
        &until,
        "--pod",
        "default/web-node-a",
        "--format",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["workers"][0]["state"], "terminating", "{doc}");
    assert_eq!(doc["workers"][0]["deleted"], false);

    let early = ledgerlet(&["replay", p, "--until", "10", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&early.stdout).unwrap();
    assert_eq!(doc["last_seq"], 10);
    assert_eq!(doc["records_folded"], 10);
}

#[test]
fn a_malformed_line_exits_with_status_2_and_names_the_line() {
    let text = std::fs::read_to_string(repo(EXAMPLE)).unwrap();
    let mut lines: Vec<&str> = text.lines().take(5).collect();
    lines[2] = "{\"seq\":3,\"at\":\"2026-01-01T00:00:00Z\",\"kind\":\"UpdatePod\",\"event\":{\"update_type\":\"explode\"}}";
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{}", lines.join("\n")).unwrap();
    let out = ledgerlet(&["replay", f.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3:"), "{err}");
    assert!(err.contains("bad UpdatePod event"), "{err}");
    assert!(out.stdout.is_empty());
    assert!(!err.contains("panicked"), "never a panic");

    // a file that does not exist, and a ledger with a gap, are bad input too
    let missing = ledgerlet(&["replay", "/nonexistent/ledger.ndjson"]);
    assert_eq!(missing.status.code(), Some(2));
    let gap: Vec<&str> = text.lines().skip(1).take(3).collect();
    let mut g = tempfile::NamedTempFile::new().unwrap();
    writeln!(g, "{}", gap.join("\n")).unwrap();
    let out = ledgerlet(&["replay", g.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 1: the ledger starts at seq 2 without a Snapshot line"),
        "{err}"
    );
}
