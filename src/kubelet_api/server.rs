//! The kubelet API's HTTPS accept loop and its authentication/authorization layer.
//!
//! Owns the listener, the TLS handshakes, the per-connection HTTP/1.1 server and the guard
//! every route sits behind (401 `Unauthorized`, 403 with the kubelet's message, 500 when a
//! review fails). Must not hold anything unbounded: connections, handshake time, header
//! bytes and request bodies all have limits, and hostile input gets a 4xx or a closed
//! connection, never a panic. Must not let a token reach a handler, a log or a span.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;

use super::attributes;
use super::authn::{Authenticator, User};
use super::authz::{Authorizer, Decision};

/// The identity the node gives its API to: who may authenticate, and how requests are
/// authorized.
pub struct KubeletApi {
    /// The node's name (the `nodes/<name>` every review names).
    pub node_name: String,
    /// Certificates, tokens, anonymous.
    pub authn: Authenticator,
    /// `AlwaysAllow` or `Webhook`.
    pub authz: Authorizer,
}

/// What one client may cost the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once; more are closed at accept.
    pub max_connections: usize,
    /// A TLS handshake not done by then is dropped.
    pub handshake_timeout: Duration,
    /// A request whose headers are not all in by then is dropped.
    pub header_read_timeout: Duration,
    /// The HTTP read buffer: larger request headers get 431.
    pub max_header_bytes: usize,
    /// A larger request body gets 413.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            max_header_bytes: 64 * 1024,
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// The user a verified client certificate named, put on each request of its connection.
#[derive(Clone, Debug)]
struct PeerUser(Option<User>);

/// `routes` behind the authentication and authorization guard (every route, and the 404
/// fallback, needs a user and an allowed review).
pub fn guarded(api: Arc<KubeletApi>, routes: Router, limits: Limits) -> Router {
    routes.layer(axum::middleware::from_fn_with_state(
        (api, limits.max_body_bytes),
        guard,
    ))
}

async fn guard(
    State((api, max_body)): State<(Arc<KubeletApi>, usize)>,
    req: Request,
    next: Next,
) -> Response {
    let certificate_user = req.extensions().get::<PeerUser>().and_then(|p| p.0.clone());
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let Some(user) = api
        .authn
        .authenticate(certificate_user, authorization.as_deref())
        .await
    else {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    let attrs = attributes::for_request(req.method().as_str(), req.uri().path());
    match api.authz.authorize(&user, &attrs, &api.node_name).await {
        Decision::Allowed => {}
        Decision::Denied => {
            tracing::info!(user = %user.name, verb = attrs.verb, subresources = ?attrs.subresources, path = req.uri().path(), "kubelet API request forbidden");
            return (
                StatusCode::FORBIDDEN,
                attributes::forbidden_message(&user.name, &attrs),
            )
                .into_response();
        }
        Decision::Error {
            subresource,
            reason,
        } => {
            tracing::warn!(user = %user.name, verb = attrs.verb, subresource, error = %reason, "kubelet API authorization error");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "Authorization error (user={}, verb={}, resource=nodes, subresource={subresource})",
                    user.name, attrs.verb
                ),
            )
                .into_response();
        }
    }
    let too_big = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > max_body as u64);
    if too_big {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body larger than {max_body} bytes\n"),
        )
            .into_response();
    }
    let (mut parts, body) = req.into_parts();
    // no handler sees the token
    parts.headers.remove(header::AUTHORIZATION);
    let body = Body::new(http_body_util::Limited::new(body, max_body));
    next.run(Request::from_parts(parts, body)).await
}

/// Serves `app` (already [`guarded`]) over TLS on `listener` until `shutdown` turns true.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let accepted = tokio::select! {
            _ = wait_true(&mut shutdown) => return,
            a = listener.accept() => a,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // e.g. out of file descriptors: wait a little rather than spin
                tracing::warn!(error = %e, "kubelet API: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = limits.max_connections, "kubelet API: too many connections, closing a new one");
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _slot = slot;
            connection(acceptor, tcp, app, limits, shutdown).await;
        });
    }
}

async fn wait_true(rx: &mut watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// One connection: the handshake (bounded in time), then HTTP/1.1 with bounded headers.
async fn connection(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    app: Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let stream = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "kubelet API: TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("kubelet API: TLS handshake timed out");
            return;
        }
    };
    let user = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| super::authn::user_from_certificate(c));
    let peer = PeerUser(user);
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(peer.clone());
        app.clone().oneshot(req)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192));
    let conn = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = wait_true(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
        }
    }
}
