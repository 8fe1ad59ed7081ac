//! Pod volumes on the node (kubelet volume manager, for the plugins ledgerlet has):
//! `emptyDir` and `hostPath` here; `projected`, `configMap`, `secret` and `downwardAPI` are
//! written by [`super::projected`] (this module only returns their paths).
//!
//! Owns the pod directory's volume layout (`<root-dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>`,
//! as the kubelet lays it out), creating `emptyDir`s (a `tmpfs` for `medium: Memory`, sized by
//! `sizeLimit`), the `hostPath` type checks (and creation for `DirectoryOrCreate` /
//! `FileOrCreate`), and tearing a pod's volumes down (unmount, remove) when it is terminated.
//! Must not decide when: the executor calls [`prepare`] before it starts containers and
//! [`remove_pod`] when the pod is terminated. Every error is a [`MountError`]: the cause in
//! the kubelet's words for its `FailedMount` event, and a detail naming the pod, the volume
//! and the field.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, Volume};

use super::projected::MountError;
use crate::core::pod;

/// The directory of the kubelet's emptyDir plugin inside a pod's volume directory.
pub const EMPTY_DIR_PLUGIN: &str = "kubernetes.io~empty-dir";

/// Host paths of a pod's volumes, by volume name.
pub type VolumePaths = BTreeMap<String, PathBuf>;

/// `<pods_dir>/<uid>`: the pod's directory.
pub fn pod_dir(pods_dir: &Path, uid: &str) -> PathBuf {
    pods_dir.join(uid)
}

/// `<pods_dir>/<uid>/volumes/kubernetes.io~empty-dir/<name>`.
pub fn empty_dir_path(pods_dir: &Path, uid: &str, name: &str) -> PathBuf {
    pod_dir(pods_dir, uid)
        .join("volumes")
        .join(EMPTY_DIR_PLUGIN)
        .join(name)
}

/// An error about the `i`-th volume of `p` (`field` under it), naming the pod and the volume.
pub fn volume_error(
    p: &Pod,
    i: usize,
    v: &Volume,
    field: &str,
    what: impl std::fmt::Display,
) -> String {
    format!(
        "pod {}/{}: spec.volumes[{i}]{field} (volume {:?}): {what}",
        pod::namespace(p),
        pod::name(p),
        v.name
    )
}

/// Makes every volume of the pod ready on the host and returns their host paths. Creating
/// an existing `emptyDir` (or mounting an already mounted `tmpfs`) is a no-op, so this runs
/// before every start. A failure is the volume's `MountVolume.SetUp` failure (the executor
/// reports `FailedMount` and creates nothing).
pub fn prepare(pods_dir: &Path, p: &Pod) -> Result<VolumePaths, MountError> {
    let mut out = VolumePaths::new();
    let volumes = p
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        let err = |field: &str, cause: String| MountError {
            volume: v.name.clone(),
            detail: volume_error(p, i, v, field, &cause),
            cause,
        };
        let path = if let Some(e) = &v.empty_dir {
            let dir = empty_dir_path(pods_dir, pod::uid_str(p), &v.name);
            let fresh = !dir.exists();
            std::fs::create_dir_all(&dir)
                .map_err(|e| err(".emptyDir", format!("cannot create {}: {e}", dir.display())))?;
            // world-writable like the kubelet's emptyDir (0777), so any user in the container can use it
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777));
            match e.medium.as_deref().unwrap_or("") {
                "" => {}
                "Memory" => {
                    let size = e.size_limit.as_ref().map(|q| {
                        crate::core::pod_status::quantity::parse_nanos(&q.0)
                            .map(|n| (n / 1_000_000_000).max(0))
                            .ok_or_else(|| {
                                err(
                                    ".emptyDir.sizeLimit",
                                    format!("{:?} is not a quantity", q.0),
                                )
                            })
                    });
                    let size = memory_volume_size(size.transpose()?, pod_memory_limit(p));
                    mount_tmpfs(&dir, size)
                        .map_err(|e| err(".emptyDir.medium", format!("Memory: {e}")))?;
                }
                other => {
                    return Err(err(
                        ".emptyDir.medium",
                        format!("{other:?} is not supported (\"\" or \"Memory\")"),
                    ))
                }
            }
            // the kubelet sets an emptyDir's ownership once, when it sets it up
            if fresh {
                super::fs_group::set_volume_ownership(p, &dir, false)
                    .map_err(|e| err("", format!("fsGroup: {e}")))?;
            }
            dir
        } else if let Some(dir) = super::projected::volume_path(pods_dir, pod::uid_str(p), v) {
            // written by the projector (super::projected) before this runs
            dir
        } else if let Some(h) = &v.host_path {
            check_host_path(Path::new(&h.path), h.type_.as_deref().unwrap_or(""))
                .map_err(|e| err(".hostPath.type", e))?;
            PathBuf::from(&h.path)
        } else {
            return Err(err(
                "",
                "only emptyDir, hostPath, projected, configMap, secret and downwardAPI volumes are \
                 supported by ledgerlet so far"
                    .into(),
            ));
        };
        out.insert(v.name.clone(), path);
    }
    Ok(out)
}

