//! Volume ownership by the pod's `fsGroup` (kubelet `volume.SetVolumeOwnership` in
//! `pkg/volume/volume_linux.go`).
//!
//! Owns the walk that gives every file and directory of one volume the pod's `fsGroup` as
//! group, the group permission bits (`rw` for writable volumes, `r` for the read-only ones
//! the kubelet writes: configMap, secret, downwardAPI, projected), and setgid on
//! directories so new files inherit the group; and `fsGroupChangePolicy: OnRootMismatch`.
//! Must not decide which volumes or when: the volume code calls it when it sets a volume
//! up. Never follows a symlink out of the volume, never reads file contents.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use super::projected::Payload;

/// Group read and write (`rwMask`).
const RW_MASK: u32 = 0o660;
/// Group read (`roMask`).
const RO_MASK: u32 = 0o440;
/// Execute for owner and group, on directories (`execMask`).
const EXEC_MASK: u32 = 0o110;
/// `os.ModeSetgid` on directories.
const SETGID: u32 = 0o2000;

/// The pod's `securityContext.fsGroup`.
pub fn fs_group(p: &Pod) -> Option<i64> {
    p.spec.as_ref()?.security_context.as_ref()?.fs_group
}

fn on_root_mismatch(p: &Pod) -> bool {
    let policy = p
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.fs_group_change_policy.as_deref());
    policy == Some("OnRootMismatch")
}

fn mask(read_only: bool) -> u32 {
    if read_only {
        RO_MASK
    } else {
        RW_MASK
    }
}

/// `SetVolumeOwnership` of the volume at `dir` for pod `p` (nothing without an `fsGroup`).
/// With `OnRootMismatch`, a volume whose root already has the group and the bits is left
/// alone. Errors name the path.
pub fn set_volume_ownership(p: &Pod, dir: &Path, read_only: bool) -> Result<(), String> {
    let Some(gid) = fs_group(p) else {
        return Ok(());
    };
    let gid = u32::try_from(gid).map_err(|_| format!("fsGroup {gid} is not a valid group id"))?;
    if on_root_mismatch(p) && root_matches(dir, gid, read_only) {
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let shown = path.display();
        let meta =
            std::fs::symlink_metadata(&path).map_err(|e| format!("cannot stat {shown}: {e}"))?;
        std::os::unix::fs::lchown(&path, None, Some(gid))
            .map_err(|e| format!("cannot give {shown} group {gid}: {e}"))?;
        // a symlink's own mode means nothing, and chmod would follow it
        if meta.file_type().is_symlink() {
            continue;
        }
        let mut bits = mask(read_only);
        if meta.is_dir() {
            bits |= SETGID | EXEC_MASK;
            let entries =
                std::fs::read_dir(&path).map_err(|e| format!("cannot list {shown}: {e}"))?;
            stack.extend(entries.flatten().map(|e| e.path()));
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode | bits != mode {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | bits))
                .map_err(|e| format!("cannot change the mode of {shown}: {e}"))?;
        }
    }
    Ok(())
}

/// `skipPermissionChange`: the root has the group, setgid and the group bits.
fn root_matches(dir: &Path, gid: u32, read_only: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return false;
    };
    let want = mask(read_only) | SETGID | EXEC_MASK;
    meta.gid() == gid && meta.mode() & want == want
}

/// `FsUserFrom`: the user every init and regular container runs as (its `runAsUser`, else
/// the pod's), when they all name the same one.
pub fn fs_user(p: &Pod) -> Option<i64> {
    let spec = p.spec.as_ref()?;
    let pod_user = spec.security_context.as_ref().and_then(|s| s.run_as_user);
    let mut users = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| {
            c.security_context
                .as_ref()
                .and_then(|s| s.run_as_user)
                .or(pod_user)
        });
    let first = users.next()??;
    users.all(|u| u == Some(first)).then_some(first)
}

/// The mode of a projected service-account token: 0600 when the pod has an fsUser or an
/// fsGroup (the ownership walk then adds group read), else the volume's default mode.
pub fn token_mode(p: &Pod, default_mode: u32) -> u32 {
    if fs_user(p).is_some() || fs_group(p).is_some() {
        0o600
    } else {
        default_mode
    }
}

