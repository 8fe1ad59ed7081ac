//! The eviction manager's measurement of `emptyDir` volumes that have a `sizeLimit` (the
//! kubelet's `localStorageEviction` input, every `evictionMonitoringPeriod`).
//!
//! Owns the set of volumes to measure (a disk-backed `emptyDir` with a positive `sizeLimit`
//! of a pod the node runs; a `medium: Memory` one is a tmpfs of that size and cannot outgrow
//! it), the walk that measures one, and the report of a volume found above its limit, once
//! per volume. Must not decide on an eviction (the core does, on the
//! [`VolumeUsageObserved`] record) and must not follow symlinks or leave the volume's
//! filesystem.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::Report;
use crate::core::empty_dir_eviction::size_limit_bytes;
use crate::core::pod;
use crate::core::record::event::VolumeUsageObserved;
use crate::core::record::Event;
use crate::core::uid::Uid;

/// The kubelet's `evictionMonitoringPeriod`.
pub const DEFAULT_PERIOD_MS: u64 = 10_000;
/// At most this many volumes are measured; more are not watched (and a warning says so).
pub const MAX_WATCHED_VOLUMES: usize = 10_000;
/// A walk counts at most this many directory entries; a volume with more is measured by
/// those it counted (a lower bound, so an eviction it causes is never wrong).
pub const MAX_ENTRIES_PER_WALK: usize = 1_000_000;

/// One watched volume: where it is, its limit, and whether it was reported.
struct Watched {
    dir: PathBuf,
    limit_bytes: u64,
    reported: bool,
}

/// The watched volumes by (pod UID, volume name); shared by the executor and the loop.
#[derive(Clone, Default)]
pub struct EmptyDirUsage {
    volumes: Arc<Mutex<BTreeMap<(String, String), Watched>>>,
}

impl EmptyDirUsage {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Watched>> {
        self.volumes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches `p`'s disk-backed `emptyDir`s that have a positive `sizeLimit` (called on
    /// every sync of the pod; a volume already watched keeps its state).
    pub fn watch(&self, pods_dir: &Path, p: &Pod) {
        let uid = pod::uid_str(p);
        let volumes = p.spec.as_ref().and_then(|s| s.volumes.as_deref());
        let mut watched = self.lock();
        for v in volumes.unwrap_or_default() {
            let Some(e) = &v.empty_dir else { continue };
            if e.medium.as_deref() == Some("Memory") {
                continue;
            }
            let Some((limit_bytes, _)) = size_limit_bytes(p, &v.name) else {
                continue;
            };
            let key = (uid.to_string(), v.name.clone());
            if watched.contains_key(&key) {
                continue;
            }
            if watched.len() >= MAX_WATCHED_VOLUMES {
                tracing::warn!(uid, volume = %v.name, max = MAX_WATCHED_VOLUMES, "too many emptyDir volumes with a sizeLimit: this one is not measured");
                continue;
            }
            let dir = super::volumes::empty_dir_path(pods_dir, uid, &v.name);
            watched.insert(
                key,
                Watched {
                    dir,
                    limit_bytes,
                    reported: false,
                },
            );
        }
    }

    /// Stops watching the volumes of pod `uid` (its volumes are torn down).
    pub fn forget(&self, uid: &str) {
        self.lock().retain(|(u, _), _| u != uid);
    }

    /// Measures every watched volume each `period_ms` and reports those above their limit,
    /// until the engine stops.
    pub async fn run(self, period_ms: u64, report: Report) {
        let mut tick = tokio::time::interval(Duration::from_millis(period_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let todo: Vec<((String, String), PathBuf, u64)> = self
                .lock()
                .iter()
                .filter(|(_, w)| !w.reported)
                .map(|(k, w)| (k.clone(), w.dir.clone(), w.limit_bytes))
                .collect();
            for ((uid, volume), dir, limit_bytes) in todo {
                let measured = tokio::task::spawn_blocking(move || disk_usage(&dir)).await;
                let Ok(used_bytes) = measured else { continue };
                if used_bytes <= limit_bytes {
                    continue;
                }
                match self.lock().get_mut(&(uid.clone(), volume.clone())) {
                    Some(w) => w.reported = true,
                    None => continue, // forgotten meanwhile
                }
                let event = Event::VolumeUsageObserved(VolumeUsageObserved {
                    uid: Uid::new(&uid),
                    volume,
                    used_bytes,
                });
                if !report.send(event, None).await {
                    return;
                }
            }
        }
    }
}

/// The bytes `dir` uses (`du -x`): allocated blocks of every file and directory under it,
/// each hard-linked inode once, on `dir`'s filesystem only, symlinks not followed, at most
/// [`MAX_ENTRIES_PER_WALK`] entries. A missing directory uses nothing.
pub fn disk_usage(dir: &Path) -> u64 {
    let Ok(root) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    let dev = root.dev();
    let mut seen_links: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut total = root.blocks() * 512;
    let mut stack = vec![dir.to_path_buf()];
    let mut entries = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(list) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in list.flatten() {
            entries += 1;
            if entries > MAX_ENTRIES_PER_WALK {
                return total;
            }
            let Ok(m) = entry.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            if m.nlink() > 1 && !m.is_dir() && !seen_links.insert((m.dev(), m.ino())) {
                continue;
            }
            total = total.saturating_add(m.blocks() * 512);
            if m.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_allocated_bytes_once_per_inode_and_not_through_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let empty = disk_usage(d.path());
        std::fs::write(d.path().join("a"), vec![1u8; 256 * 1024]).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b"), vec![1u8; 256 * 1024]).unwrap();
        std::fs::hard_link(d.path().join("a"), d.path().join("sub/a-again")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("big"), vec![1u8; 1024 * 1024]).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        let used = disk_usage(d.path()) - empty;
        assert!(
            (512 * 1024..1024 * 1024).contains(&used),
            "two 256 KiB files and a directory, not the hard link twice nor the symlink's target: {used}"
        );
        assert_eq!(disk_usage(&d.path().join("missing")), 0);
    }

    #[test]
    fn only_disk_backed_empty_dirs_with_a_positive_size_limit_are_watched_until_forgotten() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {"containers": [{"name": "main"}], "volumes": [
                {"name": "sized", "emptyDir": {"sizeLimit": "1Mi"}},
                {"name": "memory", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                {"name": "unbounded", "emptyDir": {}},
                {"name": "cm", "configMap": {"name": "x"}}
            ]}
        }))
        .unwrap();
        let u = EmptyDirUsage::default();
        u.watch(Path::new("/pods"), &p);
        u.watch(Path::new("/pods"), &p);
        let keys: Vec<_> = u.lock().keys().cloned().collect();
        assert_eq!(keys, vec![("u-1".to_string(), "sized".to_string())]);
        assert_eq!(
            u.lock().values().next().unwrap().dir,
            Path::new("/pods/u-1/volumes/kubernetes.io~empty-dir/sized")
        );
        u.forget("u-1");
        assert!(u.lock().is_empty());
    }
}
