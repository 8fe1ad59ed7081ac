//! The static pod source's memory: which pods each manifest gave, and what changed since
//! the previous scan.
//!
//! Owns `FileSource::scan`: list, read (skipping files whose bytes did not change), parse,
//! resolve UID conflicts, and diff by UID into `SourceChange`s, ordered by path, then
//! document index (a removal before an addition at the same place). Must not send, sleep or
//! read a clock: the caller passes `now` and forwards the changes (see `driver`).
//!
//! Where this differs from the kubelet's file source, on purpose:
//! * A file that becomes invalid (unparsable, invalid, too large, unreadable) keeps its last
//!   valid pods running; the kubelet would drop them until the file is fixed. An editor
//!   caught half-way through a save no longer restarts a control-plane pod. The rejection is
//!   reported once per distinct content or error, not on every scan.
//! * An empty file (no document) is such a rejection, not "no pods", for the same reason.
//! * Two manifests declaring the same `name_namespace` are both kept, as distinct UIDs (the
//!   pod workers order same-fullname static pods); the kubelet drops the second. A warning
//!   is logged.
//! * The directory is bounded: at most `max_manifests` files (files already running keep
//!   their place; new ones are admitted in path order) and `max_manifest_bytes` per file.
//!
//! As in the kubelet, a manifest path that does not exist means no static pods: the pods of
//! a vanished directory are removed. A path that exists but cannot be read keeps them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::error::{ManifestError, Problem};
use super::listing::{self, Listing, ReadError};
use super::manifest::{parse_manifest, Manifest};
use crate::core::pod::{self as podinfo, CONFIG_SEEN_ANNOTATION};
use crate::core::record::Time;
use md5::{Digest, Md5};

/// Bounds on what the source reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most manifest files considered (default 1000); the rest are rejected.
    pub max_manifests: usize,
    /// The largest manifest read, in bytes (default 10 MiB, the kubelet's
    /// `maxConfigLength`); larger ones are rejected.
    pub max_manifest_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_manifests: 1000,
            max_manifest_bytes: 10 * 1024 * 1024,
        }
    }
}

/// What a scan found changed.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceChange {
    /// A pod UID appeared.
    Added(Arc<Pod>),
    /// A pod kept its UID but its content changed (only with an explicit `metadata.uid`:
    /// generated UIDs hash the content).
    Updated(Arc<Pod>),
    /// A pod UID is gone; the pod as last seen.
    Removed(Arc<Pod>),
    /// A manifest (or the manifest path) could not be used. The file's last valid pods, if
    /// any, are kept.
    Rejected {
        /// The file, or the manifest path.
        path: PathBuf,
        /// What is wrong.
        error: ManifestError,
    },
}

/// What the source holds for one admitted manifest file.
#[derive(Clone, Debug, Default)]
struct Tracked {
    /// MD5 of the bytes last parsed, valid or not (`None` if they could not be read).
    digest: Option<[u8; 16]>,
    /// The number of documents of the last valid version.
    documents: usize,
    /// The pods in effect: the last valid version's, by document index.
    pods: Vec<(usize, Arc<Pod>)>,
    /// The rejection last reported, while the file is rejected.
    error: Option<ManifestError>,
}

/// What one scan made of one admitted file.
enum Outcome {
    /// The same bytes as last time: nothing to do.
    Unchanged,
    /// New content, all valid.
    Accepted {
        digest: [u8; 16],
        manifest: Manifest,
    },
    /// New content, or no content, that cannot be used.
    Rejected {
        digest: Option<[u8; 16]>,
        error: ManifestError,
    },
}

/// Orders the changes of a scan: by path, then document, removals first.
type Key = (PathBuf, usize, u8);

/// The static pod source: a manifest directory (or one file) and what it last held.
#[derive(Debug)]
pub struct FileSource {
    path: PathBuf,
    node_name: String,
    limits: Limits,
    files: BTreeMap<PathBuf, Tracked>,
    over_limit: BTreeSet<PathBuf>,
    path_error: Option<ManifestError>,
    ignored: BTreeSet<PathBuf>,
}

