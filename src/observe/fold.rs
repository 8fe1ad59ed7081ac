//! The fold, observed: a span `fold <kind>` per record and fold metrics.
//!
//! Owns `ledgerlet_ledger_records_total{kind}` and `ledgerlet_fold_duration_seconds{kind}`.
//! Must not change what the fold does.

use std::time::Instant;

use crate::core::{Command, Node};
use crate::ledger::Record;

/// Records folded, by kind.
pub const RECORDS_TOTAL: &str = "ledgerlet_ledger_records_total";
/// Fold latency, by kind.
pub const FOLD_DURATION_SECONDS: &str = "ledgerlet_fold_duration_seconds";

/// Folds `record` inside its span and records the fold metrics.
pub fn observed_fold(node: &mut Node, record: &Record) -> Vec<Command> {
    let kind = record.event.kind();
    let span = record.event.fold_span(record.seq);
    let _enter = span.enter();
    let started = Instant::now();
    let commands = crate::core::fold(node, record);
    let elapsed = started.elapsed();
    metrics::counter!(RECORDS_TOTAL, "kind" => kind).increment(1);
    metrics::histogram!(FOLD_DURATION_SECONDS, "kind" => kind).record(elapsed.as_secs_f64());
    commands
}
