//! The OpenTelemetry pipeline: where spans go, which are sampled, and what resource they
//! carry.
//!
//! Owns starting the exporter the configuration names (`observe::otlp_config` resolves it:
//! OTLP/gRPC as the kubelet's, or OTLP/HTTP), the SDK tracer provider that
//! `tracing-opentelemetry` uses for command, CRI and status spans, and the fold tracer the
//! engine uses for fold spans. Both feed one bounded queue (`observe::export`). Must not be
//! started more than once per process; with no endpoint nothing is exported and no span
//! context is created.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use super::context::{self, IdGen, RootSampler};
use super::export::{ExportOptions, Exporting, Transport};
use super::fold::FoldTracer;
use super::otlp_config::{self, Compression, Protocol};
use super::otlp_grpc::OtlpGrpc;
use super::otlp_http::OtlpHttp;

static GLOBAL: std::sync::OnceLock<Tracing> = std::sync::OnceLock::new();

/// Starts the process-wide pipeline (once; later calls return the first one).
pub fn install(cfg: &TracingConfig) -> Result<&'static Tracing, TracingError> {
    if let Some(t) = GLOBAL.get() {
        return Ok(t);
    }
    let t = Tracing::start(cfg)?;
    Ok(GLOBAL.get_or_init(|| t))
}

/// The process-wide pipeline, when tracing is on.
pub fn global() -> Option<&'static Tracing> {
    GLOBAL.get()
}

/// Tracing configuration (kubelet `TracingConfiguration` plus the queue's bounds).
#[derive(Clone, Debug, PartialEq)]
pub struct TracingConfig {
    /// The collector's URI (`otlp_config::resolve`: `http://host:port`, with the path for
    /// OTLP/HTTP).
    pub endpoint: String,
    /// How spans are sent.
    pub protocol: Protocol,
    /// How request bodies are compressed.
    pub compression: Compression,
    /// Roots sampled per million (children follow their parent).
    pub sampling_rate_per_million: u32,
    /// Batching and bounds.
    pub export: ExportOptions,
    /// `service.name` (`OTEL_SERVICE_NAME` wins when set).
    pub service_name: String,
    /// `k8s.node.name`.
    pub node_name: String,
    /// `host.name`.
    pub host_name: String,
}

/// Why the pipeline could not start.
#[derive(Debug, thiserror::Error)]
pub enum TracingError {
    /// The endpoint is not a usable URI.
    #[error("invalid tracing endpoint {endpoint:?} ({origin}): {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// The flag or variable it came from.
        origin: &'static str,
        /// Why.
        reason: String,
    },
    /// A protocol or compression ledgerlet does not speak.
    #[error("invalid {value:?} ({origin}): {reason}")]
    Setting {
        /// The value as given.
        value: String,
        /// The flag or variable it came from.
        origin: &'static str,
        /// Why.
        reason: String,
    },
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` or `OTEL_EXPORTER_OTLP_HEADERS` is malformed.
    #[error("invalid OTLP export headers: {0}")]
    Headers(String),
    /// The exporter or its thread could not start.
    #[error("cannot start the OTLP exporter: {0}")]
    Start(String),
}

/// The resource every span carries.
pub fn resource(cfg: &TracingConfig) -> Resource {
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| cfg.service_name.clone());
    Resource::builder()
        .with_service_name(service)
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("host.name", cfg.host_name.clone()),
            KeyValue::new("k8s.node.name", cfg.node_name.clone()),
        ])
        .build()
}

/// A running pipeline.
pub struct Tracing {
    exporting: Exporting,
    provider: SdkTracerProvider,
    sampler: RootSampler,
}

impl Tracing {
    /// Starts the pipeline exporting OTLP to `cfg.endpoint` with `cfg.protocol`. The
    /// connection is made lazily: an unreachable collector is not an error (its spans are
    /// dropped and counted).
    pub fn start(cfg: &TracingConfig) -> Result<Tracing, TracingError> {
        let headers = otlp_config::headers_from_env().map_err(TracingError::Headers)?;
        let timeout = Duration::from_millis(cfg.export.export_timeout_ms.max(1));
        let (endpoint, compression) = (cfg.endpoint.clone(), cfg.compression);
        match cfg.protocol {
            Protocol::Grpc => Tracing::start_with(cfg, move || {
                OtlpGrpc::connect_lazy(&endpoint, timeout, &headers, compression)
            }),
            Protocol::HttpProtobuf => {
                Tracing::start_with(cfg, move || OtlpHttp::new(&endpoint, &headers, compression))
            }
        }
    }

    /// Starts the pipeline with any transport (benchmarks and unit tests).
    pub fn start_with<T, F>(cfg: &TracingConfig, make: F) -> Result<Tracing, TracingError>
    where
        T: Transport,
        F: FnOnce() -> Result<T, String> + Send + 'static,
    {
        let resource = resource(cfg);
        let exporting =
            Exporting::start(&cfg.export, resource.clone(), make).map_err(TracingError::Start)?;
        let sampler = RootSampler::new(cfg.sampling_rate_per_million);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(exporting.processor())
            .with_sampler(sampler.sdk_sampler())
            .with_resource(resource)
            .build();
        Ok(Tracing {
            exporting,
            provider,
            sampler,
        })
    }

    /// The tracer for `tracing-opentelemetry`.
    pub fn tracer(&self) -> SdkTracer {
        // the fold spans' scope too, so a request holds one scope
        self.provider.tracer_with_scope(super::export::scope())
    }

    /// A fold tracer for an engine (one per engine).
    pub fn fold_tracer(&self) -> FoldTracer {
        FoldTracer::new(
            self.sampler,
            IdGen::from_os(),
            self.exporting.queue().clone(),
        )
    }

    /// The export queue (for tests and metrics).
    pub fn exporting(&self) -> &Exporting {
        &self.exporting
    }

    /// Exports what is queued, waiting at most `timeout`.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.exporting.flush(timeout)
    }

    /// Exports what is queued (bounded by `timeout`) and stops exporting.
    pub fn shutdown(&self, timeout: Duration) {
        context::set_enabled(false);
        let _ = self.provider.shutdown_with_timeout(timeout);
        self.exporting.shutdown(timeout);
    }
}
