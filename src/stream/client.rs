//! The client side of `ledgerlet.v1.Ledger`, for `ledgerlet ledger tail|export`.
//!
//! Owns dialling the agent (its unix socket, or a loopback TCP address) and writing an
//! export file. Must not interpret records beyond rebuilding their NDJSON lines.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use super::pb::ledger_client::LedgerClient;
use super::pb::{ExportRequest, WatchRequest, WatchResponse};
use super::{line_of, snapshot_line_of};
use crate::ledger::export::{ExportStats, ExportWriter};

/// Where the agent serves its ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A unix socket path.
    Unix(PathBuf),
    /// `http://HOST:PORT` (loopback TCP).
    Tcp(String),
}

impl Target {
    /// `unix:///path` or a path, or `HOST:PORT` / `http://HOST:PORT`.
    pub fn parse(s: &str) -> Target {
        if let Some(p) = s.strip_prefix("unix://") {
            return Target::Unix(PathBuf::from(p));
        }
        if s.starts_with("http://") {
            return Target::Tcp(s.to_string());
        }
        if !s.contains('/') && s.contains(':') {
            return Target::Tcp(format!("http://{s}"));
        }
        Target::Unix(PathBuf::from(s))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix://{}", p.display()),
            Target::Tcp(u) => f.write_str(u),
        }
    }
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The agent could not be reached.
    #[error("cannot reach the agent's ledger at {target}: {why} (is `ledgerlet run` running with this --root-dir?)")]
    Connect {
        /// Where.
        target: String,
        /// Why.
        why: String,
    },
    /// The agent refused or broke off the call.
    #[error("{message}")]
    Rpc {
        /// The gRPC status code.
        code: tonic::Code,
        /// What the agent said.
        message: String,
    },
    /// Writing the output failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The output.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

fn rpc(s: tonic::Status) -> ClientError {
    ClientError::Rpc {
        code: s.code(),
        message: s.message().to_string(),
    }
}

/// Connects to the agent.
pub async fn connect(target: &Target) -> Result<LedgerClient<Channel>, ClientError> {
    let fail = |why: String| ClientError::Connect {
        target: target.to_string(),
        why,
    };
    let channel = match target {
        Target::Unix(path) => {
            if !path.exists() {
                return Err(fail("the socket does not exist".into()));
            }
            let sock: std::sync::Arc<Path> = path.clone().into();
            let connector = tower::service_fn(move |_: Uri| {
                let sock = sock.clone();
                async move {
                    tokio::net::UnixStream::connect(&*sock)
                        .await
                        .map(TokioIo::new)
                }
            });
            Endpoint::from_static("http://localhost")
                .connect_timeout(Duration::from_secs(5))
                .connect_with_connector(connector)
                .await
                .map_err(|e| fail(crate::error_chain::error_chain(&e)))?
        }
        Target::Tcp(url) => Endpoint::from_shared(url.clone())
            .map_err(|e| fail(e.to_string()))?
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| fail(crate::error_chain::error_chain(&e)))?,
    };
    Ok(LedgerClient::new(channel).max_decoding_message_size(256 * 1024 * 1024))
}

/// Streams `Export(since)` into `out` (gzip when it ends in `.gz`).
pub async fn export_to_file(
    target: &Target,
    since: u64,
    out: &Path,
) -> Result<ExportStats, ClientError> {
    let mut client = connect(target).await?;
    let mut stream = client
        .export(ExportRequest { since })
        .await
        .map_err(rpc)?
        .into_inner();
    let werr = |source| ClientError::Write {
        path: out.to_path_buf(),
        source,
    };
    let mut w = ExportWriter::create(out).map_err(werr)?;
    let mut stats = ExportStats::default();
    while let Some(msg) = stream.message().await.map_err(rpc)? {
        if let Some(s) = &msg.snapshot {
            stats.snapshot_seq = Some(s.seq);
            w.write_all(snapshot_line_of(s).as_bytes()).map_err(werr)?;
            w.write_all(b"\n").map_err(werr)?;
        }
        for r in &msg.records {
            w.write_all(line_of(r).as_bytes()).map_err(werr)?;
            w.write_all(b"\n").map_err(werr)?;
            stats.records += 1;
            stats.first_seq.get_or_insert(r.seq);
            stats.last_seq = Some(r.seq);
        }
    }
    w.finish().map_err(werr)?;
    Ok(stats)
}

/// Opens `Watch`; the caller reads messages from the returned stream.
pub async fn watch(
    target: &Target,
    request: WatchRequest,
) -> Result<tonic::Streaming<WatchResponse>, ClientError> {
    let mut client = connect(target).await?;
    Ok(client.watch(request).await.map_err(rpc)?.into_inner())
}
