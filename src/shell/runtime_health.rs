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
//! As upstream, a failed `Status` call changes nothing by itself: the runtime is "down" once
//! `max_wait_ms` (the kubelet's `maxWaitForContainerRuntime`, 30 s) has passed without a
//! `Status` answer with `RuntimeReady`, and "may not have completed yet" until the first
//! one. The clock is re-read every period even while a `Status` call hangs, so a frozen
//! runtime turns the node NotReady after `max_wait_ms`, not after the call's timeout.
//!
//! Difference from upstream: a change means a change of the three flags or of the runtime or
//! network error, not of the PLEG error text (which names the time since the last relist and
//! so changes on every probe).

use std::time::Duration;

use tokio::sync::watch;
use tonic::Code;

use super::Report;
use crate::core::node_status::conditions::{aggregate, ERR_NETWORK_UNKNOWN};
use crate::core::record::event::RuntimeHealth;
use crate::core::record::Event;
use crate::cri::{v1, CriClient, CriError};

/// The kubelet's runtime status check period (`updateRuntimeUp` every 5 s).
pub const DEFAULT_PERIOD_MS: u64 = 5_000;

/// The kubelet's `maxWaitForContainerRuntime`: the runtime is down after this long without a
/// successful status check.
pub const DEFAULT_MAX_WAIT_MS: u64 = 30_000;

/// The kubelet's text before the first successful status check.
pub const ERR_NOT_YET: &str = "container runtime status check may not have completed yet";

/// The kubelet's text once `max_wait_ms` passed without one.
pub const ERR_DOWN: &str = "container runtime is down";

/// What a change is compared on (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    flags: (bool, bool, bool),
    sync_error: Option<&'static str>,
    runtime_error: Option<String>,
    network_error: Option<String>,
}

/// The runtime state between probes (kubelet `runtimeState`).
#[derive(Debug)]
pub struct HealthTracker {
    /// `baseRuntimeSyncThreshold`.
    max_wait_ms: u64,
    /// `lastBaseRuntimeSync`: when (ms on the caller's monotonic clock) a `Status` answer
    /// last had `RuntimeReady`; `None` before the first.
    last_sync_ms: Option<u64>,
    runtime_error: Option<String>,
    network_error: Option<String>,
    last: Option<Key>,
}

impl Default for HealthTracker {
    fn default() -> Self {
        HealthTracker::new(DEFAULT_MAX_WAIT_MS)
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
    /// A tracker in the kubelet's initial state (no status check yet, network state
    /// unknown) that calls the runtime down after `max_wait_ms` without a good check.
    pub fn new(max_wait_ms: u64) -> HealthTracker {
        HealthTracker {
            max_wait_ms,
            last_sync_ms: None,
            runtime_error: None,
            network_error: Some(ERR_NETWORK_UNKNOWN.to_string()),
            last: None,
        }
    }

    /// Folds one look at `now_ms`: a `Status` answer, a failed call (logged by the caller,
    /// changes nothing by itself, as upstream) or none (a call still pending); returns the
    /// record to send if the health changed (always on the first look).
    pub fn observe(
        &mut self,
        now_ms: u64,
        status: Option<Result<&v1::StatusResponse, &CriError>>,
        pleg: Result<(), String>,
    ) -> Option<RuntimeHealth> {
        match status {
            None | Some(Err(_)) => {}
            Some(Ok(s)) => {
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
                if self.runtime_error.is_none() {
                    self.last_sync_ms = Some(now_ms);
                }
            }
        }
        let sync_error = match self.last_sync_ms {
            None => Some(ERR_NOT_YET),
            Some(t) if now_ms >= t.saturating_add(self.max_wait_ms) => Some(ERR_DOWN),
            Some(_) => None,
        };
        let pleg_error = pleg.err().map(|e| format!("PLEG is not healthy: {e}"));
        let key = Key {
            flags: (
                sync_error.is_none() && self.runtime_error.is_none(),
                self.network_error.is_none(),
                pleg_error.is_none(),
            ),
            sync_error,
            runtime_error: self.runtime_error.clone(),
            network_error: self.network_error.clone(),
        };
        if self.last.as_ref() == Some(&key) {
            return None;
        }
        // runtimeErrors (sync, health checks, runtime condition), then networkErrors
        let errors: Vec<&str> = [
            sync_error,
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
            network_message: self.network_error.clone().unwrap_or_default(),
        })
    }
}

/// Probes every `period_ms` until `shutdown` turns true (or the engine stops), sending a
/// `RuntimeHealth` record on every change. While a `Status` call is pending the tracker is
/// looked at again every period, so a hanging runtime is down after `max_wait_ms`.
pub async fn run(
    cri: CriClient,
    period_ms: u64,
    max_wait_ms: u64,
    pleg: impl Fn() -> Result<(), String> + Send + 'static,
    report: Report,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tracker = HealthTracker::new(max_wait_ms);
    let period = Duration::from_millis(period_ms.max(1));
    let start = tokio::time::Instant::now();
    let now_ms = || start.elapsed().as_millis() as u64;
    let mut failing: Option<Code> = None;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let call = cri.status(false);
        tokio::pin!(call);
        let status = loop {
            tokio::select! {
                s = &mut call => break s,
                _ = tokio::time::sleep(period) => {
                    // still waiting for the runtime: time alone may make it down
                    if let Some(health) = tracker.observe(now_ms(), None, pleg()) {
                        if !send(&report, health).await {
                            return;
                        }
                    }
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        return;
                    }
                }
            }
        };
        match &status {
            Err(e) if failing != Some(e.code()) => {
                tracing::warn!(error = %e, max_wait_ms, "container runtime status check failed; the runtime is down if none succeeds within max_wait_ms");
                failing = Some(e.code());
            }
            Err(e) => tracing::debug!(error = %e, "container runtime status check failed"),
            Ok(_) => failing = None,
        }
        if let Some(health) = tracker.observe(now_ms(), Some(status.as_ref()), pleg()) {
            if !send(&report, health).await {
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

/// Logs and reports a change; `false` once the engine is gone.
async fn send(report: &Report, health: RuntimeHealth) -> bool {
    tracing::info!(
        runtime_ready = health.runtime_ready,
        network_ready = health.network_ready,
        pleg_healthy = health.pleg_healthy,
        message = %health.message,
        "container runtime health changed"
    );
    report.send(Event::RuntimeHealth(health), None).await
}

#[cfg(test)]
mod tests;
