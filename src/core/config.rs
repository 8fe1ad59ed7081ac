//! The configuration the core folds with, carried in the ledger by `ConfigApplied`.
//!
//! Owns the kubelet timing constants and limits that decisions depend on, with upstream
//! defaults. Must not read files, flags or the environment: the shell builds a
//! `CoreConfig` and appends it as a record so a replay folds with the same values.

use serde::{Deserialize, Serialize};

/// Where desired pods come from (kubelet config sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodSource {
    /// Static pods from `--pod-manifest-path` (`kubernetes.io/config.source=file`).
    File,
    /// Pods bound to this node in the API server (`kubernetes.io/config.source=api`).
    Api,
}

impl PodSource {
    /// The value of the `kubernetes.io/config.source` annotation for this source.
    pub fn annotation_value(self) -> &'static str {
        match self {
            PodSource::File => "file",
            PodSource::Api => "api",
        }
    }
}

/// Knobs the pure core depends on. Every duration names its unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CoreConfig {
    /// This node's name (`--node-name`, defaulting to the hostname in the shell).
    pub node_name: String,
    /// The node's IP (`status.hostIP`, and the pod IP of host-network pods).
    pub node_ip: String,
    /// The container runtime's name, the scheme of container IDs in pod statuses
    /// (`containerd://…`).
    pub runtime_name: String,
    /// The config sources that must report before housekeeping and deletions run.
    pub sources: Vec<PodSource>,
    /// Pod worker resync after a successful sync (kubelet `--sync-frequency`, 1 m),
    /// jittered by up to 50 %.
    pub resync_interval_ms: u64,
    /// Pod worker retry after a failed sync (kubelet `backOffPeriod`, 10 s), jittered 50 %.
    pub sync_error_backoff_ms: u64,
    /// Pod worker retry when the network is not ready (`backOffOnTransientErrorPeriod`, 1 s).
    pub network_not_ready_backoff_ms: u64,
    /// Housekeeping period (kubelet `housekeepingPeriod`, 2 s).
    pub housekeeping_period_ms: u64,
    /// Admission limit on active pods (kubelet `--max-pods`, 110).
    pub max_pods: u32,
    /// The least a `killPodNow` caller waits before `ExceededGracePeriod` (10 s).
    pub kill_wait_min_ms: u64,
    /// First CrashLoopBackOff delay (kubelet `backOffPeriod`, 10 s).
    pub crash_loop_backoff_initial_ms: u64,
    /// Maximum CrashLoopBackOff delay (kubelet `MaxContainerBackOff`, 300 s).
    pub crash_loop_backoff_max_ms: u64,
    /// A container that ran longer than this before crashing restarts without backoff
    /// (10 min, fixed upstream).
    pub crash_loop_backoff_reset_ms: u64,
    /// First ImagePullBackOff delay after a failed pull (the kubelet's image backoff,
    /// `backOffPeriod`, 10 s); keyed by pod UID and image.
    pub image_pull_backoff_initial_ms: u64,
    /// Maximum ImagePullBackOff delay (`MaxContainerBackOff`, 300 s); an entry idle for twice
    /// this long starts over.
    pub image_pull_backoff_max_ms: u64,
    /// A volume that failed to set up is tried again after this, then after twice as long
    /// each time (the volume manager's `initialDurationBeforeRetry`, 500 ms), while the sync
    /// waits for the pod's volumes.
    pub volume_mount_retry_initial_ms: u64,
    /// How long a sync waits for the pod's volumes before it fails (the kubelet's
    /// `podAttachAndMountTimeout`, 2 min 3 s); the pod worker then backs off.
    pub volume_mount_timeout_ms: u64,
    /// The status manager's full pass over every pod (`needsUpdate`, `needsReconcile`;
    /// kubelet `syncPeriod`, 10 s).
    pub status_sync_period_ms: u64,
    /// Status syncs (GET + PATCH [+ DELETE]) the shell runs at once, at most one per pod
    /// (upstream runs them one at a time).
    pub status_sync_max_in_flight: u32,
    /// How long a node shutdown may take in all (kubelet `shutdownGracePeriod`, default 0:
    /// graceful node shutdown off, pods are stopped with their own grace periods).
    pub shutdown_grace_period_s: u64,
    /// The part of `shutdown_grace_period_s` kept for critical pods, which are killed after
    /// the others (kubelet `shutdownGracePeriodCriticalPods`, default 0).
    pub shutdown_grace_period_critical_pods_s: u64,
    /// Registration, Lease and node status timings. Boxed to keep `ConfigApplied` (and so
    /// every `Event`) small; flattened, so its fields are plain `CoreConfig` fields on the wire.
    #[serde(flatten)]
    pub node_lifecycle: Box<NodeLifecycleConfig>,
    /// Whether the host enforces AppArmor (probed by the shell at start): a pod that asks
    /// for a profile cannot run without it (`core::soft_admission`). Written only when true,
    /// so ledgers of hosts without AppArmor read as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub apparmor_enabled: bool,
    /// Sysctls, or prefixes ending in `*`, a pod may set beyond the safe set (kubelet
    /// `--allowed-unsafe-sysctls`; `core::admission::sysctls`). Only namespaced sysctls;
    /// written only when set, so earlier ledgers read as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_unsafe_sysctls: Vec<String>,
}

