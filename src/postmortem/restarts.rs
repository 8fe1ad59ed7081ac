//! Why containers were killed and restarted, read from a ledger as it is replayed: for each
//! container kill of a runtime plan (a failed liveness or startup probe, a changed spec, a
//! failed postStart hook, an unknown state), the kill's message and, when a probe caused
//! it, the `ProbeResult` verdict with the `ProbeFinished` runs that made it.
//!
//! Owns the bookkeeping over records (bounded: the runs kept per container instance and
//! probe, the kills kept per pod). Must not fold: it only reads records `replay` folds.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::core::probe_results::ProbeOutcome;
use crate::core::probes::{ProbeType, ResultReason, RunResult};
use crate::core::record::event::RuntimeAction;
use crate::core::record::{Event, Record, Time};
use crate::core::{pod, Uid};
use k8s_openapi::api::core::v1::Pod;

/// Runs kept per container instance and probe (the newest; a longer run is summarised).
pub const MAX_RUNS_KEPT: usize = 64;
/// Kills kept per pod (the newest).
pub const MAX_KILLS_KEPT: usize = 256;

/// One probe run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Run {
    /// Its `ProbeFinished` record.
    pub seq: u64,
    /// When it was recorded.
    pub at: Time,
    /// How it ended.
    pub result: RunResult,
    /// What the probe said.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output: String,
}

/// The probe verdict behind a kill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The `ProbeResult` record.
    pub seq: u64,
    /// Which probe.
    pub probe: ProbeType,
    /// Consecutive failed runs it counted.
    pub consecutive: u32,
    /// Those runs (the newest `MAX_RUNS_KEPT`).
    pub runs: Vec<Run>,
}

/// One container kill of a runtime plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kill {
    /// The `KillContainer` record.
    pub seq: u64,
    /// When it was recorded.
    pub at: Time,
    /// Container name.
    pub container: String,
    /// The instance killed.
    pub container_id: String,
    /// Why, as the `Killing` event said.
    pub message: String,
    /// The probe verdict that caused it, if a probe did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

type RunKey = (Uid, String, ProbeType);

/// Collects kills and their causes while records are replayed.
#[derive(Clone, Debug, Default)]
pub struct KillLog {
    runs: BTreeMap<RunKey, Vec<Run>>,
    verdicts: BTreeMap<(Uid, String), Verdict>,
    kills: BTreeMap<Uid, Vec<Kill>>,
    names: BTreeMap<Uid, String>,
}

fn failed(r: RunResult) -> bool {
    r == RunResult::Failure
}

impl KillLog {
    /// Reads one record.
    pub fn observe(&mut self, r: &Record) {
        // a record that carries a pod is about that pod (`pod_uid` is the pod's UID)
        if let Some(p) = r.event.pod() {
            let uid = crate::core::pod::uid_str(p);
            if !self.names.contains_key(uid) {
                self.names.insert(Uid::new(uid), pod_name(p));
            }
        }
        match &r.event {
            Event::ProbeFinished(f) if f.result != RunResult::Error => {
                let key = (f.uid.clone(), f.container_id.clone(), f.probe);
                let runs = self.runs.entry(key).or_default();
                if runs
                    .last()
                    .is_some_and(|l| failed(l.result) != failed(f.result))
                {
                    runs.clear();
                }
                if runs.len() == MAX_RUNS_KEPT {
                    runs.remove(0);
                }
                runs.push(Run {
                    seq: r.seq,
                    at: r.at,
                    result: f.result,
                    output: f.output.clone(),
                });
            }
            Event::ProbeResult(p) => {
                let key = (p.uid.clone(), p.container_id.clone(), p.probe);
                match p.result {
                    None => {
                        self.runs.remove(&key);
                    }
                    Some(ProbeOutcome::Failure)
                        if p.reason == ResultReason::Threshold
                            && p.probe != ProbeType::Readiness =>
                    {
                        let since = p.since_seq.unwrap_or(0);
                        let until = r.cause.unwrap_or(r.seq);
                        let runs = self
                            .runs
                            .get(&key)
                            .map(|v| {
                                v.iter()
                                    .filter(|run| run.seq >= since && run.seq <= until)
                                    .cloned()
                                    .collect()
                            })
                            .unwrap_or_default();
                        self.verdicts.insert(
                            (p.uid.clone(), p.container_id.clone()),
                            Verdict {
                                seq: r.seq,
                                probe: p.probe,
                                consecutive: p.consecutive,
                                runs,
                            },
                        );
                    }
                    _ => {}
                }
            }
            Event::RuntimeActionFinished(a) => {
                let RuntimeAction::KillContainer { id, name, message } = &a.action else {
                    return;
                };
                // a pod kill stops containers, it restarts none
                if message.is_empty() || message.starts_with("Stopping container ") {
                    return;
                }
                let verdict = self.verdicts.remove(&(a.uid.clone(), id.clone()));
                let kills = self.kills.entry(a.uid.clone()).or_default();
                if kills.len() == MAX_KILLS_KEPT {
                    kills.remove(0);
                }
                kills.push(Kill {
                    seq: r.seq,
                    at: r.at,
                    container: name.clone(),
                    container_id: id.clone(),
                    message: message.clone(),
                    verdict,
                });
            }
            _ => {}
        }
    }

    /// The pods with kills whose `namespace/name` is `name`, or whose UID is `name`.
    pub fn pods_named(&self, name: &str) -> Vec<Uid> {
        self.kills
            .keys()
            .filter(|u| u.as_str() == name || self.names.get(*u).is_some_and(|n| n == name))
            .cloned()
            .collect()
    }

    /// `namespace/name` of a pod, if a record named it.
    pub fn name_of(&self, uid: &Uid) -> Option<&str> {
        self.names.get(uid).map(String::as_str)
    }

    /// The kills of a pod, oldest first.
    pub fn of_pod(&self, uid: &Uid) -> &[Kill] {
        self.kills.get(uid).map_or(&[], Vec::as_slice)
    }
}

/// `namespace/name` of a pod.
pub fn pod_name(p: &Pod) -> String {
    format!("{}/{}", pod::namespace(p), pod::name(p))
}

/// The kills as text lines (each indented by `indent`).
pub fn render(kills: &[Kill], indent: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if kills.is_empty() {
        let _ = writeln!(out, "{indent}(no container kills)");
    }
    for k in kills {
        let _ = writeln!(
            out,
            "{indent}seq {} {} container {} ({}): {}",
            k.seq,
            k.at.to_rfc3339_nanos(),
            k.container,
            k.container_id,
            k.message
        );
        if let Some(v) = &k.verdict {
            let _ = writeln!(
                out,
                "{indent}  caused by ProbeResult seq {}: {} failure after {} consecutive failed runs",
                v.seq,
                v.probe.as_str(),
                v.consecutive
            );
            if (v.runs.len() as u32) < v.consecutive {
                let _ = writeln!(
                    out,
                    "{indent}    ({} earlier runs not kept)",
                    v.consecutive - v.runs.len() as u32
                );
            }
            for run in &v.runs {
                let output = run.output.trim_end().replace('\n', "\\n");
                let _ = writeln!(
                    out,
                    "{indent}    ProbeFinished seq {} {} {}: {}",
                    run.seq,
                    run.at.to_rfc3339_nanos(),
                    run.result.metric_label(),
                    output
                );
            }
        }
    }
    out
}
