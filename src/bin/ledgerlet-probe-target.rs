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
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

#[derive(Clone, Default)]
struct Opts {
    http: Option<u16>,
    tcp: Option<u16>,
    grpc: Option<u16>,
    healthy_file: Option<PathBuf>,
    term_delay_ms: u64,
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "ledgerlet-probe-target: {msg}\nusage: ledgerlet-probe-target [--http PORT] [--tcp PORT] [--grpc PORT] [--healthy-file PATH] [--term-delay-ms N]"
    );
    std::process::exit(2)
}

fn parse() -> Opts {
    let mut o = Opts::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let port = || {
            value
                .parse::<u16>()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a port: {value}")))
        };
        match flag.as_str() {
            "--http" => o.http = Some(port()),
            "--tcp" => o.tcp = Some(port()),
            "--grpc" => o.grpc = Some(port()),
            "--healthy-file" => o.healthy_file = Some(PathBuf::from(&value)),
            "--term-delay-ms" => {
                o.term_delay_ms = value
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("{flag}: not a number: {value}")))
            }
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    o
}

fn healthy(o: &Opts) -> bool {
    o.healthy_file.as_ref().is_none_or(|p| p.exists())
}

async fn serve_http(o: Arc<Opts>, port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| usage(&format!("--http {port}: {e}")));
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            continue;
        };
        let o = o.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(conn);
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let mut agent = String::new();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).await.unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.trim_end().split_once(':') {
                    if k.eq_ignore_ascii_case("user-agent") {
                        agent = v.trim().to_string();
                    }
                }
            }
            println!("GET {path} user-agent={agent}");
            let (status, location, body) = match path.as_str() {
                "/healthz" if healthy(&o) => ("200 OK", None, "ok"),
                "/healthz" => ("500 Internal Server Error", None, "unhealthy"),
                "/redirect" => ("302 Found", Some("/healthz"), ""),
                "/away" => ("302 Found", Some("http://example.invalid/"), "elsewhere"),
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
            let mut conn = reader.into_inner();
            let _ = conn.write_all(out.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
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
            .unwrap_or_else(|e| usage(&format!("--tcp {port}: {e}")));
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
        .unwrap_or_else(|e| usage(&format!("--grpc {port}: {e}")));
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
    let o = Arc::new(parse());
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
