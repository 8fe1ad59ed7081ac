//! The upgrade-aware proxy to the runtime's streaming server (the kubelet's `proxyStream`,
//! apimachinery's `UpgradeAwareHandler` with an upgrade required).
//!
//! Owns the second hop of `/exec`, `/attach` and `/portForward`: the client's upgrade request
//! is replayed to the URL the runtime gave, a `101 Switching Protocols` is passed back and the
//! two connections are joined byte for byte (SPDY and WebSocket alike, whatever the client and
//! the runtime agree on); a refusal of 400 or more is passed back as it is. Must not: read or
//! rewrite the streams, forward the client's credentials (the guard has removed them), or
//! outlive either side: when one direction ends, both connections close.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::sync::OwnedSemaphorePermit;

/// The client asked to switch protocols (a `Connection` header naming `upgrade`, as
/// apimachinery's `IsUpgradeRequest` checks).
pub fn is_upgrade_request(req: &Request) -> bool {
    req.headers().get_all(header::CONNECTION).iter().any(|v| {
        v.as_bytes()
            .to_ascii_lowercase()
            .windows(7)
            .any(|w| w == b"upgrade")
    })
}

/// The client asked for a WebSocket (`Upgrade: websocket`).
pub fn is_websocket_request(req: &Request) -> bool {
    is_upgrade_request(req)
        && req
            .headers()
            .get(header::UPGRADE)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
}

/// The kubelet's answer when proxying fails: 500 with the error's text.
pub fn failure(message: impl Into<String>) -> Response {
    let mut body = message.into();
    body.push('\n');
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Proxies the upgrade request `req` to `url` (the runtime's `http://host:port/path`). The
/// joined connections hold `permit` until they close.
pub async fn proxy_stream(mut req: Request, url: &str, permit: OwnedSemaphorePermit) -> Response {
    let target: Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => return failure(format!("the runtime's streaming URL {url:?}: {e}")),
    };
    if target.scheme_str() != Some("http") {
        return failure(format!(
            "the runtime's streaming URL {url:?}: only http streaming servers are supported"
        ));
    }
    let Some(authority) = target.authority().cloned() else {
        return failure(format!("the runtime's streaming URL {url:?} has no host"));
    };
    let address = match authority.port_u16() {
        Some(_) => authority.as_str().to_string(),
        None => format!("{}:80", authority.host()),
    };
    let backend = match tokio::net::TcpStream::connect(&address).await {
        Ok(s) => s,
        Err(e) => return failure(format!("dial tcp {address}: {e}")),
    };
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(backend)).await {
            Ok(pair) => pair,
            Err(e) => return failure(format!("streaming server at {address}: {e}")),
        };
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });

    let on_client = hyper::upgrade::on(&mut req);
    let path = target
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut forward = hyper::Request::builder()
        .method(req.method().clone())
        .uri(path)
        .body(Empty::<bytes::Bytes>::new())
        .expect("a request from valid parts");
    for (name, value) in req.headers() {
        if name != header::HOST
            && name != header::CONTENT_LENGTH
            && name != header::TRANSFER_ENCODING
        {
            forward.headers_mut().append(name.clone(), value.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
        forward.headers_mut().insert(header::HOST, host);
    }

    let mut answer = match sender.send_request(forward).await {
        Ok(r) => r,
        Err(e) => return failure(format!("streaming server at {address}: {e}")),
    };
    let status = answer.status();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        if status.as_u16() < 400 {
            return failure(format!(
                "invalid upgrade response: status code {}",
                status.as_u16()
            ));
        }
        // the runtime's refusal (an expired token, an unsupported protocol) as it is
        return answer.map(Body::new).into_response();
    }
    let on_backend = hyper::upgrade::on(&mut answer);
    let mut to_client = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        to_client = to_client.header(name, value);
    }
    tokio::spawn(async move {
        let _permit = permit;
        let (client, backend) = match tokio::join!(on_client, on_backend) {
            (Ok(c), Ok(b)) => (c, b),
            (c, b) => {
                tracing::debug!(client = ?c.err(), runtime = ?b.err(), "stream upgrade failed");
                return;
            }
        };
        join(TokioIo::new(client), TokioIo::new(backend)).await;
    });
    to_client
        .body(Body::empty())
        .expect("a response from valid parts")
}

/// Copies both ways until either direction ends (the client or the runtime closed, or a
/// write failed), then drops both connections, as the kubelet's proxy does.
async fn join<A, B>(a: A, b: B)
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    tokio::select! {
        _ = tokio::io::copy(&mut a_read, &mut b_write) => {}
        _ = tokio::io::copy(&mut b_read, &mut a_write) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut b = Request::builder().uri("/exec/ns/p/c");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Body::empty()).unwrap()
    }

    #[test]
    fn an_upgrade_request_names_upgrade_in_any_connection_header() {
        assert!(is_upgrade_request(&request(&[("Connection", "Upgrade")])));
        assert!(is_upgrade_request(&request(&[(
            "connection",
            "keep-alive, upgrade"
        )])));
        assert!(!is_upgrade_request(&request(&[(
            "Connection",
            "keep-alive"
        )])));
        assert!(!is_upgrade_request(&request(&[("Upgrade", "SPDY/3.1")])));
        assert!(is_websocket_request(&request(&[
            ("Connection", "Upgrade"),
            ("Upgrade", "WebSocket")
        ])));
        assert!(!is_websocket_request(&request(&[
            ("Connection", "Upgrade"),
            ("Upgrade", "SPDY/3.1")
        ])));
    }
}
