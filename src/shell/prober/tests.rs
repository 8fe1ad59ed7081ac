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
use crate::core::probes::RunResult;
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
    let (status, location, body) = match path.as_str() {
        "/ok" => ("200 OK", None, "fine"),
        "/fail" => ("500 Internal Server Error", None, "secret body"),
        "/same" => ("302 Found", Some("/ok".to_string()), ""),
        "/away" => (
            "302 Found",
            Some("http://example.invalid/x".into()),
            "moved",
        ),
        "/loop" => ("302 Found", Some("/loop".into()), ""),
        "/rel/a" => ("301 Moved Permanently", Some("b".into()), ""),
        "/rel/b" => ("200 OK", None, "relative"),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ("200 OK", None, "late")
        }
        _ => ("404 Not Found", None, ""),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(l) = location {
        out.push_str(&format!("Location: {l}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    let mut stream = reader.into_inner();
    let _ = stream.write_all(out.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// An HTTP (or, with `tls`, HTTPS) server on a free loopback port.
async fn server(tls: Option<tokio_rustls::TlsAcceptor>) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let s = s.clone();
            let tls = tls.clone();
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
        Err(e) => (RunResult::Failure, e),
    }
}

#[tokio::test]
async fn pr_17_http_status_codes_redirects_and_headers() {
    let (port, seen) = server(None).await;
    let t = |p: &str| target(Scheme::Http, port, p);
    assert_eq!(
        probe_http(&t("/ok"), 1000).await,
        (RunResult::Success, "fine".into())
    );
    assert_eq!(
        probe_http(&t("/fail"), 1000).await,
        (
            RunResult::Failure,
            "HTTP probe failed with statuscode: 500".into()
        ),
        "the body is not in the message"
    );
    // same-host redirects are followed, relative ones too
    assert_eq!(probe_http(&t("/same"), 1000).await.0, RunResult::Success);
    assert_eq!(
        probe_http(&t("/rel/a"), 1000).await,
        (RunResult::Success, "relative".into())
    );
    // a redirect to another host is not followed: a warning, which counts as a success
    assert_eq!(
        probe_http(&t("/away"), 1000).await,
        (
            RunResult::Warning,
            "Probe terminated redirects, Response body: moved".into()
        )
    );
    // at most ten requests
    seen.lock().unwrap().clear();
    let (r, msg) = probe_http(&t("/loop"), 2000).await;
    assert_eq!(r, RunResult::Failure);
    assert!(msg.ends_with("stopped after 10 redirects"), "{msg}");
    assert_eq!(seen.lock().unwrap().len(), 10);
    // the kubelet's headers, and the spec's
    seen.lock().unwrap().clear();
    let mut with_headers = t("/ok");
    with_headers.headers = vec![
        ("X-Custom".into(), "yes".into()),
        ("Host".into(), "web.example".into()),
    ];
    probe_http(&with_headers, 1000).await;
    let (_, h) = seen.lock().unwrap()[0].clone();
    let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("user-agent").as_deref(), Some("kube-probe/1.31"));
    assert_eq!(get("accept").as_deref(), Some("*/*"));
    assert_eq!(get("x-custom").as_deref(), Some("yes"));
    assert_eq!(get("host").as_deref(), Some("web.example"));
    assert_eq!(get("connection").as_deref(), Some("close"));
}

#[tokio::test]
async fn pr_17_timeouts_and_refused_connections_are_failures() {
    let (port, _) = server(None).await;
    let (r, msg) = probe_http(&target(Scheme::Http, port, "/slow"), 300).await;
    assert_eq!(r, RunResult::Failure);
    assert!(msg.contains("context deadline exceeded"), "{msg}");
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = closed.local_addr().unwrap().port();
    drop(closed);
    let (r, msg) = probe_http(&target(Scheme::Http, dead, "/ok"), 1000).await;
    assert_eq!(r, RunResult::Failure);
    assert!(msg.ends_with("connect: connection refused"), "{msg}");
}

/// A self-signed certificate from the system's `openssl` (DER certificate, PKCS#8 key).
fn self_signed(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let run = |args: &[&str]| {
        let ok = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl (installed by scripts/test.sh)");
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.der",
        "-outform",
        "DER",
        "-subj",
        "/CN=localhost",
        "-days",
        "1",
    ]);
    run(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-outform", "DER", "-out", "key.der",
    ]);
    (
        std::fs::read(dir.join("cert.der")).unwrap(),
        std::fs::read(dir.join("key.der")).unwrap(),
    )
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
    assert_eq!(
        probe_http(&target(Scheme::Https, port, "/ok"), 2000).await,
        (RunResult::Success, "fine".into())
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn pr_18_tcp_connect_or_the_dial_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    assert_eq!(
        tcp::probe("127.0.0.1", port, Duration::from_secs(1)).await,
        (RunResult::Success, String::new())
    );
    drop(listener);
    assert_eq!(
        tcp::probe("127.0.0.1", port, Duration::from_secs(1)).await,
        (
            RunResult::Failure,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        )
    );
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
        let ua = req
            .metadata()
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(ua.starts_with("kube-probe/1.31"), "{ua}");
        match self.status {
            Some(s) => Ok(tonic::Response::new(HealthCheckResponse {
                status: s as i32,
            })),
            None => Err(tonic::Status::unimplemented(
                "unknown service grpc.health.v1.Health",
            )),
        }
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
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
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
    let second = Duration::from_secs(1);
    let serving = grpc_server(Some(ServingStatus::Serving), Duration::ZERO).await;
    assert_eq!(
        grpc::probe("127.0.0.1", serving, "", second).await,
        (RunResult::Success, "service healthy".into())
    );
    let not_serving = grpc_server(Some(ServingStatus::NotServing), Duration::ZERO).await;
    assert_eq!(
        grpc::probe("127.0.0.1", not_serving, "db", second).await,
        (
            RunResult::Failure,
            "service unhealthy (responded with \"NOT_SERVING\")".into()
        )
    );
    let unimplemented = grpc_server(None, Duration::ZERO).await;
    let (r, msg) = grpc::probe("127.0.0.1", unimplemented, "", second).await;
    assert_eq!(r, RunResult::Failure);
    assert!(
        msg.starts_with(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): "
        ),
        "{msg}"
    );
    let slow = grpc_server(Some(ServingStatus::Serving), Duration::from_secs(3)).await;
    assert_eq!(
        grpc::probe("127.0.0.1", slow, "", second).await,
        (
            RunResult::Failure,
            "timeout: health rpc did not complete within 1s".into()
        )
    );
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = closed.local_addr().unwrap().port();
    drop(closed);
    assert_eq!(
        grpc::probe("127.0.0.1", dead, "", second).await,
        (
            RunResult::Failure,
            format!(
                "timeout: failed to connect service \"127.0.0.1:{dead}\" within 1s: context deadline exceeded"
            )
        )
    );
}
