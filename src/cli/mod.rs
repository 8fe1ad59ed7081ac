//! The command line (`ledgerlet run | replay | …`).
//!
//! Owns argument parsing, exit codes and the wording of errors a user sees. Must not hold
//! logic the library does not expose: each subcommand calls into the library.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad input (arguments, files, malformed
//! ledger lines).

mod duration;
mod explain_cmd;
mod ledger_cmd;
mod remote_ledger;
mod replay_cmd;
mod run_cmd;
mod runtime_cmd;
mod tracing_args;

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ledgerlet: an event-sourced Kubernetes node agent.
#[derive(Parser, Debug)]
#[command(name = "ledgerlet", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the node agent.
    Run(Box<run_cmd::RunArgs>),
    /// Fold an exported ledger offline and print the pod-worker state.
    Replay(replay_cmd::ReplayArgs),
    /// Explain a pod's life in a ledger in plain language, naming the causing records.
    Explain(explain_cmd::ExplainArgs),
    /// What changed in a pod's worker, status and probe state between two records.
    Diff(explain_cmd::DiffArgs),
    /// A running agent's ledger: tail (stream) or export it.
    #[command(subcommand)]
    Ledger(ledger_cmd::LedgerCmd),
    /// The embedded CRI runtime.
    #[command(subcommand)]
    Runtime(runtime_cmd::RuntimeCmd),
}

/// Parses the arguments and runs the subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run(args) => run_cmd::run(*args),
        Cmd::Replay(args) => replay_cmd::run(args),
        Cmd::Runtime(cmd) => runtime_cmd::run(cmd),
        Cmd::Ledger(cmd) => ledger_cmd::run(cmd),
        Cmd::Explain(args) => explain_cmd::explain(args),
        Cmd::Diff(args) => explain_cmd::diff(args),
    }
}

/// Writes `text` to stdout for `ledgerlet <cmd>`; a closed pipe (`| head`) is not a failure.
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

/// The ledger file of `ledgerlet <cmd>`: `file`, or `remote`'s node's ledger downloaded
/// through the API server into a temporary file (kept alive by the second value). When
/// neither can be had, says why and returns exit code 2.
fn ledger_source(
    file: &Option<std::path::PathBuf>,
    remote: &remote_ledger::RemoteLedger,
    cmd: &str,
) -> Result<(std::path::PathBuf, Option<remote_ledger::Fetched>), ExitCode> {
    match (file, &remote.node, &remote.kubeconfig) {
        (Some(f), _, _) => Ok((f.clone(), None)),
        (None, Some(node), Some(kubeconfig)) => match remote_ledger::fetch(kubeconfig, node) {
            Ok(fetched) => Ok((fetched.path.clone(), Some(fetched))),
            Err(e) => {
                eprintln!("ledgerlet {cmd}: cannot read the ledger of node {node}: {e}");
                Err(ExitCode::from(2))
            }
        },
        _ => {
            eprintln!("ledgerlet {cmd}: give a ledger FILE, or --kubeconfig and --node");
            Err(ExitCode::from(2))
        }
    }
}

/// Opens the ledger input of `ledgerlet <cmd>` (with a progress bar on a terminal); when it
/// cannot, says so and returns exit code 2.
fn open_ledger(path: &Path, cmd: &str) -> Result<Box<dyn BufRead + Send>, ExitCode> {
    crate::postmortem::progress::open_with_progress(path).map_err(|e| {
        eprintln!("ledgerlet {cmd}: cannot open {}: {e}", path.display());
        ExitCode::from(2)
    })
}

/// The async runtime of `ledgerlet <cmd>` (all threads when `multi_thread`); when it cannot
/// start, says so and returns exit code 1.
fn async_runtime(cmd: &str, multi_thread: bool) -> Result<tokio::runtime::Runtime, ExitCode> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build().map_err(|e| {
        eprintln!("ledgerlet {cmd}: cannot start the async runtime: {e}");
        ExitCode::from(1)
    })
}
