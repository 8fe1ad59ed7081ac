//! `fold`: how fast the core folds a realistic record mix over 1,000 pods, and how many
//! bytes the ledger retains per record.
//!
//! The workload is a simulated node (sim::scenarios::busy_node): 1,000 pods added, synced,
//! resynced, a tenth of them deleted and some failing, with PLEG events, runtime status
//! observations, timers and housekeeping, over ten minutes of virtual time. Targets
//! (issue 2): ≥ 1,000,000 records/s folded on one core; ≤ 512 bytes retained per record.

use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

use ledgerlet::core::{fold, Node};
use ledgerlet::ledger::{Ledger, LedgerConfig, Record};
use ledgerlet::sim::scenarios::busy_node;

fn workload() -> Vec<Arc<Record>> {
    let sim = busy_node(1_000, 10 * 60 * 1000);
    sim.engine().ledger().since(0).cloned().collect()
}

fn bytes_per_record(records: &[Arc<Record>]) -> f64 {
    let mut ledger: Ledger<()> = Ledger::new(
        LedgerConfig {
            max_records: usize::MAX / 2,
            max_bytes: u64::MAX,
            ..LedgerConfig::default()
        },
        0,
    );
    for r in records {
        ledger.append(r.at, r.cause, r.trace, r.event.clone());
    }
    ledger.stats().retained_bytes as f64 / records.len() as f64
}

fn fold_all(records: &[Arc<Record>]) -> Node {
    let mut node = Node::default();
    for r in records {
        let _ = fold(&mut node, r);
    }
    node
}

fn report(records: &[Arc<Record>]) {
    // One plain measurement for the headline numbers, next to criterion's statistics.
    let rounds = 5;
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(fold_all(records));
    }
    let per_s = (records.len() * rounds) as f64 / started.elapsed().as_secs_f64();
    let bpr = bytes_per_record(records);
    println!(
        "fold: {} records over 1000 pods: {:.0} records/s folded (target >= 1000000: {}), \
         {:.0} bytes retained per record (target <= 512: {})",
        records.len(),
        per_s,
        if per_s >= 1_000_000.0 {
            "met"
        } else {
            "MISSED"
        },
        bpr,
        if bpr <= 512.0 { "met" } else { "MISSED" }
    );
}

fn bench(c: &mut Criterion) {
    let records = workload();
    report(&records);
    let mut g = c.benchmark_group("fold");
    g.throughput(Throughput::Elements(records.len() as u64));
    g.sample_size(10);
    g.bench_function("realistic_mix_1000_pods", |b| {
        b.iter_batched(|| (), |_| fold_all(&records), BatchSize::SmallInput)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
