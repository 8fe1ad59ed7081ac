//! The status PATCH body (`statusutil.PatchPodStatus`): a two-way strategic merge patch from
//! the API server's status to the merged one, carrying the pod's UID as a precondition.
//!
//! Owns the diff. Lists the API merges by key (`conditions` by `type`, `podIPs` and `hostIPs`
//! by `ip`, `resourceClaimStatuses` by `name`) are diffed element by element, with
//! `$patch: delete` for removed elements and `$setElementOrder` for their order, as
//! `CreateTwoWayMergePatch` does; every other list is replaced whole. Both sides are compared
//! the way the API server compares them (absent, empty and null are the same), so a status
//! the server already has yields no patch. Must not send anything.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{json, Map, Value};

use super::equality::strip_empty;

/// The merge key of a list field of `PodStatus` the API server merges by key.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "conditions" => Some("type"),
        "podIPs" | "hostIPs" => Some("ip"),
        "resourceClaimStatuses" => Some("name"),
        _ => None,
    }
}

/// The diff of two maps; `None` if they are equal. `keyed` says whether list fields of this
/// map may be merged by key (only the status object's own fields are).
fn diff_maps(old: &Map<String, Value>, new: &Map<String, Value>, keyed: bool) -> Option<Value> {
    let mut patch = Map::new();
    for (k, nv) in new {
        match old.get(k) {
            None => {
                patch.insert(k.clone(), nv.clone());
            }
            Some(ov) if ov == nv => {}
            Some(ov) => match (ov, nv) {
                (Value::Object(o), Value::Object(n)) => {
                    if let Some(d) = diff_maps(o, n, false) {
                        patch.insert(k.clone(), d);
                    }
                }
                (Value::Array(o), Value::Array(n)) if keyed && merge_key(k).is_some() => {
                    let key = merge_key(k).expect("checked");
                    match diff_keyed_list(o, n, key) {
                        Some((items, order)) => {
                            patch.insert(k.clone(), Value::Array(items));
                            patch.insert(format!("$setElementOrder/{k}"), Value::Array(order));
                        }
                        None => {
                            patch.insert(k.clone(), nv.clone());
                        }
                    }
                }
                _ => {
                    patch.insert(k.clone(), nv.clone());
                }
            },
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// The patch of a list merged by `key`: changed or new elements (changed ones as a diff with
/// their key), `$patch: delete` for removed ones, and the order of `new`. `None` if an element
/// lacks its key (then the caller replaces the list, which is always correct).
fn diff_keyed_list(old: &[Value], new: &[Value], key: &str) -> Option<(Vec<Value>, Vec<Value>)> {
    let key_of = |v: &Value| v.get(key).cloned();
    let mut items = Vec::new();
    let mut order = Vec::new();
    for n in new {
        let k = key_of(n)?;
        order.push(json!({ key: k.clone() }));
        match old.iter().find(|o| key_of(o).as_ref() == Some(&k)) {
            None => items.push(n.clone()),
            Some(o) if o == n => {}
            Some(o) => {
                let (Value::Object(om), Value::Object(nm)) = (o, n) else {
                    return None;
                };
                if let Some(Value::Object(mut d)) = diff_maps(om, nm, false) {
                    d.insert(key.to_string(), k);
                    items.push(Value::Object(d));
                }
            }
        }
    }
    for o in old {
        let k = key_of(o)?;
        if !new.iter().any(|n| key_of(n).as_ref() == Some(&k)) {
            items.push(json!({ "$patch": "delete", key: k }));
        }
    }
    Some((items, order))
}

fn status_value(s: &PodStatus) -> Map<String, Value> {
    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
    strip_empty(&mut v);
    // an empty `resources` of a container status is kept: the kubelet sends it (`{}` for a
    // container without requests or limits) and the API server stores it
    let lists = [
        ("containerStatuses", &s.container_statuses),
        ("initContainerStatuses", &s.init_container_statuses),
        (
            "ephemeralContainerStatuses",
            &s.ephemeral_container_statuses,
        ),
    ];
    for (field, typed) in lists {
        let (Some(typed), Some(Value::Array(items))) = (typed, v.get_mut(field)) else {
            continue;
        };
        for (t, item) in typed.iter().zip(items.iter_mut()) {
            if let (Some(_), Value::Object(m)) = (&t.resources, item) {
                m.entry("resources").or_insert_with(|| json!({}));
            }
        }
    }
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The body of the status PATCH that turns `current`'s status into `merged`:
/// `{"metadata":{"uid":…},"status":{…}}`, or `None` when the API server already has it
/// (upstream's `unchanged`: the patch would hold only the UID precondition).
pub fn status_patch(current: &Pod, merged: &PodStatus) -> Option<Value> {
    let old = status_value(current.status.as_ref().unwrap_or(&PodStatus::default()));
    let new = status_value(merged);
    let diff = diff_maps(&old, &new, true)?;
    Some(json!({
        "metadata": { "uid": current.metadata.uid.clone().unwrap_or_default() },
        "status": diff,
    }))
}

/// Applies a status patch made by `status_patch` to a status (the API server's side, used by
/// tests and the simulator to check a patch does what it claims).
pub fn apply_status_patch(status: &PodStatus, patch: &Value) -> Result<PodStatus, String> {
    let mut target = Value::Object(status_value(status));
    if let Some(p) = patch.get("status") {
        apply(&mut target, p, true)?;
    }
    serde_json::from_value(target).map_err(|e| e.to_string())
}

fn apply(target: &mut Value, patch: &Value, keyed: bool) -> Result<(), String> {
    let Value::Object(pm) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let tm = target.as_object_mut().expect("object");
    for (k, pv) in pm {
        if k.starts_with("$setElementOrder/") {
            continue;
        }
        match (pv, keyed.then(|| merge_key(k)).flatten()) {
            (Value::Null, _) => {
                tm.remove(k);
            }
            (Value::Array(items), Some(key)) => {
                let list = tm.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                let Value::Array(list) = list else {
                    return Err(format!("{k} is not a list"));
                };
                for item in items {
                    let kv = item.get(key).ok_or(format!("{k}: element without {key}"))?;
                    let pos = list.iter().position(|e| e.get(key) == Some(kv));
                    if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                        if let Some(i) = pos {
                            list.remove(i);
                        }
                    } else if let Some(i) = pos {
                        apply(&mut list[i], item, false)?;
                    } else {
                        list.push(item.clone());
                    }
                }
                if let Some(Value::Array(order)) = pm.get(&format!("$setElementOrder/{k}")) {
                    let rank = |e: &Value| {
                        order
                            .iter()
                            .position(|o| o.get(key) == e.get(key))
                            .unwrap_or(usize::MAX)
                    };
                    list.sort_by_key(rank);
                }
            }
            (Value::Object(_), _) => {
                let child = tm.entry(k.clone()).or_insert(Value::Null);
                apply(child, pv, false)?;
            }
            _ => {
                tm.insert(k.clone(), pv.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, ResourceRequirements};

    fn with_app(resources: Option<ResourceRequirements>) -> PodStatus {
        PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                resources,
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        }
    }

    #[test]
    fn gs_20_an_empty_resources_of_a_container_status_is_sent_and_then_unchanged() {
        let mut pod = Pod {
            status: Some(with_app(None)),
            ..Pod::default()
        };
        let merged = with_app(Some(ResourceRequirements::default()));
        let patch = status_patch(&pod, &merged).expect("a patch");
        assert_eq!(
            patch["status"]["containerStatuses"][0]["resources"],
            json!({})
        );
        // the API server stores `{}`: nothing more to send
        pod.status = Some(apply_status_patch(&with_app(None), &patch).unwrap());
        assert_eq!(status_patch(&pod, &merged), None);
    }
}
