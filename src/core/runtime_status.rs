//! What the container runtime reported about a pod, and the core's cache of it.
//!
//! Owns `RuntimePodStatus` (the kubelet's `kubecontainer.PodStatus`), `RunningPod` (the
//! kubelet's `kubecontainer.Pod`, used for runtime-only pods) and `RuntimeCache` (the
//! kubelet's `podCache`), which is filled only by `RuntimeStatusObserved` records. Must not
//! talk to a runtime: the shell (PLEG, `InspectPod`) observes and appends.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::uid::Uid;
use super::uid_map::UidMap;
use crate::core::record::Time;

/// The state of a pod sandbox (CRI `PodSandboxState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SandboxState {
    /// `SANDBOX_READY`: the sandbox exists and its network is set up.
    SandboxReady,
    /// `SANDBOX_NOTREADY`: stopped or broken.
    SandboxNotready,
}

/// A pod sandbox as the runtime reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    /// Runtime ID.
    pub id: String,
    /// Ready or not.
    pub state: SandboxState,
    /// Creation time.
    pub created_at: Time,
    /// The attempt counter from the sandbox metadata.
    #[serde(default)]
    pub attempt: u32,
    /// The primary pod IP of the sandbox's network status: `None` when the runtime reported
    /// no network status, `Some("")` when it reported one without an IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// True if the sandbox uses the host network namespace.
    #[serde(default)]
    pub host_network: bool,
}

impl SandboxStatus {
    /// kuberuntime `PodSandboxChanged`'s "no IP" test: the runtime reported a network status
    /// whose IP is empty. A sandbox without a network status is not recreated for it.
    pub fn has_empty_network_ip(&self) -> bool {
        self.ip.as_deref() == Some("")
    }
}

/// The state of a container (kubecontainer `State`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    /// Created but not started.
    Created,
    /// Running.
    Running,
    /// Exited (has an exit code).
    Exited,
    /// The runtime does not know.
    Unknown,
}

/// One container instance as the runtime reports it (several per name across restarts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStatus {
    /// Runtime ID.
    pub id: String,
    /// The container's name in the pod spec.
    pub name: String,
    /// Lifecycle state.
    pub state: ContainerState,
    /// Creation time.
    pub created_at: Time,
    /// Start time, if started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// Finish time, if exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Exit code, meaningful when exited.
    #[serde(default)]
    pub exit_code: i32,
    /// Runtime reason (e.g. `Completed`, `Error`, `OOMKilled`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Runtime message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Image reference as given in the spec.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// The image the runtime resolved (digest or ID).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_ref: String,
    /// The spec hash the container was created from (kubelet annotation).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hash: String,
    /// The restart count annotation the container was created with.
    #[serde(default)]
    pub restart_count: i32,
}

/// Everything the runtime knows about one pod (kubelet `kubecontainer.PodStatus`).
/// Containers and sandboxes are ordered newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimePodStatus {
    /// Pod name from the runtime's labels.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Pod namespace from the runtime's labels.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Pod IPs, primary first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// Sandboxes, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandboxes: Vec<SandboxStatus>,
    /// Container instances, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerStatus>,
}

impl RuntimePodStatus {
    /// The newest sandbox by creation time, the first of equals (the runtime lists newest
    /// first, so that is `sandboxes[0]` for what the shell observes; a hand-written record
    /// in another order still gets the newest).
    pub fn newest_sandbox(&self) -> Option<&SandboxStatus> {
        self.sandboxes.iter().reduce(|best, s| {
            if s.created_at > best.created_at {
                s
            } else {
                best
            }
        })
    }

    /// The IDs of every container shown, in the order shown.
    pub fn container_ids(&self) -> Vec<String> {
        self.containers.iter().map(|c| c.id.clone()).collect()
    }

    /// The IDs of every sandbox shown, in the order shown.
    pub fn sandbox_ids(&self) -> Vec<String> {
        self.sandboxes.iter().map(|s| s.id.clone()).collect()
    }

    /// `isPodStatusCacheTerminal`: no running container and no ready sandbox.
    pub fn is_terminal(&self) -> bool {
        !self
            .containers
            .iter()
            .any(|c| c.state == ContainerState::Running)
            && !self
                .sandboxes
                .iter()
                .any(|s| s.state == SandboxState::SandboxReady)
    }

    /// True if the runtime has nothing at all for the pod.
    pub fn is_empty(&self) -> bool {
        self.sandboxes.is_empty() && self.containers.is_empty()
    }

    /// True if something of the pod is running: a running container or a ready sandbox
    /// (the kubelet's runtime cache `GetPods()` without `all`).
    pub fn has_running(&self) -> bool {
        !self.is_terminal()
    }

