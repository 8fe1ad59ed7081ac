//! The container runtime's health, probed as the kubelet's `updateRuntimeUp` does: every
//! period, CRI `Status`, its `RuntimeReady` and `NetworkReady` conditions, and the PLEG
//! health check; a `RuntimeHealth` record when the answer changes (and once at start).
//!
//! Owns the probe loop and `HealthTracker`, the kubelet's `runtimeState` for these checks:
//! the error texts ("container runtime not ready: RuntimeReady=false reason:… message:…",
//! "container runtime network not ready: …", "PLEG is not healthy: …") aggregated as
//! `utilerrors.NewAggregate` does, runtime errors first. Must not decide readiness for the
//! node: the core turns the record into the Ready condition.
//!
//! Differences from upstream: a failed `Status` call makes the runtime not ready at once
//! ("container runtime is down: <error>"), where the kubelet waits 30 s without a successful
//! check; a change means a change of the three flags or of the runtime or network error, not
//! of the PLEG error text (which names the time since the last relist and so changes on every
//! probe) or the CRI error text (a streak of failures with the same gRPC code is one change).

use std::time::Duration;

use tokio::sync::watch;
use tonic::Code;

use super::Report;
use crate::core::node_status::conditions::{aggregate, ERR_NETWORK_UNKNOWN};
use crate::cri::{v1, CriClient, CriError};
use crate::ledger::event::RuntimeHealth;
use crate::ledger::Event;

/// The kubelet's runtime status check period (`updateRuntimeUp` every 5 s).
pub const DEFAULT_PERIOD_MS: u64 = 5_000;

/// What a change is compared on (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    flags: (bool, bool, bool),
    down: Option<Code>,
    runtime_error: Option<String>,
    network_error: Option<String>,
}

/// The runtime state between probes (kubelet `runtimeState`).
#[derive(Debug)]
pub struct HealthTracker {
    /// The last `Status` call failed (its code and error text, from the first failure).
    down: Option<(Code, String)>,
    runtime_error: Option<String>,
    network_error: Option<String>,
    last: Option<Key>,
}

impl Default for HealthTracker {
    fn default() -> Self {
        HealthTracker {
            down: None,
            runtime_error: None,
            network_error: Some(ERR_NETWORK_UNKNOWN.to_string()),
            last: None,
        }
    }
}

/// `%v` of a `*RuntimeCondition` (its `String()`, or `<nil>`).
fn describe(c: Option<&v1::RuntimeCondition>) -> String {
    match c {
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.r#type, c.status, c.reason, c.message
        ),
        None => "<nil>".to_string(),
    }
}

impl HealthTracker {
    /// A tracker in the kubelet's initial state (network state unknown).
    pub fn new() -> HealthTracker {
        HealthTracker::default()
    }

    /// Folds one probe; returns the record to send if the health changed (always on the
    /// first probe).
    pub fn observe(
        &mut self,
        status: Result<&v1::StatusResponse, &CriError>,
        pleg: Result<(), String>,
    ) -> Option<RuntimeHealth> {
        match status {
            Err(e) => {
                if self.down.as_ref().map(|d| d.0) != Some(e.code()) {
                    self.down = Some((e.code(), format!("container runtime is down: {e}")));
                }
            }
            Ok(s) => {
                self.down = None;
                let conditions = s
                    .status
                    .as_ref()
                    .map(|r| r.conditions.as_slice())
                    .unwrap_or_default();
                let find = |t: &str| conditions.iter().find(|c| c.r#type == t);
                let network = find("NetworkReady");
                self.network_error = match network {
                    Some(c) if c.status => None,
                    other => Some(format!(
                        "container runtime network not ready: {}",
                        describe(other)
                    )),
                };
                let runtime = find("RuntimeReady");
                self.runtime_error = match runtime {
                    Some(c) if c.status => None,
                    other => Some(format!("container runtime not ready: {}", describe(other))),
                };
            }
        }
        let pleg_error = pleg.err().map(|e| format!("PLEG is not healthy: {e}"));
        let key = Key {
            flags: (
                self.down.is_none() && self.runtime_error.is_none(),
                self.network_error.is_none(),
                pleg_error.is_none(),
            ),
            down: self.down.as_ref().map(|d| d.0),
            runtime_error: self.runtime_error.clone(),
            network_error: self.network_error.clone(),
        };
        if self.last.as_ref() == Some(&key) {
            return None;
        }
        // runtimeErrors (down, health checks, runtime condition), then networkErrors
        let errors: Vec<&str> = [
            self.down.as_ref().map(|d| d.1.as_str()),
            pleg_error.as_deref(),
            self.runtime_error.as_deref(),
            self.network_error.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        let (runtime_ready, network_ready, pleg_healthy) = key.flags;
        self.last = Some(key);
        Some(RuntimeHealth {
            runtime_ready,
            network_ready,
            pleg_healthy,
            message: aggregate(&errors),
        })
    }
}

/// Probes every `period_ms` until `shutdown` turns true (or the engine stops), sending a
/// `RuntimeHealth` record on every change.
pub async fn run(
    cri: CriClient,
    period_ms: u64,
    pleg: impl Fn() -> Result<(), String> + Send + 'static,
    report: Report,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tracker = HealthTracker::new();
    let period = Duration::from_millis(period_ms.max(1));
    loop {
        if *shutdown.borrow() {
            return;
        }
        let status = tokio::select! {
            s = cri.status(false) => s,
            changed = shutdown.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        if let Err(e) = &status {
            tracing::debug!(error = %e, "container runtime status check failed");
        }
        if let Some(health) = tracker.observe(status.as_ref(), pleg()) {
            tracing::info!(
                runtime_ready = health.runtime_ready,
                network_ready = health.network_ready,
                pleg_healthy = health.pleg_healthy,
                message = %health.message,
                "container runtime health changed"
            );
            if !report.send(Event::RuntimeHealth(health), None).await {
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            changed = shutdown.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
