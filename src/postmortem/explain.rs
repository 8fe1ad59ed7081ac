//! `ledgerlet explain FILE --pod NS/NAME`: a pod's life in plain language, each statement
//! naming the records that cause it.
//!
//! Owns the causal reading of one pod's records while they are re-folded: when it was
//! added, started, killed and why (the kill's own reason from the plan the fold emitted; for
//! a probe-caused kill, the failed probe results before it), each container restart with
//! the exit that preceded it and the CrashLoopBackOff delay the fold chose, each status
//! version and how long it took to reach the API server (with the failed writes on the way),
//! and the end of the pod. Must not talk to anything and must not guess: every sentence is
//! backed by records, and what the ledger does not say is not said.
//!
//! A probe-caused kill is explained with the `ProbeResult` verdict and the failed
//! `ProbeFinished` runs behind it, as `replay --pod` shows them (`crate::postmortem::restarts`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;
use std::time::Duration;

use crate::core::command::{Command, ContainerKill};
use crate::core::record::event::{
    ActionOutcome, PlegEventKind, RuntimeAction, StatusSyncOutcome, SyncOutcome,
};
use crate::core::record::{Event, Record, Time};
use crate::core::runtime_status::ContainerState;
use crate::core::timers::TimerKey;
use crate::core::Uid;
use crate::ledger::filter::{PodSelector, RecordFilter};
use crate::postmortem::replay::{replay_with, Fold, ReplayError, Until};

use super::diff::resolve;

/// Statuses that reached the API within this are summarised, not listed.
pub const QUICK_STATUS_MS: u64 = 1_000;

/// One line of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// When.
    pub at: Time,
    /// The record it is placed at.
    pub seq: u64,
    /// What happened, with the causing records named.
    pub text: String,
}

struct Exit {
    code: i32,
    reason: String,
    finished_at: Option<Time>,
    seq: u64,
}

struct StatusVersion {
    version: u64,
    phase: String,
    changed_at: Time,
    seq: u64,
    failures: Vec<(u64, String)>,
}

#[derive(Default)]
struct Facts {
    uids: Vec<Uid>,
    /// Instances started, by container name: (record, id).
    starts: BTreeMap<String, Vec<(u64, String)>>,
    exits: BTreeMap<String, Exit>,
    died: BTreeMap<String, (u64, Time)>,
    /// Container kills decided, by instance: (record, message).
    kills: BTreeMap<String, (u64, String)>,
    /// Back-off decisions: (record, at, due).
    backoffs: Vec<(u64, Time, Time)>,
    backoff_fired: Vec<u64>,
    /// Container kills with the probe verdicts behind them.
    kill_log: crate::postmortem::restarts::KillLog,
    statuses: Vec<StatusVersion>,
    last_version: u64,
    status_syncs: u64,
    quick_statuses: Vec<Duration>,
    entries: Vec<Entry>,
}

fn clock(t: Time) -> String {
    // HH:MM:SS.mmm of the RFC 3339 form
    let s = t.to_rfc3339_nanos();
    s.get(11..23).unwrap_or(&s).to_string()
}

fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn records(seqs: &[u64]) -> String {
    let list: Vec<String> = seqs.iter().map(u64::to_string).collect();
    match list.len() {
        0 => String::new(),
        1 => format!("record {}", list[0]),
        _ => format!("records {}", list.join(", ")),
    }
}

fn kills_of(c: &Command) -> Vec<&ContainerKill> {
    match c {
        Command::SyncPod(s) => (s.plan.kill_pod.iter().flat_map(|k| &k.containers))
            .chain(&s.plan.kill_containers)
            .collect(),
        Command::SyncTerminatingPod(s) => s.kill.containers.iter().collect(),
        Command::SyncTerminatingRuntimePod(s) => s.kill.containers.iter().collect(),
        _ => Vec::new(),
    }
}

