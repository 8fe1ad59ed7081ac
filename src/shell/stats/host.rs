//! The node's own figures: CPU of the root cgroup (cgroup v2 `cpu.stat`, v1
//! `cpuacct.usage`, else `/proc/stat`), memory (`/proc/meminfo`, `/proc/vmstat`, or the v1
//! root memory cgroup), network (`/proc/net/dev`), the root directory's filesystem
//! (`statvfs`), process limits and the boot time.
//!
//! Owns reading those files and the pure parsers behind them. Must not keep state (rates are
//! `cpu_rate`'s) nor fail: an unreadable figure is absent.

use std::path::Path;

use super::summary::{FsStats, InterfaceStats, MemoryStats, NetworkStats, RlimitStats, SwapStats};

/// Cumulative CPU of the root cgroup v2 (`cpu.stat`'s `usage_usec`), in nanoseconds.
pub fn parse_cgroup2_cpu_usage_ns(cpu_stat: &str) -> Option<u64> {
    field(cpu_stat, "usage_usec").map(|us| us.saturating_mul(1000))
}

/// Cumulative busy CPU of all cores from `/proc/stat`'s `cpu` line (user, nice, system, irq,
/// softirq, steal), in nanoseconds, with `ticks_per_s` clock ticks a second.
pub fn parse_proc_stat_cpu_ns(proc_stat: &str, ticks_per_s: u64) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| v.get(i)).sum();
    Some(busy.saturating_mul(1_000_000_000) / ticks_per_s.max(1))
}

/// The boot time (`btime`) from `/proc/stat`, in seconds since the epoch.
pub fn parse_boot_time_s(proc_stat: &str) -> Option<i64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// `NAME value` (or `NAME: value kB`) from a key-value file; `kB` values are turned into bytes.
pub fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        let mut it = rest.split_whitespace();
        let v: u64 = it.next()?.parse().ok()?;
        Some(if it.next() == Some("kB") { v * 1024 } else { v })
    })
}

/// Node memory from `/proc/meminfo` and `/proc/vmstat`, as cAdvisor reports the root:
/// usage is what is not free, the working set is usage minus inactive file pages, and
/// available is capacity minus the working set.
pub fn memory_from_meminfo(meminfo: &str, vmstat: &str, time: &str) -> Option<MemoryStats> {
    let total = field(meminfo, "MemTotal")?;
    let usage = total.saturating_sub(field(meminfo, "MemFree")?);
    let working_set = usage.saturating_sub(field(meminfo, "Inactive(file)").unwrap_or(0));
    Some(MemoryStats {
        time: time.to_string(),
        available_bytes: Some(total.saturating_sub(working_set)),
        usage_bytes: Some(usage),
        working_set_bytes: Some(working_set),
        rss_bytes: field(meminfo, "AnonPages"),
        page_faults: field(vmstat, "pgfault"),
        major_page_faults: field(vmstat, "pgmajfault"),
    })
}

/// Node memory from the cgroup v1 root memory cgroup (`memory.usage_in_bytes` and
/// `memory.stat`), with `total` bytes of memory in the machine.
pub fn memory_from_cgroup1(usage: u64, stat: &str, total: u64, time: &str) -> MemoryStats {
    let working_set = usage.saturating_sub(field(stat, "total_inactive_file").unwrap_or(0));
    MemoryStats {
        time: time.to_string(),
        available_bytes: Some(total.saturating_sub(working_set)),
        usage_bytes: Some(usage),
        working_set_bytes: Some(working_set),
        rss_bytes: field(stat, "total_rss"),
        page_faults: field(stat, "total_pgfault"),
        major_page_faults: field(stat, "total_pgmajfault"),
    }
}

/// The host's swap from `/proc/meminfo`.
pub fn swap_from_meminfo(meminfo: &str, time: &str) -> Option<SwapStats> {
    let total = field(meminfo, "SwapTotal")?;
    let free = field(meminfo, "SwapFree")?;
    Some(SwapStats {
        time: time.to_string(),
        swap_available_bytes: Some(free),
        swap_usage_bytes: Some(total.saturating_sub(free)),
    })
}

/// Every interface but loopback from `/proc/net/dev`, in name order; the default one is the
/// one that received most (the kubelet reports its default interface inline).
pub fn network_from_net_dev(net_dev: &str, time: &str) -> Option<NetworkStats> {
    let mut interfaces: Vec<InterfaceStats> = net_dev
        .lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let name = name.trim();
            if name == "lo" {
                return None;
            }
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            Some(InterfaceStats {
                name: name.to_string(),
                rx_bytes: v.first().copied(),
                rx_errors: v.get(2).copied(),
                tx_bytes: v.get(8).copied(),
                tx_errors: v.get(10).copied(),
            })
        })
        .collect();
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    let default = interfaces
        .iter()
        .max_by_key(|i| (i.rx_bytes, std::cmp::Reverse(i.name.clone())))?
        .clone();
    Some(NetworkStats {
        time: time.to_string(),
        default,
        interfaces,
    })
}

