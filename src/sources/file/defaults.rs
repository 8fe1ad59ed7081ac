//! Defaulting of a static pod: the kubelet's `applyDefaults` (pkg/kubelet/config/common.go)
//! plus the API defaults a node agent relies on, since no API server defaults these pods.
//!
//! Owns the UID derivation and every value a manifest may leave out. Must not validate
//! (see `validate`) and must not read a clock: the `config.seen` time comes from the caller.
//!
//! The UID, unless `metadata.uid` is set, is the MD5 (as 32 lower-case hex characters) of,
//! each prefixed by its length as a little-endian u64: the node name, the file path as
//! configured, the document index in decimal, and the canonical content — the decoded Pod
//! serialised to JSON before any defaulting. Whitespace, comments, key order and YAML style
//! therefore do not change the UID; any change of a value does, so an edited manifest is a
//! new pod (as in the kubelet, which hashes the decoded pod, the node and the file name).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};

use crate::core::config::PodSource;
use crate::core::pod::{
    CONFIG_HASH_ANNOTATION, CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION,
    DEFAULT_TERMINATION_GRACE_PERIOD_S,
};
use crate::core::record::Time;
use md5::{Digest, Md5};

/// `corev1.DefaultTerminationMessagePath`.
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// The UID of the pod decoded from `document` of `path` on `node_name`, as described in the
/// module documentation. `pod` must be as decoded (not yet defaulted).
pub fn generated_uid(pod: &Pod, path: &Path, document: usize, node_name: &str) -> String {
    let mut h = Md5::new();
    // each field preceded by its length, so that consecutive fields cannot run together
    let mut field = |data: &[u8]| {
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
    };
    field(node_name.as_bytes());
    field(path.as_os_str().as_encoded_bytes());
    field(document.to_string().as_bytes());
    // Serialising a k8s-openapi object is deterministic: fields in declaration order, maps
    // are BTreeMaps. It cannot fail (no non-string map keys, no non-finite floats).
    field(&serde_json::to_vec(pod).unwrap_or_default());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Applies the static pod defaults to `pod`, decoded from `document` of `path`.
pub fn apply_defaults(pod: &mut Pod, path: &Path, document: usize, node_name: &str, seen: Time) {
    let uid = match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_owned(),
        _ => generated_uid(pod, path, document, node_name),
    };
    let meta = &mut pod.metadata;
    meta.uid = Some(uid.clone());
    // generatePodName: left empty here when missing, so validation reports it as required.
    if let Some(name) = meta.name.as_mut().filter(|n| !n.is_empty()) {
        name.push('-');
        name.push_str(&node_name.to_lowercase());
    }
    if meta.namespace.as_deref().unwrap_or("").is_empty() {
        meta.namespace = Some("default".into());
    }
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), uid);
    annotations.insert(
        CONFIG_SOURCE_ANNOTATION.into(),
        PodSource::File.annotation_value().into(),
    );
    annotations.insert(CONFIG_SEEN_ANNOTATION.into(), seen.to_string());

    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.node_name = Some(node_name.to_owned());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD_S);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    for c in spec.containers.iter_mut() {
        default_container(c);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_container(c);
    }

    pod.status.get_or_insert_with(PodStatus::default).phase = Some("Pending".into());
}

fn default_container(c: &mut Container) {
    if c.image_pull_policy.is_none() {
        c.image_pull_policy = Some(default_pull_policy(c.image.as_deref().unwrap_or("")).into());
    }
    c.termination_message_path
        .get_or_insert_with(|| DEFAULT_TERMINATION_MESSAGE_PATH.into());
    c.termination_message_policy
        .get_or_insert_with(|| "File".into());
    for p in c.ports.iter_mut().flatten() {
        p.protocol.get_or_insert_with(|| "TCP".into());
    }
}

/// `Always` when the image's tag is `latest` or absent (and it has no digest), else
/// `IfNotPresent` (the API's `SetDefaults_Container`).
pub fn default_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    // The tag is after a ':' in the last path component (a ':' before a '/' is a port).
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':').map(|(_, tag)| tag) {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if digest.is_some() => "IfNotPresent",
        None => "Always",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_is_always_only_for_latest_or_untagged_images() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(default_pull_policy("localhost:5000/app"), "Always");
        assert_eq!(default_pull_policy("localhost:5000/app:v2"), "IfNotPresent");
        assert_eq!(default_pull_policy("app@sha256:abcd"), "IfNotPresent");
        assert_eq!(default_pull_policy("app:latest@sha256:abcd"), "Always");
        assert_eq!(default_pull_policy(""), "Always");
    }
}
