//! `ledgerlet replay FILE [--until SEQ|RFC3339] [--pod UID|NAMESPACE/NAME] [--format table|json]`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::postmortem::replay::{render_json, render_table, replay, PodFilter, Until};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// One JSON document.
    Json,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The ledger: an export (plain or .gz), `/debug/ledger` output, or a --ledger-dir.
    #[arg(required_unless_present = "node", conflicts_with = "node")]
    file: Option<PathBuf>,
    #[command(flatten)]
    remote: super::remote_ledger::RemoteLedger,
    /// Stop after this seq, or after the last record at or before this RFC 3339 time.
    #[arg(long, value_name = "SEQ|RFC3339")]
    until: Option<Until>,
    /// Show only this pod.
    #[arg(long, value_name = "UID|NAMESPACE/NAME")]
    pod: Option<PodFilter>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Instead of printing the state, check that every derived record and every command
    /// outcome was caused by what the fold of its cause emits (exit 1 if not).
    #[arg(long)]
    verify: bool,
}

pub fn run(args: ReplayArgs) -> ExitCode {
    // the whole ledger: a replay folds every record, whatever --pod shows
    let (path, _fetched) = match super::ledger_source(&args.file, &args.remote, "replay") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let file = match super::open_ledger(&path, "replay") {
        Ok(f) => f,
        Err(code) => return code,
    };
    if args.verify {
        return verify(file, &args, &path);
    }
    let replayed = match replay(file, args.until) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ledgerlet replay: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let text = match args.format {
        Format::Table => render_table(&replayed, args.pod.as_ref()),
        Format::Json => render_json(&replayed, args.pod.as_ref()),
    };
    super::print(&text, "replay")
}

fn verify(file: impl std::io::BufRead + Send, args: &ReplayArgs, path: &Path) -> ExitCode {
    use crate::postmortem::verify;
    match verify::verify(file, args.until) {
        Ok(v) => {
            print!("{}", verify::render(&v));
            if v.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("ledgerlet replay: {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}
