//! `ledgerlet explain FILE --pod NS/NAME` and `ledgerlet diff FILE SEQ1 SEQ2 --pod NS/NAME`:
//! offline readings of one pod in a ledger; `explain --kubeconfig K --node N` instead of
//! FILE reads node N's ledger through the API server.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::ledger::filter::PodSelector;
use crate::postmortem::replay::Until;
use crate::postmortem::{diff, explain};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The ledger: an export (plain or .gz), `/debug/ledger` output, or a --ledger-dir.
    #[arg(required_unless_present = "node", conflicts_with = "node")]
    file: Option<PathBuf>,
    #[command(flatten)]
    remote: super::remote_ledger::RemoteLedger,
    /// The pod.
    #[arg(long, value_name = "NAMESPACE/NAME|UID")]
    pod: PodSelector,
    /// Stop after this seq or RFC 3339 time.
    #[arg(long, value_name = "SEQ|RFC3339")]
    until: Option<Until>,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The ledger: an export (plain or .gz), `/debug/ledger` output, or a --ledger-dir.
    file: PathBuf,
    /// The first point (after this record).
    seq1: u64,
    /// The second point (after this record).
    seq2: u64,
    /// The pod.
    #[arg(long, value_name = "NAMESPACE/NAME|UID")]
    pod: PodSelector,
}

pub fn explain(args: ExplainArgs) -> ExitCode {
    // the whole ledger: explain folds every record, then reads the pod's
    let (file, _fetched) = match super::ledger_source(&args.file, &args.remote, "explain") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let input = match super::open_ledger(&file, "explain") {
        Ok(i) => i,
        Err(code) => return code,
    };
    match explain::explain(input, &args.pod, args.until) {
        Ok(text) => super::print(&text, "explain"),
        Err(e) => {
            eprintln!("ledgerlet explain: {}: {e}", file.display());
            ExitCode::from(2)
        }
    }
}

pub fn diff(args: DiffArgs) -> ExitCode {
    let file = args.file;
    let input = match super::open_ledger(&file, "diff") {
        Ok(i) => i,
        Err(code) => return code,
    };
    match diff::diff(input, args.seq1, args.seq2, &args.pod) {
        Ok(text) => super::print(&text, "diff"),
        Err(e) => {
            eprintln!("ledgerlet diff: {}: {e}", file.display());
            ExitCode::from(2)
        }
    }
}
