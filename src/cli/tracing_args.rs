//! The tracing flags shared by `ledgerlet run` and `ledgerlet runtime serve`.

use clap::Args;

use crate::observe::export::ExportOptions;
use crate::observe::otel::{self, TracingConfig};
use crate::observe::otlp_config::{self, Flags};

#[derive(Args, Debug, Clone)]
pub struct TracingArgs {
    /// Export OpenTelemetry traces to this collector (host:port or http://host:port; alone,
    /// localhost:4317, or localhost:4318 for OTLP/HTTP, which posts to /v1/traces unless a
    /// path is given). Without it, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT is used; with none of them, tracing is off.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub tracing_endpoint: Option<String>,
    /// How traces are sent: grpc (OTLP/gRPC, the kubelet's) or http/protobuf (OTLP/HTTP).
    /// Without it, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL is used;
    /// with neither, grpc.
    #[arg(long, value_name = "grpc|http/protobuf")]
    pub tracing_protocol: Option<String>,
    /// Compression of the export requests: gzip or none. Without it,
    /// OTEL_EXPORTER_OTLP_TRACES_COMPRESSION or OTEL_EXPORTER_OTLP_COMPRESSION is used; with
    /// neither, none (as the kubelet's exporter).
    #[arg(long, value_name = "gzip|none")]
    pub tracing_compression: Option<String>,
    /// Traces started per million (ParentBased(TraceIDRatio) as the kubelet; children follow
    /// their parent). The kubelet's default is 0; ledgerlet's is every trace.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub tracing_sampling_rate_per_million: u32,
    /// Spans buffered for export; when full (a slow or unreachable collector) new spans are
    /// dropped and counted in ledgerlet_trace_spans_dropped_total.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tracing_max_queue_size: u32,
    /// How often the span queue is exported.
    #[arg(long, default_value_t = 1000)]
    pub tracing_export_period_ms: u64,
    /// Longest time one export call may take, its retries included.
    #[arg(long, default_value_t = 10_000)]
    pub tracing_export_timeout_ms: u64,
    /// First wait before an export the collector may take later (gRPC Unavailable, HTTP
    /// 429/502/503/504, a refused connection) is sent again; then ×1.5 per retry, randomized
    /// by ±50 %, within the export timeout. 0 turns retries off.
    #[arg(long, default_value_t = 5_000)]
    pub tracing_export_retry_initial_backoff_ms: u64,
    /// Longest wait between retries of an export.
    #[arg(long, default_value_t = 30_000)]
    pub tracing_export_retry_max_backoff_ms: u64,
}

impl TracingArgs {
    /// The pipeline's configuration, `None` when no endpoint is configured, or why the
    /// endpoint or protocol given is not usable.
    pub fn config(
        &self,
        service: &str,
        node_name: &str,
        host_name: &str,
    ) -> Result<Option<TracingConfig>, otel::TracingError> {
        let flags = Flags {
            endpoint: self.tracing_endpoint.as_deref(),
            protocol: self.tracing_protocol.as_deref(),
            compression: self.tracing_compression.as_deref(),
        };
        let Some(destination) = otlp_config::resolve(flags, &|k| std::env::var(k).ok())? else {
            return Ok(None);
        };
        Ok(Some(TracingConfig {
            endpoint: destination.uri,
            protocol: destination.protocol,
            compression: destination.compression,
            sampling_rate_per_million: self.tracing_sampling_rate_per_million,
            export: ExportOptions {
                max_queue_size: self.tracing_max_queue_size as usize,
                export_period_ms: self.tracing_export_period_ms,
                export_timeout_ms: self.tracing_export_timeout_ms,
                retry_initial_backoff_ms: self.tracing_export_retry_initial_backoff_ms,
                retry_max_backoff_ms: self.tracing_export_retry_max_backoff_ms,
                ..ExportOptions::default()
            },
            service_name: service.to_string(),
            node_name: node_name.to_string(),
            host_name: host_name.to_string(),
        }))
    }

    /// Starts the pipeline (if configured) and the log output with its layer. A bad endpoint
    /// is an error the caller reports.
    pub fn init(
        &self,
        service: &str,
        node_name: &str,
        host_name: &str,
        log_level: &str,
        json: bool,
    ) -> Result<(), otel::TracingError> {
        let config = self.config(service, node_name, host_name)?;
        let tracing = match &config {
            Some(cfg) => Some(otel::install(cfg)?),
            None => None,
        };
        crate::observe::logging::init(log_level, json, tracing.map(|t| t.tracer()));
        if let Some(cfg) = config {
            tracing::info!(endpoint = %cfg.endpoint, protocol = cfg.protocol.as_str(), compression = cfg.compression.as_str(), sampling_rate_per_million = cfg.sampling_rate_per_million, max_queue_size = cfg.export.max_queue_size, "exporting OpenTelemetry traces over OTLP");
        }
        Ok(())
    }
}
