//! The exec probe (`pkg/probe/exec`): the command through CRI `ExecSync` with the probe's
//! timeout.
//!
//! Owns the reading of an `ExecSync` outcome: exit 0 is a success, any other exit a failure
//! with the output (stdout then stderr, at most 10 KiB), a runtime-side timeout a failure
//! `command "…" timed out` (ExecProbeTimeout), anything else an error. Must not retry.

use tonic::Code;

use crate::core::probes::RunResult;
use crate::cri::CriClient;

/// The most exec output kept (`maxReadLength`, 10 KiB).
pub const MAX_OUTPUT_BYTES: usize = 10 * 1024;

/// Runs `cmd` in container `id` with `timeout_s`; `Err` is an error (PR-16).
pub async fn probe(
    cri: &CriClient,
    id: &str,
    cmd: Vec<String>,
    timeout_s: i64,
) -> Result<(RunResult, String), String> {
    let shown = cmd.join(" ");
    match cri.exec_sync(id, cmd, timeout_s).await {
        Ok(r) => {
            let mut out = r.stdout;
            out.extend_from_slice(&r.stderr);
            out.truncate(MAX_OUTPUT_BYTES);
            let output = String::from_utf8_lossy(&out).into_owned();
            let result = if r.exit_code == 0 {
                RunResult::Success
            } else {
                RunResult::Failure
            };
            Ok((result, output))
        }
        Err(e) if e.code() == Code::DeadlineExceeded => {
            Ok((RunResult::Failure, format!("command {shown:?} timed out")))
        }
        Err(e) => Err(e.to_string()),
    }
}
