//! `ledgerlet ledger tail|export`: clients of a running agent's ledger stream.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::daemon::default_root_dir;
use crate::stream::client::{self, Target};
use crate::stream::pb::WatchRequest;
use crate::stream::{line_of, SOCKET_NAME};

#[derive(Subcommand, Debug)]
pub enum LedgerCmd {
    /// Print the agent's records as NDJSON (filtered), and with --follow keep printing new
    /// ones.
    Tail(TailArgs),
    /// Write a replayable copy of the agent's retained ledger (a snapshot line, then the
    /// records) to a file; a name ending in .gz is gzip-compressed.
    Export(ExportArgs),
}

/// Where the agent is.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The agent's --root-dir: its ledger socket is <root-dir>/ledger.sock.
    #[arg(long)]
    root_dir: Option<PathBuf>,
    /// The ledger stream's address instead: unix:///PATH, a socket path, or HOST:PORT (the
    /// agent's --ledger-grpc-address).
    #[arg(long, value_name = "ADDRESS")]
    server: Option<String>,
}

impl AgentArgs {
    fn target(&self) -> Target {
        match &self.server {
            Some(s) => Target::parse(s),
            None => Target::Unix(
                self.root_dir
                    .clone()
                    .unwrap_or_else(default_root_dir)
                    .join(SOCKET_NAME),
            ),
        }
    }
}

#[derive(Args, Debug)]
pub struct TailArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// Only records about this pod (NAMESPACE/NAME or UID).
    #[arg(long, value_name = "NAMESPACE/NAME|UID")]
    pod: Option<String>,
    /// Only records of this kind (repeatable: --kind SyncFinished --kind PlegEvent).
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// Start at this seq (default: the oldest retained record).
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// Keep printing records as they are appended.
    #[arg(long, short = 'f')]
    follow: bool,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The file to write (gzip when it ends in .gz).
    #[arg(long)]
    out: PathBuf,
    /// Export from this seq (the file starts at the newest snapshot at or before it, so it
    /// replays).
    #[arg(long, default_value_t = 0)]
    since: u64,
}

pub fn run(cmd: LedgerCmd) -> ExitCode {
    let rt = match super::async_runtime("ledger", false) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match cmd {
        LedgerCmd::Tail(a) => rt.block_on(tail(a)),
        LedgerCmd::Export(a) => rt.block_on(export(a)),
    }
}

async fn export(a: ExportArgs) -> ExitCode {
    let target = a.agent.target();
    match client::export_to_file(&target, a.since, &a.out).await {
        Ok(stats) => {
            eprintln!(
                "ledgerlet ledger export: wrote {}{} records (seq {}..={}) to {}",
                stats
                    .snapshot_seq
                    .map(|s| format!("a snapshot at seq {s} and "))
                    .unwrap_or_default(),
                stats.records,
                stats.first_seq.unwrap_or(0),
                stats.last_seq.unwrap_or(0),
                a.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ledgerlet ledger export: {e}");
            ExitCode::from(1)
        }
    }
}

async fn tail(a: TailArgs) -> ExitCode {
    let target = a.agent.target();
    let request = WatchRequest {
        since: a.since,
        pod: a.pod.unwrap_or_default(),
        kinds: a.kinds,
        follow: a.follow,
    };
    let mut stream = match client::watch(&target, request).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ledgerlet ledger tail: {e}");
            let bad_input = matches!(
                e,
                client::ClientError::Rpc {
                    code: tonic::Code::InvalidArgument,
                    ..
                }
            );
            return ExitCode::from(if bad_input { 2 } else { 1 });
        }
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    loop {
        let msg = match stream.message().await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(s) => {
                let _ = out.flush();
                eprintln!(
                    "ledgerlet ledger tail: the stream broke off: {}",
                    s.message()
                );
                return ExitCode::from(1);
            }
        };
        if let Some(l) = &msg.lagged {
            let _ = out.flush();
            eprintln!("ledgerlet ledger tail: {}", l.message);
        }
        for r in &msg.records {
            let line = line_of(r);
            if out
                .write_all(line.as_bytes())
                .and_then(|_| out.write_all(b"\n"))
                .is_err()
            {
                return ExitCode::SUCCESS; // stdout closed (a pipe to head)
            }
        }
        if a.follow && out.flush().is_err() {
            return ExitCode::SUCCESS;
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
