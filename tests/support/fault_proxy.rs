//! A TLS-terminating TCP proxy for fault tests, placed between the agent and the real
//! kube-apiserver of a [`RealCluster`]: the agent talks to the proxy (through a kubeconfig
//! whose `server` is the proxy, see [`FaultProxy::for_node`]), the proxy talks to the
//! apiserver.
//!
//! - Downstream it listens on `127.0.0.1:0` and presents the apiserver's own serving
//!   certificate (`DIR/pki/apiserver.crt`, SAN `IP:127.0.0.1`, signed by `DIR/pki/ca.crt`),
//!   so the agent's kubeconfig keeps its CA; it advertises only the ALPN `http/1.1`, because
//!   the bytes it forwards must be HTTP/1.1 for `status_500` and `watch_gone` to answer
//!   them. It does not ask for a client certificate.
//! - Upstream it connects with TLS to the apiserver (`APISERVER` in `DIR/cluster.env`,
//!   trusting `DIR/pki/ca.crt`, ALPN `http/1.1`) and presents the node's client certificate
//!   (`DIR/pki/node-NAME.crt` / `.key`, issued by `scripts/cluster.sh node-credentials DIR
//!   NAME`), so the apiserver authenticates `system:node:NAME` exactly as without the proxy.
//! - Without a fault it copies bytes both ways and parses nothing.
//!
//! Faults (each set and cleared by the test, for as long as it likes): `refuse` (new
//! connections are closed with RST before TLS), `reset` (every open connection is cut now
//! with RST; with `refuse` the API is unreachable), `delay` (every chunk, both ways, is
//! forwarded that long after it was read), `status_500` (new connections get `HTTP/1.1 500`
//! with a JSON `Status` body and `Connection: close` after their request head; open ones are
//! cut when it starts, so long watches meet it too) and `watch_gone` (as `status_500`, except
//! that a watch request is answered as the apiserver answers a watch from a resource version
//! it no longer has: `200` and one `ERROR` event with a `410 Expired` Status, which makes a
//! client-go or kube-rs watcher list again). Counters say how many connections were
//! accepted and how many met a fault, so a test can assert that its fault was met.
//!
//! It owns its listener, its connections and the tokio runtime they run on (one worker
//! thread, so blocking tests can drive it); dropping it closes everything. It must not parse
//! or change what it forwards, hold more than [`MAX_CONNECTIONS`] connections at once (one
//! over the cap is closed with RST at once and counted in [`Stats::over_cap`]), or buffer more
//! than [`MAX_CHUNKS_IN_FLIGHT`] chunks of [`CHUNK`] bytes per direction of a connection.
#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::Instant;

use super::real_cluster::RealCluster;

/// At most this many connections are open through the proxy at once.
pub const MAX_CONNECTIONS: usize = 256;
/// The largest chunk read at once from either side.
pub const CHUNK: usize = 16 * 1024;
/// Chunks read but not yet written, per direction of a connection (the delay queue).
pub const MAX_CHUNKS_IN_FLIGHT: usize = 64;
/// How long a client gets to finish its TLS handshake, and the proxy to connect upstream.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);
/// The largest request head read before a fault's answer.
const MAX_HEAD: usize = 64 * 1024;

/// What the proxy needs to know about both ends.
pub struct ProxyConfig {
    /// The apiserver's address (`127.0.0.1:PORT`).
    pub upstream: SocketAddr,
    /// The CA that signed the apiserver's serving certificate.
    pub ca: PathBuf,
    /// The certificate and key presented to the agent (the apiserver's).
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// The client certificate and key presented to the apiserver (the node's).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl ProxyConfig {
    /// The certificates of `cluster` for node `name` (whose credentials
    /// `RealCluster::node_kubeconfig(name)` must have issued first).
    pub fn for_node(cluster: &RealCluster, name: &str) -> ProxyConfig {
        let pki = cluster.dir.join("pki");
        let server = cluster
            .env
            .get("APISERVER")
            .expect("APISERVER in cluster.env");
        let hostport = server
            .strip_prefix("https://")
            .unwrap_or_else(|| panic!("APISERVER is not https://HOST:PORT: {server}"));
        ProxyConfig {
            upstream: hostport
                .parse()
                .unwrap_or_else(|e| panic!("APISERVER {server}: {e}")),
            ca: pki.join("ca.crt"),
            serving_cert: pki.join("apiserver.crt"),
            serving_key: pki.join("apiserver.key"),
            client_cert: pki.join(format!("node-{name}.crt")),
            client_key: pki.join(format!("node-{name}.key")),
        }
    }
}

