//! The tracing flags shared by `ledgerlet run` and `ledgerlet runtime serve`.

use clap::Args;

use crate::observe::otel::{self, ExportOptions, TracingConfig};

#[derive(Args, Debug, Clone)]
pub struct TracingArgs {
    /// Export OpenTelemetry traces to this collector (host:port or http://host:port; alone,
    /// localhost:4317, or localhost:4318 for OTLP/HTTP, which posts to /v1/traces unless a
    /// path is given). Without it, the OpenTelemetry SDK reads
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT; with none of them,
    /// tracing is off.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub tracing_endpoint: Option<String>,
    /// How traces are sent: grpc (OTLP/gRPC, the kubelet's) or http/protobuf (OTLP/HTTP).
    /// Without it, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL is used;
    /// with neither, grpc.
    #[arg(long, value_name = "grpc|http/protobuf")]
    pub tracing_protocol: Option<String>,
    /// Compression of the export requests: gzip or none. Without it (or with none), the SDK
    /// reads OTEL_EXPORTER_OTLP_TRACES_COMPRESSION or OTEL_EXPORTER_OTLP_COMPRESSION; with
    /// neither, none (as the kubelet's exporter).
    #[arg(long, value_name = "gzip|none")]
    pub tracing_compression: Option<String>,
    /// Traces started per million (ParentBased(TraceIDRatio) as the kubelet; children follow
    /// their parent). 0, the kubelet's default, starts none: only spans under a sampled
    /// parent are exported.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub tracing_sampling_rate_per_million: u32,
    /// Spans buffered for export; when full (a slow or unreachable collector) new spans are
    /// dropped and counted in ledgerlet_trace_spans_dropped_total.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tracing_max_queue_size: u32,
    /// How often the batch span processor exports.
    #[arg(long, default_value_t = 1000)]
    pub tracing_export_period_ms: u64,
    /// Longest time one export call may take, its retries included.
    #[arg(long, default_value_t = 10_000)]
    pub tracing_export_timeout_ms: u64,
    /// First wait before an export the collector may take later (gRPC Unavailable, HTTP
    /// 429/502/503/504, a refused connection) is sent again; then doubled per retry, within
    /// the export timeout (the OTLP exporter's retry policy). 0 turns retries off.
    #[arg(long, default_value_t = 5_000)]
    pub tracing_export_retry_initial_backoff_ms: u64,
    /// Longest wait between retries of an export.
    #[arg(long, default_value_t = 30_000)]
    pub tracing_export_retry_max_backoff_ms: u64,
}

impl TracingArgs {
    /// The pipeline's configuration, `None` when no endpoint is configured (neither the flag
    /// nor an endpoint variable), or why a setting given is not usable.
    pub fn config(
        &self,
        service: &str,
        node_name: &str,
        host_name: &str,
    ) -> Result<Option<TracingConfig>, otel::TracingError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let from_env = otel::ENDPOINT_VARIABLES.iter().any(|k| env(k).is_some());
        if self.tracing_endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let protocol = otel::protocol(self.tracing_protocol.as_deref(), &env)?;
        otel::check_headers(&env)?;
        let endpoint = (self.tracing_endpoint.as_deref())
            .map(|e| otel::flag_endpoint(e, protocol))
            .transpose()?;
        let gzip = match self.tracing_compression.as_deref().map(str::trim) {
            None => None,
            Some("gzip") => Some(true),
            Some("none") => Some(false),
            Some(other) => {
                return Err(otel::TracingError::Setting {
                    value: other.to_string(),
                    origin: "--tracing-compression",
                    reason: "expected gzip or none".into(),
                })
            }
        };
        Ok(Some(TracingConfig {
            endpoint,
            protocol,
            gzip,
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
        let tracing = config.as_ref().map(otel::install).transpose()?;
        crate::observe::logging::init(log_level, json, tracing.map(|t| t.tracer()));
        if let Some(cfg) = config {
            let endpoint = cfg
                .endpoint
                .as_deref()
                .unwrap_or("(OTEL_EXPORTER_OTLP_*ENDPOINT)");
            tracing::info!(
                endpoint,
                protocol = cfg.protocol.as_str(),
                sampling_rate_per_million = cfg.sampling_rate_per_million,
                max_queue_size = cfg.export.max_queue_size,
                "exporting OpenTelemetry traces over OTLP"
            );
        }
        Ok(())
    }
}
