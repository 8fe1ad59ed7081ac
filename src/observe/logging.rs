//! Log output: human-readable text or JSON lines, filtered by `RUST_LOG` or `--log-level`.
//!
//! Owns the subscriber setup. Must not be called twice in one process (the second call is
//! ignored).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. `level` is used when `RUST_LOG` is not set.
pub fn init(level: &str, json: bool) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.with_ansi(false).try_init()
    };
}
