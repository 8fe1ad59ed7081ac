//! The eviction of a pod whose `emptyDir` outgrew its `sizeLimit`, as the kubelet's eviction
//! manager does it (`localStorageEviction` → `emptyDirLimitEviction`, `evictPod`).
//!
//! Owns the verdict (the volume is an `emptyDir` of the pod with a positive `sizeLimit` that
//! the measured usage exceeds; a critical pod is never evicted), the message, and the status
//! an evicted pod ends with. Must not measure anything (the shell walks the volume and
//! reports a [`VolumeUsageObserved`]), read a clock, or kill the pod itself: it returns the
//! kill the dispatcher appends.

use k8s_openapi::api::core::v1::{Pod, PodCondition};

use super::node_shutdown::{is_critical, DISRUPTION_REASON};
use super::pod;
use super::pod_status::conditions::DISRUPTION_TARGET;
use super::pod_status::quantity::parse_nanos;
use super::record::event::VolumeUsageObserved;
use super::update::PodStatusOverride;

/// `eviction.Reason`: the status reason and the Warning event's reason of an evicted pod.
pub const REASON: &str = "Evicted";

/// The `sizeLimit` of `p`'s `emptyDir` volume `volume` in bytes, when it has a positive one.
pub fn size_limit_bytes(p: &Pod, volume: &str) -> Option<(u64, String)> {
    let v = p
        .spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find(|v| v.name == volume)?;
    let limit = v.empty_dir.as_ref()?.size_limit.as_ref()?;
    let bytes = parse_nanos(&limit.0)? / 1_000_000_000;
    (bytes > 0).then(|| (u64::try_from(bytes).unwrap_or(u64::MAX), limit.0.clone()))
}

/// `emptyDirMessageFmt`: why the pod was evicted (the kubelet's trailing space included).
pub fn message(volume: &str, limit: &str) -> String {
    format!("Usage of EmptyDir volume {volume:?} exceeds the limit {limit:?}. ")
}

/// The eviction message when `usage` of `p` calls for one: the volume is an `emptyDir`
/// whose positive `sizeLimit` the usage exceeds, and the pod is not critical (`evictPod`
/// refuses a static, mirror or system-critical pod).
pub fn verdict(p: &Pod, usage: &VolumeUsageObserved) -> Option<String> {
    let (limit_bytes, limit) = size_limit_bytes(p, &usage.volume)?;
    if usage.used_bytes <= limit_bytes || pod::is_static(p) || pod::is_mirror(p) || is_critical(p) {
        return None;
    }
    Some(message(&usage.volume, &limit))
}

/// The status an evicted pod ends with (`evictPod`'s status function): phase Failed, reason
/// `Evicted`, the message, and the `DisruptionTarget` condition (True,
/// `TerminationByKubelet`, the same message).
pub fn status_override(message: &str) -> PodStatusOverride {
    PodStatusOverride {
        phase: Some("Failed".into()),
        keep_succeeded: false,
        reason: Some(REASON.into()),
        message: Some(message.into()),
        conditions: vec![PodCondition {
            type_: DISRUPTION_TARGET.into(),
            status: "True".into(),
            reason: Some(DISRUPTION_REASON.into()),
            message: Some(message.into()),
            ..PodCondition::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::uid::Uid;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut p = serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {"containers": [{"name": "main"}], "volumes": [
                {"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}},
                {"name": "unbounded", "emptyDir": {}},
                {"name": "zero", "emptyDir": {"sizeLimit": "0"}}
            ]}
        });
        if let serde_json::Value::Object(m) = extra {
            for (k, v) in m {
                p["spec"][k] = v;
            }
        }
        serde_json::from_value(p).unwrap()
    }

    fn usage(volume: &str, used_bytes: u64) -> VolumeUsageObserved {
        VolumeUsageObserved {
            uid: Uid::new("u-1"),
            volume: volume.into(),
            used_bytes,
        }
    }

    #[test]
    fn an_empty_dir_over_its_size_limit_evicts_with_the_kubelets_message() {
        let p = pod(serde_json::json!({}));
        assert_eq!(
            verdict(&p, &usage("scratch", 1024 * 1024)),
            None,
            "at the limit"
        );
        assert_eq!(
            verdict(&p, &usage("scratch", 1024 * 1024 + 1)).as_deref(),
            Some("Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ")
        );
    }

    #[test]
    fn volumes_without_a_positive_size_limit_or_unknown_never_evict() {
        let p = pod(serde_json::json!({}));
        for v in ["unbounded", "zero", "missing"] {
            assert_eq!(verdict(&p, &usage(v, u64::MAX)), None, "{v}");
        }
    }

    #[test]
    fn a_critical_pod_is_not_evicted() {
        let p = pod(serde_json::json!({"priority": 2_000_001_000}));
        assert_eq!(verdict(&p, &usage("scratch", u64::MAX)), None);
    }

    #[test]
    fn an_evicted_pod_fails_with_the_disruption_target_condition() {
        let m = message("scratch", "1Mi");
        let o = status_override(&m);
        assert_eq!(o.phase.as_deref(), Some("Failed"));
        assert_eq!(o.reason.as_deref(), Some("Evicted"));
        assert_eq!(o.message.as_deref(), Some(m.as_str()));
        assert!(!o.keep_succeeded);
        assert_eq!(o.conditions[0].type_, "DisruptionTarget");
        assert_eq!(
            o.conditions[0].reason.as_deref(),
            Some("TerminationByKubelet")
        );
    }
}
