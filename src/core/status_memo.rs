//! Remembers, per pod, the inputs of the last status generation and the cached status
//! version it left, so a sync with the very same inputs skips `generateAPIPodStatus` and the
//! comparison with the cached status (most syncs of a steady pod are periodic resyncs that
//! change nothing).
//!
//! Owns the memo entries. Must never change an output: a hit is allowed only when generating
//! again would give a status equal to the cached one, which holds when every input of the
//! generation is the same as at a generation whose result is the very version still cached
//! (it either left that version unchanged or recorded it: the store keeps the merged and
//! normalised status, and generating again from it and the same inputs gives it back): the
//! same pod object and runtime status (the same `Arc`s), the same start failures, the same
//! probe results, the same terminal flag, no status override and no deletion timestamp (a
//! deleted pod's status is always recorded anew). The memo is not state: it is not
//! serialised and compares equal to any other memo, so a replay or a restored snapshot
//! (which start without it) reach exactly the same state and commands. `tests/invariants.rs`
//! folds busy nodes and random histories with the memo cleared before every record and
//! requires the same commands and state.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::reason_cache::StartFailure;
use super::runtime_status::RuntimePodStatus;
use super::uid::Uid;

/// The inputs of one generation (see the module doc).
#[derive(Clone, Debug)]
pub struct MemoKey<'a> {
    /// The pod object.
    pub pod: &'a Arc<Pod>,
    /// The runtime status.
    pub runtime: &'a Arc<RuntimePodStatus>,
    /// The pod's start failures (the reason cache).
    pub start_failures: Option<&'a BTreeMap<String, StartFailure>>,
    /// `ProbeResults::generation`.
    pub probes_generation: u64,
    /// `podIsTerminal`.
    pub pod_is_terminal: bool,
}

#[derive(Clone, Debug)]
struct Entry {
    pod: Arc<Pod>,
    runtime: Arc<RuntimePodStatus>,
    start_failures: Option<BTreeMap<String, StartFailure>>,
    probes_generation: u64,
    pod_is_terminal: bool,
    /// The cached status version the generation left (unchanged or recorded).
    version: u64,
}

impl Entry {
    fn matches(&self, k: &MemoKey<'_>, version: u64) -> bool {
        self.version == version
            && Arc::ptr_eq(&self.pod, k.pod)
            && Arc::ptr_eq(&self.runtime, k.runtime)
            && self.probes_generation == k.probes_generation
            && self.pod_is_terminal == k.pod_is_terminal
            && self.start_failures.as_ref() == k.start_failures
    }
}

/// Per pod, the inputs of the last generation and the cached version it left.
#[derive(Clone, Debug, Default)]
pub struct StatusMemo {
    by_pod: BTreeMap<Uid, Entry>,
}

/// Not state: any two memos are equal (see the module doc).
impl PartialEq for StatusMemo {
    fn eq(&self, _: &StatusMemo) -> bool {
        true
    }
}

impl StatusMemo {
    /// True if generating `uid`'s status from `key` against the cached `version` is known to
    /// change nothing.
    pub fn hit(&self, uid: &Uid, key: &MemoKey<'_>, version: u64) -> bool {
        self.by_pod
            .get(uid)
            .is_some_and(|e| e.matches(key, version))
    }

    /// Records that generating from `key` left cached `version` (unchanged or recorded).
    pub fn remember(&mut self, uid: &Uid, key: &MemoKey<'_>, version: u64) {
        self.by_pod.insert(
            uid.clone(),
            Entry {
                pod: key.pod.clone(),
                runtime: key.runtime.clone(),
                start_failures: key.start_failures.cloned(),
                probes_generation: key.probes_generation,
                pod_is_terminal: key.pod_is_terminal,
                version,
            },
        );
    }

    /// Forgets a pod (its status was deleted: a new status of the same UID starts again at
    /// version 1, which an old entry must not match).
    pub fn forget(&mut self, uid: &Uid) {
        self.by_pod.remove(uid);
    }

    /// Forgets everything (the node's configuration changed).
    pub fn clear(&mut self) {
        self.by_pod.clear();
    }

    /// The number of pods remembered.
    pub fn len(&self) -> usize {
        self.by_pod.len()
    }

    /// True if nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_pod.is_empty()
    }
}
