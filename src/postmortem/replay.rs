//! Offline replay of an exported ledger: fold it into a `Node` and show the pod workers.
//!
//! Owns reading an NDJSON ledger (optionally starting from a leading snapshot), checking it
//! is replayable (dense seqs), stopping at a seq or time, and rendering the pod-worker state
//! as a table or JSON. Output is deterministic: the same file prints the same bytes. Must not
//! talk to anything: replay is pure computation over a file.

use std::fmt::Write as _;
use std::io::BufRead;

use serde::Serialize;

use crate::core::pod_workers::{PodSyncStatus, WorkerActivity};
use crate::core::record::{Record, Time};
use crate::core::{fold, Command, Node, Uid};
use crate::ledger::filter::PodSelector;
use crate::ledger::DecodeError;

pub mod ahead;

use super::restarts;

/// Where to stop folding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// After the record with this seq.
    Seq(u64),
    /// After the last record at or before this time.
    Time(Time),
}

impl std::str::FromStr for Until {
    type Err = String;
    fn from_str(s: &str) -> Result<Until, String> {
        if let Ok(seq) = s.parse::<u64>() {
            return Ok(Until::Seq(seq));
        }
        Time::parse_rfc3339(s)
            .map(Until::Time)
            .map_err(|e| format!("expected a seq or an RFC 3339 time: {e}"))
    }
}

/// Which pod to show: a UID or `namespace/name`.
pub type PodFilter = PodSelector;

fn shows(filter: &PodFilter, uid: &Uid, status: &PodSyncStatus) -> bool {
    match filter {
        PodSelector::Uid(u) => u == uid,
        PodSelector::Name { namespace, name } => {
            status.fullname == crate::core::pod::build_full_name(name, namespace)
        }
    }
}

/// Why a ledger could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A line could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The ledger is not a contiguous history.
    #[error("line {line}: {what}")]
    NotReplayable {
        /// 1-based line number.
        line: u64,
        /// What is missing.
        what: String,
    },
}

impl ReplayError {
    /// The line the error is about.
    pub fn line(&self) -> u64 {
        match self {
            ReplayError::Decode(e) => e.line(),
            ReplayError::NotReplayable { line, .. } => *line,
        }
    }
}

/// The result of a replay.
pub struct Replayed {
    /// The folded state.
    pub node: Node,
    /// Records folded (not counting a snapshot).
    pub records_folded: u64,
    /// The seq the replay started after (the snapshot's seq, or 0).
    pub base_seq: u64,
    /// Container kills and the probe records behind them, from the records folded.
    pub kills: restarts::KillLog,
}

/// Folds the ledger read from `input` until `until` (or the end).
pub fn replay(input: impl BufRead + Send, until: Option<Until>) -> Result<Replayed, ReplayError> {
    replay_with(input, until, |_: Fold<'_>| {})
}

/// What [`replay_with`] shows its observer.
pub enum Fold<'a> {
    /// The ledger starts from this snapshot (its state is the node now).
    Snapshot {
        /// The snapshot's seq.
        seq: u64,
    },
    /// `record` was just folded into `node` and the fold asked for `commands`.
    Record {
        /// The state after the record.
        node: &'a Node,
        /// The record.
        record: &'a Record,
        /// What the fold emitted (derived events as `Command::Append`).
        commands: &'a [Command],
        /// The record's 1-based line in the input.
        line: u64,
    },
}

