//! `ledgerlet explain FILE --pod NS/NAME` and `ledgerlet diff FILE SEQ1 SEQ2 --pod NS/NAME`:
//! offline readings of one pod in a ledger.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::ledger::filter::PodSelector;
use crate::postmortem::replay::Until;
use crate::postmortem::{diff, explain, progress};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The ledger: an export (plain or .gz), `/debug/ledger` output, or a --ledger-dir.
    file: PathBuf,
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

fn print(text: &str, cmd: &str) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("ledgerlet {cmd}: writing output: {e}");
            ExitCode::from(1)
        }
        _ => ExitCode::SUCCESS,
    }
}

pub fn explain(args: ExplainArgs) -> ExitCode {
    let input = match progress::open_with_progress(&args.file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!(
                "ledgerlet explain: cannot open {}: {e}",
                args.file.display()
            );
            return ExitCode::from(2);
        }
    };
    match explain::explain(input, &args.pod, args.until) {
        Ok(text) => print(&text, "explain"),
        Err(e) => {
            eprintln!("ledgerlet explain: {}: {e}", args.file.display());
            ExitCode::from(2)
        }
    }
}

pub fn diff(args: DiffArgs) -> ExitCode {
    let input = match progress::open_with_progress(&args.file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("ledgerlet diff: cannot open {}: {e}", args.file.display());
            return ExitCode::from(2);
        }
    };
    match diff::diff(input, args.seq1, args.seq2, &args.pod) {
        Ok(text) => print(&text, "diff"),
        Err(e) => {
            eprintln!("ledgerlet diff: {}: {e}", args.file.display());
            ExitCode::from(2)
        }
    }
}
