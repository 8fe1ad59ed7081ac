//! The containers' log figures of the full summary: the bytes and files in each running
//! container's log directory (`<pod-logs-dir>/<namespace>_<name>_<uid>/<container>/`, the
//! CRI layout), on the filesystem of the pod log directory, added to the pod's
//! `ephemeral-storage` as the kubelet counts logs there.
//!
//! Owns reading those directories (one level, regular files only, at most
//! [`MAX_FILES`] entries each). Must not follow symlinks or write anything.

use std::path::Path;

use super::host;
use super::summary::{FsStats, PodStats};

/// At most this many directory entries are looked at per container.
pub const MAX_FILES: usize = 1024;

/// Bytes and regular files in `dir` (not recursive, symlinks not followed).
fn usage_of(dir: &Path) -> Option<(u64, u64)> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut bytes = 0;
    let mut files = 0;
    for e in entries.flatten().take(MAX_FILES) {
        if let Ok(m) = e.path().symlink_metadata() {
            if m.is_file() {
                bytes += m.len();
                files += 1;
            }
        }
    }
    Some((bytes, files))
}

/// Fills each running container's `logs` and adds them to its pod's `ephemeral-storage`.
pub fn add_logs(pods: &mut [PodStats], pod_logs_dir: &Path, time: &str) {
    let fs = host::fs_of(pod_logs_dir, time);
    for p in pods.iter_mut() {
        let r = &p.pod_ref;
        let pod_dir = pod_logs_dir.join(format!("{}_{}_{}", r.namespace, r.name, r.uid));
        let mut total = (0, 0);
        for c in p.containers.iter_mut() {
            let Some((bytes, files)) = usage_of(&pod_dir.join(&c.name)) else {
                continue;
            };
            total = (total.0 + bytes, total.1 + files);
            c.logs = Some(FsStats {
                time: time.to_string(),
                used_bytes: Some(bytes),
                inodes_used: Some(files),
                ..fs.clone().unwrap_or_default()
            });
        }
        if let Some(e) = p.ephemeral_storage.as_mut() {
            e.used_bytes = Some(e.used_bytes.unwrap_or(0) + total.0);
            e.inodes_used = Some(e.inodes_used.unwrap_or(0) + total.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::summary::{ContainerStats, PodReference};
    use super::*;

    #[test]
    fn a_containers_log_files_are_its_logs_and_count_in_the_pods_ephemeral_storage() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("default_web_u1/main");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("0.log"), vec![b'x'; 1000]).unwrap();
        std::fs::write(logs.join("0.log.1"), vec![b'x'; 24]).unwrap();
        let mut pods = vec![PodStats {
            pod_ref: PodReference {
                name: "web".into(),
                namespace: "default".into(),
                uid: "u1".into(),
            },
            containers: vec![
                ContainerStats {
                    name: "main".into(),
                    ..Default::default()
                },
                ContainerStats {
                    name: "quiet".into(),
                    ..Default::default()
                },
            ],
            ephemeral_storage: Some(FsStats {
                used_bytes: Some(4096),
                inodes_used: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        }];
        add_logs(&mut pods, dir.path(), "t");
        let l = pods[0].containers[0].logs.as_ref().unwrap();
        assert_eq!((l.used_bytes, l.inodes_used), (Some(1024), Some(2)));
        assert!(l.capacity_bytes.is_some_and(|c| c > 0));
        assert!(pods[0].containers[1].logs.is_none());
        let e = pods[0].ephemeral_storage.as_ref().unwrap();
        assert_eq!((e.used_bytes, e.inodes_used), (Some(5120), Some(12)));
    }
}
