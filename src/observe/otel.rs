//! The OpenTelemetry pipeline: where spans go, which are sampled, and what resource they
//! carry.
//!
//! Owns the choice of exporter (`opentelemetry-otlp`: OTLP/gRPC over tonic as the kubelet's,
//! or OTLP/HTTP with protobuf bodies), the SDK's batch span processor behind a bound of our
//! own that counts what it drops, the SDK tracer provider that `tracing-opentelemetry` uses
//! for command, CRI and status spans, and the fold tracer the engine uses for fold spans.
//! Both kinds of span go through the same bound and batch processor, and its metrics:
//! `ledgerlet_trace_spans_dropped_total`, `ledgerlet_trace_spans_exported_total`,
//! `ledgerlet_trace_export_errors_total`, `ledgerlet_trace_queue_spans` and
//! `ledgerlet_trace_queue_capacity_spans`. Must not be started more than once per process;
//! with no endpoint nothing is exported and no span context is created.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};
use opentelemetry_sdk::Resource;

use super::context::{self, IdGen, RootSampler};
use super::fold::FoldTracer;

/// Spans dropped because the queue was full.
pub const SPANS_DROPPED_TOTAL: &str = "ledgerlet_trace_spans_dropped_total";
/// Spans the collector accepted.
pub const SPANS_EXPORTED_TOTAL: &str = "ledgerlet_trace_spans_exported_total";
/// Export calls that failed or timed out (their spans are lost).
pub const EXPORT_ERRORS_TOTAL: &str = "ledgerlet_trace_export_errors_total";
/// Spans waiting for export (queued, batched or being sent).
pub const QUEUE_SPANS: &str = "ledgerlet_trace_queue_spans";
/// The queue's bound.
pub const QUEUE_CAPACITY_SPANS: &str = "ledgerlet_trace_queue_capacity_spans";

/// The instrumentation scope of every ledgerlet span.
pub const SCOPE: &str = "ledgerlet";

/// Where the protocol is read from, most specific first (after `--tracing-protocol`).
pub const PROTOCOL_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
/// The endpoint variables (the SDK reads them; one set turns tracing on).
pub const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];
/// The header variables (the SDK reads them; ledgerlet refuses malformed ones at start-up).
pub const HEADER_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_HEADERS",
];

/// The instrumentation scope of every ledgerlet span, with the agent's version.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope::builder(SCOPE)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

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

/// How spans are sent to the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC (the kubelet's only protocol, and ledgerlet's default).
    Grpc,
    /// OTLP/HTTP with binary protobuf bodies.
    HttpProtobuf,
}

impl Protocol {
    /// The name the OpenTelemetry variables use.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// Parses a protocol name (`grpc`, `http/protobuf`).
    pub fn parse(value: &str) -> Result<Protocol, String> {
        match value.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Err("http/json is not supported; use http/protobuf or grpc".into()),
            _ => Err("expected grpc or http/protobuf".into()),
        }
    }
}

/// Tracing configuration (kubelet `TracingConfiguration` plus the batch processor's bounds).
#[derive(Clone, Debug, PartialEq)]
pub struct TracingConfig {
    /// `--tracing-endpoint` as a URI for the exporter; `None`: the SDK reads the
    /// `OTEL_EXPORTER_OTLP_*ENDPOINT` variables.
    pub endpoint: Option<String>,
    /// How spans are sent.
    pub protocol: Protocol,
    /// `--tracing-compression` (`None`: the SDK reads the compression variables).
    pub gzip: Option<bool>,
    /// Roots sampled per million (children follow their parent).
    pub sampling_rate_per_million: u32,
    /// Batching, bounds and retries.
    pub export: ExportOptions,
    /// `service.name` (`OTEL_SERVICE_NAME` wins when set).
    pub service_name: String,
    /// `k8s.node.name`.
    pub node_name: String,
    /// `host.name`.
    pub host_name: String,
}

/// How the batch processor batches, and the exporter times out and retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// The queue's bound, in spans.
    pub max_queue_size: usize,
    /// Spans per export call.
    pub max_export_batch_size: usize,
    /// How often the batch processor exports.
    pub export_period_ms: u64,
    /// Longest time one export call may take, its retries included.
    pub export_timeout_ms: u64,
    /// The first wait before a failed export is sent again; 0 turns retries off.
    pub retry_initial_backoff_ms: u64,
    /// The longest wait between retries.
    pub retry_max_backoff_ms: u64,
}