impl FileSource {
    /// A source for the manifest directory (or file) `path` on node `node_name`, with the
    /// default limits. It holds nothing until the first `scan`.
    pub fn new(path: impl Into<PathBuf>, node_name: impl Into<String>) -> FileSource {
        FileSource {
            path: path.into(),
            node_name: node_name.into(),
            limits: Limits::default(),
            files: BTreeMap::new(),
            over_limit: BTreeSet::new(),
            path_error: None,
            ignored: BTreeSet::new(),
        }
    }

    /// The same source with other limits.
    pub fn with_limits(mut self, limits: Limits) -> FileSource {
        self.limits = limits;
        self
    }

    /// The pods in effect, by path and document.
    pub fn pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.files
            .values()
            .flat_map(|t| t.pods.iter().map(|(_, p)| p))
    }

    /// Compares the manifest path with the previous scan and returns what changed, in a
    /// deterministic order. `now` stamps `kubernetes.io/config.seen` on new pod versions.
    pub fn scan(&mut self, now: Time) -> Vec<SourceChange> {
        let mut changes: Vec<(Key, SourceChange)> = Vec::new();
        let entries = match listing::list(&self.path, &mut self.ignored) {
            Ok(Listing::Files(files)) => {
                if self.path_error.take().is_some() {
                    tracing::info!(path = %self.path.display(), "manifest path is readable again");
                }
                files
            }
            Ok(Listing::Missing) => {
                self.path_problem(Problem::Missing, &mut changes);
                Vec::new()
            }
            Err(problem) => {
                // Keep everything; try again next time.
                self.path_problem(problem, &mut changes);
                return finish(changes);
            }
        };

        let admitted = self.admit(entries, &mut changes);
        let mut outcomes = self.read_all(admitted, now);
        self.resolve_uid_conflicts(&mut outcomes);
        self.apply(outcomes, &mut changes);
        finish(changes)
    }

    fn path_problem(&mut self, problem: Problem, changes: &mut Vec<(Key, SourceChange)>) {
        let error = ManifestError::file(&self.path, problem);
        if self.path_error.as_ref() != Some(&error) {
            reject(changes, (self.path.clone(), 0, 0), error.clone());
            self.path_error = Some(error);
        }
    }

    /// Splits the listing into the files to read (those already tracked, then new ones in
    /// path order while there is room) and the rest, which are rejected once.
    fn admit(
        &mut self,
        entries: Vec<PathBuf>,
        changes: &mut Vec<(Key, SourceChange)>,
    ) -> Vec<PathBuf> {
        let tracked = entries
            .iter()
            .filter(|e| self.files.contains_key(*e))
            .count();
        let mut room = self.limits.max_manifests.saturating_sub(tracked);
        let mut admitted = Vec::with_capacity(entries.len().min(self.limits.max_manifests));
        let mut over = BTreeSet::new();
        for entry in entries {
            if self.files.contains_key(&entry) {
                admitted.push(entry);
            } else if room > 0 {
                room -= 1;
                admitted.push(entry);
            } else {
                if !self.over_limit.contains(&entry) {
                    let error = ManifestError::file(
                        &entry,
                        Problem::TooMany {
                            limit: self.limits.max_manifests,
                        },
                    );
                    reject(changes, (entry.clone(), 0, 2), error);
                }
                over.insert(entry);
            }
        }
        self.over_limit = over;
        admitted
    }

    /// Reads and parses the admitted files whose bytes changed. A file gone since the
    /// listing has no outcome (it is removed).
    fn read_all(&self, admitted: Vec<PathBuf>, now: Time) -> BTreeMap<PathBuf, Outcome> {
        let mut outcomes = BTreeMap::new();
        for path in admitted {
            let outcome = match listing::read_bounded(&path, self.limits.max_manifest_bytes) {
                Err(ReadError::Gone) => continue,
                Err(ReadError::Problem(problem)) => Outcome::Rejected {
                    digest: None,
                    error: ManifestError::file(&path, problem),
                },
                Ok(bytes) => {
                    let digest: [u8; 16] = Md5::digest(&bytes).into();
                    let before = self.files.get(&path);
                    // A UID conflict depends on the other files: look again every time.
                    let conflicted = before.is_some_and(|t| {
                        matches!(
                            t.error,
                            Some(ManifestError {
                                problem: Problem::DuplicateUid { .. },
                                ..
                            })
                        )
                    });
                    if before.and_then(|t| t.digest) == Some(digest) && !conflicted {
                        Outcome::Unchanged
                    } else {
                        match parse_manifest(&path, &bytes, &self.node_name, now) {
                            Ok(manifest) => Outcome::Accepted { digest, manifest },
                            Err(error) => Outcome::Rejected {
                                digest: Some(digest),
                                error,
                            },
                        }
                    }
                }
            };
            outcomes.insert(path, outcome);
        }
        outcomes
    }

    /// Makes UIDs unique across all positions. A pod that keeps its UID at its place (or a
    /// rejected file's kept pods) wins over a newcomer; between newcomers, the first in path
    /// order wins. A file with a losing pod is rejected whole, which keeps its old pods, so
    /// repeat until nothing conflicts (each round rejects one more file).
    fn resolve_uid_conflicts(&self, outcomes: &mut BTreeMap<PathBuf, Outcome>) {
        loop {
            let mut owner: HashMap<&str, (&Path, usize, usize)> = HashMap::new();
            for (path, outcome) in outcomes.iter() {
                let old = self.files.get(path);
                let old_pods = old.map_or(&[][..], |t| &t.pods[..]);
                let documents = old.map_or(0, |t| t.documents);
                match outcome {
                    Outcome::Unchanged | Outcome::Rejected { .. } => {
                        for (doc, pod) in old_pods {
                            owner.insert(podinfo::uid_str(pod), (path, *doc, documents));
                        }
                    }
                    Outcome::Accepted { manifest, .. } => {
                        for (doc, pod) in &manifest.pods {
                            if keeps_place(old_pods, *doc, pod) {
                                let documents = manifest.documents;
                                owner.insert(podinfo::uid_str(pod), (path, *doc, documents));
                            }
                        }
                    }
                }
            }
            let mut loser = None;
            'files: for (path, outcome) in outcomes.iter() {
                let Outcome::Accepted { digest, manifest } = outcome else {
                    continue;
                };
                let old_pods = self.files.get(path).map_or(&[][..], |t| &t.pods[..]);
                for (doc, pod) in &manifest.pods {
                    if keeps_place(old_pods, *doc, pod) {
                        continue;
                    }
                    let uid = podinfo::uid_str(pod);
                    match owner.get(uid) {
                        Some(&(other, other_doc, other_docs)) => {
                            let other = match other_docs > 1 {
                                true => format!("{} document[{other_doc}]", other.display()),
                                false => other.display().to_string(),
                            };
                            let error = ManifestError {
                                path: path.clone(),
                                document: manifest.label(*doc),
                                problem: Problem::DuplicateUid {
                                    uid: uid.to_owned(),
                                    other,
                                },
                            };
                            loser = Some((path.clone(), *digest, error));
                            break 'files;
                        }
                        None => {
                            owner.insert(uid, (path, *doc, manifest.documents));
                        }
                    }
                }
            }
            let Some((path, digest, error)) = loser else {
                return;
            };
            outcomes.insert(
                path,
                Outcome::Rejected {
                    digest: Some(digest),
                    error,
                },
            );
        }
    }

    /// Installs the outcomes as the new state and records the changes: by UID, so a UID
    /// that moves between places is one update, not a removal and an addition.
    fn apply(
        &mut self,
        outcomes: BTreeMap<PathBuf, Outcome>,
        changes: &mut Vec<(Key, SourceChange)>,
    ) {
        let old_files = std::mem::take(&mut self.files);
        let old_by_uid: HashMap<&str, &Arc<Pod>> = old_files
            .values()
            .flat_map(|t| t.pods.iter().map(|(_, p)| (podinfo::uid_str(p), p)))
            .collect();
        let mut pods_changed = false;
        for (path, outcome) in outcomes {
            let old = old_files.get(&path);
            let tracked = match outcome {
                Outcome::Unchanged => old.cloned().unwrap_or_default(),
                Outcome::Rejected { digest, error } => {
                    let mut t = old.cloned().unwrap_or_default();
                    if t.digest != digest || t.error.as_ref() != Some(&error) {
                        reject(changes, (path.clone(), 0, 2), error.clone());
                    }
                    t.digest = digest;
                    t.error = Some(error);
                    t
                }
                Outcome::Accepted { digest, manifest } => {
                    if old.is_some_and(|t| t.error.is_some()) {
                        tracing::info!(path = %path.display(), "manifest accepted again");
                    }
                    let documents = manifest.documents;
                    let mut pods = Vec::with_capacity(manifest.pods.len());
                    for (doc, pod) in manifest.pods {
                        let key = (path.clone(), doc, 1);
                        let kept = match old_by_uid.get(podinfo::uid_str(&pod)) {
                            Some(old) if same_content(old, &pod) => Arc::clone(old),
                            old => {
                                let pod = Arc::new(pod);
                                let change = match old {
                                    Some(_) => SourceChange::Updated(Arc::clone(&pod)),
                                    None => SourceChange::Added(Arc::clone(&pod)),
                                };
                                changes.push((key, change));
                                pods_changed = true;
                                pod
                            }
                        };
                        pods.push((doc, kept));
                    }
                    Tracked {
                        digest: Some(digest),
                        documents,
                        pods,
                        error: None,
                    }
                }
            };
            self.files.insert(path, tracked);
        }
        let now_held: HashSet<&str> = self
            .files
            .values()
            .flat_map(|t| t.pods.iter().map(|(_, p)| podinfo::uid_str(p)))
            .collect();
        for (path, t) in &old_files {
            for (doc, pod) in &t.pods {
                if !now_held.contains(podinfo::uid_str(pod)) {
                    let key = (path.clone(), *doc, 0);
                    changes.push((key, SourceChange::Removed(Arc::clone(pod))));
                    pods_changed = true;
                }
            }
        }
        if pods_changed {
            self.warn_duplicate_full_names();
        }
    }

    fn warn_duplicate_full_names(&self) {
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (path, t) in &self.files {
            for (doc, pod) in &t.pods {
                by_name
                    .entry(podinfo::full_name(pod))
                    .or_default()
                    .push(format!("{} document[{doc}]", path.display()));
            }
        }
        for (full_name, places) in by_name.into_iter().filter(|(_, v)| v.len() > 1) {
            tracing::warn!(
                pod = %full_name,
                manifests = %places.join(", "),
                "several static pod manifests declare the same pod name; all are kept, the pod workers run one at a time"
            );
        }
    }
}

