//! Log output (human-readable text or JSON lines, filtered by `RUST_LOG` or `--log-level`)
//! and, when tracing is on, the `tracing-opentelemetry` layer.
//!
//! Owns the subscriber setup. The log filter applies to the log output only: the
//! OpenTelemetry layer sees ledgerlet's own spans at INFO and above whatever the log level,
//! so `--log-level warn` does not switch traces off. Must not be called twice in one process
//! (the second call is ignored).

use opentelemetry_sdk::trace::SdkTracer;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Installs the global subscriber. `level` is used when `RUST_LOG` is not set. With a
/// tracer, ledgerlet's spans are exported through it.
pub fn init(level: &str, json: bool, tracer: Option<SdkTracer>) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_ansi(false).with_filter(filter).boxed()
    };
    let otel = tracer.map(|t| {
        tracing_opentelemetry::layer()
            .with_tracer(t)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(Targets::new().with_target("ledgerlet", Level::INFO))
    });
    let enabled = otel.is_some();
    if tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok()
    {
        super::context::set_enabled(enabled);
    }
}