/// The pod's memory limit in bytes as the kubelet's `ResourceConfigForPod` computes it: only
/// when every container and init container has one, the larger of the regular containers'
/// and sidecars' sum and the largest init container (with the sidecars started before it),
/// plus the pod's overhead.
fn pod_memory_limit(p: &Pod) -> Option<i128> {
    let spec = p.spec.as_ref()?;
    let limit = |c: &k8s_openapi::api::core::v1::Container| {
        let q = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
        crate::core::pod_status::quantity::parse_nanos(&q.0).map(|n| n / 1_000_000_000)
    };
    let (mut sidecars, mut init_max) = (0i128, 0i128);
    for c in spec.init_containers.iter().flatten() {
        let l = limit(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars += l;
            init_max = init_max.max(sidecars);
        } else {
            init_max = init_max.max(sidecars + l);
        }
    }
    let mut regular = 0i128;
    for c in &spec.containers {
        regular += limit(c)?;
    }
    let overhead = spec
        .overhead
        .as_ref()
        .and_then(|o| o.get("memory"))
        .and_then(|q| crate::core::pod_status::quantity::parse_nanos(&q.0))
        .map_or(0, |n| n / 1_000_000_000);
    Some((regular + sidecars).max(init_max) + overhead)
}

/// The size of a `medium: Memory` emptyDir's tmpfs (the kubelet's
/// `calculateEmptyDirMemorySize`): `sizeLimit` when it is positive and no larger than the
/// pod's memory limit, else the pod's memory limit. The kubelet also caps both by the node's
/// allocatable memory and uses that when neither is set; ledgerlet then leaves the size to
/// the kernel's default (`None`).
fn memory_volume_size(size_limit: Option<i128>, pod_limit: Option<i128>) -> Option<i128> {
    let pod_limit = pod_limit.filter(|l| *l > 0);
    match size_limit.filter(|s| *s > 0) {
        Some(s) if pod_limit.is_none_or(|l| s <= l) => Some(s),
        _ => pod_limit,
    }
}

/// The kubelet's `hostPath` type checks (`checkType`), creating what `*OrCreate` asks for;
/// the error is the kubelet's (`hostPath type check failed: <path> is not a directory`; a
/// missing path is "not a directory" too).
pub fn check_host_path(path: &Path, type_: &str) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path);
    let exists = meta.is_ok();
    let is = |f: fn(&std::fs::Metadata) -> bool| meta.as_ref().is_ok_and(f);
    // whether the path is of the type, and what the type is called
    let (ok, what) = match type_ {
        "" => return Ok(()),
        "DirectoryOrCreate" if !exists => {
            return std::fs::create_dir_all(path)
                .and_then(|()| {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
                })
                .map_err(|e| format!("cannot create directory {shown}: {e}"))
        }
        "FileOrCreate" if !exists => {
            return std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|_| {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
                })
                .map_err(|e| format!("cannot create file {shown}: {e}"))
        }
        "DirectoryOrCreate" | "Directory" => (is(|m| m.is_dir()), "a directory"),
        "FileOrCreate" | "File" => (is(|m| m.is_file()), "a file"),
        "Socket" => (is(|m| m.file_type().is_socket()), "a socket file"),
        "CharDevice" => (is(|m| m.file_type().is_char_device()), "a character device"),
        "BlockDevice" => (is(|m| m.file_type().is_block_device()), "a block device"),
        other => {
            return Err(format!(
                "{other:?} is not a hostPath type (\"\", DirectoryOrCreate, Directory, \
                 FileOrCreate, File, Socket, CharDevice, BlockDevice)"
            ))
        }
    };
    if ok {
        return Ok(());
    }
    Err(format!("hostPath type check failed: {shown} is not {what}"))
}

