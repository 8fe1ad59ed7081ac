//! `node_110`: the agent's CPU on a full node with every trace sampled. Floors: at most 5 % of
//! one core, and no span dropped.
//!
//! It runs the real `ledgerlet run` binary on the embedded runtime with 110 static pods (the
//! kubelet's default `--max-pods`), each with a liveness and a readiness exec probe (every
//! 10 s, the kubelet's default period) and one in eleven of them crash-looping (its container
//! exits after 30 s; the kubelet's default back-off), every trace sampled
//! (`--tracing-sampling-rate-per-million 1000000`) and exported over OTLP/gRPC to a real
//! receiver (PyPI `rotel`, discarding what it receives). Once every pod has been seen
//! running it reads the agent's CPU time (utime + stime of `/proc/<pid>/stat`) at the start
//! and the end of five minutes, and `ledgerlet_trace_spans_dropped_total` from `/metrics`
//! at the end. It exits 1 when a floor is missed. Under `cargo test` (no `--bench` argument)
//! it runs a short smoke version (five pods, about 20 s) that checks the figures are made,
//! not their values.

#[path = "../tests/support/agent.rs"]
mod agent;
#[path = "../tests/support/peers.rs"]
mod peers;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use agent::Agent;

/// Pods on the node in a `--bench` run.
const PODS: usize = 110;
/// One pod in this many crash-loops.
const CRASHING_EVERY: usize = 11;
/// How long CPU is measured in a `--bench` run.
const MEASURE: Duration = Duration::from_secs(5 * 60);
/// The CPU floor: at most this share of one core.
const MAX_CPU: f64 = 0.05;

/// rotel receiving OTLP/gRPC and discarding it (no debug log: it would cost the machine
/// more than the agent).
struct Receiver(Child);

impl Receiver {
    fn start(bin: &Path, dir: &Path) -> (Receiver, u16) {
        let port = peers::free_port();
        let http_port = peers::free_port();
        let log = std::fs::File::create(dir.join("rotel.log")).unwrap();
        let child = Command::new(bin)
            .arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{port}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http_port}")])
            .args(["--exporter", "blackhole"])
            .args(["--pid-file", dir.join("rotel.pid").to_str().unwrap()])
            .args(["--log-file", dir.join("rotel-daemon.log").to_str().unwrap()])
            .env("NO_COLOR", "1")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start rotel-agent");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "rotel did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        (Receiver(child), port)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn manifest(i: usize) -> String {
    let command = if i % CRASHING_EVERY == CRASHING_EVERY - 1 {
        "sleep 30; exit 1"
    } else {
        "sleep 3600"
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\nspec:\n  restartPolicy: Always\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: main\n      image: busybox\n      command: [sh, -c, \"{command}\"]\n      livenessProbe:\n        exec: {{command: [\"true\"]}}\n        periodSeconds: 10\n      readinessProbe:\n        exec: {{command: [\"true\"]}}\n        periodSeconds: 10\n"
    )
}

/// The process's CPU time so far (user + system), from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the agent's stat");
    // fields after the command name (which may hold spaces) start at field 3
    let rest = stat.rsplit_once(')').expect("a stat line").1;
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().expect("utime and stime"))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos((fields[0] + fields[1]) * 1_000_000_000 / ticks)
}

/// The sum of every series of `family` in the exposition `text`.
fn total(text: &str, family: &str) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(family))
        .filter(|rest| rest.starts_with([' ', '{']))
        .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Pods whose status says Running.
