//! `ledgerlet runtime serve --listen unix:///PATH`: the embedded CRI runtime as its own
//! server, so pods can outlive an agent restart (and other CRI clients can use it).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::runtime::{serve, RuntimeOptions};

#[derive(Subcommand, Debug)]
pub enum RuntimeCmd {
    /// Serve the embedded CRI runtime on a unix socket until SIGTERM or SIGINT. Containers
    /// are host processes: nothing is isolated (development, demos and tests only).
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen: unix:///path/to/socket (or a bare path).
    #[arg(long)]
    listen: String,
    /// Where the runtime keeps its state (default: next to the socket).
    #[arg(long)]
    root_dir: Option<PathBuf>,
    /// Log level when RUST_LOG is not set.
    #[arg(long, default_value = "info")]
    log_level: String,
    #[command(flatten)]
    tracing: super::tracing_args::TracingArgs,
}

pub fn run(cmd: RuntimeCmd) -> ExitCode {
    let RuntimeCmd::Serve(args) = cmd;
    let host = crate::shell::machine::system_hostname();
    if let Err(e) = args
        .tracing
        .init("ledgerlet-runtime", &host, &host, &args.log_level, false)
    {
        eprintln!("ledgerlet runtime serve: {e}");
        return ExitCode::from(2);
    }
    let root = args.root_dir.unwrap_or_else(|| {
        let path = args.listen.trim_start_matches("unix://");
        PathBuf::from(path)
            .parent()
            .map(|p| p.join("ledgerlet-runtime"))
            .unwrap_or_else(|| PathBuf::from("ledgerlet-runtime"))
    });
    let rt = match super::async_runtime("runtime serve", true) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = rt.block_on(async {
        let shutdown = async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        };
        serve(&args.listen, RuntimeOptions::new(root), shutdown).await
    });
    if let Some(t) = crate::observe::otel::global() {
        t.shutdown(std::time::Duration::from_secs(3));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ledgerlet runtime serve: {e}");
            ExitCode::from(1)
        }
    }
}
