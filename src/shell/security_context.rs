//! The pod's and its containers' `securityContext` as CRI security contexts (kubelet
//! `kuberuntime/security_context.go` `determineEffectiveSecurityContext`,
//! `security_context_others.go` `verifyRunAsNonRoot`, `pkg/securitycontext`, the seccomp
//! and AppArmor helpers of `kuberuntime/helpers.go`, and the security half of
//! `kuberuntime_sandbox_linux.go` `generatePodSandboxLinuxConfig`).
//!
//! Owns the merge of the pod's and a container's security context, its translation into
//! `LinuxContainerSecurityContext` / `LinuxSandboxSecurityContext` (users, groups,
//! capabilities, privileged, read-only root, no_new_privs, seccomp, AppArmor, masked and
//! read-only paths), the sandbox's sysctls, the runAsNonRoot check against the image's
//! user, and the probe of whether the host enforces AppArmor. Must not do other I/O (the
//! caller asks the runtime for the image's user) nor decide whether a container runs: an
//! error is a `CreateContainerConfigError` the executor reports, and which pods may run at
//! all is `core::soft_admission`'s.

use std::collections::HashMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodSecurityContext, SeccompProfile, SecurityContext,
};

use super::cri_config::ConfigError;
use crate::core::admission::sysctl_names;
use crate::core::{pod, soft_admission};
use crate::cri::v1;

/// Paths the runtime masks in a container with `procMount: Default` (kubelet
/// `securitycontext.defaultMaskedPaths` of the release ledgerlet follows, kept in sync with
/// moby's; later releases also mask `/proc/interrupts`).
pub const DEFAULT_MASKED_PATHS: [&str; 11] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths the runtime mounts read-only with `procMount: Default`
/// (`securitycontext.defaultReadonlyPaths`).
pub const DEFAULT_READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// `<root-dir>/seccomp`: where `Localhost` seccomp profiles are looked up (the kubelet's
/// `seccompProfileRoot`), given the node's `<root-dir>/pods`.
pub fn seccomp_profile_root(pods_dir: &Path) -> std::path::PathBuf {
    pods_dir
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .join("seccomp")
}

fn pod_security_context(p: &Pod) -> Option<&PodSecurityContext> {
    p.spec.as_ref()?.security_context.as_ref()
}

/// `securitycontext.DetermineEffectiveSecurityContext`: the pod's user, group, runAsNonRoot
/// and SELinux options, each overridden by the container's when it sets them, with the
/// container-only fields from the container.
pub fn effective(p: &Pod, c: &Container) -> SecurityContext {
    let mut sc = c.security_context.clone().unwrap_or_default();
    if let Some(psc) = pod_security_context(p) {
        sc.run_as_user = sc.run_as_user.or(psc.run_as_user);
        sc.run_as_group = sc.run_as_group.or(psc.run_as_group);
        sc.run_as_non_root = sc.run_as_non_root.or(psc.run_as_non_root);
        if sc.se_linux_options.is_none() {
            sc.se_linux_options = psc.se_linux_options.clone();
        }
    }
    sc
}

/// The kubelet's `format.Pod`: `name_namespace(uid)`.
fn pod_ref(p: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod::name(p),
        pod::namespace(p),
        pod::uid_str(p)
    )
}

/// True if the container's effective security context asks for `runAsNonRoot` without a
/// `runAsUser` (so [`verify_run_as_non_root`] needs the image's user).
pub fn needs_image_user(p: &Pod, c: &Container) -> bool {
    let sc = effective(p, c);
    sc.run_as_non_root == Some(true) && sc.run_as_user.is_none()
}

/// The kubelet's `getImageUser` over a CRI `ImageStatus` answer: the numeric uid, else the
/// user name, else root.
pub fn image_user(image: Option<&v1::Image>) -> (Option<i64>, String) {
    match image {
        Some(i) if i.uid.is_some() => (i.uid.as_ref().map(|u| u.value), String::new()),
        Some(i) if !i.username.is_empty() => (None, i.username.clone()),
        _ => (Some(0), String::new()),
    }
}

