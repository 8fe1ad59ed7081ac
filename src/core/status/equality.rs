//! `isPodStatusByKubeletEqual` and the API's semantic equality.
//!
//! Owns the question "would the API server see a difference?": kubelet-owned and shared
//! conditions must match in status, reason and message; every other field must be
//! semantically equal (Go's `apiequality.Semantic.DeepEqual`, where an absent field, an empty
//! string, an empty list and an empty map are the same thing). Conditions the kubelet does not
//! own are ignored. Must stay cheap on the common path: a plain structural comparison answers
//! first, and only a difference falls back to the semantic comparison.

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use serde_json::Value;

use super::super::pod_status::conditions::{is_kubelet_owned, DISRUPTION_TARGET};

/// `kubetypes.PodConditionSharedByKubelet`.
pub fn is_shared_with_kubelet(condition_type: &str) -> bool {
    condition_type == DISRUPTION_TARGET
}

fn go_str(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

fn same_condition(old: &PodCondition, new: &PodCondition) -> bool {
    old.status == new.status
        && go_str(&old.reason) == go_str(&new.reason)
        && go_str(&old.message) == go_str(&new.message)
}

/// Removes what Go's semantic equality cannot see: nulls, empty strings, empty lists and
/// empty maps (recursively; a map that becomes empty is removed too).
pub fn strip_empty(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for child in m.values_mut() {
                strip_empty(child);
            }
            m.retain(|_, child| !is_empty(child));
        }
        Value::Array(a) => {
            for child in a.iter_mut() {
                strip_empty(child);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// A status as the semantic comparison sees it.
pub fn semantic_value(s: &PodStatus) -> Value {
    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
    strip_empty(&mut v);
    v
}

/// `apiequality.Semantic.DeepEqual` on two statuses.
pub fn semantically_equal(a: &PodStatus, b: &PodStatus) -> bool {
    a == b || semantic_value(a) == semantic_value(b)
}

/// `isPodStatusByKubeletEqual(old, new)`: equal when every kubelet-owned or shared condition of
/// `new` has a counterpart in `old` with the same status, reason and message, and the rest of
/// the statuses are semantically equal, ignoring conditions the kubelet does not own.
pub fn is_pod_status_by_kubelet_equal(old: &PodStatus, new: &PodStatus) -> bool {
    // The common case, answered by one structural comparison: equal statuses are equal by
    // the kubelet's rule too, because condition types are unique in a pod status (a list
    // map keyed by type, enforced by the API server, and `generate` emits each once).
    if old == new {
        return true;
    }
    for c in new.conditions.iter().flatten() {
        if is_kubelet_owned(&c.type_) || is_shared_with_kubelet(&c.type_) {
            let found = old.conditions.iter().flatten().find(|o| o.type_ == c.type_);
            if !found.is_some_and(|o| same_condition(o, c)) {
                return false;
            }
        }
    }
    // compare everything but the conditions (upstream copies new's conditions into old)
    if old.conditions == new.conditions {
        return semantically_equal(old, new);
    }
    let mut a = semantic_value(old);
    let b = semantic_value(new);
    if let Value::Object(m) = &mut a {
        m.remove("conditions");
        if let Some(c) = b.get("conditions") {
            m.insert("conditions".into(), c.clone());
        }
    }
    a == b
}
