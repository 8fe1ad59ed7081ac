//! `fold_observed`: fold throughput with tracing and metrics on, against both off (issue 5
//! target: on ≥ 90 % of off).
//!
//! The workload is the `fold` bench's simulated busy node (1,000 pods over ten minutes).
//! "Off" folds each record with the pure core and nothing else. "On" is what the agent's
//! engine does around each fold with `--tracing-endpoint` set: a trace context per record
//! (a child of its cause's span or a sampled root, every trace sampled), the fold span handed
//! to the real export queue and export thread (a bounded queue of 2,048 spans; the exporter is
//! an in-process sink, so the bench measures the agent's side, not a network), the per-kind
//! fold statistics, pod-worker transitions and pod start metrics, with the Prometheus recorder
//! installed. Rounds alternate off/on and the best round of each counts (the machine is
//! shared). Under `cargo test` (no `--bench` argument) it runs one short round of each as a
//! smoke test and checks nothing.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ledgerlet::core::{fold, Node};
use ledgerlet::ledger::{Record, TraceParent};
use ledgerlet::observe::export::ExportOptions;
use ledgerlet::observe::fold::{FoldObserver, Parent};
use ledgerlet::observe::otel::{Tracing, TracingConfig};
use ledgerlet::sim::scenarios::busy_node;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

const TARGET_RATIO: f64 = 0.90;

/// Counts what it receives (a collector that keeps up).
#[derive(Debug, Clone, Default)]
struct Sink(Arc<Mutex<u64>>);

impl SpanExporter for Sink {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        *self.0.lock().unwrap() += batch.len() as u64;
        Ok(())
    }
}

fn workload(pods: usize, ms: u64) -> Vec<Arc<Record>> {
    let sim = busy_node(pods, ms);
    sim.engine().ledger().since(0).cloned().collect()
}

fn fold_off(records: &[Arc<Record>]) -> Node {
    let mut node = Node::default();
    for r in records {
        let _ = fold(&mut node, r);
    }
    node
}

fn fold_on(records: &[Arc<Record>], tracing: &Tracing) -> Node {
    let mut node = Node::default();
    let mut observer = FoldObserver::new(Some(tracing.fold_tracer()));
    // the trace context each record got, by seq (a record's cause is an earlier record)
    let mut traces: Vec<Option<TraceParent>> = vec![None; records.len() + 2];
    for r in records {
        observer.begin_input(r.at);
        let parent = match r.cause {
            Some(c) => Parent::Input(traces.get(c as usize).copied().flatten()),
            None => Parent::Input(None),
        };
        let opened = observer.open(parent, &r.event);
        if let Some(slot) = traces.get_mut(r.seq as usize) {
            *slot = opened.map(|o| o.ctx);
        }
        let _ = observer.fold(&mut node, r, opened);
        observer.end_input();
    }
    observer.flush_spans();
    node
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (pods, ms, rounds) = if bench {
        (1_000, 10 * 60 * 1000, 7)
    } else {
        (50, 60 * 1000, 1)
    };
    let records = workload(pods, ms);
    let _ = ledgerlet::observe::metrics::install();
    let sink = Sink::default();
    let s = sink.clone();
    let tracing = Tracing::start_with(
        &TracingConfig {
            endpoint: "localhost:4317".into(),
            sampling_rate_per_million: 1_000_000,
            export: ExportOptions::default(),
            service_name: "ledgerlet-bench".into(),
            node_name: "bench-node".into(),
            host_name: "bench".into(),
        },
        move || Ok(s),
    )
    .expect("tracing pipeline");
    let mut best_off = 0f64;
    let mut best_on = 0f64;
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(fold_off(&records));
        best_off = best_off.max(records.len() as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(fold_on(&records, &tracing));
        best_on = best_on.max(records.len() as f64 / t.elapsed().as_secs_f64());
    }
    tracing.flush(std::time::Duration::from_secs(5));
    let exported = *sink.0.lock().unwrap();
    let dropped = tracing.exporting().queue().dropped();
    let ratio = best_on / best_off;
    println!(
        "fold_observed: {} records over {pods} pods: off {:.0} records/s, on (tracing + metrics) {:.0} records/s = {:.1} % of off (target >= {:.0} %: {}); fold spans exported {exported}, dropped at the bounded queue {dropped}",
        records.len(),
        best_off,
        best_on,
        ratio * 100.0,
        TARGET_RATIO * 100.0,
        if !bench {
            "smoke run, not checked"
        } else if ratio >= TARGET_RATIO {
            "met"
        } else {
            "MISSED"
        }
    );
    tracing.shutdown(std::time::Duration::from_secs(2));
}
