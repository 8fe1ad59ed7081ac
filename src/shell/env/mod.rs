//! A container's environment as the kubelet builds it (`makeEnvironmentVariables`), and the
//! `$(VAR)` expansion of its `command` and `args` (`ExpandContainerCommandAndArgs`).
//!
//! Owns the order: `envFrom` sources first (each key, with its `prefix`, set in turn), then
//! `env` in declaration order (a later entry replaces an earlier one of the same name), then
//! the service-link variables no other variable set. A literal `value` is expanded against
//! the variables set so far and the service links; a `valueFrom` value is not expanded.
//! Errors are the kubelet's messages (`CreateContainerConfigError`), with the field beside them.
//!
//! Pure: [`make_environment`] reads only the pod and the [`EnvSources`] that [`fetch`]
//! read for this container creation. Must not read the API, log, or put a value of a Secret
//! in an error (values never appear in errors at all).

pub mod expansion;
pub mod fetch;
pub mod service_links;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::core::pod;
use crate::cri::v1;
use crate::shell::cri_config::{ConfigError, NodeContext};

pub use expansion::expand;

/// The keys of one ConfigMap or Secret as env sees them (`None`: the object does not
/// exist).
pub type EnvKeys = Option<BTreeMap<String, String>>;

/// What a container's env refers to, read for one container creation. Its `Debug` shows
/// names only, never a value.
#[derive(Clone, Default)]
pub struct EnvSources {
    /// False on a node without an API server (standalone): a ConfigMap or Secret reference
    /// is an error, and there are no service links.
    pub joined: bool,
    /// The ConfigMaps the env names, by name.
    pub config_maps: BTreeMap<String, EnvKeys>,
    /// The Secrets the env names, by name (values registered with the redactor).
    pub secrets: BTreeMap<String, EnvKeys>,
    /// The service-link variables.
    pub service_env: BTreeMap<String, String>,
    /// The node's allocatable, read when a `resourceFieldRef` names an unset limit.
    pub allocatable: Option<BTreeMap<String, Quantity>>,
}

impl std::fmt::Debug for EnvSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvSources")
            .field("joined", &self.joined)
            .field("config_maps", &self.config_maps.keys().collect::<Vec<_>>())
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("service_env", &self.service_env.len())
            .finish()
    }
}

/// Which kind of object a reference reads.
#[derive(Clone, Copy)]
enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    /// The kind as the kubelet's messages name it, the resource as the API's NotFound error
    /// names it, and the field as a pod spec names it (`configMap`Ref, `secret`Ref).
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Kind::ConfigMap => ("ConfigMap", "configmap", "configMap"),
            Kind::Secret => ("Secret", "secret", "secret"),
        }
    }
}

/// The keys of `name`, `Ok(None)` when it does not exist and the reference is optional
/// (the kubelet's `continue`), or the kubelet's error.
fn keys_of<'a>(
    p: &Pod,
    src: &'a EnvSources,
    kind: Kind,
    name: &str,
    optional: bool,
) -> Result<Option<&'a BTreeMap<String, String>>, String> {
    let (_, resource, field) = kind.names();
    let ns = pod::namespace(p);
    if !src.joined {
        return Err(format!(
            "couldn't get {field} {ns}/{name}, no kubeClient defined"
        ));
    }
    let map = match kind {
        Kind::ConfigMap => &src.config_maps,
        Kind::Secret => &src.secrets,
    };
    match map.get(name) {
        Some(Some(keys)) => Ok(Some(keys)),
        Some(None) if optional => Ok(None),
        Some(None) => Err(format!("{resource} \"{name}\" not found")),
        None => Err(format!(
            "{field} {ns}/{name} was not read for this container"
        )),
    }
}

