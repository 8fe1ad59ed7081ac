//! CrashLoopBackOff and other exponential backoffs (client-go `flowcontrol.Backoff` as the
//! kubelet configures it, and kuberuntime `doBackOff`; BO-01…BO-08).
//!
//! Owns the per-key backoff table (`Backoff`), its configuration and the container restart
//! decision. Must not read a clock or add jitter: "now" and the event time are parameters
//! (the kubelet's container backoff has no jitter), and the table is a `BTreeMap`, so the
//! same calls give the same state on replay. Keys are opaque: container restarts use
//! [`stable_key`]; image pulls can use the same table with their own key and config.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};

use super::plan::container_hash;
use super::pod;
use super::runtime_status::{ContainerState, RuntimePodStatus};
use crate::core::record::Time;

/// The reason of a start refused by the backoff (`kubecontainer.ErrCrashLoopBackOff`); the
/// status generator shows it as the container's waiting reason.
pub const REASON_CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
/// The reason of the Warning event emitted when a start is refused (`BackOff`).
pub const EVENT_REASON_BACK_OFF: &str = "BackOff";

/// Backoff parameters. `Default` is the kubelet's container restart backoff (BO-01): 10s
/// initial (`containerBackOffPeriod`), 300s max (`MaxContainerBackOff`), reset after an
/// event more than 600s after the last update (BO-05).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackoffConfig {
    /// The first delay.
    pub initial_ms: u64,
    /// The delay doubles up to this.
    pub max_ms: u64,
    /// An event more than this long after the entry's last update resets it
    /// (`HasExpiredFunc`). For image pulls use `2 × max_ms`, client-go's default.
    pub reset_after_ms: u64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial_ms: 10_000,
            max_ms: 300_000,
            reset_after_ms: 600_000,
        }
    }
}

impl BackoffConfig {
    /// BO-08 `crashLoopBackOff.maxContainerRestartPeriod`: the container backoff with a
    /// configured maximum; if it is below the 10s initial delay, the initial delay is the
    /// maximum. The reset stays at 600s.
    pub fn with_max_ms(max_ms: u64) -> Self {
        let d = BackoffConfig::default();
        BackoffConfig {
            initial_ms: d.initial_ms.min(max_ms),
            max_ms,
            reset_after_ms: d.reset_after_ms,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    backoff_ms: u64,
    last_update: Time,
}

/// Backoff state per key (client-go `flowcontrol.Backoff`, without its clock).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    entries: BTreeMap<String, Entry>,
}

fn ms(d: u64) -> Duration {
    Duration::from_millis(d)
}

impl Backoff {
    fn expired(cfg: &BackoffConfig, event_time: Time, e: &Entry) -> bool {
        event_time.since(e.last_update) > ms(cfg.reset_after_ms)
    }

    /// `IsInBackOffSince`: true if `key` has an entry that has not expired at
    /// `event_time` and less than its current backoff has passed from `event_time` to
    /// `now`.
    pub fn is_in_backoff_since(
        &self,
        cfg: &BackoffConfig,
        key: &str,
        event_time: Time,
        now: Time,
    ) -> bool {
        match self.entries.get(key) {
            None => false,
            Some(e) if Backoff::expired(cfg, event_time, e) => false,
            Some(e) => now.since(event_time) < ms(e.backoff_ms),
        }
    }

    /// `IsInBackOffSinceUpdate`: true if `key` has an entry that has not expired at `now`
    /// and less than its current backoff has passed since its last update (the image
    /// puller's check before a pull).
    pub fn is_in_backoff_since_update(&self, cfg: &BackoffConfig, key: &str, now: Time) -> bool {
        match self.entries.get(key) {
            None => false,
            Some(e) if Backoff::expired(cfg, now, e) => false,
            Some(e) => now.since(e.last_update) < ms(e.backoff_ms),
        }
    }

    /// `Next`: starts `key` at the initial delay (if new or expired at `event_time`), else
    /// doubles its delay up to the maximum; the entry's last update becomes `now`.
    pub fn next(&mut self, cfg: &BackoffConfig, key: &str, event_time: Time, now: Time) {
        let backoff_ms = match self.entries.get(key) {
            Some(e) if !Backoff::expired(cfg, event_time, e) => {
                e.backoff_ms.saturating_mul(2).min(cfg.max_ms)
            }
            _ => cfg.initial_ms,
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                backoff_ms,
                last_update: now,
            },
        );
    }

