//! Sysctl names as the kubelet reads them: the `/`-separated form normalised to dots
//! (`NormalizeName`), the syntax of an allowlist pattern (`IsValidSysctlPattern`), the kernel
//! namespace a sysctl lives in (`GetNamespace`, of `component-helpers/node/util/sysctl`),
//! and the kubelet's safe set with the kernel release each member needs
//! (`pkg/kubelet/sysctl/safe_sysctls.go`).
//!
//! Owns those tables and rules. Must not decide about a pod (that is `sysctls`') nor read
//! the kernel: the release is the caller's (the machine the shell observed).

/// A kernel namespace that isolates a sysctl (`utilsysctl.Namespace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    /// The IPC namespace (`kernel.sem`, `kernel.shm*`, `kernel.msg*`, `fs.mqueue.*`):
    /// shared with the host by `hostIPC: true`.
    Ipc,
    /// The network namespace (`net.*`): shared with the host by `hostNetwork: true`.
    Net,
}

impl Namespace {
    /// The name the kubelet's messages use (`IPC`, `Net`).
    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::Ipc => "IPC",
            Namespace::Net => "Net",
        }
    }
}

/// The longest sysctl name or pattern (`SysctlMaxLength`).
pub const MAX_LENGTH: usize = 253;

/// The pattern syntax, in the words of the kubelet's error (`SysctlContainSlashPatternFmt`).
pub const PATTERN_REGEX: &str =
    r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]";

/// Sysctls known to be in the IPC namespace by their exact name (`nameToNamespace`);
/// `kernel.shm` and `kernel.msg` make the patterns `kernel.shm*` and `kernel.msg*` known.
const IPC_NAMES: [&str; 10] = [
    "kernel.sem",
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "kernel.shm_rmid_forced",
    "kernel.shm",
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.msg",
];

/// The safe sysctls, each with the least kernel release (major, minor) that namespaces it
/// (`safeSysctls`; `None`: any release). A gated sysctl is safe only when the release is
/// known and at least that.
const SAFE: [(&str, Option<(u64, u64)>); 12] = [
    ("kernel.shm_rmid_forced", None),
    ("net.ipv4.ip_local_port_range", None),
    ("net.ipv4.tcp_syncookies", None),
    ("net.ipv4.ping_group_range", None),
    ("net.ipv4.ip_unprivileged_port_start", None),
    ("net.ipv4.ip_local_reserved_ports", Some((3, 16))),
    ("net.ipv4.tcp_keepalive_time", Some((4, 5))),
    ("net.ipv4.tcp_fin_timeout", Some((4, 6))),
    ("net.ipv4.tcp_keepalive_intvl", Some((4, 5))),
    ("net.ipv4.tcp_keepalive_probes", Some((4, 5))),
    ("net.ipv4.tcp_rmem", Some((4, 15))),
    ("net.ipv4.tcp_wmem", Some((4, 15))),
];

/// `NormalizeName`: a name whose first separator is `/` (`net/ipv4/conf/eno2.100/rp_filter`)
/// has its `/` and `.` swapped (`net.ipv4.conf.eno2/100.rp_filter`); any other is as given.
pub fn normalize(name: &str) -> String {
    let first = name.find(['.', '/']);
    if first.is_none_or(|i| name.as_bytes()[i] == b'.') {
        return name.to_string();
    }
    name.chars()
        .map(|ch| match ch {
            '/' => '.',
            '.' => '/',
            other => other,
        })
        .collect()
}

fn alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn inner(b: u8) -> bool {
    alnum(b) || b == b'-' || b == b'_'
}

/// A segment before a separator: `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`.
fn is_segment(s: &[u8]) -> bool {
    match s {
        [] => false,
        [only] => alnum(*only),
        [first, middle @ .., last] => {
            alnum(*first) && alnum(*last) && middle.iter().all(|&b| inner(b))
        }
    }
}

/// The last segment of a pattern: `([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`.
fn is_last_segment(s: &[u8]) -> bool {
    let end = |b: u8| alnum(b) || b == b'*';
    match s {
        [] => false,
        [only] => end(*only),
        [first, middle @ .., last] => {
            alnum(*first) && end(*last) && middle.iter().all(|&b| inner(b))
        }
    }
}

/// `IsValidSysctlPattern`: at most [`MAX_LENGTH`] bytes, segments separated by `.` or `/`,
/// a `*` only at the very end.
pub fn is_valid_pattern(pattern: &str) -> bool {
    if pattern.len() > MAX_LENGTH {
        return false;
    }
    let segments: Vec<&[u8]> = pattern
        .as_bytes()
        .split(|&b| b == b'.' || b == b'/')
        .collect();
    let Some((last, before)) = segments.split_last() else {
        return false;
    };
    before.iter().all(|s| is_segment(s)) && is_last_segment(last)
}

/// `namespaceOf`: the namespace of a (normalised) sysctl or prefix, if it is known to be
/// namespaced.
pub fn namespace_of(name: &str) -> Option<Namespace> {
    if IPC_NAMES.contains(&name) {
        return Some(Namespace::Ipc);
    }
    if name.starts_with("net.") {
        return Some(Namespace::Net);
    }
    if name.starts_with("fs.mqueue.") {
        return Some(Namespace::Ipc);
    }
    None
}

