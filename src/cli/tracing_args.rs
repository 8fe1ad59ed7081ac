//! The tracing flags shared by `ledgerlet run` and `ledgerlet runtime serve`.

use clap::Args;

use crate::observe::export::ExportOptions;
use crate::observe::otel::{self, TracingConfig, DEFAULT_ENDPOINT};

#[derive(Args, Debug, Clone)]
pub struct TracingArgs {
    /// Export OpenTelemetry traces over OTLP/gRPC to this collector (host:port or
    /// http://host:port; alone, localhost:4317). Without it, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    /// or OTEL_EXPORTER_OTLP_ENDPOINT is used; with none of them, tracing is off.
    #[arg(long, num_args = 0..=1, default_missing_value = DEFAULT_ENDPOINT)]
    pub tracing_endpoint: Option<String>,
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
    /// Longest time one export call may take.
    #[arg(long, default_value_t = 10_000)]
    pub tracing_export_timeout_ms: u64,
}

impl TracingArgs {
    /// The pipeline's configuration, or `None` when no endpoint is configured.
    pub fn config(&self, service: &str, node_name: &str, host_name: &str) -> Option<TracingConfig> {
        let endpoint = otel::resolve_endpoint(self.tracing_endpoint.as_deref())?;
        Some(TracingConfig {
            endpoint,
            sampling_rate_per_million: self.tracing_sampling_rate_per_million,
            export: ExportOptions {
                max_queue_size: self.tracing_max_queue_size as usize,
                export_period_ms: self.tracing_export_period_ms,
                export_timeout_ms: self.tracing_export_timeout_ms,
                ..ExportOptions::default()
            },
            service_name: service.to_string(),
            node_name: node_name.to_string(),
            host_name: host_name.to_string(),
        })
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
        let tracing = match self.config(service, node_name, host_name) {
            Some(cfg) => Some(otel::install(&cfg)?),
            None => None,
        };
        crate::observe::logging::init(log_level, json, tracing.map(|t| t.tracer()));
        if let Some(cfg) = self.config(service, node_name, host_name) {
            tracing::info!(endpoint = %cfg.endpoint, sampling_rate_per_million = cfg.sampling_rate_per_million, max_queue_size = cfg.export.max_queue_size, "exporting OpenTelemetry traces over OTLP/gRPC");
        }
        Ok(())
    }
}
