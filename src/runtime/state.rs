//! In-memory records of the embedded runtime (sandboxes, containers, images),
//! their conversion to CRI messages, CRI list filters and id generation.
//!
//! Owns: what the runtime remembers. Must not: start, signal or wait for
//! processes (see `process`), or persist anything: a restarted runtime starts
//! empty, as its processes died with it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

use crate::cri::v1;

/// Nanoseconds since the Unix epoch.
pub(crate) fn now_ns() -> i64 {
    crate::core::record::Time::from_system().unix_nanos()
}

/// Container-id-like identifiers: 64 lowercase hex characters.
///
/// `mix(…) ‖ start_ns ‖ pid‖hash(root_dir) ‖ counter`: the last three words
/// make every id unique (the counter within a runtime instance; the start time
/// and pid across restarts and across instances in one process; the root-dir
/// hash between instances started in the same nanosecond). The leading word
/// is a hash of the rest so that short prefixes (as shown by crictl) differ.
pub(crate) struct IdGen {
    start_ns: u64,
    origin: u64,
    counter: AtomicU64,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl IdGen {
    pub(crate) fn new(root_dir: &Path) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let pid = u64::from(std::process::id());
        let root = fnv1a(root_dir.as_os_str().as_bytes()) & 0xFFFF_FFFF;
        Self {
            start_ns: now_ns() as u64,
            origin: (pid << 32) | root,
            counter: AtomicU64::new(1),
        }
    }

    pub(crate) fn next(&self) -> String {
        let c = self.counter.fetch_add(1, Ordering::Relaxed);
        let mix = splitmix64(self.start_ns ^ splitmix64(self.origin ^ splitmix64(c)));
        format!(
            "{mix:016x}{:016x}{:016x}{c:016x}",
            self.start_ns, self.origin
        )
    }
}

