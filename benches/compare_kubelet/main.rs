//! `compare_kubelet`: ledgerlet and the real kubelet of the pinned release side by side, in one
//! cluster, on the same machine, each node on its own containerd of the same package and
//! configuration (`scripts/cluster.sh up DIR --runtime containerd --kubelet-node NAME`), the
//! same workloads run on both alternately in one run:
//!
//! - startup: N pods created at once → each seen Running by a watch;
//! - exit: a Running container exits (it was blocked reading a FIFO the bench writes) → its
//!   terminated state seen by a watch;
//! - deletion: a pod whose container exits on TERM deleted with grace 1 s → the watch sees
//!   it gone;
//! - burst: 100 pods created at once → the last one seen Running;
//! - steady state: 110 pods on each node, both agents' CPU (utime + stime) and RSS, and
//!   their containerds' CPU, from /proc, over the same minutes;
//! - the differential status check (`tests/support/differential.rs`), every spec.
//!
//! `cargo bench --bench compare_kubelet -- --bench --cluster DIR --out FILE.json [--pods N]
//! [--rounds R] [--steady-s S]` (what `scripts/compare-kubelet.sh` runs) writes every sample,
//! both agents' figures and the ratios kubelet / ledgerlet to FILE.json, prints the table and,
//! last, a one-line summary; it exits 1 when ledgerlet is slower than the kubelet at p50 or
//! p99 of a latency row, slower in the burst, uses more RSS or CPU, or a status differs in a
//! way docs/kubelet-differences.md does not explain. Under `cargo test` (no `--bench`) it
//! runs a small version on a cluster of its own (2 pods, 1 round, 5 burst pods, 10 s of
//! steady state, no status check) that checks every figure is made, not its value.

#[path = "../../tests/support/agent.rs"]
mod agent;
#[path = "../../tests/support/differential.rs"]
mod differential;
#[path = "../../tests/support/real_cluster.rs"]
mod real_cluster;

mod figures;
mod workloads;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use figures::{Report, Row};
use workloads::{Bench, Side};

#[derive(Parser)]
struct Args {
    /// A cluster made by `scripts/cluster.sh up DIR --runtime containerd --kubelet-node NAME`.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Where the JSON report goes.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Pods per round of the startup, exit and deletion workloads.
    #[arg(long, default_value_t = 30)]
    pods: usize,
    /// Rounds of each latency workload per node.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Pods of the burst.
    #[arg(long, default_value_t = 100)]
    burst: usize,
    /// Pods per node in the steady state.
    #[arg(long, default_value_t = 110)]
    steady_pods: usize,
    /// Seconds the steady state is measured.
    #[arg(long, default_value_t = 300)]
    steady_s: u64,
    /// Only the differential status check (every spec), no timing.
    #[arg(long)]
    status_only: bool,
    /// Set by `cargo bench`: the full run.
    #[arg(long)]
    bench: bool,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    // under `cargo test` the arguments are the test harness's, not ours
    let mut args = if full {
        Args::parse()
    } else {
        Args::parse_from(["compare_kubelet"])
    };
    if !args.bench {
        // `cargo test`: a small version, on a cluster of its own
        args.pods = 2;
        args.rounds = 1;
        args.burst = 5;
        args.steady_pods = 6;
        args.steady_s = 10;
    }
    let cluster_dir = match (&args.cluster, args.bench) {
        (Some(dir), _) => dir.clone(),
        (None, true) => {
            eprintln!("compare_kubelet: --bench needs --cluster DIR (scripts/compare-kubelet.sh)");
            std::process::exit(2);
        }
        (None, false) => {
            match real_cluster::RealCluster::shared_side_by_side("ledgerlet-cmp", "kubelet-cmp") {
                Some(c) => c.dir.clone(),
                None => return,
            }
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let report = rt.block_on(run(&args, cluster_dir));
    let json = serde_json::to_string_pretty(&report.to_json()).unwrap();
    if let Some(out) = &args.out {
        std::fs::write(out, json + "\n").expect("write the report");
    }
    print!("{}", report.table());
    println!("{}", report.summary());
    if args.bench {
        let failures = report.failures();
        for f in &failures {
            eprintln!("compare_kubelet: MISSED: {f}");
        }
        if !failures.is_empty() {
            std::process::exit(1);
        }
    } else {
        report.check_every_figure_is_made();
    }
}

async fn run(args: &Args, cluster_dir: PathBuf) -> Report {
    let bench = Bench::connect(cluster_dir).await;
    let mut report = Report::new(&bench, args.bench);
    if args.status_only {
        report.differences = Some(bench.differential().await);
        bench.clean_up().await;
        return report;
    }
    let mut startup = Row::latency("startup: created → Running (watch)");
    let mut exit = Row::latency("exit → terminated state in the API");
    let mut deletion = Row::latency("deletion (grace 1 s) → pod object gone");
    for round in 0..args.rounds {
        // alternate which node goes first, so neither always runs on a warmer machine
        for side in Side::order(round) {
            startup.add(side, bench.startup(side, args.pods, round).await);
            exit.add(side, bench.exit(side, args.pods, round).await);
            deletion.add(side, bench.deletion(side, args.pods, round).await);
        }
    }
    report.rows.extend([startup, exit, deletion]);
    let mut burst = Row::once(&format!(
        "burst: {} pods created at once → all Running",
        args.burst
    ));
    for side in Side::order(0) {
        burst.add(side, vec![bench.burst(side, args.burst).await]);
    }
    report.rows.push(burst);
    report.steady = Some(
        bench
            .steady(
                args.burst,
                args.steady_pods,
                Duration::from_secs(args.steady_s),
            )
            .await,
    );
    if args.bench {
        report.differences = Some(bench.differential().await);
    }
    bench.clean_up().await;
    report
}