/// `verifyRunAsNonRoot`, with the kubelet's messages: a container that must not run as root
/// may not have `runAsUser: 0`, nor (without a `runAsUser`) an image whose user is root,
/// a name that cannot be checked, or an invalid uid.
pub fn verify_run_as_non_root(
    p: &Pod,
    c: &Container,
    image_uid: Option<i64>,
    image_username: &str,
) -> Result<(), ConfigError> {
    let sc = effective(p, c);
    if sc.run_as_non_root != Some(true) {
        return Ok(());
    }
    let (pod_ref, name) = (pod_ref(p), &c.name);
    if let Some(uid) = sc.run_as_user {
        if uid == 0 {
            return Err(ConfigError::new(format!(
                "container's runAsUser breaks non-root policy (pod: {pod_ref:?}, container: {name})"
            )));
        }
        return Ok(());
    }
    match image_uid {
        None if !image_username.is_empty() => Err(ConfigError::new(format!(
            "container has runAsNonRoot and image has non-numeric user ({image_username}), \
             cannot verify user is non-root (pod: {pod_ref:?}, container: {name})"
        ))),
        Some(0) => Err(ConfigError::new(format!(
            "container has runAsNonRoot and image will run as root (pod: {pod_ref:?}, \
             container: {name})"
        ))),
        Some(uid) if !(1..=i64::from(i32::MAX)).contains(&uid) => Err(ConfigError::new(format!(
            "container has runAsNonRoot and image has an invalid user id ({uid}). (Must be \
             1-({})): must be between 0 and {}, inclusive (pod: {pod_ref:?}, container: {name})",
            i32::MAX,
            i32::MAX
        ))),
        _ => Ok(()),
    }
}

/// `fieldSeccompProfile`: the CRI profile of a `seccompProfile` field; `Localhost` profiles
/// are files under `root`.
fn seccomp_of(
    s: &SeccompProfile,
    root: &Path,
    field: &str,
) -> Result<v1::SecurityProfile, ConfigError> {
    use v1::security_profile::ProfileType;
    let profile = |t: ProfileType, r: String| v1::SecurityProfile {
        profile_type: t as i32,
        localhost_ref: r,
    };
    match s.type_.as_str() {
        "RuntimeDefault" => Ok(profile(ProfileType::RuntimeDefault, String::new())),
        "Localhost" => match s.localhost_profile.as_deref().filter(|l| !l.is_empty()) {
            Some(l) => Ok(profile(
                ProfileType::Localhost,
                root.join(l).to_string_lossy().into_owned(),
            )),
            None => Err(ConfigError::at(
                field,
                "localhostProfile must be set if seccompProfile type is Localhost.",
            )),
        },
        _ => Ok(profile(ProfileType::Unconfined, String::new())),
    }
}

/// `getSeccompProfile`: the container's field, else the pod's, else `RuntimeDefault` with
/// `--seccomp-default` (`seccomp_default`) and `Unconfined` without.
fn seccomp(
    p: &Pod,
    c: &Container,
    root: &Path,
    seccomp_default: bool,
) -> Result<v1::SecurityProfile, ConfigError> {
    use v1::security_profile::ProfileType;
    let container = c
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref());
    let pod_level = pod_security_context(p).and_then(|s| s.seccomp_profile.as_ref());
    let field = "securityContext.seccompProfile";
    match (container, pod_level) {
        (Some(s), _) => seccomp_of(s, root, field),
        (None, Some(s)) => seccomp_of(s, root, "spec.securityContext.seccompProfile"),
        (None, None) => Ok(v1::SecurityProfile {
            profile_type: if seccomp_default {
                ProfileType::RuntimeDefault
            } else {
                ProfileType::Unconfined
            } as i32,
            localhost_ref: String::new(),
        }),
    }
}

/// `getAppArmorProfile`: the CRI profile and the deprecated profile name.
fn apparmor(p: &Pod, c: &Container) -> Result<(Option<v1::SecurityProfile>, String), ConfigError> {
    use v1::security_profile::ProfileType;
    let Some(a) = soft_admission::container_apparmor_profile(p, c) else {
        return Ok((None, String::new()));
    };
    let profile = |t: ProfileType, r: &str| {
        Some(v1::SecurityProfile {
            profile_type: t as i32,
            localhost_ref: r.to_string(),
        })
    };
    match a.type_.as_str() {
        "RuntimeDefault" => Ok((
            profile(ProfileType::RuntimeDefault, ""),
            "runtime/default".into(),
        )),
        "Unconfined" => Ok((profile(ProfileType::Unconfined, ""), "unconfined".into())),
        "Localhost" => match a.localhost_profile.as_deref().filter(|l| !l.is_empty()) {
            Some(l) => Ok((profile(ProfileType::Localhost, l), format!("localhost/{l}"))),
            None => Err(ConfigError::at(
                "appArmorProfile",
                "missing localhost apparmor profile name",
            )),
        },
        other => Err(ConfigError::at(
            "appArmorProfile",
            format!("unknown apparmor profile type: {other:?}"),
        )),
    }
}

/// Whether this host enforces AppArmor (runc's `apparmor.IsEnabled`: the securityfs
/// directory exists and the module parameter says `Y`).
pub fn host_apparmor_enabled() -> bool {
    Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|v| v.starts_with('Y'))
}

/// The pod's `fsGroup` and `supplementalGroups`, in the kubelet's order.
fn pod_groups(p: &Pod) -> Vec<i64> {
    let Some(psc) = pod_security_context(p) else {
        return Vec::new();
    };
    psc.fs_group
        .into_iter()
        .chain(psc.supplemental_groups.iter().flatten().copied())
        .collect()
}

