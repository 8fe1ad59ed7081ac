//! The prober's vocabulary in the ledger and towards the shell.
//!
//! Owns `ProbeCommand` (run one probe), `ProbeFinished` (how that run ended, from the shell)
//! and `ProbeResult` (a cached result changed: derived by the core, only on change). Must
//! not decide anything: the decisions are in `worker` and `manager`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::spec::ProbeType;
use crate::core::probe_results::ProbeOutcome;
use crate::core::uid::Uid;

/// The most output a `ProbeFinished` record keeps, in bytes (the kubelet keeps 10 KiB for
/// its event message; the ledger keeps less so a chatty probe does not fill it).
pub const MAX_RECORDED_OUTPUT_BYTES: usize = 1024;

/// Run one probe against one container instance; report `ProbeFinished` with the same
/// `run`. The shell resolves the handler (exec, httpGet, tcpSocket, grpc) from the pod spec,
/// applies `timeoutSeconds`, retries errors (not failures) up to three times, and never
/// blocks the fold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeCommand {
    /// The pod.
    pub uid: Uid,
    /// The pod spec the probe is taken from.
    pub pod: Arc<Pod>,
    /// Container name.
    pub container: String,
    /// Runtime container ID (without the `<runtime>://` prefix).
    pub container_id: String,
    /// Which probe.
    pub probe: ProbeType,
    /// `status.podIP` (the default host of httpGet, tcpSocket and grpc probes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_ip: String,
    /// Identifies the run: the seq of the record whose fold started it.
    pub run: u64,
}

/// How one probe run ended (kubelet `probe.Result`, with errors kept apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunResult {
    /// The check passed.
    Success,
    /// Passed with a warning (an HTTP redirect to another host): counts as a success and
    /// records a `ProbeWarning` event.
    Warning,
    /// The check failed (including timeouts).
    Failure,
    /// The probe could not be run (after three attempts): does not count (PR-16).
    Error,
}

impl RunResult {
    /// The `result` label of `prober_probe_total`.
    pub fn metric_label(self) -> &'static str {
        match self {
            RunResult::Success | RunResult::Warning => "successful",
            RunResult::Failure => "failed",
            RunResult::Error => "unknown",
        }
    }
}

/// A probe run ended (shell → core).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFinished {
    /// The pod.
    pub uid: Uid,
    /// Container name.
    pub container: String,
    /// The container instance probed (runtime ID, no prefix).
    pub container_id: String,
    /// Which probe.
    pub probe: ProbeType,
    /// The `run` of the `ProbeCommand`.
    pub run: u64,
    /// How it ended.
    pub result: RunResult,
    /// What the probe said (exec output, HTTP failure text, the error), at most
    /// `MAX_RECORDED_OUTPUT_BYTES`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// How long the run took, retries included.
    #[serde(default)]
    pub duration_ms: u64,
}

/// Why a cached result changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultReason {
    /// The worker saw a new container instance: its initial value (PR-01).
    Initial,
    /// Enough consecutive runs had this result (`successThreshold`/`failureThreshold`).
    Threshold,
    /// The container is not running (PR-09).
    NotRunning,
    /// The pod has a deletion timestamp: liveness and startup end with a success (PR-12).
    PodDeleting,
    /// The pod is terminating: readiness is forced to failure.
    Terminating,
    /// The worker stopped or moved to a new instance: the result is forgotten.
    Stopped,
}

/// A probe's cached result for one container instance changed (derived by the core, only on
/// change). Its fold updates `ProbeResults` and applies the consequences: readiness →
/// `SetContainerReadiness`, startup → `SetContainerStartup`, both and a liveness failure →
/// a pod sync (which kills a container whose liveness or startup failed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// The pod.
    pub uid: Uid,
    /// Container name.
    pub container: String,
    /// The container instance (runtime ID, no prefix).
    pub container_id: String,
    /// Which probe.
    pub probe: ProbeType,
    /// The new result; absent when the result is forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ProbeOutcome>,
    /// Why.
    pub reason: ResultReason,
    /// For `threshold`: the consecutive runs with this result.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive: u32,
    /// For `threshold`: the seq of the first `ProbeFinished` of those runs (the last one is
    /// this record's cause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seq: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn truncate_output(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_cut_on_a_character_boundary() {
        assert_eq!(truncate_output("abc", 10), "abc");
        let long = "é".repeat(600);
        let cut = truncate_output(&long, MAX_RECORDED_OUTPUT_BYTES);
        assert!(cut.len() <= MAX_RECORDED_OUTPUT_BYTES);
        assert!(cut.ends_with('…'));
    }
}
