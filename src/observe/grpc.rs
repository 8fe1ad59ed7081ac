//! gRPC server spans: a tower layer for the embedded CRI runtime that continues the caller's
//! trace (`traceparent` in the request metadata) in a server span named after the method,
//! `runtime.v1.RuntimeService/<Method>`, as otelgrpc names them. Calls without a trace
//! context get no span.
//!
//! Owns the server side of CRI trace propagation. Must not touch requests or responses.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tracing::Instrument;

use super::context;

/// Wraps a gRPC server's services with [`ServerTrace`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerTraceLayer;

impl<S> tower::Layer<S> for ServerTraceLayer {
    type Service = ServerTrace<S>;
    fn layer(&self, inner: S) -> ServerTrace<S> {
        ServerTrace { inner }
    }
}

/// One server span per call, parented to the caller's span.
#[derive(Clone, Debug)]
pub struct ServerTrace<S> {
    inner: S,
}

/// The `grpc-status` of a response that carries it in its headers (errors), else OK.
fn status_code<B>(r: &http::Response<B>) -> i64 {
    r.headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl<S, B, RB> tower::Service<http::Request<B>> for ServerTrace<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // continue traced callers only: untraced calls (the PLEG's relists, health checks)
        // would each start a trace of their own
        let parent = match context::extract(req.headers()) {
            Some(p) if context::enabled() => p,
            _ => return Box::pin(self.inner.call(req)),
        };
        let name = req.uri().path().trim_start_matches('/').to_string();
        let (service, method) = name.split_once('/').unwrap_or((name.as_str(), ""));
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = %name,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        context::set_parent(&span, Some(&parent));
        let fut = {
            let _e = span.enter();
            self.inner.call(req)
        };
        let s = span.clone();
        Box::pin(
            async move {
                let r = fut.await;
                if let Ok(resp) = &r {
                    let code = status_code(resp);
                    s.record("rpc.grpc.status_code", code);
                    if code != 0 {
                        s.record("otel.status_code", "error");
                    }
                }
                r
            }
            .instrument(span),
        )
    }
}