/// The value of `env[i]`: `Ok(None)` when an optional source has nothing (the variable is
/// left out).
fn value_from(
    ctx: &NodeContext,
    p: &Pod,
    c: &Container,
    e: &EnvVar,
    pod_ip: &str,
    src: &EnvSources,
) -> Result<Option<String>, String> {
    let Some(from) = &e.value_from else {
        return Ok(Some(String::new()));
    };
    if let Some(f) = &from.field_ref {
        return field_ref(ctx, p, &f.field_path, pod_ip).map(Some);
    }
    if let Some(r) = &from.resource_field_ref {
        let alloc = src.allocatable.as_ref();
        return crate::shell::resource_field::value(p, Some(c), r, alloc).map(Some);
    }
    let (kind, name, key, optional) = if let Some(r) = &from.config_map_key_ref {
        (Kind::ConfigMap, &r.name, &r.key, r.optional)
    } else if let Some(r) = &from.secret_key_ref {
        (Kind::Secret, &r.name, &r.key, r.optional)
    } else {
        return Ok(Some(String::new()));
    };
    let optional = optional.unwrap_or(false);
    let Some(keys) = keys_of(p, src, kind, name, optional)? else {
        return Ok(None);
    };
    match keys.get(key) {
        Some(v) => Ok(Some(v.clone())),
        None if optional => Ok(None),
        None => Err(format!(
            "couldn't find key {key} in {} {}/{name}",
            kind.names().0,
            pod::namespace(p)
        )),
    }
}

/// The value of an env `fieldRef` (kubelet `podFieldSelectorRuntimeValue`). The node has one
/// IPv4 address and its pods one IP, so the plural fields hold one address each (the
/// kubelet joins several with `,`).
pub fn field_ref(ctx: &NodeContext, p: &Pod, path: &str, pod_ip: &str) -> Result<String, String> {
    let spec = p.spec.as_ref();
    Ok(match path {
        "spec.nodeName" => spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| ctx.node_name.clone()),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => ctx.node_ip.clone(),
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        _ => crate::shell::projected::downward_field(p, path)
            .map_err(|_| format!("field label not supported: {path}"))?,
    })
}

/// The container's environment (kubelet `makeEnvironmentVariables`), in a stable order:
/// variables in the order they were first set, then the remaining service links by name.
pub fn make_environment(
    ctx: &NodeContext,
    p: &Pod,
    c: &Container,
    pod_ip: &str,
    src: &EnvSources,
) -> Result<Vec<v1::KeyValue>, ConfigError> {
    // the kubelet's tmpEnv, and the order in which its names were first set
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut set = |values: &mut BTreeMap<String, String>, k: String, v: String| {
        if values.insert(k.clone(), v).is_none() {
            order.push(k);
        }
    };
    for (i, from) in c.env_from.iter().flatten().enumerate() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let (kind, name, optional) = if let Some(r) = &from.config_map_ref {
            (Kind::ConfigMap, &r.name, r.optional)
        } else if let Some(r) = &from.secret_ref {
            (Kind::Secret, &r.name, r.optional)
        } else {
            continue;
        };
        let field = kind.names().2;
        let keys = keys_of(p, src, kind, name, optional.unwrap_or(false))
            .map_err(|e| ConfigError::at(format!("envFrom[{i}].{field}Ref"), e))?;
        for (k, v) in keys.into_iter().flatten() {
            set(&mut values, format!("{prefix}{k}"), v.clone());
        }
    }
    for (i, e) in c.env.iter().flatten().enumerate() {
        let literal = e.value.as_deref().unwrap_or_default();
        let value = if !literal.is_empty() {
            let mapping = |k: &str| values.get(k).or_else(|| src.service_env.get(k));
            expand(literal, |k| mapping(k).map(String::as_str))
        } else {
            let value = value_from(ctx, p, c, e, pod_ip, src)
                .map_err(|m| ConfigError::at(format!("env[{i}] ({})", e.name), m))?;
            let Some(value) = value else { continue };
            value
        };
        set(&mut values, e.name.clone(), value);
    }
    let links = src
        .service_env
        .iter()
        .filter(|(k, _)| !values.contains_key(*k));
    let links: Vec<v1::KeyValue> = links
        .map(|(k, v)| v1::KeyValue {
            key: k.clone(),
            value: v.clone(),
        })
        .collect();
    let mut out: Vec<v1::KeyValue> = order
        .into_iter()
        .map(|key| {
            let value = values.remove(&key).unwrap_or_default();
            v1::KeyValue { key, value }
        })
        .collect();
    out.extend(links);
    Ok(out)
}

/// `command` and `args` with references to the final environment expanded
/// (`ExpandContainerCommandAndArgs`).
pub fn expand_command_and_args(c: &Container, env: &[v1::KeyValue]) -> (Vec<String>, Vec<String>) {
    let vars: BTreeMap<&str, &str> = env
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    let all = |v: &Option<Vec<String>>| -> Vec<String> {
        v.iter()
            .flatten()
            .map(|s| expand(s, |k| vars.get(k).copied()))
            .collect()
    };
    (all(&c.command), all(&c.args))
}

#[cfg(test)]
mod tests;
