//! CRI stats of the embedded runtime: the CPU and memory of each container's process group,
//! read from `/proc/<pid>/stat` and `/proc/<pid>/status` (the embedded runtime has no
//! cgroups of its own).
//!
//! Owns one scan of `/proc` per request and the pure parsers behind it. Must not keep state
//! (rates are computed by the stats endpoints) nor signal anything. Figures are approximate
//! where a cgroup would be exact: CPU is the live members' time plus what their reaped
//! children used, so it drops when a member that ran long exits unreaped by the group;
//! memory is the members' resident set summed (shared pages counted in each).

use std::collections::BTreeMap;

/// What a process group uses now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GroupUsage {
    /// CPU time of its live members and their reaped children, in nanoseconds.
    pub cpu_ns: u64,
    /// Resident memory of its members, in bytes.
    pub rss_bytes: u64,
    /// Minor page faults of its live members.
    pub page_faults: u64,
    /// Major page faults of its live members.
    pub major_page_faults: u64,
    /// How many processes are in it.
    pub processes: u64,
}

/// From `/proc/<pid>/stat`: process group, CPU ticks (utime + stime + cutime + cstime),
/// minor and major faults.
pub(crate) fn parse_stat(text: &str) -> Option<(i32, u64, u64, u64)> {
    // the command name may hold spaces and parentheses: fields follow the last ')'
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after the name: state(0) ppid(1) pgrp(2) session(3) tty(4) tpgid(5) flags(6)
    // minflt(7) cminflt(8) majflt(9) cmajflt(10) utime(11) stime(12) cutime(13) cstime(14)
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let pgrp = f.get(2)?.parse().ok()?;
    let ticks = n(11)? + n(12)? + n(13).unwrap_or(0) + n(14).unwrap_or(0);
    Some((pgrp, ticks, n(7).unwrap_or(0), n(9).unwrap_or(0)))
}

/// `VmRSS` from `/proc/<pid>/status`, in bytes (0 for a kernel thread or a zombie).
pub(crate) fn parse_vm_rss(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The usage of each of `pgids` (groups without a live process are left out).
pub(crate) fn usage_of_groups(pgids: &[i32]) -> BTreeMap<i32, GroupUsage> {
    let mut out: BTreeMap<i32, GroupUsage> = BTreeMap::new();
    if pgids.is_empty() {
        return out;
    }
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((pgrp, ticks, minflt, majflt)) = parse_stat(&stat) else {
            continue;
        };
        if !pgids.contains(&pgrp) {
            continue;
        }
        let rss =
            std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(0, |s| parse_vm_rss(&s));
        let u = out.entry(pgrp).or_default();
        u.cpu_ns += ticks.saturating_mul(1_000_000_000) / ticks_per_s;
        u.rss_bytes += rss;
        u.page_faults += minflt;
        u.major_page_faults += majflt;
        u.processes += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        let s = "4242 (sh (x) y) R 1 4242 4242 0 -1 4194560 120 0 3 0 250 50 7 3 20 0 1 0 100 0 0";
        assert_eq!(parse_stat(s), Some((4242, 310, 120, 3)));
    }

    #[test]
    fn vm_rss_is_in_bytes_and_zero_when_absent() {
        assert_eq!(parse_vm_rss("Name:\tsh\nVmRSS:\t  1234 kB\n"), 1234 * 1024);
        assert_eq!(parse_vm_rss("Name:\tkthreadd\n"), 0);
    }

    #[test]
    fn this_process_group_is_found_with_cpu_and_memory() {
        // SAFETY: getpgrp has no preconditions.
        let pgid = unsafe { libc::getpgrp() };
        let u = usage_of_groups(&[pgid]);
        let u = u.get(&pgid).expect("this test's own process group");
        assert!(u.processes >= 1 && u.rss_bytes > 0, "{u:?}");
    }
}