impl Facts {
    /// A timeline line placed at record `r`.
    fn push(&mut self, r: &Record, text: String) {
        self.entries.push(Entry {
            at: r.at,
            seq: r.seq,
            text,
        });
    }

    fn mine(&self, uid: &Uid) -> bool {
        self.uids.iter().any(|u| u == uid)
    }

    /// Takes `uid` as one of the pod's (a name may be reused by a new pod).
    fn learn(&mut self, uid: Uid) {
        if !self.mine(&uid) {
            self.uids.push(uid);
        }
    }

    fn observe(
        &mut self,
        node: &crate::core::Node,
        r: &Record,
        commands: &[Command],
        sel: &PodSelector,
    ) {
        if let Some(u) = resolve(node, sel) {
            self.learn(u);
        }
        let about = r.event.pod_uid().is_some_and(|u| self.mine(&u));
        // what the fold decided for the pod
        for c in commands {
            match c {
                Command::SetTimer(t) => {
                    if let TimerKey::BackoffExpiry { uid } = &t.key {
                        if self.mine(uid) {
                            self.backoffs.push((r.seq, r.at, t.due));
                        }
                    }
                }
                Command::SyncPodStatus(s) if self.mine(&s.uid) => self.status_syncs += 1,
                _ => {}
            }
            if c.sync_id().is_some_and(|(u, _)| self.mine(u)) {
                for k in kills_of(c) {
                    self.kills
                        .entry(k.id.clone())
                        .or_insert((r.seq, k.message.clone()));
                }
            }
        }
        // status versions
        if let Some(u) = self.uids.last().cloned() {
            if let Some(v) = node.statuses.get(&u) {
                if v.version != self.last_version {
                    self.last_version = v.version;
                    self.statuses.push(StatusVersion {
                        version: v.version,
                        phase: v.status.phase.clone().unwrap_or_default(),
                        changed_at: v.changed_at,
                        seq: r.seq,
                        failures: Vec::new(),
                    });
                }
            }
        }
        self.kill_log.observe(r);
        let rec = r.seq;
        if !about {
            if matches!(r.event, Event::NodeShutdown(_)) && !self.uids.is_empty() {
                let text =
                    format!("the node began shutting down (record {rec}): every pod is stopped");
                self.push(r, text);
            }
            return;
        }
        match &r.event {
            Event::PodAdded(c) => self.push(
                r,
                format!("pod added by the {:?} source (record {rec})", c.source)
                    .replace("File", "file")
                    .replace("Api", "API"),
            ),
            Event::PodUpdated(_) => self.push(r, format!("pod spec changed (record {rec})")),
            Event::PodRemoved(_) => self.push(
                r,
                format!("pod removed from its source (record {rec}): the node stops it"),
            ),
            Event::PodDeleted(_) => self.push(
                r,
                format!("pod deleted in the API (record {rec}): the node stops it within its grace period"),
            ),
            Event::PodRejected(p) => self.push(
                r,
                format!("pod rejected at admission: {} (record {rec})", p.message),
            ),
            Event::PlegEvent(e) if e.kind == PlegEventKind::ContainerDied => {
                if let Some(id) = &e.container_id {
                    self.died.entry(id.clone()).or_insert((r.seq, r.at));
                }
            }
            Event::RuntimeStatusObserved(o) => {
                for c in o.status.iter().flat_map(|s| s.containers.iter()) {
                    if c.state == ContainerState::Exited && !self.exits.contains_key(&c.id) {
                        self.exits.insert(
                            c.id.clone(),
                            Exit {
                                code: c.exit_code,
                                reason: c.reason.clone(),
                                finished_at: c.finished_at,
                                seq: r.seq,
                            },
                        );
                    }
                }
            }
            Event::RuntimeActionFinished(a) => self.action(r, a),
            Event::TimerFired(t) => {
                if matches!(t.key, TimerKey::BackoffExpiry { .. }) {
                    self.backoff_fired.push(r.seq);
                }
            }
            Event::SyncFinished(f) => {
                if f.work == crate::core::command::WorkType::Terminated
                    && matches!(f.outcome, SyncOutcome::Ok | SyncOutcome::Terminal)
                {
                    self.push(r, format!("pod terminated: every container stopped and its final status written (record {rec})"));
                } else if let SyncOutcome::Failed { message } = &f.outcome {
                    self.push(
                        r,
                        format!(
                            "{} failed (record {rec}): {message}; the pod worker retries",
                            f.work.span_name(),
                        ),
                    );
                }
            }
            Event::StatusSyncFinished(s) => self.status_sync(r, s),
            _ => {}
        }
    }

