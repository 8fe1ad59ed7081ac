//! `ledgerlet diff FILE SEQ1 SEQ2 --pod NS/NAME`: what changed in one pod's state between
//! two points of a ledger.
//!
//! Owns the pod's view at a point (its worker, its API status, the runtime's view of it and
//! its containers' probe results) and a field-by-field diff of two views, plus a count of
//! the records about the pod in between. Must not talk to anything: one pass of folding.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;

use serde_json::{json, Value};

use crate::core::record::Time;
use crate::core::{pod, Node, Uid};
use crate::ledger::filter::{PodSelector, RecordFilter};
use crate::postmortem::replay::{replay_with, Fold, ReplayError, Until};

/// Why a diff could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The ledger could not be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The points are not in the ledger.
    #[error("{0}")]
    Range(String),
}

/// The UID the selector means in `node` (a live pod first, then a worker).
pub fn resolve(node: &Node, sel: &PodSelector) -> Option<Uid> {
    match sel {
        PodSelector::Uid(u) => Some(u.clone()),
        PodSelector::Name { namespace, name } => {
            let full = pod::build_full_name(name, namespace);
            node.pod_manager
                .iter()
                .find(|(_, p)| pod::full_name(p) == full)
                .map(|(u, _)| u.clone())
                .or_else(|| {
                    node.pod_workers
                        .statuses()
                        .find(|(_, s)| s.fullname == full)
                        .map(|(u, _)| u.clone())
                })
        }
    }
}

/// The selector as a user writes it: the UID, or `namespace/name`.
pub fn selector_text(sel: &PodSelector) -> String {
    match sel {
        PodSelector::Uid(u) => u.to_string(),
        PodSelector::Name { namespace, name } => format!("{namespace}/{name}"),
    }
}

/// The pod's state in `node`, as JSON: `worker`, `api_status`, `runtime`, `probes`.
pub fn view(node: &Node, uid: &Uid) -> Value {
    let worker = node
        .pod_workers
        .statuses()
        .find(|(u, _)| *u == uid)
        .map(|(_, s)| serde_json::to_value(s).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let api_status = node
        .statuses
        .get(uid)
        .map(|v| json!({"version": v.version, "changed_at": v.changed_at, "status": &*v.status}))
        .unwrap_or(Value::Null);
    let runtime = node.runtime.get(uid).ok();
    let probes: BTreeMap<String, Value> = runtime
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            (
                format!("{} ({})", c.name, c.id),
                serde_json::to_value(node.probes.get(&c.id)).unwrap_or(Value::Null),
            )
        })
        .collect();
    json!({
        "worker": worker,
        "api_status": api_status,
        "runtime": runtime.map(|s| serde_json::to_value(&*s).unwrap_or(Value::Null)),
        "probes": probes,
    })
}