/// Gives the projected service-account tokens of volume `v` (written at `dir`) to the
/// pod's fsUser, as the kubelet's writer does with `FileProjection.FsUser`.
pub fn own_tokens(
    p: &Pod,
    v: &k8s_openapi::api::core::v1::Volume,
    dir: &Path,
) -> Result<(), String> {
    let Some(uid) = fs_user(p) else {
        return Ok(());
    };
    let uid = u32::try_from(uid).map_err(|_| format!("runAsUser {uid} is not a valid user id"))?;
    let sources = v
        .projected
        .iter()
        .flat_map(|pr| pr.sources.iter().flatten());
    for t in sources.filter_map(|s| s.service_account_token.as_ref()) {
        let path = dir.join(&t.path);
        std::os::unix::fs::chown(&path, Some(uid), None)
            .map_err(|e| format!("cannot give {} to user {uid}: {e}", path.display()))?;
    }
    Ok(())
}

/// The modes the ownership walk gives a read-only volume's files, applied to the payload
/// before it is written, so an unchanged payload still reads as unchanged afterwards.
pub fn with_group_modes(p: &Pod, mut payload: Payload) -> Payload {
    if fs_group(p).is_some() {
        for f in payload.values_mut() {
            f.mode |= RO_MASK;
        }
    }
    payload
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn pod(sc: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"securityContext": sc, "containers": []}
        }))
        .unwrap()
    }

    #[test]
    fn every_file_gets_the_fs_group_and_directories_get_setgid() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(dir.join("sub/f"), "x").unwrap();
        std::fs::set_permissions(dir.join("sub/f"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::os::unix::fs::symlink("sub/f", dir.join("link")).unwrap();
        set_volume_ownership(&pod(serde_json::json!({"fsGroup": 4321})), &dir, false).unwrap();
        let meta = |p: &str| std::fs::symlink_metadata(dir.join(p)).unwrap();
        assert_eq!(meta("").gid(), 4321);
        assert_eq!(meta("").mode() & 0o7777, 0o2777);
        assert_eq!(meta("sub/f").gid(), 4321);
        assert_eq!(meta("sub/f").mode() & 0o7777, 0o660);
        assert_eq!(meta("link").gid(), 4321);
        // read-only volumes get group read only
        std::fs::set_permissions(dir.join("sub/f"), std::fs::Permissions::from_mode(0o400))
            .unwrap();
        set_volume_ownership(&pod(serde_json::json!({"fsGroup": 4321})), &dir, true).unwrap();
        assert_eq!(meta("sub/f").mode() & 0o7777, 0o440);
    }

    #[test]
    fn the_fs_user_is_the_one_user_all_containers_run_as_and_makes_tokens_private() {
        let pod = |v: serde_json::Value| -> Pod { serde_json::from_value(v).unwrap() };
        let shared = pod(serde_json::json!({"spec": {
            "securityContext": {"runAsUser": 1000},
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a"}, {"name": "b", "securityContext": {"runAsUser": 1000}}]
        }}));
        assert_eq!(fs_user(&shared), Some(1000));
        assert_eq!(token_mode(&shared, 0o644), 0o600);
        let mixed = pod(serde_json::json!({"spec": {
            "securityContext": {"runAsUser": 1000},
            "containers": [{"name": "a"}, {"name": "b", "securityContext": {"runAsUser": 7}}]
        }}));
        assert_eq!(fs_user(&mixed), None);
        let unset = pod(serde_json::json!({"spec": {
            "containers": [{"name": "a", "securityContext": {"runAsUser": 5}}, {"name": "b"}]
        }}));
        assert_eq!(fs_user(&unset), None);
        assert_eq!(token_mode(&unset, 0o644), 0o644);
        let group_only = pod(serde_json::json!({"spec": {
            "securityContext": {"fsGroup": 9}, "containers": [{"name": "a"}]
        }}));
        assert_eq!(token_mode(&group_only, 0o644), 0o600);
    }

    #[test]
    fn without_fs_group_nothing_changes_and_on_root_mismatch_skips_a_matching_root() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), "x").unwrap();
        std::fs::set_permissions(dir.join("f"), std::fs::Permissions::from_mode(0o600)).unwrap();
        set_volume_ownership(&pod(serde_json::json!({})), &dir, false).unwrap();
        assert_eq!(
            std::fs::metadata(dir.join("f")).unwrap().mode() & 0o777,
            0o600
        );
        let sc = serde_json::json!({"fsGroup": 77, "fsGroupChangePolicy": "OnRootMismatch"});
        set_volume_ownership(&pod(sc.clone()), &dir, false).unwrap();
        assert_eq!(std::fs::metadata(dir.join("f")).unwrap().gid(), 77);
        // the root matches now: a file added later keeps its group and mode
        std::fs::write(dir.join("g"), "y").unwrap();
        std::os::unix::fs::lchown(dir.join("g"), None, Some(0)).unwrap();
        set_volume_ownership(&pod(sc), &dir, false).unwrap();
        assert_eq!(std::fs::metadata(dir.join("g")).unwrap().gid(), 0);
    }
}