    fn action(&mut self, r: &Record, a: &crate::core::record::event::RuntimeActionFinished) {
        let rec = r.seq;
        match (&a.action, &a.outcome) {
            (RuntimeAction::StartContainer { container, id, .. }, ActionOutcome::Ok { .. }) => {
                let starts = self.starts.entry(container.clone()).or_default();
                starts.push((r.seq, id.clone()));
                let n = starts.len();
                if n == 1 {
                    self.push(r, format!("container {container} started (record {rec})"));
                } else {
                    let (prev_start, prev) = starts[n - 2].clone();
                    let text = self.restart_text(container, n - 1, &prev, prev_start, r);
                    self.push(r, text);
                }
            }
            (
                RuntimeAction::StartContainer { container, .. },
                ActionOutcome::Failed {
                    reason,
                    message,
                    detail,
                },
            )
            | (
                RuntimeAction::CreateContainer { container, .. },
                ActionOutcome::Failed {
                    reason,
                    message,
                    detail,
                },
            ) => {
                let at = detail.as_ref().map_or(String::new(), |d| format!(" ({d})"));
                self.push(
                    r,
                    format!(
                        "container {container} could not start: {reason}: {message}{at} (record {rec})"
                    ),
                );
            }
            (
                RuntimeAction::PullImage { container, image },
                ActionOutcome::Failed {
                    reason, message, ..
                },
            ) => {
                self.push(
                    r,
                    format!("image {image} for container {container}: {reason}: {message} (record {rec})"),
                );
            }
            (RuntimeAction::KillContainer { id, name, .. }, ActionOutcome::Ok { .. }) => {
                let why = match self.kills.get(id) {
                    Some((seq, message)) => format!(
                        "{message} (decided at record {seq}){}",
                        self.probe_failures(id, message)
                    ),
                    None => "no decision for it is in this ledger".into(),
                };
                self.push(
                    r,
                    format!(
                        "container {name} ({}) was stopped (record {rec}): {why}",
                        short_id(id)
                    ),
                );
            }
            _ => {}
        }
    }

    /// "; its liveness probe failed 3 times in a row (records 812, 840, 868; verdict
    /// record 869)", for the kill of the container instance `id` with `message` (nothing
    /// unless the message names a probe).
    fn probe_failures(&self, id: &str, message: &str) -> String {
        if !message.to_lowercase().contains("probe") {
            return String::new();
        }
        let verdict = self
            .uids
            .iter()
            .flat_map(|u| self.kill_log.of_pod(u))
            .filter(|k| k.container_id == id)
            .find_map(|k| k.verdict.as_ref());
        let Some(v) = verdict else {
            return String::new();
        };
        let seqs: Vec<u64> = v
            .runs
            .iter()
            .filter(|r| r.result == crate::core::probes::RunResult::Failure)
            .map(|r| r.seq)
            .collect();
        format!(
            "; its {} probe failed {} time{} in a row ({}; verdict record {})",
            v.probe.as_str(),
            v.consecutive,
            if v.consecutive == 1 { "" } else { "s" },
            records(&seqs),
            v.seq
        )
    }