fn supplemental_groups_policy(p: &Pod) -> i32 {
    match pod_security_context(p).and_then(|s| s.supplemental_groups_policy.as_deref()) {
        Some("Strict") => v1::SupplementalGroupsPolicy::Strict as i32,
        _ => v1::SupplementalGroupsPolicy::Merge as i32,
    }
}

/// `determineEffectiveSecurityContext`: the CRI security context of container `c`, with
/// the pod's `namespaces`; `Localhost` seccomp profiles are under `seccomp_root`, and a
/// container without a profile gets `RuntimeDefault` if `seccomp_default`.
// the kubelet sets the deprecated AppArmor profile name too, for runtimes that read only it
#[allow(deprecated)]
pub fn container_security_context(
    seccomp_root: &Path,
    seccomp_default: bool,
    p: &Pod,
    c: &Container,
    namespaces: v1::NamespaceOption,
) -> Result<v1::LinuxContainerSecurityContext, ConfigError> {
    let sc = effective(p, c);
    let unmasked = sc.proc_mount.as_deref() == Some("Unmasked");
    let paths = |list: &[&str]| -> Vec<String> {
        if unmasked {
            Vec::new()
        } else {
            list.iter().map(|s| s.to_string()).collect()
        }
    };
    let (apparmor, apparmor_profile) = apparmor(p, c)?;
    Ok(v1::LinuxContainerSecurityContext {
        capabilities: sc.capabilities.as_ref().map(|caps| v1::Capability {
            add_capabilities: caps.add.clone().unwrap_or_default(),
            drop_capabilities: caps.drop.clone().unwrap_or_default(),
            ..Default::default()
        }),
        privileged: sc.privileged.unwrap_or(false),
        namespace_options: Some(namespaces),
        selinux_options: sc.se_linux_options.as_ref().map(selinux),
        run_as_user: sc.run_as_user.map(|value| v1::Int64Value { value }),
        run_as_group: sc.run_as_group.map(|value| v1::Int64Value { value }),
        readonly_rootfs: sc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: pod_groups(p),
        supplemental_groups_policy: supplemental_groups_policy(p),
        // securitycontext.AddNoNewPrivileges: only an explicit allowPrivilegeEscalation: false
        no_new_privs: sc.allow_privilege_escalation == Some(false),
        masked_paths: paths(&DEFAULT_MASKED_PATHS),
        readonly_paths: paths(&DEFAULT_READONLY_PATHS),
        seccomp: Some(seccomp(p, c, seccomp_root, seccomp_default)?),
        apparmor,
        apparmor_profile,
        ..Default::default()
    })
}

/// `convertToRuntimeSELinuxOption`.
fn selinux(o: &k8s_openapi::api::core::v1::SELinuxOptions) -> v1::SeLinuxOption {
    v1::SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    }
}

/// True if any container of the pod is privileged (`kubecontainer.HasPrivilegedContainer`).
fn has_privileged_container(p: &Pod) -> bool {
    let Some(spec) = p.spec.as_ref() else {
        return false;
    };
    let privileged =
        |sc: &Option<SecurityContext>| sc.as_ref().and_then(|s| s.privileged).unwrap_or(false);
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .any(|c| privileged(&c.security_context))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|e| privileged(&e.security_context))
}

/// The security half of `generatePodSandboxLinuxConfig`: the pod's user, group and groups,
/// privileged if a container is, and the runtime's default seccomp profile for the sandbox.
pub fn sandbox_security_context(
    p: &Pod,
    namespaces: v1::NamespaceOption,
) -> v1::LinuxSandboxSecurityContext {
    let psc = pod_security_context(p);
    v1::LinuxSandboxSecurityContext {
        namespace_options: Some(namespaces),
        run_as_user: psc
            .and_then(|s| s.run_as_user)
            .map(|value| v1::Int64Value { value }),
        run_as_group: psc
            .and_then(|s| s.run_as_group)
            .map(|value| v1::Int64Value { value }),
        supplemental_groups: pod_groups(p),
        supplemental_groups_policy: supplemental_groups_policy(p),
        privileged: has_privileged_container(p),
        selinux_options: psc.and_then(|s| s.se_linux_options.as_ref()).map(selinux),
        seccomp: Some(v1::SecurityProfile {
            profile_type: v1::security_profile::ProfileType::RuntimeDefault as i32,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    }
}

/// The pod's `securityContext.sysctls` for the sandbox, `/` separators as dots
/// (`ConvertPodSysctlsVariableToDotsSeparator`); admission allowed them.
pub fn sandbox_sysctls(p: &Pod) -> HashMap<String, String> {
    pod_security_context(p)
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (sysctl_names::normalize(&s.name), s.value.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