impl Default for ExportOptions {
    /// The OpenTelemetry batch processor's defaults, with a shorter period (1 s, not 5 s) so a
    /// pod's spans show up in Jaeger while one looks at it.
    fn default() -> Self {
        ExportOptions {
            max_queue_size: 2048,
            max_export_batch_size: 512,
            export_period_ms: 1000,
            export_timeout_ms: 10_000,
            retry_initial_backoff_ms: 5_000,
            retry_max_backoff_ms: 30_000,
        }
    }
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
    /// The exporter or its runtime could not start.
    #[error("cannot start the OTLP exporter: {0}")]
    Start(String),
}

/// The protocol: `--tracing-protocol`, else the first protocol variable set (`env` looks
/// one up; blank counts as unset), else gRPC. A value ledgerlet does not speak is an error
/// naming where it came from.
pub fn protocol(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Protocol, TracingError> {
    let given = flag
        .map(|v| (v.to_string(), "--tracing-protocol"))
        .or_else(|| {
            PROTOCOL_VARIABLES
                .iter()
                .find_map(|k| env(k).filter(|v| !v.trim().is_empty()).map(|v| (v, *k)))
        });
    let Some((value, origin)) = given else {
        return Ok(Protocol::Grpc);
    };
    Protocol::parse(&value).map_err(|reason| TracingError::Setting {
        value,
        origin,
        reason,
    })
}

/// `--tracing-endpoint` as the exporter's URI: empty means the protocol's default
/// (`localhost:4317`, or `localhost:4318` for OTLP/HTTP), `host:port` (the kubelet's form)
/// becomes `http://host:port`, and an OTLP/HTTP URI without a path posts to `/v1/traces`.
/// Plain `http` only (the kubelet's exporter has no TLS either).
pub fn flag_endpoint(endpoint: &str, protocol: Protocol) -> Result<String, TracingError> {
    let e = match endpoint.trim() {
        "" if protocol == Protocol::Grpc => "localhost:4317",
        "" => "localhost:4318",
        e => e,
    };
    let uri = if e.contains("://") {
        e.to_string()
    } else {
        format!("http://{e}")
    };
    let bad = |reason: String| TracingError::Endpoint {
        endpoint: endpoint.to_string(),
        origin: "--tracing-endpoint",
        reason,
    };
    let parsed: tonic::codegen::http::Uri = uri.parse().map_err(|e| bad(format!("{e}")))?;
    if parsed.scheme_str() != Some("http") {
        return Err(bad(
            "only plain http:// is supported (the kubelet's endpoint is plain gRPC too)".into(),
        ));
    }
    let authority = parsed
        .authority()
        .filter(|a| !a.host().is_empty())
        .ok_or_else(|| bad("no host".into()))?;
    Ok(match (protocol, parsed.path()) {
        (Protocol::Grpc, _) => format!("http://{authority}"),
        (Protocol::HttpProtobuf, "" | "/") => format!("http://{authority}/v1/traces"),
        (Protocol::HttpProtobuf, _) => uri,
    })
}

/// Checks the export header variable the SDK will read (the first of [`HEADER_VARIABLES`]
/// set): `key=value` pairs separated by commas. An entry without `=` or with an empty key is
/// an error naming the variable and the entry (the SDK would skip it silently).
pub fn check_headers(env: &dyn Fn(&str) -> Option<String>) -> Result<(), TracingError> {
    let Some((var, value)) = HEADER_VARIABLES
        .iter()
        .find_map(|k| env(k).map(|v| (*k, v)))
    else {
        return Ok(());
    };
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let why = match entry.split_once('=') {
            Some((k, _)) if !k.trim().is_empty() => continue,
            Some(_) => "has an empty key",
            None => "has no '='",
        };
        let what = format!("{var}: header entry {entry:?} {why}");
        return Err(TracingError::Headers(what));
    }
    Ok(())
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

/// The bound in front of the SDK's batch processor: spans admitted and not yet through an
/// export call. The batch processor's own queue is as long, so it never drops on its own;
/// ledgerlet drops (and counts) before it does.
#[derive(Debug)]
pub struct SpanQueue {
    capacity: usize,
    pending: AtomicUsize,
}

impl SpanQueue {
    fn new(capacity: usize) -> SpanQueue {
        metrics::gauge!(QUEUE_CAPACITY_SPANS).set(capacity as f64);
        metrics::gauge!(QUEUE_SPANS).set(0.0);
        for name in [
            SPANS_DROPPED_TOTAL,
            SPANS_EXPORTED_TOTAL,
            EXPORT_ERRORS_TOTAL,
        ] {
            metrics::counter!(name).absolute(0);
        }
        SpanQueue {
            capacity,
            pending: AtomicUsize::new(0),
        }
    }

    /// Spans waiting for export now.
    pub fn len(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// True if no span waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes up to `n` spans in; those that do not fit are counted as dropped. How many
    /// fit.
    fn admit(&self, n: usize) -> usize {
        let fit = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |p| {
                (p < self.capacity).then(|| p + n.min(self.capacity - p))
            })
            .map_or(0, |p| n.min(self.capacity - p));
        if fit < n {
            self.dropped(n - fit);
        }
        fit
    }

    /// Takes `n` spans in if they all fit, else counts them as dropped.
    fn admit_all(&self, n: usize) -> bool {
        let ok = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |p| {
                (p + n <= self.capacity).then_some(p + n)
            })
            .is_ok();
        if !ok {
            self.dropped(n);
        }
        ok
    }

    fn dropped(&self, n: usize) {
        metrics::counter!(SPANS_DROPPED_TOTAL).increment(n as u64);
        metrics::gauge!(QUEUE_SPANS).set(self.len() as f64);
    }

    /// `n` admitted spans left: an export call of them returned (`Some(ok)`), or they were
    /// dropped (`None`).
    fn exported(&self, n: usize, ok: Option<bool>) {
        let left = self
            .pending
            .fetch_sub(n, Ordering::AcqRel)
            .saturating_sub(n);
        metrics::gauge!(QUEUE_SPANS).set(left as f64);
        match ok {
            Some(true) => metrics::counter!(SPANS_EXPORTED_TOTAL).increment(n as u64),
            Some(false) => metrics::counter!(EXPORT_ERRORS_TOTAL).increment(1),
            None => {}
        }
    }
}