/// `statvfs` of `dir`: capacity, available, used and inodes.
pub fn fs_of(dir: &Path, time: &str) -> Option<FsStats> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `c` is a valid C string and `st` a valid out-pointer.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    let (blocks, bfree, bavail, frsize, files, ffree) = (
        st.f_blocks as u64,
        st.f_bfree as u64,
        st.f_bavail as u64,
        st.f_frsize as u64,
        st.f_files as u64,
        st.f_ffree as u64,
    );
    Some(FsStats {
        time: time.to_string(),
        available_bytes: Some(bavail * frsize),
        capacity_bytes: Some(blocks * frsize),
        used_bytes: Some(blocks.saturating_sub(bfree) * frsize),
        inodes_free: Some(ffree),
        inodes: Some(files),
        inodes_used: Some(files.saturating_sub(ffree)),
    })
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The root cgroup's cumulative CPU, in core-nanoseconds.
pub fn cpu_usage_ns() -> Option<u64> {
    if let Some(v) = read("/sys/fs/cgroup/cpu.stat").and_then(|s| parse_cgroup2_cpu_usage_ns(&s)) {
        return Some(v);
    }
    for p in [
        "/sys/fs/cgroup/cpuacct/cpuacct.usage",
        "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage",
    ] {
        if let Some(v) = read(p).and_then(|s| s.trim().parse().ok()) {
            return Some(v);
        }
    }
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    read("/proc/stat").and_then(|s| parse_proc_stat_cpu_ns(&s, ticks))
}

/// The node's memory: the v1 root memory cgroup where there is one, else `/proc/meminfo`.
pub fn memory(time: &str) -> Option<MemoryStats> {
    let meminfo = read("/proc/meminfo").unwrap_or_default();
    let v1 = "/sys/fs/cgroup/memory";
    if let (Some(usage), Some(stat), Some(total)) = (
        read(&format!("{v1}/memory.usage_in_bytes")).and_then(|s| s.trim().parse().ok()),
        read(&format!("{v1}/memory.stat")),
        field(&meminfo, "MemTotal"),
    ) {
        return Some(memory_from_cgroup1(usage, &stat, total, time));
    }
    memory_from_meminfo(&meminfo, &read("/proc/vmstat").unwrap_or_default(), time)
}

/// The host's swap.
pub fn swap(time: &str) -> Option<SwapStats> {
    swap_from_meminfo(&read("/proc/meminfo")?, time)
}

/// The host's network interfaces.
pub fn network(time: &str) -> Option<NetworkStats> {
    network_from_net_dev(&read("/proc/net/dev")?, time)
}

/// The boot time, in nanoseconds since the epoch.
pub fn boot_time_ns() -> i64 {
    read("/proc/stat")
        .and_then(|s| parse_boot_time_s(&s))
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
}

/// `pid_max` and the number of processes now.
pub fn rlimit(time: &str) -> RlimitStats {
    let curproc = std::fs::read_dir("/proc").ok().map(|d| {
        d.flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count() as i64
    });
    RlimitStats {
        time: time.to_string(),
        maxpid: read("/proc/sys/kernel/pid_max").and_then(|s| s.trim().parse().ok()),
        curproc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_root_cpu_usage_is_read_in_nanoseconds() {
        let s = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n";
        assert_eq!(parse_cgroup2_cpu_usage_ns(s), Some(1_500_000));
    }

    #[test]
    fn proc_stat_busy_time_leaves_out_idle_and_iowait() {
        let s = "cpu  100 0 50 9000 70 5 5 0 0 0\ncpu0 1 2 3\nbtime 1700000000\n";
        assert_eq!(parse_proc_stat_cpu_ns(s, 100), Some(1_600_000_000));
        assert_eq!(parse_boot_time_s(s), Some(1_700_000_000));
    }

    #[test]
    fn meminfo_working_set_is_usage_minus_inactive_file() {
        let meminfo = "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):   100 kB\nAnonPages:  300 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n";
        let vmstat = "pgfault 42\npgmajfault 3\n";
        let m = memory_from_meminfo(meminfo, vmstat, "t").unwrap();
        assert_eq!(m.usage_bytes, Some(800 * 1024));
        assert_eq!(m.working_set_bytes, Some(700 * 1024));
        assert_eq!(m.available_bytes, Some(300 * 1024));
        assert_eq!(m.rss_bytes, Some(300 * 1024));
        assert_eq!((m.page_faults, m.major_page_faults), (Some(42), Some(3)));
        let s = swap_from_meminfo(meminfo, "t").unwrap();
        assert_eq!(s.swap_usage_bytes, Some(0));
    }

    #[test]
    fn net_dev_leaves_out_loopback_and_picks_the_busiest_interface_as_default() {
        let s = "Inter-|   Receive  |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n  eth0: 500 5 1 0 0 0 0 0 700 7 2 0 0 0 0 0\n  eth1: 10 1 0 0 0 0 0 0 20 1 0 0 0 0 0 0\n";
        let n = network_from_net_dev(s, "t").unwrap();
        assert_eq!(n.default.name, "eth0");
        assert_eq!(n.default.rx_bytes, Some(500));
        assert_eq!(n.default.rx_errors, Some(1));
        assert_eq!(n.default.tx_bytes, Some(700));
        assert_eq!(n.default.tx_errors, Some(2));
        assert_eq!(n.interfaces.len(), 2);
    }
}