/// True if `pod` sits at `doc` with the UID the same place had before.
fn keeps_place(old_pods: &[(usize, Arc<Pod>)], doc: usize, pod: &Pod) -> bool {
    old_pods
        .iter()
        .any(|(d, p)| *d == doc && podinfo::uid_str(p) == podinfo::uid_str(pod))
}

/// Equal but for `kubernetes.io/config.seen`, which only says when this version was read.
fn same_content(old: &Pod, new: &Pod) -> bool {
    let seen = |p: &Pod| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CONFIG_SEEN_ANNOTATION))
            .cloned()
    };
    if seen(old) == seen(new) {
        return old == new;
    }
    let mut new = new.clone();
    if let (Some(annotations), Some(old_seen)) = (new.metadata.annotations.as_mut(), seen(old)) {
        annotations.insert(CONFIG_SEEN_ANNOTATION.into(), old_seen);
    }
    *old == new
}

/// Records a rejection: a change, a warning and the `ledgerlet_manifest_errors_total` metric.
fn reject(changes: &mut Vec<(Key, SourceChange)>, key: Key, error: ManifestError) {
    tracing::warn!(error = %error, "static pod manifest rejected");
    metrics::counter!("ledgerlet_manifest_errors_total", "reason" => error.reason()).increment(1);
    let path = error.path.clone();
    changes.push((key, SourceChange::Rejected { path, error }));
}

/// The changes in order (the sort is stable: equal keys keep the order they were found in).
fn finish(mut changes: Vec<(Key, SourceChange)>) -> Vec<SourceChange> {
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    changes.into_iter().map(|(_, c)| c).collect()
}