/// Spans made later, on the conversion thread.
pub type Later = Box<dyn FnOnce() -> Vec<SpanData> + Send>;

enum Work {
    Convert(Later),
    /// Everything sent before is with the batch processor: answer.
    Drained(SyncSender<()>),
}

/// The batch processor behind the bound: what the tracer provider and the fold tracers
/// hand finished spans to.
#[derive(Debug)]
pub struct Spans {
    queue: Arc<SpanQueue>,
    batch: Arc<BatchSpanProcessor>,
    /// To the conversion thread.
    later: SyncSender<Work>,
}

impl Spans {
    fn new(queue: Arc<SpanQueue>, batch: BatchSpanProcessor) -> Result<Spans, TracingError> {
        let batch = Arc::new(batch);
        let b = batch.clone();
        // fold spans come a buffer (up to 128) at a time
        let (later, work) = std::sync::mpsc::sync_channel(queue.capacity / 64 + 2);
        std::thread::Builder::new()
            .name("otlp-spans".into())
            .spawn(move || convert(&work, &b))
            .map_err(|e| TracingError::Start(format!("cannot start the span thread: {e}")))?;
        Ok(Spans {
            queue,
            batch,
            later,
        })
    }

    /// Hands sampled spans to the batch processor, as many as the bound takes.
    pub fn push(&self, spans: impl ExactSizeIterator<Item = SpanData>) {
        let fit = self.queue.admit(spans.len());
        for s in spans.take(fit) {
            self.batch.on_end(s);
        }
    }

    /// Hands `n` sampled spans that `make` makes to the batch processor, made on the
    /// conversion thread (so the engine's thread spends nothing on `SpanData`); all or none,
    /// as the bound and the conversion thread's queue take them. Never blocks.
    pub fn push_later(&self, n: usize, make: Later) {
        if self.queue.admit_all(n) && self.later.try_send(Work::Convert(make)).is_err() {
            self.queue.exported(n, None);
            self.queue.dropped(n);
        }
    }

    /// Waits (at most `timeout`) until every span pushed so far is with the batch processor.
    fn drain(&self, timeout: Duration) -> bool {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.later.send(Work::Drained(tx)).is_ok() && rx.recv_timeout(timeout).is_ok()
    }