/// What the proxy has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted (including those refused or over the cap).
    pub accepted: u64,
    /// Closed with RST at accept under `refuse`.
    pub refused: u64,
    /// Answered `500` under `status_500`.
    pub answered_500: u64,
    /// Watch requests answered with a `410 Expired` event under `watch_gone`.
    pub answered_gone: u64,
    /// Of those, watches of pods (`GET /api/v1/pods?…watch=true`, a node's pod watch).
    pub answered_gone_pods: u64,
    /// Open connections cut with RST by `reset` or the start of `status_500` or `watch_gone`.
    pub cut: u64,
    /// Chunks forwarded late under `delay`.
    pub delayed_chunks: u64,
    /// Closed with RST at accept because [`MAX_CONNECTIONS`] were open.
    pub over_cap: u64,
    /// Connections forwarded to the apiserver.
    pub forwarded: u64,
}

impl Stats {
    /// Connections that met a fault (refused, answered 500 or cut).
    pub fn faulted(&self) -> u64 {
        self.refused + self.answered_500 + self.answered_gone + self.cut
    }
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    answered_500: AtomicU64,
    answered_gone: AtomicU64,
    answered_gone_pods: AtomicU64,
    cut: AtomicU64,
    delayed_chunks: AtomicU64,
    over_cap: AtomicU64,
    forwarded: AtomicU64,
}

struct Shared {
    refuse: AtomicBool,
    status_500: AtomicBool,
    watch_gone: AtomicBool,
    delay_ms: AtomicU64,
    /// Bumped to cut every open connection.
    cut: watch::Sender<u64>,
    counters: Counters,
    slots: Arc<Semaphore>,
}

impl Shared {
    fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms.load(Ordering::SeqCst))
    }

    fn count(&self, c: impl Fn(&Counters) -> &AtomicU64) {
        c(&self.counters).fetch_add(1, Ordering::SeqCst);
    }
}

/// The proxy; see the module docs.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    rt: Option<tokio::runtime::Runtime>,
}

impl FaultProxy {
    /// A proxy for node `name` of `cluster` (its credentials are issued here) and a
    /// kubeconfig for that node whose server is the proxy.
    pub fn for_node(cluster: &RealCluster, name: &str) -> (FaultProxy, PathBuf) {
        let node_kubeconfig = cluster.node_kubeconfig(name);
        let proxy = FaultProxy::start(ProxyConfig::for_node(cluster, name));
        let out = node_kubeconfig.with_file_name(format!("{name}.via-proxy.kubeconfig"));
        write_proxy_kubeconfig(&node_kubeconfig, &proxy.url(), &out);
        (proxy, out)
    }

