//! Mounts of the embedded runtime: a CRI mount whose `container_path` differs from its
//! `host_path` (an emptyDir, a projected volume, a hostPath mounted elsewhere) is shown to
//! the container by running it in a private mount namespace with the host path bind-mounted
//! at the container path.
//!
//! Owns: preparing the mount plan before the fork (targets created on the host, paths as C
//! strings) and applying it in the child before `exec` (`unshare(CLONE_NEWNS)`, `/` made
//! recursively private so nothing propagates back to the host, a recursive bind per mount,
//! a read-only remount for `readonly` ones). Must not: change the host's mount table (every
//! mount happens inside the child's namespace), allocate in the child, or touch containers
//! whose mounts are all same-path (they run as before, in the host's namespace).

use std::ffi::CString;
use std::path::Path;

use crate::cri::v1;

/// True if this process may create a mount namespace (it runs as root).
pub(crate) fn can_remap() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

struct BindMount {
    source: CString,
    target: CString,
    readonly: bool,
}

/// The bind mounts a container needs in its own mount namespace.
pub(crate) struct MountPlan {
    binds: Vec<BindMount>,
}

fn c_path(p: &str) -> Result<CString, String> {
    CString::new(p).map_err(|_| format!("mount path {p:?} contains a NUL byte"))
}

impl MountPlan {
    /// The plan for `mounts`, or None when every mount is same-path (no namespace needed).
    /// Creates each target on the host (a directory, or an empty file for a file source).
    pub(crate) fn new(mounts: &[v1::Mount]) -> Result<Option<MountPlan>, String> {
        let mut remapped: Vec<&v1::Mount> = mounts
            .iter()
            .filter(|m| m.host_path != m.container_path)
            .collect();
        if remapped.is_empty() {
            return Ok(None);
        }
        if !can_remap() {
            return Err(format!(
                "mount of {:?} at {:?} needs a private mount namespace, which needs root",
                remapped[0].host_path, remapped[0].container_path
            ));
        }
        // parents before children
        remapped.sort_by_key(|m| Path::new(&m.container_path).components().count());
        let mut binds = Vec::new();
        for m in remapped {
            let target = Path::new(&m.container_path);
            if !target.is_absolute() {
                return Err(format!(
                    "mount target {:?} is not an absolute path",
                    m.container_path
                ));
            }
            let source = std::fs::metadata(&m.host_path)
                .map_err(|e| format!("mount source {:?}: {e}", m.host_path))?;
            let made = if source.is_dir() {
                std::fs::create_dir_all(target)
            } else {
                target
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| {
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(target)
                            .map(|_| ())
                    })
            };
            made.map_err(|e| {
                format!(
                    "cannot create the mount target {:?} (for {:?}): {e}",
                    m.container_path, m.host_path
                )
            })?;
            binds.push(BindMount {
                source: c_path(&m.host_path)?,
                target: c_path(&m.container_path)?,
                readonly: m.readonly,
            });
        }
        Ok(Some(MountPlan { binds }))
    }

    /// In the forked child, before exec: a private mount namespace with the binds. Makes
    /// only system calls (async-signal-safe; no allocation).
    pub(crate) fn apply_in_child(&self) -> std::io::Result<()> {
        let null = std::ptr::null();
        let check = super::process::os_result;
        // SAFETY: every pointer is NUL-terminated and lives as long as `self`, or null where
        // mount(2) accepts null.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                null.cast(),
            ))?;
            for b in &self.binds {
                check(libc::mount(
                    b.source.as_ptr(),
                    b.target.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    null.cast(),
                ))?;
                if b.readonly {
                    check(libc::mount(
                        null,
                        b.target.as_ptr(),
                        null,
                        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                        null.cast(),
                    ))?;
                }
            }
        }
        Ok(())
    }
}

/// The mount namespace of the container whose main process is `pid`, if its mounts gave
/// it one of its own.
pub(crate) fn namespace_of(pid: i32, mounts: &[v1::Mount]) -> Option<std::fs::File> {
    if !mounts.iter().any(|m| m.host_path != m.container_path) {
        return None;
    }
    std::fs::File::open(format!("/proc/{pid}/ns/mnt")).ok()
}

/// In the forked child, before exec: joins the mount namespace `ns` (`setns(2)`).
pub(crate) fn enter(ns: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: setns takes a descriptor we own and no pointers.
    super::process::os_result(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNS) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(host: &str, container: &str, readonly: bool) -> v1::Mount {
        v1::Mount {
            host_path: host.into(),
            container_path: container.into(),
            readonly,
            ..Default::default()
        }
    }

    #[test]
    fn same_path_mounts_need_no_namespace() {
        assert!(MountPlan::new(&[mount("/tmp", "/tmp", true)])
            .unwrap()
            .is_none());
        assert!(MountPlan::new(&[]).unwrap().is_none());
    }

    #[test]
    fn remapped_mounts_are_bound_in_a_private_namespace_when_root() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("f"), "hello").unwrap();
        let dst = t.path().join("deep/dst");
        let m = mount(src.to_str().unwrap(), dst.to_str().unwrap(), true);
        let plan = MountPlan::new(std::slice::from_ref(&m));
        if !can_remap() {
            let e = plan.err().expect("refused without root");
            assert!(e.contains("needs root"), "{e}");
            return;
        }
        let plan = plan.unwrap().expect("a plan");
        assert!(dst.is_dir());
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg(format!(
            "cat {0}/f && ! touch {0}/g 2>/dev/null",
            dst.display()
        ));
        // SAFETY: see apply_in_child
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || plan.apply_in_child());
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");
        // nothing leaked into the host's namespace
        assert!(!dst.join("f").exists());

        // an exec joins the container's namespace and sees the mount
        let m = vec![m];
        let plan = MountPlan::new(&m).unwrap().unwrap();
        let mut sleeper = std::process::Command::new("sleep");
        sleeper.arg("30");
        // SAFETY: see apply_in_child
        unsafe {
            use std::os::unix::process::CommandExt;
            sleeper.pre_exec(move || plan.apply_in_child());
        }
        let mut sleeper = sleeper.spawn().unwrap();
        let ns = namespace_of(sleeper.id() as i32, &m).expect("its namespace");
        let mut exec = std::process::Command::new("cat");
        exec.arg(dst.join("f"));
        // SAFETY: see enter
        unsafe {
            use std::os::unix::process::CommandExt;
            exec.pre_exec(move || enter(&ns));
        }
        let out = exec.output().unwrap();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");
        assert!(namespace_of(1, &[mount("/tmp", "/tmp", false)]).is_none());
    }
}