    /// The bound and its counts.
    pub fn queue(&self) -> &SpanQueue {
        &self.queue
    }
}

/// The conversion thread: makes the spans it is handed and passes them on. It runs at a
/// lower priority than the engine: when every core is busy, making spans yields to folding.
fn convert(work: &Receiver<Work>, batch: &BatchSpanProcessor) {
    // SAFETY: setpriority with PRIO_PROCESS and 0 changes only the calling thread's nice
    // value (Linux threads have their own).
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
    for w in work {
        match w {
            Work::Convert(make) => make().into_iter().for_each(|s| batch.on_end(s)),
            Work::Drained(tx) => {
                let _ = tx.send(());
            }
        }
    }
}

/// The tracer provider's processor: the shared [`Spans`].
#[derive(Debug)]
struct Shared(Arc<Spans>);

impl SpanProcessor for Shared {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.0.push(std::iter::once(span));
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.batch.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.batch.shutdown_with_timeout(timeout)
    }
}

/// An exporter that counts what it exports, bounds each call by the export timeout and
/// runs it inside the pipeline's tokio runtime (the batch processor calls it from a thread
/// of its own; tonic's channel and hyper's client need a runtime).
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    queue: Arc<SpanQueue>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let call = async {
            let timed = tokio::time::timeout(self.timeout, self.inner.export(batch)).await;
            timed.unwrap_or(Err(OTelSdkError::Timeout(self.timeout)))
        };
        let result = InRuntime {
            runtime: &self.runtime,
            future: Box::pin(call),
        }
        .await;
        self.queue.exported(n, Some(result.is_ok()));
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _in = self.runtime.enter();
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A future polled inside a tokio runtime's context, wherever it is polled.
struct InRuntime<'a, F> {
    runtime: &'a tokio::runtime::Handle,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for InRuntime<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _in = self.runtime.enter();
        self.future.as_mut().poll(cx)
    }
}

/// A running pipeline.
pub struct Tracing {
    spans: Arc<Spans>,
    provider: SdkTracerProvider,
    sampler: RootSampler,
    /// Runs the exporter's connections (never the agent's runtime: a slow collector does not
    /// touch it); kept for as long as the pipeline.
    _runtime: tokio::runtime::Runtime,
}