/// True if `dir` is a mount point (listed in /proc/self/mountinfo).
fn is_mount_point(dir: &Path) -> bool {
    let want = dir.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| unescape(m) == want)
}

fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn mount_tmpfs(dir: &Path, size_bytes: Option<i128>) -> Result<(), String> {
    if is_mount_point(dir) {
        return Ok(());
    }
    let target = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| "the path contains a NUL byte".to_string())?;
    let data = match size_bytes {
        Some(b) => format!("mode=0777,size={b}"),
        None => "mode=0777".to_string(),
    };
    let data = std::ffi::CString::new(data).expect("no NUL");
    let fstype = std::ffi::CString::new("tmpfs").expect("no NUL");
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "cannot mount a tmpfs at {}: {e} (medium: Memory needs CAP_SYS_ADMIN)",
            dir.display()
        ));
    }
    Ok(())
}

/// Tears down a pod's volumes: unmounts every mount under its directory (deepest first) and
/// removes the directory. `hostPath` contents are never touched (they are not under it).
pub fn remove_pod(pods_dir: &Path, uid: &str) -> Result<(), String> {
    let dir = pod_dir(pods_dir, uid);
    if !dir.exists() {
        return Ok(());
    }
    let prefix = format!("{}/", dir.to_string_lossy());
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape)
        .filter(|m| m.starts_with(&prefix))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    mounts.dedup();
    for m in mounts {
        let target = std::ffi::CString::new(m.clone()).map_err(|_| format!("{m}: NUL byte"))?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            return Err(format!(
                "cannot unmount {m}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_memory_volume_is_its_size_limit_capped_by_the_pods_memory_limit() {
        let pod = |spec: serde_json::Value| -> k8s_openapi::api::core::v1::Pod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
                .unwrap()
        };
        let c = |name: &str, mem: Option<&str>| match mem {
            Some(m) => serde_json::json!({"name": name, "resources": {"limits": {"memory": m}}}),
            None => serde_json::json!({"name": name}),
        };
        let mi = |n: i128| n << 20;
        let p = pod(
            serde_json::json!({"containers": [c("a", Some("64Mi")), c("b", Some("32Mi"))],
            "initContainers": [c("i", Some("128Mi"))]}),
        );
        assert_eq!(super::pod_memory_limit(&p), Some(mi(128)));
        let mut sidecar = c("s", Some("16Mi"));
        sidecar["restartPolicy"] = "Always".into();
        let p = pod(serde_json::json!({"containers": [c("a", Some("64Mi"))],
            "initContainers": [sidecar], "overhead": {"memory": "1Mi"}}));
        assert_eq!(super::pod_memory_limit(&p), Some(mi(81)));
        let p = pod(serde_json::json!({"containers": [c("a", Some("64Mi")), c("b", None)]}));
        assert_eq!(
            super::pod_memory_limit(&p),
            None,
            "a container without a limit"
        );
        use super::memory_volume_size as size;
        assert_eq!(size(Some(mi(16)), Some(mi(64))), Some(mi(16)));
        assert_eq!(size(Some(mi(1024)), Some(mi(64))), Some(mi(64)));
        assert_eq!(size(None, Some(mi(64))), Some(mi(64)));
        assert_eq!(size(Some(mi(16)), None), Some(mi(16)));
        assert_eq!(size(Some(0), None), None);
        assert_eq!(size(None, None), None);
    }

    use super::*;

    #[test]
    fn host_path_types_are_checked_and_created() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("d");
        let file = t.path().join("f");
        assert!(check_host_path(&dir, "Directory")
            .unwrap_err()
            .contains("is not a directory"));
        check_host_path(&dir, "DirectoryOrCreate").unwrap();
        assert!(dir.is_dir());
        check_host_path(&dir, "Directory").unwrap();
        assert!(check_host_path(&dir, "File")
            .unwrap_err()
            .contains("is not a file"));
        assert_eq!(
            check_host_path(&file, "File").unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a file",
                file.display()
            )
        );
        check_host_path(&file, "FileOrCreate").unwrap();
        assert!(file.is_file());
        check_host_path(&file, "File").unwrap();
        assert!(check_host_path(&file, "DirectoryOrCreate")
            .unwrap_err()
            .contains("is not a directory"));
        assert!(check_host_path(&file, "Socket")
            .unwrap_err()
            .contains("socket"));
        assert!(check_host_path(Path::new("/dev/null"), "CharDevice").is_ok());
        assert!(check_host_path(&file, "Bogus")
            .unwrap_err()
            .contains("not a hostPath type"));
        check_host_path(Path::new("/nonexistent/anything"), "").unwrap();
        // FileOrCreate does not create parent directories (as upstream)
        assert!(check_host_path(&t.path().join("no/such/f"), "FileOrCreate").is_err());
    }

    fn pod_with(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes}
        }))
        .unwrap()
    }

    #[test]
    fn empty_dirs_live_under_the_pod_dir_and_go_with_it() {
        let t = tempfile::tempdir().unwrap();
        let p = pod_with(serde_json::json!([{"name": "scratch", "emptyDir": {}}]));
        let paths = prepare(t.path(), &p).unwrap();
        let want = t.path().join("u1/volumes/kubernetes.io~empty-dir/scratch");
        assert_eq!(paths["scratch"], want);
        assert!(want.is_dir());
        std::fs::write(want.join("x"), "data").unwrap();
        // preparing again keeps the contents
        prepare(t.path(), &p).unwrap();
        assert!(want.join("x").is_file());
        remove_pod(t.path(), "u1").unwrap();
        assert!(!t.path().join("u1").exists());
    }

    #[test]
    fn unsupported_volumes_are_refused_naming_pod_volume_and_field() {
        let t = tempfile::tempdir().unwrap();
        let p = pod_with(serde_json::json!([
            {"name": "ok", "emptyDir": {}},
            {"name": "cfg", "nfs": {"server": "x", "path": "/"}}
        ]));
        let e = prepare(t.path(), &p).unwrap_err();
        assert!(e.detail.contains("pod ns/p: spec.volumes[1]"), "{e}");
        assert!(e.detail.contains("\"cfg\""), "{e}");
        assert_eq!(e.volume, "cfg");
        let p = pod_with(serde_json::json!([
            {"name": "m", "emptyDir": {"medium": "HugePages"}}
        ]));
        let e = prepare(t.path(), &p).unwrap_err();
        assert!(e.detail.contains("spec.volumes[0].emptyDir.medium"), "{e}");
    }

    #[test]
    fn a_host_path_of_the_wrong_type_is_a_mount_failure_in_the_kubelets_words() {
        let t = tempfile::tempdir().unwrap();
        let p = pod_with(serde_json::json!([
            {"name": "h", "hostPath": {"path": "/nonexistent/ledgerlet", "type": "Directory"}}
        ]));
        let e = prepare(t.path(), &p).unwrap_err();
        assert_eq!(e.volume, "h");
        assert_eq!(
            e.event_message(),
            "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: \
             /nonexistent/ledgerlet is not a directory"
        );
        assert!(
            e.detail.contains("pod ns/p: spec.volumes[0].hostPath.type"),
            "{e}"
        );
        // once the path is a directory the same pod's volumes are ready
        let dir = t.path().join("later");
        let p = pod_with(serde_json::json!([
            {"name": "h", "hostPath": {"path": dir, "type": "Directory"}}
        ]));
        assert!(prepare(t.path(), &p).is_err());
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(prepare(t.path(), &p).unwrap()["h"], dir);
    }
}