/// [`replay`], showing every fold (with the commands it emitted) to `observe`.
pub fn replay_with(
    input: impl BufRead + Send,
    until: Option<Until>,
    observe: impl FnMut(Fold<'_>),
) -> Result<Replayed, ReplayError> {
    // Decoding (a second thread, see `ahead`) and folding (this one) run side by side.
    std::thread::scope(|scope| {
        let decoder = ahead::DecodeAhead::spawn(scope, input, until);
        let folded = fold_batches(&decoder, until, observe);
        let kills = decoder.finish();
        folded.map(|(node, records_folded, base_seq)| Replayed {
            node,
            records_folded,
            base_seq,
            kills,
        })
    })
}

/// Folds what `decoder` hands over; the node, the records folded and the base seq.
fn fold_batches(
    decoder: &ahead::DecodeAhead<'_>,
    until: Option<Until>,
    mut observe: impl FnMut(Fold<'_>),
) -> Result<(Node, u64, u64), ReplayError> {
    let mut node = Node::default();
    let mut base_seq = 0;
    let mut expected = 1u64;
    let mut folded = 0u64;
    while let Some(decoded) = decoder.recv() {
        let batch = match decoded {
            ahead::Decoded::Failed(e) => return Err(e.into()),
            ahead::Decoded::Snapshot(s) => {
                let s = *s;
                node = s.state;
                base_seq = s.seq;
                expected = s.seq + 1;
                observe(Fold::Snapshot { seq: s.seq });
                continue;
            }
            ahead::Decoded::Records(batch) => batch,
        };
        for (line_no, r) in &batch {
            if r.seq != expected {
                let what = if folded == 0 && base_seq == 0 {
                    format!(
                        "the ledger starts at seq {} without a Snapshot line: records 1..{} are missing",
                        r.seq,
                        r.seq - 1
                    )
                } else {
                    format!(
                        "seq {} follows seq {}: records are missing",
                        r.seq,
                        expected - 1
                    )
                };
                return Err(ReplayError::NotReplayable {
                    line: *line_no,
                    what,
                });
            }
            if ahead::stops_before(until, r) {
                return Ok((node, folded, base_seq));
            }
            let commands = fold(&mut node, r);
            observe(Fold::Record {
                node: &node,
                record: r,
                commands: &commands,
                line: *line_no,
            });
            expected = r.seq + 1;
            folded += 1;
        }
        decoder.give_back(batch);
    }
    Ok((node, folded, base_seq))
}

/// One pod worker, as shown by `replay`.
#[derive(Serialize)]
pub struct WorkerView<'a> {
    /// The UID.
    pub uid: &'a Uid,
    /// `namespace/name`.
    pub pod: String,
    /// `sync`, `terminating` or `terminated`.
    pub state: &'static str,
    /// What the worker is doing.
    pub activity: String,
    /// The raw status (pod objects left out).
    #[serde(flatten)]
    pub flags: Flags,
}

/// The scalar fields of a worker status.
#[derive(Serialize)]
pub struct Flags {
    /// Working on an update.
    pub working: bool,
    /// Effective grace period (s).
    pub grace_period_s: i64,
    /// First seen.
    pub synced_at: Time,
    /// Allowed to start.
    pub started_at: Option<Time>,
    /// Termination requested.
    pub terminating_at: Option<Time>,
    /// All containers stopped.
    pub terminated_at: Option<Time>,
    /// Termination observed by the worker.
    pub started_terminating: bool,
    /// Deleted.
    pub deleted: bool,
    /// Evicted.
    pub evicted: bool,
    /// Finished.
    pub finished: bool,
    /// Restart requested (UID reuse).
    pub restart_requested: bool,
    /// Seen in the runtime.
    pub observed_runtime: bool,
    /// Update type of the pending update, if any.
    pub pending: Option<&'static str>,
}

fn activity_label(a: &WorkerActivity) -> String {
    match a {
        WorkerActivity::Idle => "idle".into(),
        WorkerActivity::AwaitingRuntimeStatus { work } => {
            format!("awaiting-status({})", work.work_type().span_name())
        }
        WorkerActivity::Syncing {
            sync_id,
            work_type,
            canceled,
            ..
        } => format!(
            "{}#{}{}",
            work_type.span_name(),
            sync_id,
            if *canceled { " canceled" } else { "" }
        ),
    }
}

/// The workers to show, in UID order.
pub fn worker_views<'a>(node: &'a Node, filter: Option<&PodFilter>) -> Vec<WorkerView<'a>> {
    node.pod_workers
        .statuses()
        .filter(|(uid, s)| filter.is_none_or(|f| shows(f, uid, s)))
        .map(|(uid, s)| WorkerView {
            uid,
            pod: (s.last_pod()).map_or_else(|| s.fullname.clone(), |p| restarts::pod_name(p)),
            state: s.state().as_str(),
            activity: activity_label(&s.activity),
            flags: Flags {
                working: s.is_working(),
                grace_period_s: s.grace_period_s(),
                synced_at: s.synced_at,
                started_at: s.started_at(),
                terminating_at: s.terminating_at(),
                terminated_at: s.terminated_at(),
                started_terminating: s.is_termination_started(),
                deleted: s.is_deleted(),
                evicted: s.is_evicted(),
                finished: s.is_finished(),
                restart_requested: s.restart_requested(),
                observed_runtime: s.observed_runtime(),
                pending: s.pending_update.as_ref().map(|u| u.update_type.as_str()),
            },
        })
        .collect()
}