    /// The runtime pod (kubelet `kubecontainer.Pod`) made of what is still running.
    pub fn running_pod(&self, uid: &Uid) -> RunningPod {
        RunningPod {
            uid: uid.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            containers: self
                .containers
                .iter()
                .filter(|c| c.state == ContainerState::Running)
                .map(|c| RunningContainer {
                    id: c.id.clone(),
                    name: c.name.clone(),
                })
                .collect(),
            sandboxes: self
                .sandboxes
                .iter()
                .filter(|s| s.state == SandboxState::SandboxReady)
                .map(|s| s.id.clone())
                .collect(),
        }
    }
}

/// A container of a runtime-only pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningContainer {
    /// Runtime ID.
    pub id: String,
    /// Name from the container's labels.
    pub name: String,
}

/// A pod found in the runtime with no config (kubelet `kubecontainer.Pod`): enough to kill
/// it and nothing more.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningPod {
    /// UID from the runtime labels.
    pub uid: Uid,
    /// Name from the runtime labels.
    pub name: String,
    /// Namespace from the runtime labels.
    pub namespace: String,
    /// Its containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<RunningContainer>,
    /// Its sandbox IDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandboxes: Vec<String>,
}

impl RunningPod {
    /// `RunningPod.ToAPIPod()`: a placeholder pod with only identity set. Not a config pod.
    pub fn to_api_pod(&self) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(self.uid.to_string()),
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }
}

/// One cache entry: the latest observation for a pod.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The status (empty if the runtime has nothing for the pod).
    pub status: Arc<RuntimePodStatus>,
    /// The inspection error, if the last inspection failed (the status is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The seq this entry is at least as fresh as (`RuntimeStatusObserved::fresh_as_of`):
    /// the runtime was read after that record was appended.
    pub fresh_as_of_seq: u64,
}

impl CacheEntry {
    /// What `podCache.Get` answers for this entry: the error, else the status.
    pub fn result(&self) -> CacheResult {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(self.status.clone()),
        }
    }
}

/// The core's copy of the kubelet pod cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeCache {
    entries: UidMap<CacheEntry>,
}

/// The answer of `RuntimeCache::get`.
pub type CacheResult = Result<Arc<RuntimePodStatus>, String>;

impl RuntimeCache {
    /// Folds an observation for `uid` that is at least as fresh as record `fresh_as_of_seq`.
    /// A read that began before the cached one (two readers, the relist and `InspectPod`,
    /// race) is older news and changes nothing; returns whether the entry changed.
    pub fn observe(
        &mut self,
        uid: &Uid,
        status: Option<Arc<RuntimePodStatus>>,
        error: Option<String>,
        fresh_as_of_seq: u64,
    ) -> bool {
        let entry = CacheEntry {
            status: status.unwrap_or_default(),
            error,
            fresh_as_of_seq,
        };
        // a pod already cached (the common case) keeps its key
        match self.entries.get_mut(uid) {
            Some(e) if e.fresh_as_of_seq > fresh_as_of_seq => return false,
            Some(e) => *e = entry,
            None => {
                self.entries.insert(uid.clone(), entry);
            }
        }
        true
    }

    /// `podCache.Get`: the last status, an empty status if the runtime never reported the
    /// pod, or the last inspection error.
    pub fn get<Q>(&self, uid: &Q) -> CacheResult
    where
        Uid: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries
            .get(uid)
            .map_or_else(|| Ok(Arc::default()), CacheEntry::result)
    }

    /// `podCache.GetNewerThan`: the entry if the runtime was read after record `after_seq`
    /// was appended (any entry if `after_seq` is `None`), else `None` (the caller must ask
    /// for one). Like the kubelet's cache, which stamps a relist with the time it began and
    /// not the time it was stored, a read that began before `after_seq` does not count.
    pub fn get_newer_than(&self, uid: &Uid, after_seq: Option<u64>) -> Option<CacheResult> {
        let e = self.entries.get(uid)?;
        match after_seq {
            Some(s) if e.fresh_as_of_seq < s => None,
            _ => Some(e.result()),
        }
    }

    /// The stored `Uid` equal to `uid`.
    pub fn uid_key<Q>(&self, uid: &Q) -> Option<&Uid>
    where
        Uid: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.get_key_value(uid).map(|(k, _)| k)
    }

    /// The raw entry for `uid`.
    pub fn entry(&self, uid: &Uid) -> Option<&CacheEntry> {
        self.entries.get(uid)
    }

    /// All entries in UID order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uid, &CacheEntry)> {
        self.entries.iter()
    }

    /// Forgets `uid` if the runtime has nothing for it (or it could not be inspected): the
    /// caller knows no worker and no config wants it, so an empty answer carries no
    /// information. Keeps the cache bounded by what exists somewhere.
    pub fn forget_if_empty(&mut self, uid: &Uid) {
        if self
            .entries
            .get(uid)
            .is_some_and(|e| e.error.is_some() || e.status.is_empty())
        {
            self.entries.remove(uid);
        }
    }

    /// The key-set generation of the cache (`UidMap::generation`).
    pub fn generation(&self) -> crate::core::uid_map::Generation {
        self.entries.generation()
    }

    /// How many pods are cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
