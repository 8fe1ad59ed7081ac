//! Runs probes (kubelet `prober.go` `runProbe` and `pkg/probe`): exec through CRI
//! `ExecSync`, httpGet, tcpSocket and grpc, each with `timeoutSeconds`.
//!
//! Owns carrying out a `RunProbe` command: resolving the handler from the pod spec, the
//! three attempts on an error (`runProbeWithRetries`; failures are not retried), the
//! meaning of an HTTP status (PR-17), and the `ProbeFinished` report with its output cut
//! to what the ledger keeps. Must not decide anything about results (thresholds, holds,
//! kills are the core's) and must not block the engine: each run is its own task.

mod exec;
mod grpc;
pub mod target;
mod tcp;

/// The gRPC health protocol (`proto/grpc/health/v1/health.proto`), client and server.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod health {
    tonic::include_proto!("grpc.health.v1");
}

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Probe};

use crate::core::probes::records::truncate_output;
use crate::core::probes::spec::probed_container;
use crate::core::probes::{
    ProbeCommand, ProbeFinished, ProbeSettings, RunResult, MAX_RECORDED_OUTPUT_BYTES,
};
use crate::cri::CriClient;
use crate::shell::http_get;

/// Attempts per run when the probe errors (`maxProbeRetries`).
pub const MAX_PROBE_RETRIES: usize = 3;

/// Runs probes; cheap to clone.
#[derive(Clone)]
pub struct Prober {
    cri: CriClient,
}

/// PR-17: what an HTTP probe's response means.
pub fn http_result(resp: &http_get::Response) -> (RunResult, String) {
    match resp.status {
        200..=299 => (RunResult::Success, resp.body.clone()),
        300..=399 => (
            RunResult::Warning,
            format!("Probe terminated redirects, Response body: {}", resp.body),
        ),
        code => (
            RunResult::Failure,
            format!("HTTP probe failed with statuscode: {code}"),
        ),
    }
}

impl Prober {
    /// A prober that execs through `cri`.
    pub fn new(cri: CriClient) -> Prober {
        Prober { cri }
    }

    /// Carries out `cmd` and returns its report.
    pub async fn run(&self, cmd: &ProbeCommand) -> ProbeFinished {
        let started = Instant::now();
        let mut attempt = 0;
        let (result, output) = loop {
            attempt += 1;
            match self.run_once(cmd).await {
                Ok(done) => break done,
                Err(e) if attempt >= MAX_PROBE_RETRIES => break (RunResult::Error, e),
                Err(_) => continue,
            }
        };
        ProbeFinished {
            uid: cmd.uid.clone(),
            container: cmd.container.clone(),
            container_id: cmd.container_id.clone(),
            probe: cmd.probe,
            run: cmd.run,
            result,
            output: truncate_output(&output, MAX_RECORDED_OUTPUT_BYTES),
            duration_ms: started.elapsed().as_millis() as u64,
        }
    }

    fn spec<'a>(&self, cmd: &'a ProbeCommand) -> Result<(&'a Container, &'a Probe), String> {
        let c = probed_container(&cmd.pod, &cmd.container).ok_or_else(|| missing_handler(cmd))?;
        let p = cmd.probe.of(c).ok_or_else(|| missing_handler(cmd))?;
        Ok((c, p))
    }

    /// `runProbe`: one attempt. `Err` is an error (retried, then discarded by the core).
    async fn run_once(&self, cmd: &ProbeCommand) -> Result<(RunResult, String), String> {
        let (c, p) = self.spec(cmd)?;
        let settings = ProbeSettings::of(cmd.probe, p);
        let timeout = Duration::from_secs(settings.timeout_s.max(1) as u64);
        if let Some(e) = &p.exec {
            let command = target::expand_command(e.command.as_deref().unwrap_or_default(), c);
            if command.is_empty() {
                return Err(format!(
                    "exec probe of container {:?} has no command",
                    c.name
                ));
            }
            return exec::probe(
                &self.cri,
                &cmd.container_id,
                command,
                i64::from(settings.timeout_s),
            )
            .await;
        }
        if let Some(h) = &p.http_get {
            let t = target::http_target(h, c, &cmd.pod, &cmd.pod_ip)?;
            return Ok(
                match http_get::get(&t, timeout, &target::user_agent("probe")).await {
                    Ok(resp) => http_result(&resp),
                    // connection errors and timeouts are failures, not errors
                    Err(e) => (RunResult::Failure, e),
                },
            );
        }
        if let Some(t) = &p.tcp_socket {
            let port = target::resolve_port(&t.port, c)?;
            let host = match t.host.as_deref().filter(|h| !h.is_empty()) {
                Some(h) => h.to_string(),
                None => target::default_host(&cmd.pod, &cmd.pod_ip)?,
            };
            return Ok(tcp::probe(&host, port, timeout).await);
        }
        if let Some(g) = &p.grpc {
            let port = u16::try_from(g.port)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("invalid port number: {}", g.port))?;
            let host = target::default_host(&cmd.pod, &cmd.pod_ip)?;
            let service = g.service.clone().unwrap_or_default();
            return Ok(grpc::probe(&host, port, &service, timeout).await);
        }
        Err(missing_handler(cmd))
    }
}

/// The kubelet's error for a probe with no handler.
fn missing_handler(cmd: &ProbeCommand) -> String {
    format!(
        "missing probe handler for {}/{}:{}",
        crate::core::pod::namespace(&cmd.pod),
        crate::core::pod::name(&cmd.pod),
        cmd.container
    )
}
#[cfg(test)]
mod tests;