/// Renders the replayed state as JSON (one document, trailing newline).
pub fn render_json(r: &Replayed, filter: Option<&PodFilter>) -> String {
    #[derive(Serialize)]
    struct Doc<'a> {
        last_seq: u64,
        last_at: Time,
        base_seq: u64,
        records_folded: u64,
        pods_synced: bool,
        desired_pods: usize,
        started_static_pods: &'a std::collections::BTreeMap<String, Uid>,
        waiting_static_pods: &'a std::collections::BTreeMap<String, Vec<Uid>>,
        workers: Vec<WorkerView<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        kills: Option<Vec<PodKills<'a>>>,
    }
    let doc = Doc {
        last_seq: r.node.last_seq,
        last_at: r.node.last_at,
        base_seq: r.base_seq,
        records_folded: r.records_folded,
        pods_synced: r.node.pod_workers.pods_synced(),
        desired_pods: r.node.pod_manager.len(),
        started_static_pods: r.node.pod_workers.started_static_pods(),
        waiting_static_pods: r.node.pod_workers.waiting_static_pods(),
        workers: worker_views(&r.node, filter),
        kills: filter.map(|f| pod_kills(r, f)),
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("serialisable");
    s.push('\n');
    s
}

/// The container kills of one pod a filter selects, with the probe records behind them.
#[derive(Serialize)]
pub struct PodKills<'a> {
    /// The UID.
    pub uid: Uid,
    /// `namespace/name`, if known.
    pub pod: Option<&'a str>,
    /// The kills, oldest first.
    pub kills: &'a [restarts::Kill],
}

/// The pods `filter` selects (as workers, or as pods with recorded kills), with their kills.
pub fn pod_kills<'a>(r: &'a Replayed, filter: &PodFilter) -> Vec<PodKills<'a>> {
    let mut uids: Vec<Uid> = worker_views(&r.node, Some(filter))
        .into_iter()
        .map(|v| v.uid.clone())
        .collect();
    uids.extend(r.kills.pods_named(&super::diff::selector_text(filter)));
    uids.sort();
    uids.dedup();
    uids.into_iter()
        .map(|uid| PodKills {
            pod: r.kills.name_of(&uid),
            kills: r.kills.of_pod(&uid),
            uid,
        })
        .collect()
}

/// Renders the replayed state as an aligned text table.
pub fn render_table(r: &Replayed, filter: Option<&PodFilter>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ledger: {} records folded (from seq {}), last seq {} at {}",
        r.records_folded,
        r.base_seq + 1,
        r.node.last_seq,
        r.node.last_at
    );
    let _ = writeln!(
        out,
        "workers: {} known, {} desired pods, pods synced: {}",
        r.node.pod_workers.len(),
        r.node.pod_manager.len(),
        if r.node.pod_workers.pods_synced() {
            "yes"
        } else {
            "no"
        }
    );
    let views = worker_views(&r.node, filter);
    let header = [
        "UID",
        "POD",
        "STATE",
        "ACTIVITY",
        "GRACE",
        "SYNCED_AT",
        "TERMINATING_AT",
        "TERMINATED_AT",
        "FLAGS",
    ];
    let opt = |t: Option<Time>| t.map_or("-".to_string(), |t| t.to_rfc3339_nanos());
    let mut rows = vec![header.map(String::from)];
    rows.extend(views.iter().map(|v| {
        let f = &v.flags;
        let flags: Vec<&str> = [
            (f.working, "working"),
            (f.started_at.is_some(), "started"),
            (f.started_terminating, "terminating-seen"),
            (f.deleted, "deleted"),
            (f.evicted, "evicted"),
            (f.finished, "finished"),
            (f.restart_requested, "restart-requested"),
            (f.observed_runtime, "runtime-seen"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        [
            v.uid.to_string(),
            v.pod.clone(),
            v.state.to_string(),
            v.activity.clone(),
            if f.grace_period_s == 0 {
                "-".into()
            } else {
                format!("{}s", f.grace_period_s)
            },
            f.synced_at.to_rfc3339_nanos(),
            opt(f.terminating_at),
            opt(f.terminated_at),
            if flags.is_empty() {
                "-".into()
            } else {
                flags.join(",")
            },
        ]
    }));
    let mut widths = [0; 9];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    // the header, then a row per worker; the last column unpadded
    for row in &rows {
        let mut l = String::new();
        for (cell, w) in row.iter().zip(widths) {
            let _ = write!(l, "{cell:<w$}  ");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    }
    if let Some(f) = filter {
        for p in pod_kills(r, f) {
            let _ = writeln!(
                out,
                "container kills of {} ({}):",
                p.pod.unwrap_or("?"),
                p.uid
            );
            out.push_str(&restarts::render(p.kills, "  "));
        }
    }
    out
}