    fn restart_text(
        &self,
        container: &str,
        restart: usize,
        prev: &str,
        prev_start: u64,
        r: &Record,
    ) -> String {
        let mut t = format!(
            "container {container} restarted at {} (record {}, restart {restart})",
            clock(r.at),
            r.seq
        );
        let mut because = Vec::new();
        let died = self.died.get(prev);
        match (self.exits.get(prev), died) {
            (Some(e), _) => {
                let mut seqs = vec![e.seq];
                if let Some((d, _)) = died {
                    seqs.push(*d);
                }
                seqs.sort();
                because.push(format!(
                    "its previous instance {} exited with code {}{} at {} ({})",
                    short_id(prev),
                    e.code,
                    if e.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", e.reason)
                    },
                    clock(e.finished_at.unwrap_or(r.at)),
                    records(&seqs)
                ));
            }
            (None, Some((d, at))) => because.push(format!(
                "its previous instance {} died at {} (record {d})",
                short_id(prev),
                clock(*at)
            )),
            (None, None) => {}
        }
        if let Some((seq, message)) = self.kills.get(prev) {
            because.push(format!(
                "the node had stopped it: {message} (record {seq}){}",
                self.probe_failures(prev, message)
            ));
        }
        if let Some((seq, at, due)) = self
            .backoffs
            .iter()
            .rev()
            .find(|b| b.0 > prev_start && b.0 < r.seq)
        {
            let fired = self
                .backoff_fired
                .iter()
                .rev()
                .find(|f| **f > *seq && **f <= r.seq);
            // the back-off runs from the previous instance's exit (the kubelet's event time)
            let from = self
                .exits
                .get(prev)
                .and_then(|e| e.finished_at)
                .filter(|f| f <= due)
                .unwrap_or(*at);
            because.push(format!(
                "back-off {} (CrashLoopBackOff decided at record {seq}{})",
                secs(due.since(from)),
                fired.map_or(String::new(), |f| format!(", expired at record {f}"))
            ));
        }
        if let Some(c) = r.cause {
            because.push(format!("the sync that started it ran for record {c}"));
        }
        if !because.is_empty() {
            t.push_str(": ");
            t.push_str(&because.join("; "));
        }
        t
    }

    fn status_sync(&mut self, r: &Record, s: &crate::core::record::event::StatusSyncFinished) {
        match &s.outcome {
            StatusSyncOutcome::Failed { code, message } => {
                let what = match code {
                    Some(c) => format!("failed with {c}"),
                    None => format!("failed: {message}"),
                };
                for v in self.statuses.iter_mut().filter(|v| v.version <= s.version) {
                    v.failures.push((r.seq, what.clone()));
                }
            }
            StatusSyncOutcome::Patched { .. } | StatusSyncOutcome::Unchanged { .. } => {
                let (delivered, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.statuses)
                    .into_iter()
                    .partition(|v| v.version <= s.version);
                self.statuses = keep;
                // the oldest version written here waited longest: it speaks for the others
                let Some(oldest) = delivered.first() else {
                    return;
                };
                let latency = r.at.since(oldest.changed_at);
                if oldest.failures.is_empty() && latency < Duration::from_millis(QUICK_STATUS_MS) {
                    self.quick_statuses.push(latency);
                    return;
                }
                let mut text = status_text(oldest, Some((r.seq, latency)));
                if let Some(newest) = delivered.last().filter(|n| n.version != oldest.version) {
                    let _ = write!(
                        text,
                        "; the write carried the later versions up to v{} too",
                        newest.version
                    );
                }
                self.push(r, text);
            }
            StatusSyncOutcome::NotFound | StatusSyncOutcome::UidChanged { .. } => {
                self.push(r, format!("status v{} was not written: the API object is gone or was replaced (record {})", s.version, r.seq));
            }
        }
    }
}

