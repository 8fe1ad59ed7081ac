//! Does the node match the pod's `nodeSelector` and its required node affinity?
//! (`nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)` of
//! `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`).
//!
//! Owns the matching rules: every `nodeSelector` label must be equal on the node; then at
//! least one `nodeSelectorTerms` entry must match, a term matching when all its
//! `matchExpressions` (on labels: `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`) and
//! `matchFields` (`metadata.name` with `In`/`NotIn`) hold; an empty or malformed term
//! matches nothing. Must not look at preferred affinity or at anything but labels and name.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};

/// True if the node (`name`, `labels`) satisfies the pod's required node affinity.
pub fn matches(pod: &Pod, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(selector) => selector
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, name, labels)),
    }
}

fn term_matches(term: &NodeSelectorTerm, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| field_matches(r, name))
}

fn requirement_matches(r: &NodeSelectorRequirement, label: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => !values.is_empty() && label.is_some_and(|l| values.iter().any(|v| v == l)),
        "NotIn" => !values.is_empty() && label.is_none_or(|l| values.iter().all(|v| v != l)),
        "Exists" => values.is_empty() && label.is_some(),
        "DoesNotExist" => values.is_empty() && label.is_none(),
        op @ ("Gt" | "Lt") => {
            let [bound] = values else {
                return false;
            };
            let (Ok(bound), Some(Ok(have))) =
                (bound.parse::<i64>(), label.map(|l| l.parse::<i64>()))
            else {
                return false;
            };
            if op == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// `matchFields`: only `metadata.name`, with `In` or `NotIn` and exactly one value.
fn field_matches(r: &NodeSelectorRequirement, name: &str) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    if r.key != "metadata.name" || values.len() != 1 {
        return false;
    }
    match r.operator.as_str() {
        "In" => values[0] == name,
        "NotIn" => values[0] != name,
        _ => false,
    }
}