/// The changes from `a` to `b`, one `path: old -> new` line each (absent values shown as
/// `(absent)`), in path order.
pub fn changes(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("", a, b, &mut out);
    out
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match v {
        Value::Null => "(absent)".into(),
        _ if s.chars().count() > 160 => format!("{}…", s.chars().take(160).collect::<String>()),
        _ => s,
    }
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    let empty = serde_json::Map::new();
    let as_object = |v: &Value| match v {
        Value::Object(m) => Some(m.clone()),
        Value::Null => Some(empty.clone()),
        _ => None,
    };
    if a.is_object() || b.is_object() {
        if let (Some(x), Some(y)) = (as_object(a), as_object(b)) {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                walk(
                    &join(k),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
            return;
        }
    }
    match (a, b) {
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                walk(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push(format!(
            "{}: {} -> {}",
            if path.is_empty() { "(pod)" } else { path },
            short(a),
            short(b)
        )),
    }
}

/// A pod's view at one point.
struct Point {
    seq: u64,
    at: Time,
    uid: Option<Uid>,
    view: Value,
}

impl Point {
    /// The view of the pod `uid` (if known) in `node`, after record `seq` at `at`.
    fn of(node: &Node, seq: u64, at: Time, uid: Option<Uid>) -> Point {
        let view = uid.as_ref().map_or(Value::Null, |u| view(node, u));
        Point { seq, at, uid, view }
    }
}

/// Folds `input` to `seq2` and describes what changed for `sel` since `seq1`.
pub fn diff(
    input: impl BufRead + Send,
    seq1: u64,
    seq2: u64,
    sel: &PodSelector,
) -> Result<String, DiffError> {
    if seq1 >= seq2 {
        return Err(DiffError::Range(format!(
            "SEQ1 ({seq1}) must be before SEQ2 ({seq2})"
        )));
    }
    let mut base = 0;
    let mut first: Option<Point> = None;
    let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut filter = RecordFilter::new(Some(sel.clone()), Vec::new());
    let mut last_seen = 0;
    let replayed = replay_with(input, Some(Until::Seq(seq2)), |f| match f {
        Fold::Snapshot { seq } => base = seq,
        Fold::Record { node, record, .. } => {
            last_seen = record.seq;
            let selected = filter.matches(record);
            if record.seq == seq1 {
                first = Some(Point::of(node, seq1, record.at, resolve(node, sel)));
            } else if record.seq > seq1 && selected {
                *kinds.entry(record.event.kind()).or_default() += 1;
            }
        }
    })?;
    let Some(first) = first else {
        return Err(DiffError::Range(if seq1 <= base {
            format!("record {seq1} is before the start of this ledger (its snapshot is at seq {base}); pick SEQ1 > {base}")
        } else {
            format!("record {seq1} is not in this ledger (it ends at seq {last_seen})")
        }));
    };
    if last_seen < seq2 {
        return Err(DiffError::Range(format!(
            "record {seq2} is not in this ledger (it ends at seq {last_seen})"
        )));
    }
    let node = &replayed.node;
    let uid = resolve(node, sel).or(first.uid.clone());
    let second = Point::of(node, seq2, node.last_at, uid);
    let mut s = String::new();
    let who = selector_text(sel);
    let uid_text = second
        .uid
        .as_ref()
        .map_or("not known at either point".to_string(), |u| {
            format!("uid {u}")
        });
    let _ = writeln!(
        s,
        "pod {who} ({uid_text}) from record {} ({}) to record {} ({})",
        first.seq,
        first.at.to_rfc3339_nanos(),
        second.seq,
        second.at.to_rfc3339_nanos()
    );
    let total: u64 = kinds.values().sum();
    let by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(
        s,
        "records about the pod in between: {total}{}",
        if by_kind.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_kind.join(", "))
        }
    );
    if let (Some(a), Some(b)) = (&first.uid, &second.uid) {
        if a != b {
            let _ = writeln!(s, "note: the name belonged to uid {a} at the first point");
        }
    }
    for section in ["worker", "api_status", "runtime", "probes"] {
        let lines = changes(&first.view[section], &second.view[section]);
        if lines.is_empty() {
            let _ = writeln!(s, "{section}: unchanged");
        } else {
            for l in lines {
                let _ = writeln!(s, "{section}.{l}");
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_each_path_with_old_and_new_values() {
        let a = json!({"phase": "Pending", "cs": [{"restartCount": 1}], "gone": 1});
        let b = json!({"phase": "Running", "cs": [{"restartCount": 2}], "new": "x"});
        assert_eq!(
            changes(&a, &b),
            vec![
                "cs[0].restartCount: 1 -> 2",
                "gone: 1 -> (absent)",
                "new: (absent) -> \"x\"",
                "phase: \"Pending\" -> \"Running\"",
            ]
        );
        assert!(changes(&a, &a).is_empty());
        assert_eq!(
            changes(&json!([1]), &json!([1, 2])),
            vec!["(pod): [1] -> [1,2]"]
        );
    }
}
