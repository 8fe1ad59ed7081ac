//! Translation of a pod spec into CRI configurations (kubelet `kuberuntime_sandbox.go`,
//! `kuberuntime_container.go`, `labels.go`).
//!
//! Owns the labels and annotations the kubelet puts on sandboxes and containers (so a
//! restarted agent recognises its containers and their spec hash and restart count), log
//! paths and mounts; the environment and `$(VAR)` expansion are [`super::env`]'s. Must not
//! decide what to run: it translates one container of a plan the core made. Errors are
//! `CreateContainerConfigError`s that name the pod, container and field.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::core::command::{ContainerKind, ContainerStart};
use crate::core::pod;
use crate::cri::v1;
use crate::shell::env::{self, EnvSources};

/// `io.kubernetes.pod.name`
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// `io.kubernetes.pod.namespace`
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// `io.kubernetes.pod.uid`
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// `io.kubernetes.container.name` (`POD` on sandboxes)
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Marks everything ledgerlet created, for list filters.
pub const MANAGED_LABEL: &str = "ledgerlet.dev/managed";
/// The node (agent) that created a sandbox or container: ledgerlet lists only its own, so
/// two agents with different node names can share one runtime without touching each other's
/// pods (the tests run one containerd for many agents).
pub const NODE_LABEL: &str = "ledgerlet.dev/node";
/// `io.kubernetes.container.hash`
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// `io.kubernetes.container.restartCount`
pub const RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// `io.kubernetes.container.terminationMessagePath`
pub const TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// `io.kubernetes.container.terminationMessagePolicy`
pub const TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// `io.kubernetes.pod.terminationGracePeriod`
pub const POD_TERMINATION_GRACE_ANNOTATION: &str = "io.kubernetes.pod.terminationGracePeriod";
/// `io.kubernetes.pod.deletionGracePeriod`
pub const POD_DELETION_GRACE_ANNOTATION: &str = "io.kubernetes.pod.deletionGracePeriod";
/// Ledgerlet's own annotation: `init` or `regular`.
pub const CONTAINER_KIND_ANNOTATION: &str = "ledgerlet.dev/container-kind";

/// Where pod logs go and what the node is called.
#[derive(Clone, Debug)]
pub struct NodeContext {
    /// Root of the kubelet log layout (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// The node's name.
    pub node_name: String,
    /// The node's IP (for `status.hostIP` references and host-network pods).
    pub node_ip: String,
    /// Where pod directories live (`<root-dir>/pods`): `emptyDir` volumes are under
    /// `<pods_dir>/<uid>/volumes/`.
    pub pods_dir: PathBuf,
    /// The cluster DNS settings pods' resolvers are formed from.
    pub dns: super::dns::DnsSettings,
    /// Mount the kubelet-managed files (`/etc/hosts`, the termination-message file) into
    /// containers: a runtime with mount namespaces. Not the embedded runtime, whose
    /// containers are host processes.
    pub managed_files: bool,
    /// A container without a seccomp profile (its own or the pod's) gets the runtime's
    /// default profile instead of `Unconfined` (kubelet `--seccomp-default`).
    pub seccomp_default: bool,
}

/// Why a container configuration could not be built (`CreateContainerConfigError`): the
/// kubelet's message, which the container's status and event show, and where in the pod
/// spec it arose, which only the ledger and the agent's log show (so a status reads as on a
/// kubelet-run node, and an operator still learns the field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The pod spec field, relative to the container (`env[0] (LATE)`), if the message does
    /// not say it.
    pub field: Option<String>,
    /// The message, in the kubelet's words where the kubelet has this error.
    pub message: String,
}

