//! The kubelet's sysctl admit handler (`pkg/kubelet/sysctl` `NewAllowlist` and
//! `patternAllowlist.Admit`): a pod may set only the sysctls of the allowlist, which is the
//! safe set for the node's kernel plus `--allowed-unsafe-sysctls`, and not a sysctl of a
//! namespace it shares with the host.
//!
//! Owns the allowlist (exact names and `*` prefixes, each with its kernel namespace), the
//! validation of its patterns, and the verdict with the kubelet's reason and messages. It
//! runs before every check of `can_admit_pod`, as the kubelet registers it before the
//! predicate admit handler. Must not change state nor read the kernel: the caller passes
//! the flag's patterns and the node's kernel release.

use crate::core::go_quote::go_quote;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::sysctl_names::{self, Namespace, MAX_LENGTH, PATTERN_REGEX};
use super::Admission;

/// The reason of a rejection (`ForbiddenReason`).
pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// An allowlist entry the kubelet refuses at start-up, with its words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Not a sysctl name or pattern.
    #[error(
        "sysctl {} must have at most {} characters and match regex {}",
        go_quote(.0),
        MAX_LENGTH,
        PATTERN_REGEX
    )]
    Syntax(String),
    /// A sysctl, or a prefix (before its `*`), not known to be in a namespace of the pod.
    #[error("the sysctls {} are not known to be namespaced", go_quote(.0))]
    NotNamespaced(String),
}

impl PatternError {
    /// What a valid entry is, for a configuration error.
    pub fn why(&self) -> &'static str {
        match self {
            PatternError::Syntax(_) => concat!(
                "must be a sysctl or a pattern ending in `*` of at most 253 characters \
                 matching ",
                r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]"
            ),
            PatternError::NotNamespaced(_) => {
                "is not known to be namespaced: only net.*, fs.mqueue.*, kernel.sem, \
                 kernel.shm* and kernel.msg* sysctls may be allowed"
            }
        }
    }
}

/// The sysctls a pod may set (`patternAllowlist`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    /// Exact normalised names.
    sysctls: BTreeMap<String, Namespace>,
    /// Prefixes of the `*` patterns.
    prefixes: BTreeMap<String, Namespace>,
}

impl Allowlist {
    /// `NewAllowlist(append(SafeSysctlAllowlist(), allowedUnsafeSysctls...))`: the safe set
    /// for `kernel_release` and the operator's patterns; the first bad pattern is an error.
    pub fn new(kernel_release: &str, allowed_unsafe: &[String]) -> Result<Self, PatternError> {
        let mut list = Allowlist::default();
        let safe = sysctl_names::safe_sysctls(kernel_release);
        for pattern in safe
            .into_iter()
            .chain(allowed_unsafe.iter().map(String::as_str))
        {
            list.insert(pattern)?;
        }
        Ok(list)
    }

    fn insert(&mut self, pattern: &str) -> Result<(), PatternError> {
        if !sysctl_names::is_valid_pattern(pattern) {
            return Err(PatternError::Syntax(pattern.to_string()));
        }
        let entry = sysctl_names::entry(pattern);
        let Some(ns) = entry.namespace else {
            return Err(PatternError::NotNamespaced(entry.name));
        };
        let map = if entry.prefixed {
            &mut self.prefixes
        } else {
            &mut self.sysctls
        };
        map.insert(entry.name, ns);
        Ok(())
    }

    /// `validateSysctl`: `Ok` if sysctl `name` is allowlisted and its namespace is the pod's
    /// own; else why not, in the kubelet's words.
    pub fn check(&self, name: &str, host_network: bool, host_ipc: bool) -> Result<(), String> {
        let name = sysctl_names::normalize(name);
        let ns = self.sysctls.get(&name).copied().or_else(|| {
            self.prefixes
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix.as_str()))
                .map(|(_, ns)| *ns)
        });
        match ns {
            None => Err(format!("{} not allowlisted", go_quote(&name))),
            Some(ns @ Namespace::Ipc) if host_ipc => Err(shared(&name, ns)),
            Some(ns @ Namespace::Net) if host_network => Err(shared(&name, ns)),
            Some(_) => Ok(()),
        }
    }
}

fn shared(name: &str, ns: Namespace) -> String {
    format!(
        "{} not allowed with host {} enabled",
        go_quote(name),
        ns.as_str()
    )
}

/// Checks `--allowed-unsafe-sysctls` as the kubelet does at start-up.
pub fn validate_allowed_unsafe(patterns: &[String]) -> Result<(), PatternError> {
    Allowlist::new("", patterns).map(|_| ())
}

/// `patternAllowlist.Admit`: `None` if every sysctl of the pod's `securityContext.sysctls`
/// is allowed (or it has none), else the rejection naming the first that is not.
/// `allowed_unsafe` was validated with the configuration; an entry that is not valid is
/// ignored here, leaving the safe set.
pub fn admit(pod: &Pod, allowed_unsafe: &[String], kernel_release: &str) -> Option<Admission> {
    let spec = pod.spec.as_ref()?;
    let sysctls = spec.security_context.as_ref()?.sysctls.as_deref()?;
    if sysctls.is_empty() {
        return None;
    }
    let list = Allowlist::new(kernel_release, allowed_unsafe)
        .or_else(|_| Allowlist::new(kernel_release, &[]))
        .unwrap_or_default();
    let host_network = spec.host_network.unwrap_or(false);
    let host_ipc = spec.host_ipc.unwrap_or(false);
    sysctls.iter().find_map(|s| {
        let why = list.check(&s.name, host_network, host_ipc).err()?;
        Some(Admission::Reject {
            reason: FORBIDDEN_REASON.to_string(),
            message: format!("forbidden sysctl: {why}"),
        })
    })
}

#[cfg(test)]
mod tests;