impl Tracing {
    /// Starts the pipeline exporting OTLP with `cfg.protocol`. The connection is made
    /// lazily: an unreachable collector is not an error (its spans are dropped and counted).
    pub fn start(cfg: &TracingConfig) -> Result<Tracing, TracingError> {
        use opentelemetry_otlp::{Compression, RetryPolicy, SpanExporter};
        let start = |e: opentelemetry_otlp::ExporterBuildError| TracingError::Start(e.to_string());
        let runtime = export_runtime()?;
        let o = &cfg.export;
        let timeout = Duration::from_millis(o.export_timeout_ms.max(1));
        let retry = match o.retry_initial_backoff_ms {
            0 => RetryPolicy::disabled(),
            // as many as the export timeout leaves time for
            ms => RetryPolicy::recommended()
                .with_max_retries(1000)
                .with_initial_delay(Duration::from_millis(ms))
                .with_max_delay(Duration::from_millis(o.retry_max_backoff_ms.max(ms))),
        };
        // `--tracing-compression none` sets nothing: the exporter sends uncompressed bodies
        // unless a compression variable asks for gzip
        let gzip = cfg.gzip.filter(|on| *on).map(|_| Compression::Gzip);
        // the settings both exporters take, from traits of their own
        macro_rules! configured {
            ($builder:expr) => {{
                let mut b = $builder.with_timeout(timeout).with_retry_policy(retry);
                if let Some(e) = &cfg.endpoint {
                    b = b.with_endpoint(e.clone());
                }
                if let Some(c) = gzip {
                    b = b.with_compression(c);
                }
                b.build().map_err(start)?
            }};
        }
        // tonic's lazy channel spawns its worker on the runtime it is made in
        let _in = runtime.enter();
        let exporter = match cfg.protocol {
            Protocol::Grpc => configured!(SpanExporter::builder().with_tonic()),
            Protocol::HttpProtobuf => configured!(SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)),
        };
        drop(_in);
        Tracing::start_with(cfg, exporter, runtime)
    }

    /// Starts the pipeline with any exporter (unit tests and benchmarks too).
    pub fn start_with<E: SpanExporter + 'static>(
        cfg: &TracingConfig,
        exporter: E,
        runtime: tokio::runtime::Runtime,
    ) -> Result<Tracing, TracingError> {
        let o = &cfg.export;
        let capacity = o.max_queue_size.max(1);
        let queue = Arc::new(SpanQueue::new(capacity));
        let resource = resource(cfg);
        let mut exporter = Counted {
            inner: exporter,
            queue: queue.clone(),
            runtime: runtime.handle().clone(),
            timeout: Duration::from_millis(o.export_timeout_ms.max(1)),
        };
        exporter.set_resource(&resource);
        let batch = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(capacity)
                    .with_max_export_batch_size(o.max_export_batch_size.clamp(1, capacity))
                    .with_scheduled_delay(Duration::from_millis(o.export_period_ms.max(1)))
                    .build(),
            )
            .build();
        let spans = Arc::new(Spans::new(queue, batch)?);
        let sampler = RootSampler::new(cfg.sampling_rate_per_million);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(Shared(spans.clone()))
            .with_sampler(sampler.sdk_sampler())
            .with_resource(resource)
            .build();
        Ok(Tracing {
            spans,
            provider,
            sampler,
            _runtime: runtime,
        })
    }

    /// The tracer for `tracing-opentelemetry`.
    pub fn tracer(&self) -> SdkTracer {
        // the fold spans' scope too, so a request holds one scope
        self.provider.tracer_with_scope(scope())
    }

    /// A fold tracer for an engine (one per engine).
    pub fn fold_tracer(&self) -> FoldTracer {
        FoldTracer::new(self.sampler, IdGen::from_os(), self.spans.clone())
    }

    /// The bound and its counts.
    pub fn queue(&self) -> &SpanQueue {
        self.spans.queue()
    }

    /// Where finished spans go (fold tracers made by hand, in tests and benchmarks).
    pub fn spans(&self) -> &Arc<Spans> {
        &self.spans
    }

    /// Exports what is queued; false if that failed or timed out.
    pub fn flush(&self) -> bool {
        self.spans.drain(Duration::from_secs(5)) && self.provider.force_flush().is_ok()
    }

    /// Exports what is queued (bounded by about twice `timeout`) and stops exporting.
    pub fn shutdown(&self, timeout: Duration) {
        context::set_enabled(false);
        self.spans.drain(timeout);
        let _ = self.provider.shutdown_with_timeout(timeout);
    }
}

/// The exporter's own runtime: one worker thread, so its timers and connections make
/// progress whoever polls the export call.
pub fn export_runtime() -> Result<tokio::runtime::Runtime, TracingError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()
        .map_err(|e| TracingError::Start(format!("cannot start the export runtime: {e}")))
}

/// An in-process exporter for unit tests.
#[cfg(test)]
pub mod testing {
    use super::*;
    use std::sync::Mutex;

    /// Keeps every span exported to it.
    #[derive(Clone, Debug, Default)]
    pub struct Sink(pub Arc<Mutex<Vec<SpanData>>>);

    impl Sink {
        /// The spans received so far.
        pub fn received(&self) -> Vec<SpanData> {
            self.0.lock().unwrap().clone()
        }
    }

    impl SpanExporter for Sink {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// A pipeline sampling every trace, with `export`, exporting to a new sink.
    pub fn pipeline(export: ExportOptions) -> (Tracing, Sink) {
        let sink = Sink::default();
        (with_exporter(export, sink.clone()), sink)
    }

    /// A pipeline sampling every trace, with `export`, exporting to `exporter`.
    pub fn with_exporter<E: SpanExporter + 'static>(export: ExportOptions, exporter: E) -> Tracing {
        let cfg = TracingConfig {
            endpoint: None,
            protocol: Protocol::Grpc,
            gzip: None,
            sampling_rate_per_million: 1_000_000,
            export,
            service_name: "ledgerlet-test".into(),
            node_name: "node".into(),
            host_name: "host".into(),
        };
        Tracing::start_with(&cfg, exporter, export_runtime().unwrap()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_protocol_comes_from_the_flag_then_the_traces_variable_then_the_generic_one() {
        let both = [
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert_eq!(protocol(None, &env(&[])).unwrap(), Protocol::Grpc);
        assert_eq!(protocol(None, &env(&both)).unwrap(), Protocol::HttpProtobuf);
        assert_eq!(protocol(Some("grpc"), &env(&both)).unwrap(), Protocol::Grpc);
        let bad = protocol(None, &env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]))
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && bad.contains("http/protobuf or grpc"),
            "{bad}"
        );
    }