/// Whether `labels` has every key/value of `selector` (CRI MatchLabels).
pub(crate) fn labels_match(
    labels: &HashMap<String, String>,
    selector: &HashMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// A pod sandbox: a record only, no process.
pub(crate) struct SandboxRec {
    pub id: String,
    pub config: v1::PodSandboxConfig,
    pub runtime_handler: String,
    pub state: v1::PodSandboxState,
    pub created_at: i64,
}

impl SandboxRec {
    pub(crate) fn metadata(&self) -> Option<v1::PodSandboxMetadata> {
        self.config.metadata.clone()
    }

    /// The name the sandbox reserves (unique among live sandboxes).
    pub(crate) fn reserved_name(meta: &v1::PodSandboxMetadata) -> String {
        format!(
            "{}_{}_{}_{}",
            meta.name, meta.namespace, meta.uid, meta.attempt
        )
    }

    pub(crate) fn status(&self) -> v1::PodSandboxStatus {
        let ns_options = self
            .config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.clone());
        v1::PodSandboxStatus {
            id: self.id.clone(),
            metadata: self.metadata(),
            state: self.state as i32,
            created_at: self.created_at,
            network: Some(v1::PodSandboxNetworkStatus {
                ip: "127.0.0.1".into(),
                additional_ips: vec![],
            }),
            linux: Some(v1::LinuxPodSandboxStatus {
                namespaces: Some(v1::Namespace {
                    options: ns_options,
                }),
            }),
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    pub(crate) fn summary(&self) -> v1::PodSandbox {
        v1::PodSandbox {
            id: self.id.clone(),
            metadata: self.metadata(),
            state: self.state as i32,
            created_at: self.created_at,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    pub(crate) fn matches(&self, f: &v1::PodSandboxFilter) -> bool {
        (f.id.is_empty() || self.id.starts_with(&f.id))
            && f.state
                .as_ref()
                .is_none_or(|s| s.state == self.state as i32)
            && labels_match(&self.config.labels, &f.label_selector)
    }
}

/// A container: its config, where its process is, and how it ended.
#[derive(Default)]
pub(crate) struct ContainerRec {
    pub id: String,
    pub sandbox_id: String,
    pub config: v1::ContainerConfig,
    /// Full host path of the CRI log file, or empty for "no log".
    pub log_path: String,
    /// The environment the process (and ExecSync) gets.
    pub env: Vec<(String, String)>,
    /// The working directory the process (and ExecSync) gets.
    pub working_dir: String,
    pub state: v1::ContainerState,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    /// Process group (= pid of the leader) while started and not yet reaped.
    pub pgid: Option<i32>,
    /// Becomes `true` once the process has been reaped and the record updated.
    pub exited: Option<watch::Receiver<bool>>,
    /// Process groups of ExecSync commands running in this container.
    pub exec_groups: HashSet<i32>,
    /// The open log file the output pumps write to while the process runs
    /// (swapped for a fresh file by `ReopenContainerLog` after a rotation).
    pub log: Option<super::logs::SharedLog>,
}

impl ContainerRec {
    pub(crate) fn name(&self) -> &str {
        self.config
            .metadata
            .as_ref()
            .map(|m| m.name.as_str())
            .unwrap_or("")
    }

    fn image_ref(&self) -> String {
        self.config
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default()
    }

    pub(crate) fn status(&self) -> v1::ContainerStatus {
        let image_ref = self.image_ref();
        v1::ContainerStatus {
            id: self.id.clone(),
            metadata: self.config.metadata.clone(),
            state: self.state as i32,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            exit_code: self.exit_code,
            image: self.config.image.clone(),
            image_ref: image_ref.clone(),
            reason: self.reason.clone(),
            message: self.message.clone(),
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            mounts: self.config.mounts.clone(),
            log_path: self.log_path.clone(),
            resources: self
                .config
                .linux
                .as_ref()
                .and_then(|l| l.resources.clone())
                .map(|r| v1::ContainerResources { linux: Some(r) }),
            image_id: image_ref,
            user: None,
            stop_signal: self.config.stop_signal,
        }
    }

    pub(crate) fn summary(&self) -> v1::Container {
        let image_ref = self.image_ref();
        v1::Container {
            id: self.id.clone(),
            pod_sandbox_id: self.sandbox_id.clone(),
            metadata: self.config.metadata.clone(),
            image: self.config.image.clone(),
            image_ref: image_ref.clone(),
            state: self.state as i32,
            created_at: self.created_at,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            image_id: image_ref,
        }
    }

    pub(crate) fn matches(&self, f: &v1::ContainerFilter) -> bool {
        (f.id.is_empty() || self.id.starts_with(&f.id))
            && (f.pod_sandbox_id.is_empty() || self.sandbox_id.starts_with(&f.pod_sandbox_id))
            && f.state
                .as_ref()
                .is_none_or(|s| s.state == self.state as i32)
            && labels_match(&self.config.labels, &f.label_selector)
    }
}

/// A "pulled" image: only its reference is known.
pub(crate) struct ImageRec {
    pub reference: String,
    pub spec: v1::ImageSpec,
}

impl ImageRec {
    pub(crate) fn to_image(&self) -> v1::Image {
        v1::Image {
            id: self.reference.clone(),
            repo_tags: vec![self.reference.clone()],
            repo_digests: vec![],
            // The CRI says size must be > 0; nothing is stored, so report 1.
            size: 1,
            uid: None,
            username: String::new(),
            spec: Some(self.spec.clone()),
            pinned: false,
        }
    }
}

/// Everything the runtime knows; guarded by one mutex.
#[derive(Default)]
pub(crate) struct State {
    pub sandboxes: HashMap<String, SandboxRec>,
    pub containers: HashMap<String, ContainerRec>,
    pub images: BTreeMap<String, ImageRec>,
    /// Set once shutdown began: no new process is started after that.
    pub shutting_down: bool,
}

impl State {
    /// Statuses of the containers of `sandbox_id`, oldest first.
    pub(crate) fn container_statuses_of(&self, sandbox_id: &str) -> Vec<v1::ContainerStatus> {
        let mut cs: Vec<&ContainerRec> = self
            .containers
            .values()
            .filter(|c| c.sandbox_id == sandbox_id)
            .collect();
        cs.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        cs.into_iter().map(ContainerRec::status).collect()
    }

    /// A `ContainerEventResponse` for `container_id` in `sandbox_id`, carrying
    /// the sandbox status and the statuses of all its containers as they are
    /// now (as containerd does).
    pub(crate) fn event(
        &self,
        container_id: &str,
        sandbox_id: &str,
        kind: v1::ContainerEventType,
    ) -> v1::ContainerEventResponse {
        v1::ContainerEventResponse {
            container_id: container_id.to_string(),
            container_event_type: kind as i32,
            created_at: now_ns(),
            pod_sandbox_status: self.sandboxes.get(sandbox_id).map(SandboxRec::status),
            containers_statuses: self.container_statuses_of(sandbox_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_64_hex_chars_and_unique() {
        let g = IdGen::new(Path::new("/tmp/a"));
        let a = g.next();
        let b = g.next();
        assert_eq!(a.len(), 64);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
        assert_ne!(a[..12], b[..12], "short prefixes should differ");
        let other = IdGen::new(Path::new("/tmp/b"));
        assert_ne!(other.next()[16..], a[16..]);
    }

    #[test]
    fn label_selector_requires_every_pair() {
        let labels: HashMap<String, String> =
            [("a".to_string(), "1".to_string()), ("b".into(), "2".into())].into();
        assert!(labels_match(&labels, &HashMap::new()));
        assert!(labels_match(&labels, &[("a".into(), "1".into())].into()));
        assert!(!labels_match(&labels, &[("a".into(), "2".into())].into()));
        assert!(!labels_match(&labels, &[("c".into(), "1".into())].into()));
    }
}