    /// `Get`: the current delay of `key` in milliseconds (0 if none).
    /// Whether an entry is kept for `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    pub fn get_ms(&self, key: &str) -> u64 {
        self.entries.get(key).map_or(0, |e| e.backoff_ms)
    }

    /// `GC`: drops the entries last updated more than `2 × max_ms` before `now`
    /// (client-go's default expiry; BO-07, run at the end of housekeeping).
    pub fn gc(&mut self, cfg: &BackoffConfig, now: Time) {
        // Never forget an entry before its reset window: with a small configured maximum,
        // 2 × max could drop a backoff that must still double (upstream 1.32+ keeps it).
        let idle = ms(cfg.max_ms.saturating_mul(2).max(cfg.reset_after_ms));
        self.entries.retain(|_, e| now.since(e.last_update) <= idle);
    }

    /// How many keys are tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `getStableKey` (BO-01): `podName_namespace_uid_containerName_hash`, with the container's
/// spec hash, so a spec change starts a fresh backoff (BO-06).
pub fn stable_key(pod: &Pod, container: &Container) -> String {
    format!(
        "{}_{}_{}_{}_{}",
        pod::name(pod),
        pod::namespace(pod),
        pod::uid_str(pod),
        container.name,
        container_hash(container)
    )
}

/// A start refused by the backoff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackoffDecision {
    /// The start failure message (reason [`REASON_CRASH_LOOP_BACK_OFF`]), e.g.
    /// "back-off 20s restarting failed container=web pod=web_ns(uid)".
    pub message: String,
    /// When the backoff ends (the last exit + the current delay): a sync at or after this
    /// instant starts the container.
    pub expires_at: Time,
    /// The Warning event ([`EVENT_REASON_BACK_OFF`]) message, e.g.
    /// "Back-off restarting failed container web in pod web_ns(uid)".
    pub event_message: String,
}

/// `doBackOff`: before starting `container`, look at its newest *exited* instance. If the
/// container is still backing off from that exit, returns the refusal; otherwise records
/// the restart (`Next`, event time = that exit's `finishedAt`) and returns `None`. A
/// container that never exited starts with no entry recorded (BO-02).
pub fn do_backoff(
    b: &mut Backoff,
    cfg: &BackoffConfig,
    pod: &Pod,
    container: &Container,
    runtime: &RuntimePodStatus,
    now: Time,
) -> Option<BackoffDecision> {
    let exited = runtime
        .containers
        .iter()
        .find(|c| c.name == container.name && c.state == ContainerState::Exited)?;
    let finished_at = exited.finished_at.unwrap_or(Time::ZERO);
    let key = stable_key(pod, container);
    if b.is_in_backoff_since(cfg, &key, finished_at, now) {
        let delay_ms = b.get_ms(&key);
        let pod_desc = format_pod(pod);
        return Some(BackoffDecision {
            message: format!(
                "back-off {} restarting failed container={} pod={}",
                go_duration(delay_ms),
                container.name,
                pod_desc
            ),
            expires_at: finished_at.plus_ms(delay_ms),
            event_message: format!(
                "Back-off restarting failed container {} in pod {}",
                container.name, pod_desc
            ),
        });
    }
    b.next(cfg, &key, finished_at, now);
    None
}

/// kubelet `format.Pod`: `name_namespace(uid)`.
fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod::name(pod),
        pod::namespace(pod),
        pod::uid_str(pod)
    )
}

/// Go's `time.Duration.String` for a whole number of milliseconds: "10s", "2m40s",
/// "5m0s", "1h0m0s", "1.5s", "500ms", "0s".
pub fn go_duration(total_ms: u64) -> String {
    if total_ms == 0 {
        return "0s".to_string();
    }
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let (h, m, s, frac) = (
        total_ms / 3_600_000,
        (total_ms / 60_000) % 60,
        (total_ms / 1000) % 60,
        total_ms % 1000,
    );
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    let _ = write!(out, "{s}");
    if frac > 0 {
        let f = format!("{frac:03}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    out.push('s');
    out
}

#[cfg(test)]
mod tests;
