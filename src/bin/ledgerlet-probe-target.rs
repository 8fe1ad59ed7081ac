//! `ledgerlet-probe-target`: a small program to run as a container when trying probes on
//! the embedded runtime (used by the integration tests and handy for demos). It serves,
//! on 127.0.0.1:
//!
//! * `--http PORT`: `GET /healthz` → 200 `ok` while healthy, else 500; `/redirect` → 302 to
//!   `/healthz`; `/away` → 302 to another host; every request is logged on stdout with its
//!   `User-Agent`;
//! * `--tcp PORT`: accepts connections while healthy (closes the listener otherwise);
//! * `--grpc PORT`: `grpc.health.v1.Health/Check` → SERVING while healthy, else NOT_SERVING.
//!
//! It is healthy while `--healthy-file PATH` exists (always, without the flag). It runs
//! until killed; SIGTERM ends it at once unless `--term-delay-ms N` keeps it serving N ms
//! more (a slow shutdown).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ledgerlet::shell::prober::health::health_check_response::ServingStatus;
use ledgerlet::shell::prober::health::health_server::{Health, HealthServer};
use ledgerlet::shell::prober::health::{HealthCheckRequest, HealthCheckResponse};
use tokio::net::TcpListener;

/// A probe target for the embedded runtime: HTTP, TCP and gRPC health on 127.0.0.1.
#[derive(clap::Parser)]
#[command(name = "ledgerlet-probe-target")]
struct Opts {
    /// Serve HTTP on this port.
    #[arg(long, value_name = "PORT")]
    http: Option<u16>,
    /// Accept TCP connections on this port while healthy.
    #[arg(long, value_name = "PORT")]
    tcp: Option<u16>,
    /// Serve gRPC health checks on this port.
    #[arg(long, value_name = "PORT")]
    grpc: Option<u16>,
    /// Healthy while this file exists (always, without it).
    #[arg(long, value_name = "PATH")]
    healthy_file: Option<PathBuf>,
    /// Keep serving this long after SIGTERM.
    #[arg(long, value_name = "N", default_value_t = 0)]
    term_delay_ms: u64,
}

/// A port that cannot be served: said on stderr, exit code 2.
fn fail(msg: &str) -> ! {
    eprintln!("ledgerlet-probe-target: {msg}");
    std::process::exit(2)
}

fn healthy(o: &Opts) -> bool {
    o.healthy_file.as_ref().is_none_or(|p| p.exists())
}

async fn serve_http(o: Arc<Opts>, port: u16) {
    use axum::http::{header, HeaderMap, StatusCode, Uri};
    use axum::response::IntoResponse;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| fail(&format!("--http {port}: {e}")));
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let o = o.clone();
        async move {
            let agent = headers
                .get(header::USER_AGENT)
                .map(|v| v.to_str().unwrap_or("?"));
            println!("GET {uri} user-agent={}", agent.unwrap_or(""));
            let found = |to, body| (StatusCode::FOUND, [(header::LOCATION, to)], body);
            match uri.path() {
                "/healthz" if healthy(&o) => (StatusCode::OK, "ok").into_response(),
                "/healthz" => (StatusCode::INTERNAL_SERVER_ERROR, "unhealthy").into_response(),
                "/redirect" => found("/healthz", "").into_response(),
                "/away" => found("http://example.invalid/", "elsewhere").into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("HTTP server: {e}");
        std::process::exit(1);
    }
}

async fn serve_tcp(o: Arc<Opts>, port: u16) {
    loop {
        if !healthy(&o) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| fail(&format!("--tcp {port}: {e}")));
        while healthy(&o) {
            if let Ok(Ok((conn, _))) =
                tokio::time::timeout(Duration::from_millis(100), listener.accept()).await
            {
                drop(conn);
            }
        }
    }
}

struct SwitchableHealth(Arc<Opts>);

#[tonic::async_trait]
impl Health for SwitchableHealth {
    async fn check(
        &self,
        req: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        let status = if healthy(&self.0) {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        println!(
            "Check service={:?} -> {}",
            req.get_ref().service,
            status.as_str_name()
        );
        Ok(tonic::Response::new(HealthCheckResponse {
            status: status as i32,
        }))
    }

    type WatchStream = tokio_stream::Empty<Result<HealthCheckResponse, tonic::Status>>;

    async fn watch(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("Watch is not served here"))
    }
}

async fn serve_grpc(o: Arc<Opts>, port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| fail(&format!("--grpc {port}: {e}")));
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    if let Err(e) = tonic::transport::Server::builder()
        .add_service(HealthServer::new(SwitchableHealth(o)))
        .serve_with_incoming(incoming)
        .await
    {
        eprintln!("gRPC server: {e}");
        std::process::exit(1);
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = Arc::new(<Opts as clap::Parser>::parse());
    if let Some(p) = o.http {
        tokio::spawn(serve_http(o.clone(), p));
    }
    if let Some(p) = o.tcp {
        tokio::spawn(serve_tcp(o.clone(), p));
    }
    if let Some(p) = o.grpc {
        tokio::spawn(serve_grpc(o.clone(), p));
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    term.recv().await;
    println!("SIGTERM");
    tokio::time::sleep(Duration::from_millis(o.term_delay_ms)).await;
}
