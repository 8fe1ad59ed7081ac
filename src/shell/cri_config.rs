//! Translation of a pod spec into CRI configurations (kubelet `kuberuntime_sandbox.go`,
//! `kuberuntime_container.go`, `labels.go`).
//!
//! Owns the labels and annotations the kubelet puts on sandboxes and containers (so a
//! restarted agent recognises its containers and their spec hash and restart count), log
//! paths, environment resolution and `$(VAR)` expansion, and mounts. Must not decide what to
//! run: it translates one container of a plan the core made. Errors are
//! `CreateContainerConfigError`s that name the pod, container and field.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};

use crate::core::command::{ContainerKind, ContainerStart};
use crate::core::pod;
use crate::cri::v1;
use crate::shell::secrets::SecretValues;

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
}

/// Why a container configuration could not be built (`CreateContainerConfigError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

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
        ConfigError(format!(
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
            p,
            c,
            namespace_options(p),
        )?),
    })
}

/// The spec container a start refers to.
pub fn spec_container<'a>(p: &'a Pod, start: &ContainerStart) -> Option<&'a Container> {
    let spec = p.spec.as_ref()?;
    match start.kind {
        ContainerKind::Init => spec.init_containers.as_ref()?.get(start.index),
        ContainerKind::Regular => spec.containers.get(start.index),
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

/// `generateContainerConfig` with the `secretKeyRef` values the shell fetched (`None`: the
/// node has no API server, so a reference is an error).
pub fn container_config(
    ctx: &NodeContext,
    p: &Pod,
    start: &ContainerStart,
    pod_ip: &str,
    volumes: &super::volumes::VolumePaths,
    secrets: Option<&SecretValues>,
) -> Result<v1::ContainerConfig, ConfigError> {
    let c = spec_container(p, start).ok_or_else(|| {
        ConfigError(format!(
            "pod {}/{} has no {:?} container at index {}",
            pod::namespace(p),
            pod::name(p),
            start.kind,
            start.index
        ))
    })?;
    let envs = resolve_env(ctx, p, c, pod_ip, secrets)?;
    let env_map: BTreeMap<&str, &str> = envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    let expand_all = |v: &Option<Vec<String>>| -> Vec<String> {
        v.as_deref()
            .unwrap_or_default()
            .iter()
            .map(|s| expand(s, &env_map))
            .collect()
    };
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
        }
        .into(),
    );
    let image = c.image.clone().unwrap_or_default();
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
        command: expand_all(&c.command),
        args: expand_all(&c.args),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs,
        mounts: mounts(p, c, volumes)?,
        labels,
        annotations,
        log_path: container_log_path(&c.name, start.restart_count),
        linux: Some(linux_config(ctx, p, c)?),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        ..Default::default()
    })
}

/// The container's `volumeMounts` as CRI mounts of the prepared volumes' host paths
/// (`subPath` joined, never escaping the volume).
fn mounts(
    p: &Pod,
    c: &Container,
    volumes: &super::volumes::VolumePaths,
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
            return Err(ConfigError(format!(
                "container {}: volumeMounts[{i}].name: volume {:?} is not defined in spec.volumes",
                c.name, m.name
            )));
        }
        let Some(host) = volumes.get(&m.name) else {
            return Err(ConfigError(format!(
                "container {}: volumeMounts[{i}]: volume {:?} is not ready on the node",
                c.name, m.name
            )));
        };
        let mut host = host.clone();
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            let rel = Path::new(sub);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(ConfigError(format!(
                    "container {}: volumeMounts[{i}].subPath: {sub:?} must be a relative path \
                     without '..'",
                    c.name
                )));
            }
            host = host.join(rel);
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

