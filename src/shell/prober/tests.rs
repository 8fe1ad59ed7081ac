//! PR-17…PR-19 against real servers on loopback sockets (HTTP, HTTPS, TCP, gRPC health).
//! PR-16 (exec) needs a CRI runtime: it is pinned by `tests/probes.rs` on the embedded one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::health::health_check_response::ServingStatus;
use super::health::health_server::{Health, HealthServer};
use super::health::{HealthCheckRequest, HealthCheckResponse};
use super::{grpc, http_result, tcp};
use crate::core::probes::RunResult::{self, *};
use crate::shell::http_get::{self, Scheme, Target};

type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>)>>>;

async fn respond<S: AsyncRead + AsyncWrite + Unpin>(stream: S, seen: Seen) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).await.unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    seen.lock().unwrap().push((path.clone(), headers));
    let (status, extra_headers, body) = match path.as_str() {
        "/ok" => ("200 OK", "", "fine"),
        "/fail" => ("500 Internal Server Error", "", "secret body"),
        "/same" => ("302 Found", "Location: /ok\r\n", ""),
        "/away" => (
            "302 Found",
            "Location: http://example.invalid/x\r\n",
            "moved",
        ),
        "/loop" => ("302 Found", "Location: /loop\r\n", ""),
        "/rel/a" => ("301 Moved Permanently", "Location: b\r\n", ""),
        "/rel/b" => ("200 OK", "", "relative"),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ("200 OK", "", "late")
        }
        _ => ("404 Not Found", "", ""),
    };
    let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    let out = format!("{head}Connection: close\r\n{extra_headers}\r\n{body}");
    let mut stream = reader.into_inner();
    let _ = stream.write_all(out.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// An HTTP (or, with `tls`, HTTPS) server on a free loopback port.
async fn server(tls: Option<tokio_rustls::TlsAcceptor>) -> (u16, Seen) {
    let (listener, port) = listen().await;
    let seen: Seen = Arc::default();
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let (s, tls) = (s.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(t) = acceptor.accept(conn).await {
                            respond(t, s).await;
                        }
                    }
                    None => respond(conn, s).await,
                }
            });
        }
    });
    (port, seen)
}

fn target(scheme: Scheme, port: u16, path: &str) -> Target {
    Target {
        scheme,
        host: "127.0.0.1".into(),
        port,
        path: path.into(),
        headers: vec![],
    }
}

async fn probe_http(t: &Target, timeout_ms: u64) -> (RunResult, String) {
    match http_get::get(t, Duration::from_millis(timeout_ms), "kube-probe/1.31").await {
        Ok(r) => http_result(&r),
        Err(e) => (Failure, e),
    }
}

/// A listener on a free loopback port (once dropped, a port nothing listens on).
async fn listen() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Checks a probe result; `want` is the whole message, or with a leading `*` its end, with a
/// trailing `*` its start, with both something it contains.
fn check(label: &str, (r, msg): (RunResult, String), want_r: RunResult, want: &str) {
    assert_eq!(r, want_r, "{label}: {msg}");
    let ok = match (want.strip_prefix('*'), want.strip_suffix('*')) {
        (Some(_), Some(_)) => msg.contains(want.trim_matches('*')),
        (Some(end), None) => msg.ends_with(end),
        (None, Some(start)) => msg.starts_with(start),
        (None, None) => msg == want,
    };
    assert!(ok, "{label}: {msg:?} does not match {want:?}");
}

#[tokio::test]
async fn pr_17_http_status_codes_redirects_and_headers() {
    let (port, seen) = server(None).await;
    let t = |p: &str| target(Scheme::Http, port, p);
    let status_500 = "HTTP probe failed with statuscode: 500";
    let moved = "Probe terminated redirects, Response body: moved";
    for (label, path, want_r, want) in [
        ("200", "/ok", Success, "fine"),
        ("no body in the message", "/fail", Failure, status_500),
        ("same-host redirects are followed", "/same", Success, "*"),
        ("relative ones too", "/rel/a", Success, "relative"),
        // a redirect to another host is not followed: a warning, which counts as a success
        ("other host", "/away", Warning, moved),
    ] {
        check(label, probe_http(&t(path), 1000).await, want_r, want);
    }
    // at most ten requests
    seen.lock().unwrap().clear();
    let got = probe_http(&t("/loop"), 2000).await;
    check("loop", got, Failure, "*stopped after 10 redirects");
    assert_eq!(seen.lock().unwrap().len(), 10);
    // the kubelet's headers, and the spec's
    seen.lock().unwrap().clear();
    let mut with_headers = t("/ok");
    let headers = [("X-Custom", "yes"), ("Host", "web.example")];
    with_headers.headers = headers.map(|(k, v)| (k.into(), v.into())).to_vec();
    probe_http(&with_headers, 1000).await;
    let (_, h) = seen.lock().unwrap()[0].clone();
    for (k, v) in [
        ("user-agent", "kube-probe/1.31"),
        ("accept", "*/*"),
        ("x-custom", "yes"),
        ("host", "web.example"),
        ("connection", "close"),
    ] {
        let got = h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(got, Some(v), "header {k}");
    }
}