/// What an allowlist entry names (`GetNamespace`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its namespace, if known.
    pub namespace: Option<Namespace>,
    /// The normalised sysctl, or the prefix before the first `*`.
    pub name: String,
    /// True for a pattern (it had a `*`): `name` is a prefix.
    pub prefixed: bool,
}

/// `GetNamespace`: the entry a sysctl or pattern stands for.
pub fn entry(pattern: &str) -> Entry {
    let mut name = normalize(pattern);
    let prefixed = match name.find('*') {
        Some(i) => {
            name.truncate(i);
            true
        }
        None => false,
    };
    Entry {
        namespace: namespace_of(&name),
        name,
        prefixed,
    }
}

/// `version.ParseGeneric` of a kernel release (`5.15.0-75-generic`): its leading dotted
/// numbers, at least two of them.
fn parse_release(release: &str) -> Option<Vec<u64>> {
    let s = release.trim_start();
    let s = s.strip_prefix('v').unwrap_or(s);
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let numbers = s[..end].trim_end_matches('.');
    let parts: Vec<u64> = numbers
        .split('.')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (parts.len() >= 2).then_some(parts)
}

/// True if `release` is at least `major.minor`.
fn at_least(release: &[u64], (major, minor): (u64, u64)) -> bool {
    let got = (release[0], release.get(1).copied().unwrap_or(0));
    got >= (major, minor)
}

/// `SafeSysctlAllowlist` on a kernel of release `kernel_release` (`uname -r`; empty or
/// unreadable: only the sysctls without a kernel gate).
pub fn safe_sysctls(kernel_release: &str) -> Vec<&'static str> {
    let release = parse_release(kernel_release);
    SAFE.iter()
        .filter(|(_, gate)| match (gate, &release) {
            (None, _) => true,
            (Some(min), Some(r)) => at_least(r, *min),
            (Some(_), None) => false,
        })
        .map(|(name, _)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slash_separated_name_is_normalised_to_dots_and_its_dots_to_slashes() {
        assert_eq!(normalize("net/ipv4/ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(
            normalize("net/ipv4/conf/eno2.100/rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );
        assert_eq!(
            normalize("net.ipv4.conf.eno2/100.rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );
        assert_eq!(normalize("kernel"), "kernel");
    }

    #[test]
    fn patterns_are_lowercase_segments_with_a_star_only_at_the_end() {
        for ok in [
            "kernel.msg*",
            "net.*",
            "net.core.somaxconn",
            "kernel/shm*",
            "fs.mqueue.*",
            "*",
            "a-*",
            "net.ipv4.conf.eth0/100.rp_filter",
        ] {
            assert!(is_valid_pattern(ok), "{ok}");
        }
        for bad in [
            "",
            "Kernel.msg*",
            "kernel.*.msg",
            "kernel..msg",
            ".kernel",
            "kernel.",
            "net.-core.x",
            "net.core-.x",
            "kernel.msg**",
            "kernel msg",
        ] {
            assert!(!is_valid_pattern(bad), "{bad}");
        }
        assert!(!is_valid_pattern(&format!(
            "net.{}",
            "a".repeat(MAX_LENGTH)
        )));
    }

    #[test]
    fn net_fs_mqueue_and_the_ipc_kernel_sysctls_are_namespaced_and_nothing_else() {
        assert_eq!(namespace_of("net.core.somaxconn"), Some(Namespace::Net));
        assert_eq!(namespace_of("net."), Some(Namespace::Net));
        assert_eq!(namespace_of("fs.mqueue.msg_max"), Some(Namespace::Ipc));
        assert_eq!(namespace_of("kernel.sem"), Some(Namespace::Ipc));
        assert_eq!(namespace_of("kernel.msg"), Some(Namespace::Ipc));
        assert_eq!(namespace_of("kernel.shmmax"), Some(Namespace::Ipc));
        for unknown in [
            "net",
            "kernel.",
            "kernel.hostname",
            "vm.swappiness",
            "fs.mqueue",
            "",
        ] {
            assert_eq!(namespace_of(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn an_entry_is_the_normalised_name_or_the_prefix_before_the_star() {
        assert_eq!(
            entry("kernel/msg*"),
            Entry {
                namespace: Some(Namespace::Ipc),
                name: "kernel.msg".into(),
                prefixed: true
            }
        );
        assert_eq!(entry("net.*").name, "net.");
        assert_eq!(entry("net.*").namespace, Some(Namespace::Net));
        assert!(!entry("net.core.somaxconn").prefixed);
        assert_eq!(entry("*").namespace, None);
    }

    #[test]
    fn kernel_gated_safe_sysctls_need_a_known_recent_enough_release() {
        let all = safe_sysctls("6.8.0-45-generic");
        assert_eq!(all.len(), 12);
        assert!(all.contains(&"net.ipv4.tcp_wmem"));
        let old = safe_sysctls("4.5.0");
        assert!(old.contains(&"net.ipv4.tcp_keepalive_time"));
        assert!(!old.contains(&"net.ipv4.tcp_fin_timeout"));
        assert!(!old.contains(&"net.ipv4.tcp_rmem"));
        assert_eq!(
            safe_sysctls("3.18.0-957.27.2.el7.x86_64"),
            [
                "kernel.shm_rmid_forced",
                "net.ipv4.ip_local_port_range",
                "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range",
                "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.ip_local_reserved_ports",
            ]
        );
        for unknown in ["", "linux", "5"] {
            assert_eq!(safe_sysctls(unknown).len(), 5, "{unknown:?}");
        }
    }
}
