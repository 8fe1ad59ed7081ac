//! A manifest directory holding hostile files beside a good pod: each bad file is rejected
//! in the first scan with its reason, naming the file, and the good pod starts at once. The
//! deeply nested file is the one that used to stall the source for about 50 s.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use ledgerlet::core::record::Event;
use ledgerlet::sources::file::{Limits, MAX_NESTING_DEPTH};
use support::agent::Agent;

const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: good\nspec:\n  containers:\n    - name: main\n      image: busybox\n      command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 1; done\"]\n";

/// The hostile files, each with the words its rejection must contain.
fn hostile_files(dir: &Path) -> Vec<(&'static str, String)> {
    let write = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
    // 100,000 nested sequences: 200 KB
    let deep = format!(
        "apiVersion: v1\nkind: Pod\nspec: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    write("deep.yaml", deep.as_bytes());
    write(
        "deep.json",
        format!(
            "{{\"spec\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        )
        .as_bytes(),
    );
    // nine levels of aliases, each repeating the last nine times (9^9 strings once
    // expanded), in a field the decoder reads whole (managedFields' free-form fieldsV1)
    let mut bomb = String::from(
        "apiVersion: v1\nkind: Pod\nx:\n  a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n",
    );
    for (i, c) in ('b'..='i').enumerate() {
        let prev = (b'a' + i as u8) as char;
        bomb.push_str(&format!(
            "  {c}: &{c} [{}]\n",
            vec![format!("*{prev}"); 9].join(",")
        ));
    }
    bomb.push_str("metadata:\n  name: bomb\n  managedFields: [{fieldsV1: *i}]\n");
    write("bomb.yaml", bomb.as_bytes());
    // bytes of no encoding, from a fixed seed
    let mut x: u32 = 0x1234_5678;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect();
    write("random.yaml", &random);
    write(
        "longname.yaml",
        GOOD.replace("name: good", &format!("name: {}", "a".repeat(5_000)))
            .as_bytes(),
    );
    let limit = Limits::default().max_manifest_bytes as usize;
    write("huge.yaml", &vec![b'#'; limit + 1]);
    vec![
        (
            "deep.yaml",
            format!("nesting is deeper than {MAX_NESTING_DEPTH} levels"),
        ),
        (
            "deep.json",
            format!("nesting is deeper than {MAX_NESTING_DEPTH} levels"),
        ),
        ("bomb.yaml", "repetition limit exceeded".into()),
        ("random.yaml", "cannot parse YAML".into()),
        ("longname.yaml", "metadata.name".into()),
        ("huge.yaml", format!("more than the limit of {limit} bytes")),
    ]
}

#[test]
fn hostile_manifests_are_each_rejected_with_their_reason_and_the_good_pod_starts_at_once() {
    let root = tempfile::tempdir().unwrap();
    let manifests = root.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(manifests.join("good.yaml"), GOOD).unwrap();
    let want = hostile_files(&manifests);
    let started = Instant::now();
    let agent = Agent::start_in(root, &[], &[]);
    agent.wait_for("the good pod Running", 30, |a| {
        let p = a.pod("good")?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    });
    eprintln!(
        "good pod Running {:?} after the agent was started",
        started.elapsed()
    );
    // every bad file was rejected in the first scan: before the file source was ready
    let records = agent.ledger();
    let ready = records
        .iter()
        .position(|r| matches!(&r.event, Event::SourceReady(_)))
        .expect("the file source is ready");
    let rejected: Vec<(usize, String)> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match &r.event {
            Event::ManifestRejected(m) => Some((i, format!("{}: {}", m.path, m.error))),
            _ => None,
        })
        .collect();
    for (file, words) in &want {
        let hit = rejected
            .iter()
            .find(|(_, m)| m.contains(&format!("/{file}: ")))
            .unwrap_or_else(|| panic!("{file} was not rejected: {rejected:?}"));
        assert!(
            hit.1.contains(words.as_str()),
            "{file}: want {words:?} in {:?}",
            hit.1
        );
        assert!(hit.0 < ready, "{file} was rejected after the first scan");
    }
    assert!(
        records.iter().take(ready).any(|r| matches!(&r.event, Event::PodAdded(c) if c.pod.metadata.name.as_deref().is_some_and(|n| n.starts_with("good-")))),
        "the good pod was not added in the first scan"
    );
}

#[test]
fn a_manifest_rewritten_while_it_is_read_never_stops_the_source() {
    let agent = Agent::start(&["--manifest-check-period-ms", "50"]);
    agent.write_manifest("good.yaml", GOOD);
    let path = agent.manifests.join("churn.yaml");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let valid = GOOD.replace("name: good", "name: churn");
        std::thread::spawn(move || {
            // rewritten in place (not renamed): a scan may read any prefix of either text
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = if n % 2 == 0 {
                    valid.clone()
                } else {
                    format!("spec: [{}", "[".repeat(1000))
                };
                std::fs::write(&path, body).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
            n
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 100, "only {writes} rewrites");
    // the source still works: a new file is picked up, and the good pod runs
    agent.write_manifest("after.yaml", &GOOD.replace("name: good", "name: after"));
    agent.wait_for("the good pods Running", 30, |a| {
        let running = |name: &str| {
            a.pod(name)
                .and_then(|p| p.status?.phase)
                .is_some_and(|ph| ph == "Running")
        };
        (running("good") && running("after")).then_some(())
    });
    let rejected: Vec<String> = agent
        .ledger()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::ManifestRejected(m) => Some(m.path),
            _ => None,
        })
        .collect();
    assert!(
        rejected.iter().all(|p| p.ends_with("/churn.yaml")),
        "only the rewritten file may be rejected: {rejected:?}"
    );
}
