//! Host processes of the embedded runtime: process groups, signals, exit
//! codes, and the registry of every group the runtime started.
//!
//! Owns: the only `kill(2)`/`waitid(2)` calls of the runtime. Must not: signal
//! anything that is not a process group this runtime created (every signal
//! goes to `-pgid` with `pgid > 1`, never to pid 0 or -1), or reap children it
//! did not start (tokio reaps the group leaders; see [`reap_group_members`]).

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

/// The program a container process runs: `program` itself when it names a path, else the
/// first executable file of that name on the `PATH` of `env` (relative entries taken from
/// `cwd`), the lookup the child's `execvp` would make. Resolved here, before the spawn, so
/// std can start the process with `posix_spawn`: given a bare name and a `PATH` of its own,
/// std forks and execs instead, and copying the agent's page tables on every exec probe
/// was more than half the agent's CPU on a 110-pod node (bench `node_110`, perf:
/// `copy_page_range` under `_Fork`). When nothing is found the name is returned unchanged,
/// so the spawn fails as before.
pub(crate) fn resolve_program(program: &str, env: &[(String, String)], cwd: &Path) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    path.unwrap_or_default()
        .split(':')
        .map(|dir| {
            cwd.join(if dir.is_empty() { "." } else { dir })
                .join(program)
        })
        .find(|f| {
            std::fs::metadata(f).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

/// Every process group started by one runtime instance and not yet fully
/// cleaned up. Shutdown kills all of them and waits until the set is empty.
///
/// A `std` mutex so that `Drop` can kill without an async context.
#[derive(Default)]
pub(crate) struct ProcessRegistry {
    groups: Mutex<HashSet<i32>>,
    changed: Notify,
}

impl ProcessRegistry {
    pub(crate) fn add(&self, pgid: i32) {
        self.lock().insert(pgid);
    }

    pub(crate) fn remove(&self, pgid: i32) {
        self.lock().remove(&pgid);
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `sig` to every registered group.
    pub(crate) fn signal_all(&self, sig: i32) {
        for pgid in self.lock().iter() {
            let _ = signal_group(*pgid, sig);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Waits until every registered group has been cleaned up, or `limit`.
    /// Returns whether the registry is empty.
    pub(crate) async fn wait_empty(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            if self.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.is_empty();
            }
        }
    }
}

/// Sends `sig` to the process group `pgid`. Refuses `pgid <= 1`, which would
/// mean "my own group" or "every process".
pub(crate) fn signal_group(pgid: i32, sig: i32) -> std::io::Result<()> {
    if pgid <= 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    os_result(unsafe { libc::kill(-pgid, sig) })
}

/// The result of a system call that returns 0 on success and sets `errno` otherwise.
/// Async-signal-safe (usable in a forked child): it does not allocate.
pub(crate) fn os_result(rc: libc::c_int) -> std::io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Whether any process (zombies included) is still in group `pgid`.
fn group_exists(pgid: i32) -> bool {
    match signal_group(pgid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() != Some(libc::ESRCH),
    }
}

/// The CRI exit code: the exit status, or 128 + signal number when killed by
/// a signal (SIGKILL = 137, SIGTERM = 143), as containerd reports it.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 255,
    }
}

/// Makes this process a "child subreaper" (`PR_SET_CHILD_SUBREAPER`):
/// orphaned descendants are re-parented to it instead of to PID 1, so
/// [`reap_group_members`] can reap a container's grandchildren. This is
/// process-wide and cannot be scoped to the runtime.
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes no pointers.
    os_result(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) })
}

/// Reaps the remaining members of group `pgid` after its leader has been
/// reaped (by tokio) and the group killed. Only members that became our
/// children (orphans re-parented to us as subreaper) can be reaped here; the
/// wait is limited to `waitid(P_PGID, pgid)`, so no other child of the
/// process is touched. Returns when the group is gone or at `limit`.
pub(crate) async fn reap_group_members(pgid: i32, limit: Duration) -> bool {
    if pgid <= 1 {
        return true;
    }
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        loop {
            // SAFETY: waitid writes only into the siginfo_t we own.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let rc = unsafe {
                libc::waitid(
                    libc::P_PGID,
                    pgid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG,
                )
            };
            // rc == -1: ECHILD (none of the group's members is our child).
            // rc == 0 with si_pid == 0: members exist but none has exited.
            if rc != 0 || unsafe { info.si_pid() } == 0 {
                break;
            }
        }
        if !group_exists(pgid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        let _ = signal_group(pgid, libc::SIGKILL);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn signal_deaths_map_to_128_plus_signal() {
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
    }

    #[test]
    fn a_bare_program_name_is_found_on_the_containers_path() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, bin) = (dir.path().join("empty"), dir.path().join("bin"));
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(empty.join("tool"), "not executable").unwrap();
        let env = |path: String| vec![("PATH".to_string(), path)];
        let path = format!("{}:{}", empty.display(), bin.display());
        assert_eq!(resolve_program("tool", &env(path), Path::new("/")), tool);
        // relative entries are taken from the working directory
        assert_eq!(
            resolve_program("tool", &env("bin".into()), dir.path()),
            tool
        );
        // a path is used as given, a name found nowhere is left for the spawn to report
        assert_eq!(
            resolve_program("./tool", &env(String::new()), dir.path()),
            PathBuf::from("./tool")
        );
        assert_eq!(
            resolve_program("missing", &env(bin.display().to_string()), dir.path()),
            PathBuf::from("missing")
        );
        assert_eq!(
            resolve_program("tool", &[], dir.path()),
            PathBuf::from("tool")
        );
    }

    #[test]
    fn own_group_and_broadcast_are_never_signalled() {
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
        assert!(signal_group(-5, 0).is_err());
    }
}