fn running(agent: &Agent) -> usize {
    agent
        .pods()
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph == "Running")
        })
        .count()
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    // the kubelet's manifest check period in a --bench run; the smoke run's pods come up at once
    let (pods, measure, manifest_check_ms) = if full {
        (PODS, MEASURE, "20000")
    } else {
        (5, Duration::from_secs(10), "500")
    };
    let Some(rotel) = peers::rotel() else {
        if full {
            eprintln!("node_110: rotel is needed (pip install rotel)");
            std::process::exit(1);
        }
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (receiver, port) = Receiver::start(&rotel, dir.path());
    let endpoint = format!("127.0.0.1:{port}");
    let quiet = "warn,ledgerlet::daemon=info";
    let agent = Agent::start_with_env(
        &[
            "--tracing-endpoint",
            &endpoint,
            "--tracing-sampling-rate-per-million",
            "1000000",
            // the kubelet's defaults, not the tests' short periods
            "--housekeeping-period-ms",
            "2000",
            "--manifest-check-period-ms",
            manifest_check_ms,
            "--crash-loop-backoff-initial-ms",
            "10000",
            "--crash-loop-backoff-max-ms",
            "300000",
            "--log-level",
            quiet,
        ],
        &[("RUST_LOG", quiet)],
    );
    for i in 0..pods {
        agent.write_manifest(&format!("p{i}.yaml"), &manifest(i));
    }
    let started = Instant::now();
    agent.wait_for("every pod running", 300, |a| {
        (running(a) == pods).then_some(())
    });
    let startup = started.elapsed();
    // the start-up burst is over: the steady state is measured
    let pid = agent.pid();
    let (cpu0, wall0) = (cpu_time(pid), Instant::now());
    let before = agent.get("/metrics").1;
    let records0 = total(&before, "ledgerlet_ledger_records_total");
    let dropped0 = total(&before, "ledgerlet_trace_spans_dropped_total");
    std::thread::sleep(measure);
    let (cpu1, wall1) = (cpu_time(pid), Instant::now());
    let metrics = agent.get("/metrics").1;
    let probes = agent.get("/metrics/probes").1;
    let cpu = (cpu1 - cpu0).as_secs_f64() / (wall1 - wall0).as_secs_f64();
    let records = total(&metrics, "ledgerlet_ledger_records_total") - records0;
    let dropped = total(&metrics, "ledgerlet_trace_spans_dropped_total");
    let exported = total(&metrics, "ledgerlet_trace_spans_exported_total");
    let probe_runs = total(&probes, "prober_probe_total");
    let restarts = agent
        .pods()
        .iter()
        .filter_map(|p| p.status.as_ref()?.container_statuses.as_ref())
        .flatten()
        .map(|c| c.restart_count)
        .sum::<i32>();
    let seconds = (wall1 - wall0).as_secs_f64();
    println!(
        "node_110: {pods} pods (every trace sampled, OTLP to rotel), all running after {:.1} s; over {seconds:.0} s: agent CPU {:.2} % of a core (floor <= {:.0} %: {}), {:.1} records/s, spans exported {exported:.0}, dropped {dropped:.0} since start, {:.0} of them while measuring (floor 0: {}), probe runs {probe_runs:.0}, container restarts {restarts}",
        startup.as_secs_f64(),
        cpu * 100.0,
        MAX_CPU * 100.0,
        if cpu <= MAX_CPU { "met" } else { "MISSED" },
        records / seconds,
        dropped - dropped0,
        if dropped == 0.0 { "met" } else { "MISSED" },
    );
    // the figures are made (the smoke run checks only that)
    assert!(cpu.is_finite() && cpu > 0.0, "CPU {cpu}");
    assert!(records > 0.0, "no record folded while measuring");
    assert!(
        metrics.contains("ledgerlet_trace_spans_dropped_total"),
        "no dropped-span count in /metrics"
    );
    assert!(exported > 0.0, "no span reached the receiver");
    if full && (cpu > MAX_CPU || dropped > 0.0) {
        // exit runs no destructor: stop the agent and the receiver first
        drop(agent);
        drop(receiver);
        eprintln!(
            "node_110: a floor was missed: CPU {:.2} % (<= {:.0} %), {dropped} spans dropped (0)",
            cpu * 100.0,
            MAX_CPU * 100.0
        );
        std::process::exit(1);
    }
}