#[tokio::test]
async fn pr_17_timeouts_and_refused_connections_are_failures() {
    let (port, _) = server(None).await;
    let got = probe_http(&target(Scheme::Http, port, "/slow"), 300).await;
    check("timeout", got, Failure, "*context deadline exceeded*");
    let dead = listen().await.1;
    let got = probe_http(&target(Scheme::Http, dead, "/ok"), 1000).await;
    check("refused", got, Failure, "*connect: connection refused");
}

/// A self-signed certificate from the system's `openssl` (DER certificate, PKCS#8 key).
fn self_signed(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    for args in [
        "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem \
         -out cert.der -outform DER -subj /CN=localhost -days 1",
        "pkcs8 -topk8 -nocrypt -in key.pem -outform DER -out key.der",
    ] {
        let ok = std::process::Command::new("openssl")
            .args(args.split_whitespace())
            .current_dir(dir)
            .output()
            .expect("openssl (installed by scripts/test.sh)");
        let stderr = String::from_utf8_lossy(&ok.stderr);
        assert!(ok.status.success(), "{stderr}");
    }
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    (read("cert.der"), read("key.der"))
}

#[tokio::test]
async fn pr_17_https_without_certificate_verification() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(cert)],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.into()),
        )
        .unwrap();
    let (port, seen) = server(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await;
    let got = probe_http(&target(Scheme::Https, port, "/ok"), 2000).await;
    check("https", got, Success, "fine");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn pr_18_tcp_connect_or_the_dial_error() {
    let (listener, port) = listen().await;
    let second = Duration::from_secs(1);
    let got = tcp::probe("127.0.0.1", port, second).await;
    check("open", got, Success, "");
    drop(listener);
    let want = format!("dial tcp 127.0.0.1:{port}: connect: connection refused");
    let got = tcp::probe("127.0.0.1", port, second).await;
    check("closed", got, Failure, &want);
}

/// A health service answering `status` for every service, after `delay`.
struct TestHealth {
    status: Option<ServingStatus>,
    delay: Duration,
}

#[tonic::async_trait]
impl Health for TestHealth {
    async fn check(
        &self,
        req: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        tokio::time::sleep(self.delay).await;
        let ua = req.metadata().get("user-agent");
        let ua = ua.and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(ua.starts_with("kube-probe/1.31"), "{ua}");
        let unknown = || tonic::Status::unimplemented("unknown service grpc.health.v1.Health");
        let status = self.status.ok_or_else(unknown)? as i32;
        Ok(tonic::Response::new(HealthCheckResponse { status }))
    }

    type WatchStream = tokio_stream::Empty<Result<HealthCheckResponse, tonic::Status>>;

    async fn watch(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("watch"))
    }
}

async fn grpc_server(status: Option<ServingStatus>, delay: Duration) -> u16 {
    let (listener, port) = listen().await;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(HealthServer::new(TestHealth { status, delay }))
            .serve_with_incoming(incoming),
    );
    port
}

#[tokio::test]
async fn pr_19_grpc_health_check_results_and_messages() {
    use ServingStatus::*;
    let second = Duration::from_secs(1);
    let unhealthy = "service unhealthy (responded with \"NOT_SERVING\")";
    let unimplemented =
        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): *";
    let slow = "timeout: health rpc did not complete within 1s";
    for (label, status, delay_s, service, want_r, want) in [
        ("serving", Some(Serving), 0, "", Success, "service healthy"),
        ("not serving", Some(NotServing), 0, "db", Failure, unhealthy),
        ("unimplemented", None, 0, "", Failure, unimplemented),
        ("slow", Some(Serving), 3, "", Failure, slow),
    ] {
        let port = grpc_server(status, Duration::from_secs(delay_s)).await;
        let got = grpc::probe("127.0.0.1", port, service, second).await;
        check(label, got, want_r, want);
    }
    let dead = listen().await.1;
    let refused = format!(
        "timeout: failed to connect service \"127.0.0.1:{dead}\" within 1s: context deadline exceeded"
    );
    let got = grpc::probe("127.0.0.1", dead, "", second).await;
    check("refused", got, Failure, &refused);
}
