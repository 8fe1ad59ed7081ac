//! Read-only questions about a Kubernetes `Pod` that the kubelet asks everywhere.
//!
//! Owns the annotation names and the helpers (`full_name`, `is_static`, `is_mirror`,
//! phase checks). Must not mutate pods: pods in events are shared behind `Arc`.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod};

use super::uid::Uid;

/// Annotation naming the config source of a pod (`file`, `http`, `api`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Annotation present on mirror pods (value: the static pod's hash).
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Annotation with the hash of a static pod's manifest.
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Annotation with the time a source first saw this version of a pod (RFC 3339).
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";

/// The API's default `terminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_S: i64 = 30;

/// The pod's UID (empty if missing; sources reject such pods before they reach the core).
pub fn uid(pod: &Pod) -> Uid {
    Uid::new(pod.metadata.uid.as_deref().unwrap_or(""))
}

/// The pod's UID as text, without allocating (maps keyed by `Uid` accept `&str`).
pub fn uid_str(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

/// The pod's name.
pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// The pod's namespace.
pub fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("")
}

/// `kubecontainer.BuildPodFullName`: `name_namespace`.
pub fn build_full_name(name: &str, namespace: &str) -> String {
    let mut s = String::with_capacity(name.len() + namespace.len() + 1);
    s.push_str(name);
    s.push('_');
    s.push_str(namespace);
    s
}

/// `kubecontainer.GetPodFullName`.
pub fn full_name(pod: &Pod) -> String {
    build_full_name(name(pod), namespace(pod))
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `kubetypes.IsStaticPod`: the pod did not come from the API server.
pub fn is_static(pod: &Pod) -> bool {
    matches!(annotation(pod, CONFIG_SOURCE_ANNOTATION), Some(s) if s != "api")
}

/// `kubetypes.IsMirrorPod`: the API-side mirror of a static pod.
pub fn is_mirror(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION).is_some()
}

/// The pod's `status.phase`, or "" if unset.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// True for the terminal phases `Succeeded` and `Failed`.
pub fn is_phase_terminal(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

/// True if the pod's API phase is terminal.
pub fn has_terminal_phase(pod: &Pod) -> bool {
    is_phase_terminal(phase(pod))
}

/// True if the pod has a `deletionTimestamp` (graceful deletion started).
pub fn is_deleted(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `metadata.deletionGracePeriodSeconds`.
pub fn deletion_grace_period_s(pod: &Pod) -> Option<i64> {
    pod.metadata.deletion_grace_period_seconds
}

/// `spec.terminationGracePeriodSeconds` as set (no defaulting).
pub fn termination_grace_period_s(pod: &Pod) -> Option<i64> {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
}

/// The number of app containers in the spec.
pub fn container_count(pod: &Pod) -> usize {
    pod.spec.as_ref().map_or(0, |s| s.containers.len())
}

/// An ephemeral container as the container it runs as (the kubelet's
/// `(*v1.Container)(&ec.EphemeralContainerCommon)`): every field but `targetContainerName`.
pub fn ephemeral_as_container(ec: &EphemeralContainer) -> Container {
    let ec = ec.clone();
    Container {
        args: ec.args,
        command: ec.command,
        env: ec.env,
        env_from: ec.env_from,
        image: ec.image,
        image_pull_policy: ec.image_pull_policy,
        lifecycle: ec.lifecycle,
        liveness_probe: ec.liveness_probe,
        name: ec.name,
        ports: ec.ports,
        readiness_probe: ec.readiness_probe,
        resize_policy: ec.resize_policy,
        resources: ec.resources,
        restart_policy: ec.restart_policy,
        restart_policy_rules: ec.restart_policy_rules,
        security_context: ec.security_context,
        startup_probe: ec.startup_probe,
        stdin: ec.stdin,
        stdin_once: ec.stdin_once,
        termination_message_path: ec.termination_message_path,
        termination_message_policy: ec.termination_message_policy,
        tty: ec.tty,
        volume_devices: ec.volume_devices,
        volume_mounts: ec.volume_mounts,
        working_dir: ec.working_dir,
    }
}

/// The pod's ephemeral containers as containers, in spec order.
pub fn ephemeral_containers(pod: &Pod) -> Vec<Container> {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .map(ephemeral_as_container)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn with_source(source: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                annotations: source.map(|s| {
                    BTreeMap::from([(CONFIG_SOURCE_ANNOTATION.to_string(), s.to_string())])
                }),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn static_means_a_source_other_than_the_api() {
        assert!(is_static(&with_source(Some("file"))));
        assert!(is_static(&with_source(Some("http"))));
        assert!(!is_static(&with_source(Some("api"))));
        assert!(!is_static(&with_source(None)));
        assert_eq!(full_name(&with_source(None)), "web_ns");
    }
}