impl ConfigError {
    /// An error whose message says all.
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            field: None,
            message: message.into(),
        }
    }

    /// An error in the pod spec's `field`.
    pub fn at(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            field: Some(field.into()),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<String> for ConfigError {
    fn from(message: String) -> ConfigError {
        ConfigError::new(message)
    }
}

/// The pod's log directory: `<root>/<namespace>_<name>_<uid>`.
pub fn pod_log_dir(ctx: &NodeContext, p: &Pod) -> PathBuf {
    ctx.pod_logs_dir.join(format!(
        "{}_{}_{}",
        pod::namespace(p),
        pod::name(p),
        pod::uid_str(p)
    ))
}

/// The container's log path relative to the pod log directory: `<name>/<restart>.log`.
pub fn container_log_path(name: &str, restart_count: i32) -> String {
    format!("{name}/{restart_count}.log")
}

fn pod_labels(ctx: &NodeContext, p: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = p
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    labels.insert(POD_NAME_LABEL.into(), pod::name(p).into());
    labels.insert(POD_NAMESPACE_LABEL.into(), pod::namespace(p).into());
    labels.insert(POD_UID_LABEL.into(), pod::uid_str(p).into());
    labels.insert(MANAGED_LABEL.into(), "true".into());
    labels.insert(NODE_LABEL.into(), ctx.node_name.clone());
    labels
}

/// `generatePodSandboxConfig`.
pub fn sandbox_config(ctx: &NodeContext, p: &Pod, attempt: u32) -> v1::PodSandboxConfig {
    let spec = p.spec.clone().unwrap_or_default();
    let mut labels = pod_labels(ctx, p);
    labels.insert(CONTAINER_NAME_LABEL.into(), "POD".into());
    let annotations: HashMap<String, String> = p
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let host_network = spec.host_network.unwrap_or(false);
    // The kubelet sets a hostname only for pods with their own network (and so UTS)
    // namespace: a runtime cannot set one in the node's (runc: "unable to set hostname
    // without a private UTS namespace").
    let hostname = if host_network {
        String::new()
    } else {
        spec.hostname
            .clone()
            .unwrap_or_else(|| pod::name(p).to_string())
    };
    v1::PodSandboxConfig {
        metadata: Some(v1::PodSandboxMetadata {
            name: pod::name(p).into(),
            uid: pod::uid_str(p).into(),
            namespace: pod::namespace(p).into(),
            attempt,
        }),
        hostname: hostname.chars().take(63).collect(),
        log_directory: pod_log_dir(ctx, p).to_string_lossy().into_owned(),
        labels,
        annotations,
        linux: Some(v1::LinuxPodSandboxConfig {
            security_context: Some(super::security_context::sandbox_security_context(
                p,
                namespace_options(p),
            )),
            sysctls: super::security_context::sandbox_sysctls(p),
            cgroup_parent: super::pod_cgroups::cgroup_parent(p),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// kubelet `namespacesForPod`: the node's network/PID/IPC namespace when the pod asks for
/// it, else the pod's (PID: the container's own unless `shareProcessNamespace`).
pub fn namespace_options(p: &Pod) -> v1::NamespaceOption {
    let spec = p.spec.as_ref();
    let flag = |f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>| {
        spec.and_then(f).unwrap_or(false)
    };
    let mode = |host: bool| {
        if host {
            v1::NamespaceMode::Node as i32
        } else {
            v1::NamespaceMode::Pod as i32
        }
    };
    v1::NamespaceOption {
        network: mode(flag(|s| s.host_network)),
        pid: if flag(|s| s.host_pid) {
            v1::NamespaceMode::Node as i32
        } else if flag(|s| s.share_process_namespace) {
            v1::NamespaceMode::Pod as i32
        } else {
            v1::NamespaceMode::Container as i32
        },
        ipc: mode(flag(|s| s.host_ipc)),
        ..Default::default()
    }
}

/// kubelet `milliCPUToShares`: 1024 shares per CPU, at least 2.
pub fn milli_cpu_to_shares(milli: i64) -> i64 {
    if milli == 0 {
        return 2;
    }
    (milli * 1024 / 1000).max(2)
}

/// kubelet `milliCPUToQuota` with the 100 ms CFS period: at least 1 ms.
pub fn milli_cpu_to_quota(milli: i64, period_us: i64) -> i64 {
    if milli == 0 {
        return 0;
    }
    (milli * period_us / 1000).max(1000)
}

/// The CFS period the kubelet uses (`quotaPeriod`, 100 ms).
pub const CPU_PERIOD_US: i64 = 100_000;

fn quantity(
    c: &Container,
    which: &str,
    resource: &str,
    per_unit: i128,
) -> Result<Option<i64>, ConfigError> {
    let Some(r) = c.resources.as_ref() else {
        return Ok(None);
    };
    let list = if which == "limits" {
        &r.limits
    } else {
        &r.requests
    };
    let Some(q) = list.as_ref().and_then(|l| l.get(resource)) else {
        return Ok(None);
    };
    let nanos = crate::core::pod_status::quantity::parse_nanos(&q.0).ok_or_else(|| {
        ConfigError::new(format!(
            "container {}: resources.{which}.{resource}: {:?} is not a quantity",
            c.name, q.0
        ))
    })?;
    Ok(Some((nanos / per_unit).clamp(0, i64::MAX as i128) as i64))
}

/// kubelet `generateLinuxContainerResources` (CPU shares and quota, memory limit) and the
/// container's security context (`super::security_context`).
fn linux_config(
    ctx: &NodeContext,
    p: &Pod,
    c: &Container,
) -> Result<v1::LinuxContainerConfig, ConfigError> {
    let milli = |which| quantity(c, which, "cpu", 1_000_000);
    let cpu_request = milli("requests")?;
    let cpu_limit = milli("limits")?;
    let memory_limit = quantity(c, "limits", "memory", 1_000_000_000)?;
    let shares = milli_cpu_to_shares(cpu_request.or(cpu_limit).unwrap_or(0));
    let (cpu_quota, cpu_period) = match cpu_limit {
        Some(l) => (milli_cpu_to_quota(l, CPU_PERIOD_US), CPU_PERIOD_US),
        None => (0, 0),
    };
    let mut resources = v1::LinuxContainerResources {
        cpu_shares: shares,
        cpu_quota,
        cpu_period,
        memory_limit_in_bytes: memory_limit.unwrap_or(0),
        ..Default::default()
    };
    super::container_resources::apply_host_policy(p, c, &mut resources);
    Ok(v1::LinuxContainerConfig {
        resources: Some(resources),
        security_context: Some(super::security_context::container_security_context(
            &super::security_context::seccomp_profile_root(&ctx.pods_dir),
            ctx.seccomp_default,
            p,
            c,
            namespace_options(p),
        )?),
    })
}

/// The spec container a start refers to (an ephemeral container as the container it runs as).
pub fn spec_container<'a>(p: &'a Pod, start: &ContainerStart) -> Option<Cow<'a, Container>> {
    let spec = p.spec.as_ref()?;
    match start.kind {
        ContainerKind::Init => spec
            .init_containers
            .as_ref()?
            .get(start.index)
            .map(Cow::Borrowed),
        ContainerKind::Regular => spec.containers.get(start.index).map(Cow::Borrowed),
        ContainerKind::Ephemeral => {
            let e = spec.ephemeral_containers.as_ref()?.get(start.index)?;
            Some(Cow::Owned(pod::ephemeral_as_container(e)))
        }
    }
}

/// The runtime ID of the container an ephemeral container targets (kuberuntime
/// `getTargetID`): `None` without a `targetContainerName`; an error when the target has no
/// instance in the runtime.
fn ephemeral_target(p: &Pod, start: &ContainerStart) -> Result<Option<String>, ConfigError> {
    if start.kind != ContainerKind::Ephemeral {
        return Ok(None);
    }
    let target = p
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref()?.get(start.index))
        .and_then(|e| e.target_container_name.as_deref())
        .filter(|t| !t.is_empty());
    match (target, &start.target_container_id) {
        (None, _) => Ok(None),
        (Some(_), Some(id)) => Ok(Some(id.clone())),
        (Some(t), None) => Err(ConfigError::new(format!(
            "unable to find target container {t}"
        ))),
    }
}

/// The regular or init container of the pod named `name`.
pub fn container_named<'a>(p: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = p.spec.as_ref()?;
    let mut all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    all.find(|c| c.name == name)
}

/// `generateContainerConfig` with the env sources the shell read for this creation
/// ([`env::fetch`]; empty on a node without an API server).
pub fn container_config(
    ctx: &NodeContext,
    p: &Pod,
    start: &ContainerStart,
    pod_ip: &str,
    volumes: &super::volumes::VolumePaths,
    env_sources: &EnvSources,
) -> Result<v1::ContainerConfig, ConfigError> {
    let c = spec_container(p, start).ok_or_else(|| {
        ConfigError::new(format!(
            "pod {}/{} has no {:?} container at index {}",
            pod::namespace(p),
            pod::name(p),
            start.kind,
            start.index
        ))
    })?;
    let c: &Container = &c;
    let mut linux = linux_config(ctx, p, c)?;
    if let Some(target) = ephemeral_target(p, start)? {
        let ns = linux
            .security_context
            .get_or_insert_with(Default::default)
            .namespace_options
            .get_or_insert_with(Default::default);
        ns.pid = v1::NamespaceMode::Target as i32;
        ns.target_id = target;
    }
    let envs = env::make_environment(ctx, p, c, pod_ip, env_sources)?;
    let (command, args) = env::expand_command_and_args(c, &envs);
    let mut labels = pod_labels(ctx, p);
    labels.insert(CONTAINER_NAME_LABEL.into(), c.name.clone());
    let mut annotations = HashMap::new();
    annotations.insert(CONTAINER_HASH_ANNOTATION.into(), start.hash.clone());
    annotations.insert(
        RESTART_COUNT_ANNOTATION.into(),
        start.restart_count.to_string(),
    );
    annotations.insert(
        TERMINATION_MESSAGE_PATH_ANNOTATION.into(),
        c.termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into()),
    );
    annotations.insert(
        TERMINATION_MESSAGE_POLICY_ANNOTATION.into(),
        c.termination_message_policy
            .clone()
            .unwrap_or_else(|| "File".into()),
    );
    if let Some(g) = pod::termination_grace_period_s(p) {
        annotations.insert(POD_TERMINATION_GRACE_ANNOTATION.into(), g.to_string());
    }
    if let Some(g) = pod::deletion_grace_period_s(p) {
        annotations.insert(POD_DELETION_GRACE_ANNOTATION.into(), g.to_string());
    }
    annotations.insert(
        CONTAINER_KIND_ANNOTATION.into(),
        match start.kind {
            ContainerKind::Init => "init",
            ContainerKind::Regular => "regular",
            ContainerKind::Ephemeral => "ephemeral",
        }
        .into(),
    );
    let image = c.image.clone().unwrap_or_default();
    let mounts = mounts(p, c, volumes, &envs)?;
    Ok(v1::ContainerConfig {
        metadata: Some(v1::ContainerMetadata {
            name: c.name.clone(),
            attempt: start.restart_count.max(0) as u32,
        }),
        image: Some(v1::ImageSpec {
            image: image.clone(),
            user_specified_image: image,
            ..Default::default()
        }),
        command,
        args,
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs,
        mounts,
        labels,
        annotations,
        log_path: container_log_path(&c.name, start.restart_count),
        linux: Some(linux),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        ..Default::default()
    })
}