/// The node lifecycle's timings (`core::node_status`), with the kubelet's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeLifecycleConfig {
    /// How often the node status is computed and, if it changed, patched (kubelet
    /// `nodeStatusUpdateFrequency`, 10 s).
    pub node_status_update_frequency_ms: u64,
    /// An unchanged node status is still patched (a heartbeat) this long after the last
    /// successful report (kubelet `nodeStatusReportFrequency`, 5 min).
    pub node_status_report_frequency_ms: u64,
    /// `spec.leaseDurationSeconds` of the node's Lease (kubelet `nodeLeaseDurationSeconds`,
    /// 40).
    pub node_lease_duration_s: i32,
    /// How often the Lease is renewed (the kubelet's 0.25 × lease duration, 10 s).
    pub lease_renew_interval_ms: u64,
    /// First delay before retrying a failed registration (`registerWithAPIServer`, 100 ms).
    pub node_register_backoff_initial_ms: u64,
    /// Largest registration retry delay (the delay doubles up to this, 7 s).
    pub node_register_backoff_max_ms: u64,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            node_status_update_frequency_ms: 10_000,
            node_status_report_frequency_ms: 300_000,
            node_lease_duration_s: 40,
            lease_renew_interval_ms: 10_000,
            node_register_backoff_initial_ms: 100,
            node_register_backoff_max_ms: 7_000,
        }
    }
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            node_name: String::new(),
            node_ip: String::new(),
            runtime_name: String::new(),
            sources: Vec::new(),
            resync_interval_ms: 60_000,
            sync_error_backoff_ms: 10_000,
            network_not_ready_backoff_ms: 1_000,
            housekeeping_period_ms: 2_000,
            max_pods: 110,
            kill_wait_min_ms: 10_000,
            crash_loop_backoff_initial_ms: 10_000,
            crash_loop_backoff_max_ms: 300_000,
            crash_loop_backoff_reset_ms: 600_000,
            image_pull_backoff_initial_ms: 10_000,
            image_pull_backoff_max_ms: 300_000,
            volume_mount_retry_initial_ms: 500,
            volume_mount_timeout_ms: 123_000,
            status_sync_period_ms: 10_000,
            status_sync_max_in_flight: 16,
            shutdown_grace_period_s: 0,
            shutdown_grace_period_critical_pods_s: 0,
            node_lifecycle: Box::default(),
            apparmor_enabled: false,
            allowed_unsafe_sysctls: Vec::new(),
        }
    }
}

/// A configuration value that cannot work, named by field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {field} = {value}: {why}")]
pub struct ConfigError {
    /// The field's name as in `CoreConfig`.
    pub field: &'static str,
    /// The rejected value.
    pub value: String,
    /// What a valid value looks like.
    pub why: &'static str,
}