    /// Starts the proxy on `127.0.0.1:0`, passing everything through.
    pub fn start(config: ProxyConfig) -> FaultProxy {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_tls = server_config(&config, provider.clone());
        let client_tls = client_config(&config, provider);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("the fault proxy's runtime");
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            refuse: AtomicBool::new(false),
            status_500: AtomicBool::new(false),
            watch_gone: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            cut: watch::channel(0).0,
            counters: Counters::default(),
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        });
        let ends = Arc::new(Ends {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server_tls)),
            connector: tokio_rustls::TlsConnector::from(Arc::new(client_tls)),
            upstream: config.upstream,
        });
        rt.spawn(accept_loop(listener, shared.clone(), ends));
        FaultProxy {
            addr,
            shared,
            rt: Some(rt),
        }
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`, the server URL for a kubeconfig.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// `refuse`: while on, new connections are closed with RST before TLS.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// `reset`: cuts every open connection now, with RST.
    pub fn reset(&self) {
        self.shared.cut.send_modify(|g| *g += 1);
    }

    /// The API is unreachable: `refuse` on, then `reset`.
    pub fn unreachable(&self) {
        self.refuse(true);
        self.reset();
    }

    /// `delay`: every chunk read from now on, in both directions, is forwarded `d` after it
    /// was read (`Duration::ZERO` clears it).
    pub fn delay(&self, d: Duration) {
        self.shared
            .delay_ms
            .store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// `status_500`: while on, new connections are answered `500` after their request head;
    /// turning it on cuts the open ones.
    pub fn status_500(&self, on: bool) {
        self.shared.status_500.store(on, Ordering::SeqCst);
        if on {
            self.reset();
        }
    }

    /// `watch_gone`: while on, new connections get, after their request head, a `410
    /// Expired` watch event if it is a watch (`watch=true`) and `500` otherwise; turning it on
    /// cuts the open ones.
    pub fn watch_gone(&self, on: bool) {
        self.shared.watch_gone.store(on, Ordering::SeqCst);
        if on {
            self.reset();
        }
    }

    /// Clears every fault (connections cut stay cut).
    pub fn clear(&self) {
        self.refuse(false);
        self.status_500(false);
        self.watch_gone(false);
        self.delay(Duration::ZERO);
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Stats {
            accepted: get(&c.accepted),
            refused: get(&c.refused),
            answered_500: get(&c.answered_500),
            answered_gone: get(&c.answered_gone),
            answered_gone_pods: get(&c.answered_gone_pods),
            cut: get(&c.cut),
            delayed_chunks: get(&c.delayed_chunks),
            over_cap: get(&c.over_cap),
            forwarded: get(&c.forwarded),
        }
    }

    /// Polls the counters every 50 ms until `check` holds, for at most `secs`.
    pub fn wait_for_stats(&self, what: &str, secs: u64, check: impl Fn(&Stats) -> bool) -> Stats {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.stats();
            if check(&s) {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after {secs} s waiting for {what}: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        MAX_CONNECTIONS - self.shared.slots.available_permits()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Writes to `out` a copy of `node_kubeconfig` whose clusters' `server` is `server` (the
/// CA, the credentials and the context stay), mode 0600; returns `out`.
pub fn write_proxy_kubeconfig(node_kubeconfig: &Path, server: &str, out: &Path) -> PathBuf {
    let text = std::fs::read_to_string(node_kubeconfig)
        .unwrap_or_else(|e| panic!("read {}: {e}", node_kubeconfig.display()));
    let mut kc: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig YAML");
    let clusters = kc
        .get_mut("clusters")
        .and_then(|c| c.as_sequence_mut())
        .expect("kubeconfig clusters");
    assert!(!clusters.is_empty(), "no cluster in the kubeconfig");
    for c in clusters {
        let cluster = c
            .get_mut("cluster")
            .and_then(|c| c.as_mapping_mut())
            .expect("clusters[].cluster");
        cluster.insert("server".into(), server.into());
    }
    let tmp = out.with_extension("tmp");
    std::fs::write(&tmp, serde_yaml::to_string(&kc).unwrap()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::fs::rename(&tmp, out).unwrap();
    out.to_path_buf()
}

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .unwrap_or_else(|e| panic!("read {}: {e:?}", path.display()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("certificates in {}: {e:?}", path.display()));
    assert!(!certs.is_empty(), "no certificate in {}", path.display());
    certs
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_file(path)
        .unwrap_or_else(|e| panic!("private key in {}: {e:?}", path.display()))
}

fn server_config(
    c: &ProxyConfig,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> rustls::ServerConfig {
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs(&c.serving_cert), key(&c.serving_key))
        .expect("the apiserver's serving certificate and key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

fn client_config(
    c: &ProxyConfig,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs(&c.ca) {
        roots.add(cert).expect("the cluster CA");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs(&c.client_cert), key(&c.client_key))
        .unwrap_or_else(|e| {
            panic!(
                "the node's client certificate {}: {e}",
                c.client_cert.display()
            )
        });
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

struct Ends {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
    upstream: SocketAddr,
}

/// Closes `fd` with RST when it is closed (SO_LINGER on, timeout 0). The caller still owns
/// the socket and closes it right after.
fn rst_on_close(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `fd` is an open socket owned by the caller for the duration of this call
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, ends: Arc<Ends>) {
    loop {
        let (sock, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // e.g. EMFILE: back off rather than spin
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        shared.count(|c| &c.accepted);
        if shared.refuse.load(Ordering::SeqCst) {
            shared.count(|c| &c.refused);
            let _ = sock.set_zero_linger();
            drop(sock);
            continue;
        }
        let Ok(permit) = shared.slots.clone().try_acquire_owned() else {
            shared.count(|c| &c.over_cap);
            let _ = sock.set_zero_linger();
            drop(sock);
            continue;
        };
        let _ = sock.set_nodelay(true);
        let shared = shared.clone();
        let ends = ends.clone();
        tokio::spawn(async move {
            connection(sock, &shared, &ends).await;
            drop(permit);
        });
    }
}

/// One connection, from accept to close: cut with RST when the proxy says so.
async fn connection(sock: TcpStream, shared: &Shared, ends: &Ends) {
    // subscribed before anything else, so a cut from now on reaches this connection
    let mut cut = shared.cut.subscribe();
    let down_fd = sock.as_raw_fd();
    let up_fd = AtomicI32::new(-1);
    let work = serve(sock, shared, ends, &up_fd);
    tokio::pin!(work);
    let cut_now = tokio::select! {
        // done, or failed: its sockets are closed already (and their fds maybe reused)
        _ = &mut work => false,
        _ = cut.changed() => {
            shared.count(|c| &c.cut);
            true
        }
    };
    if cut_now {
        // `work` is pending and still owns both sockets: they close with RST when it is
        // dropped, right after this
        rst_on_close(down_fd);
        let up = up_fd.load(Ordering::SeqCst);
        if up >= 0 {
            rst_on_close(up);
        }
    }
}

/// Serves one accepted connection until both sides have closed; an error ends it (its
/// sockets close as they are, without a forced RST).
async fn serve(sock: TcpStream, shared: &Shared, ends: &Ends, up_fd: &AtomicI32) -> io::Result<()> {
    let mut down = tokio::time::timeout(HANDSHAKE_LIMIT, ends.acceptor.accept(sock))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "client TLS handshake"))??;
    let gone = shared.watch_gone.load(Ordering::SeqCst);
    if gone || shared.status_500.load(Ordering::SeqCst) {
        return answer(&mut down, gone, shared).await;
    }
    let up = tokio::time::timeout(HANDSHAKE_LIMIT, async {
        let tcp = TcpStream::connect(ends.upstream).await?;
        tcp.set_nodelay(true)?;
        up_fd.store(tcp.as_raw_fd(), Ordering::SeqCst);
        let name = ServerName::IpAddress(ends.upstream.ip().into());
        ends.connector.connect(name, tcp).await
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect upstream"))??;
    shared.count(|c| &c.forwarded);
    let (down_r, down_w) = tokio::io::split(down);
    let (up_r, up_w) = tokio::io::split(up);
    tokio::try_join!(pump(down_r, up_w, shared), pump(up_r, down_w, shared))?;
    Ok(())
}

/// Copies `from` to `to` chunk by chunk, each chunk written no earlier than the delay in force
/// when it was read; at the end of `from`, shuts `to` down (TLS close_notify, then FIN).
async fn pump<R, W>(mut from: R, mut to: W, shared: &Shared) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(MAX_CHUNKS_IN_FLIGHT);
    let read = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(n) => n,
                // a peer that closes TCP without close_notify: its end of the stream
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok(());
            }
            let delay = shared.delay();
            if !delay.is_zero() {
                shared.count(|c| &c.delayed_chunks);
            }
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .await
                .is_err()
            {
                return Ok(());
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            to.write_all(&chunk).await?;
            to.flush().await?;
        }
        to.shutdown().await
    };
    tokio::try_join!(read, write)?;
    Ok(())
}

/// The JSON `Status` of a failure.
fn status_json(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
    .to_string()
}

/// Reads the request head and answers it: under `watch_gone` a watch gets `200` with one
/// `ERROR` event (`410 Expired`), anything else `500` with a `Status`; then closes
/// (close_notify, FIN) and drains what the client still sends until it closes, so the close
/// is not a RST that could overtake the answer.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    gone: bool,
    shared: &Shared,
) -> io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let read_head = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "no request"));
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok(())
    };
    tokio::time::timeout(HANDSHAKE_LIMIT, read_head)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "request head"))??;
    let request_line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let request_line = String::from_utf8_lossy(request_line);
    let is_watch = request_line.contains("watch=true") || request_line.contains("watch=1");
    let answer = if gone && is_watch {
        shared.count(|c| &c.answered_gone);
        if request_line.contains(" /api/v1/pods?") {
            shared.count(|c| &c.answered_gone_pods);
        }
        let event = serde_json::json!({
            "type": "ERROR",
            "object": serde_json::from_str::<serde_json::Value>(&status_json(
                410,
                "Expired",
                "fault proxy: injected 410: too old resource version",
            ))
            .unwrap(),
        });
        // a body that ends with the connection, as a watch's does when the server ends it
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{event}\n"
        )
    } else {
        shared.count(|c| &c.answered_500);
        let body = status_json(
            500,
            "InternalError",
            "fault proxy: injected 500 Internal Server Error",
        );
        format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    s.write_all(answer.as_bytes()).await?;
    s.flush().await?;
    s.shutdown().await?;
    let drain = async {
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
    Ok(())
}