/// Environment variables in order, with `valueFrom` resolved where the node can, and
/// `$(VAR)` references to earlier variables expanded (kubelet `makeEnvironmentVariables`).
fn resolve_env(
    ctx: &NodeContext,
    p: &Pod,
    c: &Container,
    pod_ip: &str,
    secrets: Option<&SecretValues>,
) -> Result<Vec<v1::KeyValue>, ConfigError> {
    let mut resolved: Vec<v1::KeyValue> = Vec::new();
    for (i, e) in c.env.iter().flatten().enumerate() {
        let secret_ref = e
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref());
        let value = match (secret_ref, secrets) {
            (Some(r), Some(values)) => match values.get(&(r.name.clone(), r.key.clone())) {
                Some(v) => v.clone(),
                // an optional reference the resolver found nothing for: the variable is unset
                None if r.optional == Some(true) => continue,
                None => {
                    return Err(ConfigError(format!(
                        "container {}: env[{i}] ({}): key {} of Secret {} was not resolved",
                        c.name, e.name, r.key, r.name
                    )))
                }
            },
            _ => env_value(ctx, p, c, e, i, pod_ip)?,
        };
        let known: BTreeMap<&str, &str> = resolved
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
            .collect();
        let value = expand(&value, &known);
        resolved.retain(|kv| kv.key != e.name);
        resolved.push(v1::KeyValue {
            key: e.name.clone(),
            value,
        });
    }
    Ok(resolved)
}

fn env_value(
    ctx: &NodeContext,
    p: &Pod,
    c: &Container,
    e: &EnvVar,
    i: usize,
    pod_ip: &str,
) -> Result<String, ConfigError> {
    let Some(from) = &e.value_from else {
        return Ok(e.value.clone().unwrap_or_default());
    };
    let field = |what: &str| format!("container {}: env[{i}] ({}): {what}", c.name, e.name);
    if let Some(f) = &from.field_ref {
        let v = match f.field_path.as_str() {
            "metadata.name" => pod::name(p).to_string(),
            "metadata.namespace" => pod::namespace(p).to_string(),
            "metadata.uid" => pod::uid_str(p).to_string(),
            "spec.nodeName" => ctx.node_name.clone(),
            "spec.serviceAccountName" => p
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_default(),
            "status.podIP" | "status.podIPs" => pod_ip.to_string(),
            "status.hostIP" | "status.hostIPs" => ctx.node_ip.clone(),
            other => {
                if let Some(key) = other
                    .strip_prefix("metadata.labels['")
                    .and_then(|k| k.strip_suffix("']"))
                {
                    p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(key).cloned())
                        .unwrap_or_default()
                } else if let Some(key) = other
                    .strip_prefix("metadata.annotations['")
                    .and_then(|k| k.strip_suffix("']"))
                {
                    p.metadata
                        .annotations
                        .as_ref()
                        .and_then(|l| l.get(key).cloned())
                        .unwrap_or_default()
                } else {
                    return Err(ConfigError(field(&format!(
                        "fieldRef {other:?} is not supported"
                    ))));
                }
            }
        };
        return Ok(v);
    }
    if from.config_map_key_ref.is_some() {
        return Err(ConfigError(field("configMapKeyRef is not supported yet")));
    }
    if from.secret_key_ref.is_some() {
        return Err(ConfigError(field(
            "secretKeyRef needs the API server, which this node does not use (standalone \
             mode: no --kubeconfig)",
        )));
    }
    if from.resource_field_ref.is_some() {
        return Err(ConfigError(field("resourceFieldRef is not supported yet")));
    }
    Ok(String::new())
}

/// Kubernetes `$(VAR)` expansion: `$(NAME)` becomes the value of a known variable, `$$`
/// escapes a `$`, anything else is left as written.
pub fn expand(s: &str, vars: &BTreeMap<&str, &str>) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'(' {
                if let Some(end) = s[i + 2..].find(')') {
                    let name = &s[i + 2..i + 2 + end];
                    if let Some(v) = vars.get(name) {
                        out.push_str(v);
                    } else {
                        out.push_str(&s[i..i + 3 + end]);
                    }
                    i += 3 + end;
                    continue;
                }
            }
        }
        let ch = s[i..].chars().next().expect("in bounds");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_expansion_follows_kubernetes_rules() {
        let vars = BTreeMap::from([("A", "1"), ("B", "two")]);
        assert_eq!(expand("$(A)-$(B)", &vars), "1-two");
        assert_eq!(expand("$$(A)", &vars), "$(A)");
        assert_eq!(expand("$(C)", &vars), "$(C)");
        assert_eq!(expand("$(unterminated", &vars), "$(unterminated");
        assert_eq!(expand("é$(A)$", &vars), "é1$");
    }
}
