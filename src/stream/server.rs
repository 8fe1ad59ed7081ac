//! The gRPC server of `ledgerlet.v1.Ledger`: `Watch` and `Export`, on a unix socket under
//! `--root-dir` and optionally on a loopback TCP address.
//!
//! Owns request validation and turning cursor steps into messages. Must not hold the engine
//! lock while sending: each stream runs in its own task with a small bounded channel to its
//! client, so only that task waits on a slow client.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::cursor::{Cursor, Step, BATCH_RECORDS};
use super::pb::ledger_server::{Ledger, LedgerServer};
use super::pb::{self, ExportRequest, ExportResponse, WatchRequest, WatchResponse};
use super::to_proto;
use crate::core::{pod, Node, Uid};
use crate::engine::Engine;
use crate::ledger::filter::{PodSelector, RecordFilter};

/// Messages queued per stream before its task waits for the client.
pub const STREAM_CHANNEL_MESSAGES: usize = 4;

/// The service over the agent's engine.
#[derive(Clone)]
pub struct LedgerService {
    engine: Arc<Mutex<Engine>>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl LedgerService {
    /// A service reading `engine`'s ledger; its streams end when `stop` turns true.
    pub fn new(
        engine: Arc<Mutex<Engine>>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> LedgerService {
        LedgerService { engine, stop }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> LedgerServer<LedgerService> {
        LedgerServer::new(self)
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A filter from a request, with UIDs the live node already knows for a name selector.
pub fn request_filter(
    engine: &Mutex<Engine>,
    pod_arg: &str,
    kinds: Vec<String>,
) -> Result<RecordFilter, String> {
    let selector = if pod_arg.is_empty() {
        None
    } else {
        Some(pod_arg.parse::<PodSelector>()?)
    };
    let mut filter = RecordFilter::new(selector, kinds);
    let unknown = filter.unknown_kinds();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown kind(s) {unknown:?}; known kinds: {}",
            crate::core::record::Event::KINDS.join(", ")
        ));
    }
    if let Some((ns, name)) = filter.name().map(|(a, b)| (a.to_string(), b.to_string())) {
        let uids = uids_named(engine.lock().expect("engine").node(), &ns, &name);
        for u in uids {
            filter.know_uid(u);
        }
    }
    Ok(filter)
}

/// The UIDs the live node knows for the pod `ns/name` (desired, or with a worker).
pub fn uids_named(node: &Node, ns: &str, name: &str) -> Vec<Uid> {
    let full = pod::build_full_name(name, ns);
    let desired = node
        .pod_manager
        .iter()
        .filter(|(_, p)| pod::full_name(p) == full);
    let working = node
        .pod_workers
        .statuses()
        .filter(|(_, s)| s.fullname == full);
    let uids = desired.map(|(u, _)| u).chain(working.map(|(u, _)| u));
    uids.cloned().collect()
}

#[tonic::async_trait]
impl Ledger for LedgerService {
    type WatchStream = BoxStream<WatchResponse>;
    type ExportStream = BoxStream<ExportResponse>;

    async fn watch(
        &self,
        request: Request<WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let req = request.into_inner();
        let mut filter =
            request_filter(&self.engine, &req.pod, req.kinds).map_err(Status::invalid_argument)?;
        let mut cursor = Cursor::new(self.engine.clone(), req.since, req.follow);
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL_MESSAGES);
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                if *stop.borrow() {
                    return;
                }
                let step = tokio::select! {
                    s = cursor.next() => s,
                    _ = tx.closed() => return,
                    _ = stop.changed() => continue,
                };
                let msg = match step {
                    Step::End => return,
                    Step::Lagged {
                        missed_from,
                        missed_to,
                        resume_from,
                    } => WatchResponse {
                        records: Vec::new(),
                        lagged: Some(pb::Lagged {
                            missed_from,
                            missed_to,
                            resume_from,
                            message: format!(
                                "records {missed_from}..={missed_to} were evicted from retention before this follower read them; it continues at seq {resume_from}"
                            ),
                        }),
                    },
                    Step::Records(batch) => {
                        let records: Vec<pb::Record> = batch
                            .iter()
                            .filter(|r| filter.matches(r))
                            .map(|r| to_proto(r))
                            .collect();
                        if records.is_empty() {
                            continue;
                        }
                        WatchResponse {
                            records,
                            lagged: None,
                        }
                    }
                };
                if tx.send(Ok(msg)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn export(
        &self,
        request: Request<ExportRequest>,
    ) -> Result<Response<Self::ExportStream>, Status> {
        let since = request.into_inner().since;
        let (snapshot, records) = self
            .engine
            .lock()
            .expect("engine")
            .ledger()
            .export_base(since);
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL_MESSAGES);
        // encoding runs on a blocking thread, where each shared pod is encoded once for the
        // whole export (the records stay alive in `records` until it ends)
        tokio::task::spawn_blocking(move || {
            let _cache = crate::ledger::shared::EncodeCache::start();
            let snapshot = snapshot.map(|s| pb::Snapshot {
                seq: s.seq,
                at: s.at.to_rfc3339_nanos(),
                state_json: serde_json::to_string(&*s.state).expect("the node serialises"),
            });
            let mut first = true;
            let mut chunks = records.chunks(BATCH_RECORDS).peekable();
            while first || chunks.peek().is_some() {
                let records = chunks
                    .next()
                    .map(|c| c.iter().map(|r| to_proto(r)).collect())
                    .unwrap_or_default();
                let msg = ExportResponse {
                    snapshot: if first { snapshot.clone() } else { None },
                    records,
                };
                first = false;
                if tx.blocking_send(Ok(msg)).is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The socket could not be bound.
    #[error("cannot serve the ledger on {path}: {source}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another agent serves this socket.
    #[error("cannot serve the ledger on {0}: another process is serving it (is another agent running with this --root-dir?)")]
    InUse(PathBuf),
    /// The TCP address is not loopback or cannot be bound.
    #[error("--ledger-grpc-address {addr}: {why}")]
    Tcp {
        /// The address.
        addr: SocketAddr,
        /// Why.
        why: String,
    },
}

/// Binds `path`, replacing a stale socket file (a live one is an error).
pub async fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, ServeError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let err = |source| ServeError::Socket {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a file that is not a socket is in the way",
            )));
        }
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(ServeError::InUse(path.to_path_buf()));
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    Ok(listener)
}

/// Binds a loopback TCP address (the stream has no authentication, so nothing else).
pub async fn bind_tcp(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    if !addr.ip().is_loopback() {
        return Err(ServeError::Tcp {
            addr,
            why: "must be a loopback address (127.0.0.0/8 or ::1): the ledger stream has no authentication".into(),
        });
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Tcp {
            addr,
            why: e.to_string(),
        })
}

/// Serves the service on the given listeners until `shutdown` resolves.
pub async fn serve(
    service: LedgerService,
    unix: tokio::net::UnixListener,
    tcp: Option<tokio::net::TcpListener>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        while rx.changed().await.is_ok() {
            if *rx.borrow() {
                break;
            }
        }
    };
    let unix_server = tonic::transport::Server::builder()
        .add_service(service.clone().into_server())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::UnixListenerStream::new(unix),
            wait(shutdown.clone()),
        );
    let tcp_server = async {
        if let Some(l) = tcp {
            let r = tonic::transport::Server::builder()
                .add_service(service.into_server())
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(l),
                    wait(shutdown.clone()),
                )
                .await;
            if let Err(e) = r {
                tracing::warn!(error = %e, "the ledger gRPC server on TCP stopped");
            }
        }
    };
    let (u, ()) = tokio::join!(unix_server, tcp_server);
    if let Err(e) = u {
        tracing::warn!(error = %e, "the ledger gRPC server on the unix socket stopped");
    }
}