fn status_text(v: &StatusVersion, delivered: Option<(u64, Duration)>) -> String {
    let phase = if v.phase.is_empty() {
        String::new()
    } else {
        format!(" (phase {})", v.phase)
    };
    let failures = if v.failures.is_empty() {
        String::new()
    } else {
        let mut by: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for (seq, what) in &v.failures {
            by.entry(what.as_str()).or_default().push(*seq);
        }
        let parts: Vec<String> = by
            .iter()
            .map(|(what, seqs)| {
                format!(
                    "{} status write{} {what} ({})",
                    seqs.len(),
                    if seqs.len() == 1 { "" } else { "s" },
                    records(seqs)
                )
            })
            .collect();
        format!(": {}", parts.join(", "))
    };
    match delivered {
        Some((seq, latency)) => format!(
            "status v{}{phase} reached the API {} after it changed at {} (record {}, written at record {seq}){failures}",
            v.version,
            secs(latency),
            clock(v.changed_at),
            v.seq
        ),
        None => format!(
            "status v{}{phase}, changed at {} (record {}), has not reached the API by the end of the ledger{failures}",
            v.version,
            clock(v.changed_at),
            v.seq
        ),
    }
}

fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

/// Why `explain` could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The ledger could not be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The pod is not in the ledger.
    #[error("no pod {0} in this ledger")]
    NoPod(String),
}

/// The pod's timeline, in record order.
pub fn explain(
    input: impl BufRead + Send,
    sel: &PodSelector,
    until: Option<Until>,
) -> Result<String, ExplainError> {
    let mut facts = Facts::default();
    let mut filter = RecordFilter::new(Some(sel.clone()), Vec::new());
    let mut api = false;
    let replayed = replay_with(input, until, |f| {
        if let Fold::Record {
            node,
            record,
            commands,
            ..
        } = f
        {
            // every record goes through the filter: it learns a name's UIDs from them
            if let (true, Some(u)) = (filter.matches(record), record.event.pod_uid()) {
                facts.learn(u);
            }
            api |= node
                .config
                .sources
                .contains(&crate::core::config::PodSource::Api);
            facts.observe(node, record, commands, sel);
        }
    })?;
    let who = super::diff::selector_text(sel);
    if facts.uids.is_empty() {
        return Err(ExplainError::NoPod(who));
    }
    let mut s = String::new();
    let uids: Vec<String> = facts.uids.iter().map(|u| u.to_string()).collect();
    let _ = writeln!(
        s,
        "pod {who} (uid {}), records up to {} ({})",
        uids.join(", "),
        replayed.node.last_seq,
        replayed.node.last_at.to_rfc3339_nanos()
    );
    // the versions never delivered
    let pending = facts
        .statuses
        .iter()
        .filter(|v| api || !v.failures.is_empty());
    facts.entries.extend(pending.map(|v| Entry {
        at: v.changed_at,
        seq: v.seq,
        text: status_text(v, None),
    }));
    facts.entries.sort_by_key(|e| e.seq);
    for e in &facts.entries {
        let _ = writeln!(s, "{}  {}", clock(e.at), e.text);
    }
    if !facts.quick_statuses.is_empty() {
        let mut q = facts.quick_statuses.clone();
        q.sort();
        let _ = writeln!(
            s,
            "{} other status change{} reached the API within {} (median {})",
            q.len(),
            if q.len() == 1 { "" } else { "s" },
            secs(Duration::from_millis(QUICK_STATUS_MS)),
            secs(q[q.len() / 2])
        );
    }
    if !api && facts.status_syncs == 0 {
        let _ = writeln!(
            s,
            "statuses are not written to an API server: the node runs standalone (static pods only)"
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_read_as_a_person_writes_them() {
        assert_eq!(
            clock(Time::from_unix_nanos(1_767_225_787_123_456_789)),
            "00:03:07.123"
        );
        assert_eq!(secs(Duration::from_millis(20_000)), "20 s");
        assert_eq!(secs(Duration::from_millis(4_200)), "4.2 s");
        assert_eq!(secs(Duration::from_millis(3)), "3 ms");
        assert_eq!(records(&[7]), "record 7");
        assert_eq!(records(&[7, 9]), "records 7, 9");
    }
}
