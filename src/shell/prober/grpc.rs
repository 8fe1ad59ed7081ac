//! The gRPC probe (`pkg/probe/grpc`): `grpc.health.v1.Health/Check` with the service name.
//!
//! Owns the connection (retried until the timeout, as `grpc.WithBlock` does), the call with
//! the remaining time, and the upstream messages: SERVING is a success; another status,
//! an unimplemented health service, a connect timeout and an RPC timeout are failures.
//! Must not use TLS (the kubelet's probe does not).

use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::Endpoint;
use tonic::Code;

use super::health::health_check_response::ServingStatus;
use super::health::health_client::HealthClient;
use super::health::HealthCheckRequest;
use super::target::user_agent;
use crate::core::probes::RunResult;
use crate::shell::http_get::join_host_port;

/// Go's `time.Duration` text of a probe timeout (`1s`, `1.5s`).
fn go_duration(d: Duration) -> String {
    crate::core::backoff::go_duration(d.as_millis() as u64)
}

/// Checks `service` on `host:port` within `timeout`.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> (RunResult, String) {
    let addr = join_host_port(host, port);
    let deadline = Instant::now() + timeout;
    let connect_timeout = || {
        (
            RunResult::Failure,
            format!(
                "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                go_duration(timeout)
            ),
        )
    };
    let endpoint = match Endpoint::from_shared(format!("http://{addr}")) {
        Ok(e) => e,
        Err(e) => {
            return (
                RunResult::Failure,
                format!("error: failed to connect service at {addr:?}: {e}"),
            )
        }
    };
    let endpoint = match endpoint.user_agent(user_agent("probe")) {
        Ok(e) => e.connect_timeout(timeout),
        Err(e) => return (RunResult::Failure, format!("error: {e}")),
    };
    let channel = loop {
        match tokio::time::timeout_at(deadline, endpoint.connect()).await {
            Ok(Ok(ch)) => break ch,
            Ok(Err(_)) => {
                let retry_at = Instant::now() + Duration::from_millis(100);
                if retry_at >= deadline {
                    return connect_timeout();
                }
                tokio::time::sleep_until(retry_at).await;
            }
            Err(_) => return connect_timeout(),
        }
    };
    let mut client = HealthClient::new(channel);
    let mut req = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    req.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let rpc_timeout = || {
        (
            RunResult::Failure,
            format!(
                "timeout: health rpc did not complete within {}",
                go_duration(timeout)
            ),
        )
    };
    match tokio::time::timeout_at(deadline, client.check(req)).await {
        Err(_) => rpc_timeout(),
        Ok(Err(status)) => match status.code() {
            Code::Unimplemented => (
                RunResult::Failure,
                format!(
                    "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                    status.message()
                ),
            ),
            Code::DeadlineExceeded => rpc_timeout(),
            Code::Cancelled if Instant::now() >= deadline => rpc_timeout(),
            _ => (
                RunResult::Failure,
                format!(
                    "error: health rpc probe failed: rpc error: code = {:?} desc = {}",
                    status.code(),
                    status.message()
                ),
            ),
        },
        Ok(Ok(resp)) => {
            let status = resp.into_inner().status();
            if status == ServingStatus::Serving {
                (RunResult::Success, "service healthy".into())
            } else {
                (
                    RunResult::Failure,
                    format!(
                        "service unhealthy (responded with {:?})",
                        status.as_str_name()
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_does() {
        assert_eq!(go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
