//! `status_latency`: from a container's exit to its terminated status being visible in
//! `/pods`, with the evented PLEG (target: median ≤ 50 ms). The same path through the API
//! server, against the real kubelet on the same machine, is `compare_kubelet`'s exit row.
//!
//! It runs the real `ledgerlet run` binary on the embedded runtime with pods whose single
//! container exits after a staggered sleep, polls `/pods` every millisecond, and compares the
//! moment the container shows as terminated with the exit time the runtime recorded (read
//! from `/debug/ledger`, nanoseconds). Under `cargo test` (no `--bench` argument) it runs a
//! short smoke version so the harness itself stays tested.

#[path = "../tests/support/agent.rs"]
mod agent;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ledgerlet::core::record::{Event, Time};
use ledgerlet::core::runtime_status::ContainerState;
use ledgerlet::core::Node;
use ledgerlet::ledger::{Line, Reader};

/// `GET path` from the agent's HTTP server → the body.
fn get(port: u16, path: &str) -> String {
    agent::http_get(port, path).1
}

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let pods = if full { 30 } else { 3 };
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    for i in 0..pods {
        // staggered exits, 200 ms apart, after every pod has had time to start
        let sleep_ms = 3000 + i * 200;
        std::fs::write(
            manifests.join(format!("p{i}.yaml")),
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\nspec:\n  restartPolicy: Never\n  containers:\n    - name: main\n      image: busybox\n      command: [\"sh\", \"-c\", \"sleep {}\"]\n",
                sleep_ms as f64 / 1000.0
            ),
        )
        .unwrap();
    }
    let log = std::fs::File::create(dir.path().join("agent.log")).unwrap();
    // a free port for the read-only port (0 would turn it off)
    let read_only_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
        .to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_ledgerlet"))
        .args([
            "run",
            "--node-name",
            "bench",
            "--read-only-port",
            &read_only_port,
            "--port",
            "0",
        ])
        .arg("--root-dir")
        .arg(dir.path().join("state"))
        .arg("--pod-logs-dir")
        .arg(dir.path().join("logs"))
        .arg("--pod-manifest-path")
        .arg(&manifests)
        .args([
            "--manifest-check-period-ms",
            "100",
            "--log-level",
            "warn,ledgerlet::daemon=info",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start ledgerlet");
    let agent = Agent(child);
    let port = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
            if let Some(i) = log.find("address=127.0.0.1:") {
                let p: String = log[i + 18..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                break p.parse::<u16>().unwrap();
            }
            assert!(Instant::now() < deadline, "agent did not start: {log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // poll /pods until every container is terminated, noting when each first shows so
    let mut visible: BTreeMap<String, Time> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while visible.len() < pods as usize {
        assert!(
            Instant::now() < deadline,
            "not every pod finished: {visible:?}"
        );
        let body = get(port, "/pods");
        let now = Time::from_system();
        let list: serde_json::Value = serde_json::from_str(&body).unwrap();
        for p in list["items"].as_array().into_iter().flatten() {
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
            let terminated = p["status"]["containerStatuses"][0]["state"]["terminated"].is_object();
            if terminated {
                visible.entry(name).or_insert(now);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // the runtime's exit times from the ledger
    let text = get(port, "/debug/ledger");
    let mut exited: BTreeMap<String, Time> = BTreeMap::new();
    for line in Reader::<_, Node>::new(text.as_bytes()) {
        let Ok(Line::Record(r)) = line else { continue };
        if let Event::RuntimeStatusObserved(o) = &r.event {
            if let Some(s) = &o.status {
                for c in &s.containers {
                    if c.state == ContainerState::Exited {
                        if let Some(f) = c.finished_at {
                            exited.entry(s.name.clone()).or_insert(f);
                        }
                    }
                }
            }
        }
    }
    let mut latencies: Vec<f64> = visible
        .iter()
        .filter_map(|(name, seen)| {
            exited
                .get(name)
                .map(|e| seen.since(*e).as_secs_f64() * 1000.0)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    assert_eq!(latencies.len(), pods as usize, "an exit time per pod");
    let median = latencies[latencies.len() / 2];
    let p90 = latencies[(latencies.len() * 9 / 10).min(latencies.len() - 1)];
    println!(
        "status_latency: container exit -> terminated in /pods over {} pods (evented PLEG): median {:.1} ms, p90 {:.1} ms, max {:.1} ms (target median <= 50 ms: {})",
        pods,
        median,
        p90,
        latencies.last().unwrap(),
        if median <= 50.0 { "met" } else { "MISSED" }
    );
    if full && median > 50.0 {
        drop(agent);
        eprintln!("status_latency: median {median:.1} ms is over the 50 ms target");
        std::process::exit(1);
    }
}
