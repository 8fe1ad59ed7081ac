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
#[command(
    override_usage = "ledgerlet diff [OPTIONS] --pod <NAMESPACE/NAME|UID> <FILE> <SEQ1> <SEQ2>\n       \
    ledgerlet diff [OPTIONS] --pod <NAMESPACE/NAME|UID> --kubeconfig <FILE> --node <NODE> <SEQ1> <SEQ2>"
)]
pub struct DiffArgs {
    /// `FILE SEQ1 SEQ2`, or `SEQ1 SEQ2` with --node: the ledger (an export, plain or .gz,
    /// `/debug/ledger` output, or a --ledger-dir) and the two points (after these records).
    #[arg(required = true, num_args = 2..=3, value_names = ["FILE", "SEQ1", "SEQ2"])]
    positional: Vec<String>,
    #[command(flatten)]
    remote: super::remote_ledger::RemoteLedger,
    /// The pod.
    #[arg(long, value_name = "NAMESPACE/NAME|UID")]
    pod: PodSelector,
}

/// The ledger file (absent with `--node`) and the two points of `ledgerlet diff`'s
/// positional arguments, or what is wrong with them.
fn diff_points(positional: &[String], remote: bool) -> Result<(Option<PathBuf>, u64, u64), String> {
    let (file, seqs) = match (positional, remote) {
        ([file, a, b], false) => (Some(PathBuf::from(file)), [a, b]),
        ([a, b], true) => (None, [a, b]),
        (_, false) => {
            return Err("give FILE SEQ1 SEQ2 (or SEQ1 SEQ2 with --kubeconfig and --node)".into())
        }
        (_, true) => return Err("with --node, give SEQ1 SEQ2 and no FILE".into()),
    };
    let seq = |s: &String| {
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a record's seq (a whole number)"))
    };
    Ok((file, seq(seqs[0])?, seq(seqs[1])?))
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
    let (file, seq1, seq2) = match diff_points(&args.positional, args.remote.node.is_some()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ledgerlet diff: {e}");
            return ExitCode::from(2);
        }
    };
    let (file, _fetched) = match super::ledger_source(&file, &args.remote, "diff") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let input = match super::open_ledger(&file, "diff") {
        Ok(i) => i,
        Err(code) => return code,
    };
    match diff::diff(input, seq1, seq2, &args.pod) {
        Ok(text) => super::print(&text, "diff"),
        Err(e) => {
            eprintln!("ledgerlet diff: {}: {e}", file.display());
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::diff_points;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn diff_takes_a_file_and_two_seqs_or_only_the_seqs_with_node() {
        assert_eq!(
            diff_points(&strings(&["l.ndjson", "8", "9"]), false),
            Ok((Some("l.ndjson".into()), 8, 9))
        );
        assert_eq!(diff_points(&strings(&["8", "9"]), true), Ok((None, 8, 9)));
        assert!(diff_points(&strings(&["8", "9"]), false)
            .unwrap_err()
            .contains("FILE SEQ1 SEQ2"));
        assert!(diff_points(&strings(&["f", "8", "9"]), true)
            .unwrap_err()
            .contains("no FILE"));
        assert!(diff_points(&strings(&["f", "x", "9"]), false)
            .unwrap_err()
            .contains("\"x\" is not a record's seq"));
    }
}