impl CoreConfig {
    /// Checks the values a human can get wrong; the shell refuses to start on an error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = |field, value: u64| {
            if value == 0 {
                Err(ConfigError {
                    field,
                    value: value.to_string(),
                    why: "must be greater than zero",
                })
            } else {
                Ok(())
            }
        };
        positive("resync_interval_ms", self.resync_interval_ms)?;
        positive("sync_error_backoff_ms", self.sync_error_backoff_ms)?;
        positive(
            "network_not_ready_backoff_ms",
            self.network_not_ready_backoff_ms,
        )?;
        positive("housekeeping_period_ms", self.housekeeping_period_ms)?;
        positive("max_pods", u64::from(self.max_pods))?;
        positive("status_sync_period_ms", self.status_sync_period_ms)?;
        positive(
            "volume_mount_retry_initial_ms",
            self.volume_mount_retry_initial_ms,
        )?;
        positive(
            "status_sync_max_in_flight",
            u64::from(self.status_sync_max_in_flight),
        )?;
        positive(
            "crash_loop_backoff_initial_ms",
            self.crash_loop_backoff_initial_ms,
        )?;
        if self.crash_loop_backoff_max_ms < self.crash_loop_backoff_initial_ms {
            return Err(ConfigError {
                field: "crash_loop_backoff_max_ms",
                value: self.crash_loop_backoff_max_ms.to_string(),
                why: "must be at least crash_loop_backoff_initial_ms",
            });
        }
        positive(
            "image_pull_backoff_initial_ms",
            self.image_pull_backoff_initial_ms,
        )?;
        if self.image_pull_backoff_max_ms < self.image_pull_backoff_initial_ms {
            return Err(ConfigError {
                field: "image_pull_backoff_max_ms",
                value: self.image_pull_backoff_max_ms.to_string(),
                why: "must be at least image_pull_backoff_initial_ms",
            });
        }
        if self.shutdown_grace_period_critical_pods_s > self.shutdown_grace_period_s {
            return Err(ConfigError {
                field: "shutdown_grace_period_critical_pods_s",
                value: self.shutdown_grace_period_critical_pods_s.to_string(),
                why: "must not exceed shutdown_grace_period_s",
            });
        }
        let n = &self.node_lifecycle;
        positive(
            "node_status_update_frequency_ms",
            n.node_status_update_frequency_ms,
        )?;
        positive(
            "node_status_report_frequency_ms",
            n.node_status_report_frequency_ms,
        )?;
        positive("lease_renew_interval_ms", n.lease_renew_interval_ms)?;
        if n.node_lease_duration_s <= 0
            || n.lease_renew_interval_ms >= n.node_lease_duration_s as u64 * 1_000
        {
            return Err(ConfigError {
                field: "node_lease_duration_s",
                value: n.node_lease_duration_s.to_string(),
                why: "must be positive and longer than lease_renew_interval_ms",
            });
        }
        positive(
            "node_register_backoff_initial_ms",
            n.node_register_backoff_initial_ms,
        )?;
        if n.node_register_backoff_max_ms < n.node_register_backoff_initial_ms {
            return Err(ConfigError {
                field: "node_register_backoff_max_ms",
                value: n.node_register_backoff_max_ms.to_string(),
                why: "must be at least node_register_backoff_initial_ms",
            });
        }
        for pattern in &self.allowed_unsafe_sysctls {
            let one = std::slice::from_ref(pattern);
            if let Err(e) = super::admission::sysctls::validate_allowed_unsafe(one) {
                return Err(ConfigError {
                    field: "allowed_unsafe_sysctls",
                    value: pattern.clone(),
                    why: e.why(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_kubelet_defaults() {
        let c = CoreConfig::default();
        assert_eq!(c.resync_interval_ms, 60_000, "--sync-frequency 1m");
        assert_eq!(c.sync_error_backoff_ms, 10_000, "backOffPeriod 10s");
        assert_eq!(
            c.network_not_ready_backoff_ms, 1_000,
            "backOffOnTransientErrorPeriod 1s"
        );
        assert_eq!(c.housekeeping_period_ms, 2_000, "housekeepingPeriod 2s");
        assert_eq!(c.max_pods, 110, "--max-pods 110");
        assert_eq!(c.kill_wait_min_ms, 10_000, "killPodNow minimum timeout 10s");
        assert_eq!(c.crash_loop_backoff_initial_ms, 10_000, "backOffPeriod 10s");
        assert_eq!(
            c.crash_loop_backoff_max_ms, 300_000,
            "MaxContainerBackOff 300s"
        );
        assert_eq!(
            c.crash_loop_backoff_reset_ms, 600_000,
            "backoff reset after 10 min"
        );
        assert_eq!(
            c.status_sync_period_ms, 10_000,
            "status manager syncPeriod 10s"
        );
        assert_eq!(
            c.image_pull_backoff_initial_ms, 10_000,
            "image backoff: backOffPeriod 10s"
        );
        assert_eq!(
            c.image_pull_backoff_max_ms, 300_000,
            "image backoff: MaxContainerBackOff 300s"
        );
        assert_eq!(
            c.volume_mount_retry_initial_ms, 500,
            "volume manager initialDurationBeforeRetry 500ms"
        );
        assert_eq!(
            c.volume_mount_timeout_ms, 123_000,
            "podAttachAndMountTimeout 2m3s"
        );
        assert!(c.validate().is_ok());
    }

    #[test]
    fn node_lifecycle_defaults_are_the_kubelet_defaults() {
        let c = &CoreConfig::default().node_lifecycle;
        assert_eq!(
            c.node_status_update_frequency_ms, 10_000,
            "nodeStatusUpdateFrequency 10s"
        );
        assert_eq!(
            c.node_status_report_frequency_ms, 300_000,
            "nodeStatusReportFrequency 5m"
        );
        assert_eq!(c.node_lease_duration_s, 40, "nodeLeaseDurationSeconds 40");
        assert_eq!(
            c.lease_renew_interval_ms,
            c.node_lease_duration_s as u64 * 1_000 / 4,
            "renew interval = 0.25 x lease duration"
        );
        assert_eq!(
            c.node_register_backoff_initial_ms, 100,
            "registration step 100ms"
        );
        assert_eq!(
            c.node_register_backoff_max_ms, 7_000,
            "registration step cap 7s"
        );
    }

    #[test]
    fn a_lease_renewed_no_faster_than_it_expires_is_rejected() {
        let mut c = CoreConfig::default();
        c.node_lifecycle.node_lease_duration_s = 10;
        assert_eq!(c.validate().unwrap_err().field, "node_lease_duration_s");
    }

    #[test]
    fn node_lifecycle_fields_are_plain_config_fields_on_the_wire() {
        let mut c = CoreConfig::default();
        c.node_lifecycle.lease_renew_interval_ms = 5_000;
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["lease_renew_interval_ms"], 5_000);
        assert_eq!(v["node_lease_duration_s"], 40);
        assert_eq!(serde_json::from_value::<CoreConfig>(v).unwrap(), c);
        let partial: CoreConfig =
            serde_json::from_str(r#"{"node_status_report_frequency_ms": 60000}"#).unwrap();
        let l = &partial.node_lifecycle;
        assert_eq!(l.node_status_report_frequency_ms, 60_000);
        assert_eq!(l.node_status_update_frequency_ms, 10_000);
        assert_eq!(partial.max_pods, 110);
    }

    #[test]
    fn an_allowed_unsafe_sysctl_that_is_not_a_namespaced_pattern_is_rejected_by_name() {
        let with = |list: &[&str]| CoreConfig {
            allowed_unsafe_sysctls: list.iter().map(|s| s.to_string()).collect(),
            ..CoreConfig::default()
        };
        assert!(with(&["kernel.msg*", "net.core.somaxconn"])
            .validate()
            .is_ok());
        let e = with(&["kernel.msg*", "vm.*"]).validate().unwrap_err();
        assert_eq!(
            (e.field, e.value.as_str()),
            ("allowed_unsafe_sysctls", "vm.*")
        );
        assert!(e.to_string().contains("not known to be namespaced"), "{e}");
        let e = with(&["net.*.x"]).validate().unwrap_err();
        assert_eq!(
            (e.field, e.value.as_str()),
            ("allowed_unsafe_sysctls", "net.*.x")
        );
        assert!(e.to_string().contains("pattern ending in `*`"), "{e}");
    }

    #[test]
    fn allowed_unsafe_sysctls_are_left_out_of_the_record_when_unset() {
        let v = serde_json::to_value(CoreConfig::default()).unwrap();
        assert!(v.get("allowed_unsafe_sysctls").is_none());
        let c = CoreConfig {
            allowed_unsafe_sysctls: vec!["kernel.msg*".into()],
            ..CoreConfig::default()
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["allowed_unsafe_sysctls"][0], "kernel.msg*");
        assert_eq!(serde_json::from_value::<CoreConfig>(v).unwrap(), c);
    }

    #[test]
    fn zero_periods_are_rejected_by_name() {
        let c = CoreConfig {
            housekeeping_period_ms: 0,
            ..CoreConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "housekeeping_period_ms");
        assert!(e.to_string().contains("greater than zero"));
    }
}
