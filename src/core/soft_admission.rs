//! Soft admission (kubelet `canRunPod` and its soft admit handlers): may an admitted pod
//! start now? Today the one soft handler is AppArmor's (`lifecycle.NewAppArmorAdmitHandler`
//! over `apparmor.Validator`): a pod whose containers ask for an AppArmor profile other than
//! `Unconfined` cannot run on a host without AppArmor.
//!
//! Owns the AppArmor profile a container asks for (`apparmor.GetProfile`) and the verdict.
//! Must not change state nor know how the host was probed: the shell sets
//! `CoreConfig::apparmor_enabled`; `kubelet_sync` holds a refused pod Pending.

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod, SecurityContext};

use super::config::CoreConfig;

/// The annotation prefix of the deprecated per-container AppArmor profile
/// (`container.apparmor.security.beta.kubernetes.io/<container>`).
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The reason of an AppArmor refusal (`Blocked` containers, pod Pending).
pub const APPARMOR_REASON: &str = "AppArmor";

/// The waiting reason of the containers of a pod that cannot run.
pub const BLOCKED: &str = "Blocked";

/// `apparmor.GetProfile`: the container's field, else its deprecated annotation, else the
/// pod's field.
pub fn apparmor_profile(
    p: &Pod,
    name: &str,
    sc: Option<&SecurityContext>,
) -> Option<AppArmorProfile> {
    if let Some(a) = sc.and_then(|s| s.app_armor_profile.clone()) {
        return Some(a);
    }
    let annotation = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{APPARMOR_ANNOTATION_PREFIX}{name}")));
    if let Some(value) = annotation {
        let (type_, localhost) = match value.as_str() {
            "runtime/default" => ("RuntimeDefault", None),
            "unconfined" => ("Unconfined", None),
            other => match other.strip_prefix("localhost/") {
                Some(l) => ("Localhost", Some(l.to_string())),
                None => (other, None),
            },
        };
        return Some(AppArmorProfile {
            type_: type_.into(),
            localhost_profile: localhost,
        });
    }
    p.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .app_armor_profile
        .clone()
}

/// The profile container `c` asks for.
pub fn container_apparmor_profile(p: &Pod, c: &Container) -> Option<AppArmorProfile> {
    apparmor_profile(p, &c.name, c.security_context.as_ref())
}

/// The AppArmor validator's `isRequired`: a container (init, regular or ephemeral) asks for
/// a profile other than `Unconfined`.
pub fn requires_apparmor(p: &Pod) -> bool {
    let Some(spec) = p.spec.as_ref() else {
        return false;
    };
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| (c.name.as_str(), c.security_context.as_ref()));
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.security_context.as_ref()));
    containers
        .chain(ephemeral)
        .filter_map(|(name, sc)| apparmor_profile(p, name, sc))
        .any(|a| a.type_ != "Unconfined")
}

/// `canRunPod`: `None` if the pod may run, else the (reason, message) it is held with.
pub fn can_run_pod(config: &CoreConfig, p: &Pod) -> Option<(&'static str, String)> {
    if requires_apparmor(p) && !config.apparmor_enabled {
        return Some((
            APPARMOR_REASON,
            "Cannot enforce AppArmor: AppArmor is not enabled on the host".into(),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_pod_asking_for_apparmor_cannot_run_on_a_host_without_it() {
        let asks = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "securityContext": {
                "appArmorProfile": {"type": "RuntimeDefault"}}}]}
        }));
        let by_annotation = pod(serde_json::json!({
            "metadata": {"name": "p", "annotations": {
                "container.apparmor.security.beta.kubernetes.io/c": "localhost/x"}},
            "spec": {"containers": [{"name": "c"}]}
        }));
        let unconfined = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                     "containers": [{"name": "c"}]}
        }));
        let without = CoreConfig::default();
        let with = CoreConfig {
            apparmor_enabled: true,
            ..CoreConfig::default()
        };
        for p in [&asks, &by_annotation] {
            let (reason, message) = can_run_pod(&without, p).unwrap();
            assert_eq!(reason, "AppArmor");
            assert_eq!(
                message,
                "Cannot enforce AppArmor: AppArmor is not enabled on the host"
            );
            assert_eq!(can_run_pod(&with, p), None);
        }
        assert_eq!(can_run_pod(&without, &unconfined), None);
    }
}
