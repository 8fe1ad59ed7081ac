//! The TCP probe (`pkg/probe/tcp`): a connection within the timeout is a success.
//!
//! Owns the dial and its Go-worded errors. Must not send anything on the connection.

use std::time::Duration;

use tokio::net::TcpStream;

use crate::core::probes::RunResult;
use crate::shell::http_get::{dial_error, join_host_port};

/// Dials `host:port` within `timeout`.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> (RunResult, String) {
    let addr = join_host_port(host, port);
    match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
        // closed at once (the kubelet's dialer also sets SO_LINGER, which would block a
        // runtime thread on drop here)
        Ok(Ok(_conn)) => (RunResult::Success, String::new()),
        Ok(Err(e)) => (
            RunResult::Failure,
            format!("dial tcp {addr}: {}", dial_error(&e)),
        ),
        Err(_) => (RunResult::Failure, format!("dial tcp {addr}: i/o timeout")),
    }
}