    #[test]
    fn the_endpoint_flag_takes_the_kubelets_form_and_otlp_http_posts_to_v1_traces() {
        use Protocol::{Grpc, HttpProtobuf as Http};
        for (given, protocol, want) in [
            ("", Grpc, "http://localhost:4317"),
            ("10.0.0.1:4317", Grpc, "http://10.0.0.1:4317"),
            (
                "http://collector:4317/ignored",
                Grpc,
                "http://collector:4317",
            ),
            ("", Http, "http://localhost:4318/v1/traces"),
            ("collector:4318", Http, "http://collector:4318/v1/traces"),
            (
                "http://collector:4318/custom",
                Http,
                "http://collector:4318/custom",
            ),
        ] {
            assert_eq!(flag_endpoint(given, protocol).unwrap(), want, "{given}");
        }
        for bad in ["https://collector:4317", "ftp://x:1", "http://:4317"] {
            assert!(flag_endpoint(bad, Protocol::Grpc).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_export_headers_are_refused_naming_the_variable_and_entry() {
        assert!(check_headers(&env(&[("OTEL_EXPORTER_OTLP_HEADERS", "a=b, c=d%20e")])).is_ok());
        let e = check_headers(&env(&[("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=b,tenant")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("OTEL_EXPORTER_OTLP_TRACES_HEADERS") && e.contains("\"tenant\""),
            "{e}"
        );
        assert!(check_headers(&env(&[("OTEL_EXPORTER_OTLP_HEADERS", "=x")])).is_err());
    }

    #[test]
    fn the_bound_admits_what_fits_and_frees_room_as_exports_return() {
        let q = SpanQueue::new(4);
        assert_eq!(q.admit(3), 3);
        assert_eq!(q.admit(3), 1);
        assert_eq!(q.admit(1), 0);
        assert_eq!(q.len(), 4);
        q.exported(3, Some(true));
        assert_eq!(q.len(), 1);
        assert_eq!(q.admit(5), 3);
        assert!(!q.admit_all(1));
        q.exported(2, None);
        assert!(!q.admit_all(3));
        assert!(q.admit_all(2));
        assert_eq!(q.len(), 4);
    }

    /// Never answers.
    #[derive(Debug)]
    struct Hang;

    impl SpanExporter for Hang {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            std::future::pending().await
        }
    }

    fn span(n: u64) -> SpanData {
        use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId};
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(1u128),
                SpanId::from(n + 1),
                TraceFlags::SAMPLED,
                false,
                Default::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "s".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: scope(),
        }
    }

    #[test]
    fn a_hanging_collector_never_blocks_a_push_and_the_queue_stays_bounded() {
        let t = testing::with_exporter(
            ExportOptions {
                max_queue_size: 8,
                max_export_batch_size: 4,
                export_period_ms: 1,
                export_timeout_ms: 300,
                ..ExportOptions::default()
            },
            Hang,
        );
        let started = std::time::Instant::now();
        for i in 0..10_000 {
            t.spans().push(std::iter::once(span(i)));
            assert!(t.queue().len() <= 8);
        }
        // nothing waited for the hanging export (a generous bound: no speed claim)
        assert!(started.elapsed() < Duration::from_secs(30));
        // the export times out, its spans leave the queue, and later spans get in again
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while t.queue().len() == 8 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(t.queue().len() < 8);
        let stop = std::time::Instant::now();
        t.shutdown(Duration::from_millis(200));
        assert!(stop.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn spans_made_through_the_sdk_reach_the_exporter_and_leave_the_queue() {
        use opentelemetry::trace::{Tracer, TracerProvider as _};
        let (t, sink) = testing::pipeline(ExportOptions::default());
        t.provider.tracer("t").in_span("sdk span", |_| {});
        assert!(t.flush());
        let got = sink.received();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "sdk span");
        assert_eq!(t.queue().len(), 0);
        t.shutdown(Duration::from_secs(1));
    }
}
