//! Does the pod tolerate the node's `NoExecute` taints? (`FindMatchingUntoleratedTaint` with
//! the kubelet's filter, and `Toleration.ToleratesTaint`).
//!
//! Owns the toleration rule: a toleration with an effect must have the taint's; with a key,
//! the taint's key; operator `Exists` matches any value, `Equal` (or none) the same value.
//! Must not look at `NoSchedule` or `PreferNoSchedule` taints (the scheduler's, not the
//! kubelet's) nor exempt static pods (the caller does).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// True if some `NoExecute` taint is tolerated by none of `tolerations`.
pub fn has_untolerated_no_execute(taints: &[Taint], tolerations: &[Toleration]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if tol
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if tol
        .key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match tol.operator.as_deref().unwrap_or("") {
        "" | "Equal" => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}