/// The mount's `subPath`, or its `subPathExpr` with `$(VAR)` expanded from the container's
/// environment (`ExpandContainerVolumeMounts`: a variable that is unset or empty is an error
/// naming it), with the field it came from.
fn sub_path(
    m: &k8s_openapi::api::core::v1::VolumeMount,
    envs: &[v1::KeyValue],
) -> Result<(&'static str, String), String> {
    let Some(expr) = m.sub_path_expr.as_deref().filter(|s| !s.is_empty()) else {
        let sub = m.sub_path.clone().unwrap_or_default();
        return Ok(("subPath", sub));
    };
    let vars: HashMap<&str, &str> = envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    let missing = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let expanded = env::expansion::expand(expr, |k| {
        let v = vars.get(k).copied().filter(|v| !v.is_empty());
        if v.is_none() {
            missing.borrow_mut().insert(k.to_string());
        }
        Some(v.unwrap_or(""))
    });
    let missing = missing.into_inner();
    if !missing.is_empty() {
        let names: Vec<String> = missing.into_iter().collect();
        return Err(format!("missing value for {}", names.join(", ")));
    }
    Ok(("subPathExpr", expanded))
}

/// The container's `volumeMounts` as CRI mounts of the prepared volumes' host paths
/// (`subPath`, or `subPathExpr` expanded with the container's `envs`, joined, never escaping
/// the volume, and created as a directory when missing, as the kubelet's `makeMounts`).
fn mounts(
    p: &Pod,
    c: &Container,
    volumes: &super::volumes::VolumePaths,
    envs: &[v1::KeyValue],
) -> Result<Vec<v1::Mount>, ConfigError> {
    let defined = p
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        if !defined.iter().any(|v| v.name == m.name) {
            return Err(ConfigError::new(format!(
                "container {}: volumeMounts[{i}].name: volume {:?} is not defined in spec.volumes",
                c.name, m.name
            )));
        }
        let Some(host) = volumes.get(&m.name) else {
            return Err(ConfigError::new(format!(
                "container {}: volumeMounts[{i}]: volume {:?} is not ready on the node",
                c.name, m.name
            )));
        };
        let mut host = host.clone();
        let (field, sub) = sub_path(m, envs).map_err(|e| {
            ConfigError::new(format!(
                "container {}: volumeMounts[{i}].subPathExpr: {e}",
                c.name
            ))
        })?;
        if !sub.is_empty() {
            let rel = Path::new(&sub);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(ConfigError::new(format!(
                    "container {}: volumeMounts[{i}].{field}: {sub:?} must be a relative path \
                     without '..'",
                    c.name
                )));
            }
            let volume_dir = host.clone();
            host = host.join(rel);
            // the kubelet creates a missing subPath as a directory with the volume's mode
            if std::fs::symlink_metadata(&host).is_err() {
                let mode = std::fs::metadata(&volume_dir).map_or(0o755, |m| {
                    std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
                });
                std::fs::create_dir_all(&host)
                    .and_then(|()| {
                        std::fs::set_permissions(
                            &host,
                            std::os::unix::fs::PermissionsExt::from_mode(mode),
                        )
                    })
                    .map_err(|e| {
                        ConfigError::new(format!(
                            "container {}: volumeMounts[{i}].{field}: cannot create {}: {e}",
                            c.name,
                            host.display()
                        ))
                    })?;
            }
        }
        out.push(v1::Mount {
            container_path: m.mount_path.clone(),
            host_path: host.to_string_lossy().into_owned(),
            readonly: m.read_only.unwrap_or(false),
            ..Default::default()
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(v: serde_json::Value) -> k8s_openapi::api::core::v1::VolumeMount {
        serde_json::from_value(v).unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<v1::KeyValue> {
        pairs
            .iter()
            .map(|(k, v)| v1::KeyValue {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect()
    }

    #[test]
    fn sub_path_expr_expands_the_containers_env_and_names_unset_or_empty_variables() {
        let m = mount(serde_json::json!({"name": "v", "mountPath": "/m",
            "subPathExpr": "logs/$(POD)/$(C)"}));
        let vars = env(&[("POD", "web-0"), ("C", "main"), ("EMPTY", "")]);
        assert_eq!(
            sub_path(&m, &vars).unwrap(),
            ("subPathExpr", "logs/web-0/main".to_string())
        );
        let m = mount(serde_json::json!({"name": "v", "mountPath": "/m",
            "subPathExpr": "$(NOPE)/$(EMPTY)/$(POD)"}));
        assert_eq!(
            sub_path(&m, &vars).unwrap_err(),
            "missing value for EMPTY, NOPE"
        );
        let m = mount(serde_json::json!({"name": "v", "mountPath": "/m", "subPath": "a/$(POD)"}));
        assert_eq!(
            sub_path(&m, &vars).unwrap(),
            ("subPath", "a/$(POD)".to_string())
        );
    }
}
