//! `replay --verify`: the node did what its code says.
//!
//! Owns re-folding a ledger and checking every record that names a `cause`: a derived
//! record must be exactly the next event the fold of its cause derived (the engine appends
//! derived records depth-first, before any new input), and a command outcome
//! (`SyncFinished`, `RuntimeActionFinished`, `RuntimeStatusObserved`, `TimerFired`,
//! `StatusSyncFinished`, `NodeSyncFinished`) must answer a command that the fold of its
//! cause actually emitted (same pod and sync id, timer key and generation, status version,
//! node action). Outcomes that must have a cause and have none are violations too. Must not
//! trust the ledger: it recomputes every command from the records.
//!
//! What cannot be checked is counted, not failed: a cause before the start of the ledger
//! (an export that starts at a snapshot), or one older than the bound on remembered
//! commands. `AgentRestarted` ends a lifetime: commands of the previous one can no longer
//! be answered.

use std::collections::{BTreeMap, VecDeque};
use std::io::BufRead;

use crate::core::record::{Event, Record};
use crate::core::timers::TimerKey;
use crate::core::{Command, Uid};
use crate::postmortem::replay::{replay_with, Fold, ReplayError, Until};

/// Causes whose commands are remembered at most (the oldest are forgotten first).
pub const MAX_REMEMBERED_CAUSES: usize = 1_000_000;
/// Violations kept for the report (all are counted).
pub const MAX_REPORTED_VIOLATIONS: usize = 50;

/// What a command's outcome must match.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expect {
    Sync(Uid, u64),
    Inspect(Uid),
    Timer(TimerKey, u64),
    Status(Uid, u64),
    Node(String),
    /// A probe run: pod, container instance, probe, run id.
    Probe(Uid, String, crate::core::probes::ProbeType, u64),
}

/// One record that no command explains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The record's seq.
    pub seq: u64,
    /// Its line in the input.
    pub line: u64,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {} (record {}): {}", self.line, self.seq, self.what)
    }
}

/// The result of a verification.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verification {
    /// Records folded.
    pub records: u64,
    /// Derived records that matched their cause's fold.
    pub derived_ok: u64,
    /// Outcomes that answered a command their cause emitted.
    pub outcomes_ok: u64,
    /// Records whose cause precedes what could be checked.
    pub unverifiable: u64,
    /// Every violation found (counted).
    pub violations: u64,
    /// The first [`MAX_REPORTED_VIOLATIONS`] violations.
    pub reported: Vec<Violation>,
}

impl Verification {
    /// True when nothing was wrong.
    pub fn passed(&self) -> bool {
        self.violations == 0
    }
}

/// The outcome key of a record, if it is a command outcome; `must_have_cause` for kinds
/// only the shell produces in answer to a command.
fn outcome_of(e: &Event) -> Option<(Expect, bool)> {
    Some(match e {
        Event::SyncFinished(f) => (Expect::Sync(f.uid.clone(), f.sync_id), true),
        Event::RuntimeActionFinished(a) => (Expect::Sync(a.uid.clone(), a.sync_id), true),
        Event::RuntimeStatusObserved(o) => (Expect::Inspect(o.uid.clone()), false),
        Event::TimerFired(t) => (Expect::Timer(t.key.clone(), t.generation), true),
        Event::StatusSyncFinished(s) => (Expect::Status(s.uid.clone(), s.version), true),
        Event::NodeSyncFinished(n) => (Expect::Node(format!("{:?}", n.action)), true),
        Event::ProbeFinished(p) => {
            let id = p.container_id.clone();
            (Expect::Probe(p.uid.clone(), id, p.probe, p.run), true)
        }
        _ => return None,
    })
}

fn expectation(c: &Command) -> Option<Expect> {
    if let Some((uid, id)) = c.sync_id() {
        return Some(Expect::Sync(uid.clone(), id));
    }
    Some(match c {
        Command::InspectPod { uid } => Expect::Inspect(uid.clone()),
        Command::RemovePodContent(r) => Expect::Sync(r.uid.clone(), r.removal_id),
        Command::SetTimer(t) => Expect::Timer(t.key.clone(), t.generation),
        Command::SyncPodStatus(s) => Expect::Status(s.uid.clone(), s.version),
        Command::RunProbe(p) => {
            Expect::Probe(p.uid.clone(), p.container_id.clone(), p.probe, p.run)
        }
        Command::Node(n) => Expect::Node(
            match n {
                crate::core::command::NodeCommand::Register { .. } => "Register",
                crate::core::command::NodeCommand::RenewLease { .. } => "RenewLease",
                crate::core::command::NodeCommand::PatchStatus { .. } => "PatchStatus",
                crate::core::command::NodeCommand::CreateMirrorPod { .. } => "CreateMirrorPod",
                crate::core::command::NodeCommand::DeleteMirrorPod { .. } => "DeleteMirrorPod",
            }
            .to_string(),
        ),
        _ => return None,
    })
}

/// Is this outcome the last one its command produces (so the command is answered)?
fn finishes(e: &Event) -> bool {
    !matches!(e, Event::RuntimeActionFinished(_))
}

#[derive(Default)]
struct Verifier {
    out: Verification,
    base_seq: u64,
    /// The engine's queue of derived events still to come: (cause, event), front first.
    derived: VecDeque<(u64, Event)>,
    /// Commands awaiting outcomes, by the seq of the record whose fold emitted them.
    pending: BTreeMap<u64, Vec<Expect>>,
    /// The oldest cause still remembered (older ones were forgotten for the bound).
    forgotten_before: u64,
    /// Start of the current lifetime (commands before it can no longer be answered).
    lifetime_start: u64,
}

impl Verifier {
    fn violation(&mut self, r: &Record, line: u64, what: String) {
        self.out.violations += 1;
        if self.out.reported.len() < MAX_REPORTED_VIOLATIONS {
            self.out.reported.push(Violation {
                seq: r.seq,
                line,
                what,
            });
        }
    }

    fn check(&mut self, r: &Record, line: u64) {
        if matches!(r.event, Event::AgentRestarted(_)) {
            // a lifetime ended (possibly in the middle of a derivation chain)
            self.derived.clear();
            self.pending.clear();
            self.lifetime_start = r.seq;
        }
        if let Some((cause, want)) = self.derived.front() {
            if r.cause == Some(*cause) && r.event == *want {
                self.derived.pop_front();
                self.out.derived_ok += 1;
                return;
            }
            let what = format!(
                "the fold of record {cause} derived a {} record to come next, but the ledger has {} (cause {})",
                want.kind(),
                r.event.kind(),
                r.cause.map_or("none".to_string(), |c| c.to_string())
            );
            self.derived.clear();
            self.violation(r, line, what);
        }
        if let Err(what) = self.check_outcome(r) {
            self.violation(r, line, what);
        }
    }

    /// Checks a record that is not the derived record expected next: a command outcome must
    /// answer a command its cause emitted; what cannot be checked is counted.
    fn check_outcome(&mut self, r: &Record) -> Result<(), String> {
        let kind = r.event.kind();
        let Some(cause) = r.cause else {
            return match outcome_of(&r.event) {
                Some((_, true)) => Err(format!(
                    "a {kind} outcome with no cause: no command asked for it"
                )),
                _ => Ok(()),
            };
        };
        if cause <= self.base_seq || cause < self.forgotten_before {
            self.out.unverifiable += 1;
            return Ok(());
        }
        if cause >= r.seq {
            return Err(format!("its cause {cause} is not an earlier record"));
        }
        let Some((key, _)) = outcome_of(&r.event) else {
            return Err(format!(
                "a {kind} record names cause {cause}, but the fold of {cause} did not derive it and {kind} is not a command outcome"
            ));
        };
        if cause < self.lifetime_start {
            return Err(format!(
                "record {cause} belongs to a previous lifetime of the agent"
            ));
        }
        let found = (self.pending.get(&cause)).and_then(|v| v.iter().position(|k| *k == key));
        let Some(i) = found else {
            let emitted: Vec<String> = (self.pending.get(&cause).into_iter().flatten())
                .map(|k| format!("{k:?}"))
                .collect();
            return Err(format!(
                "no command of record {cause} asked for this {kind} ({key:?}); its fold emitted {}",
                if emitted.is_empty() {
                    "no command awaiting an outcome".to_string()
                } else {
                    emitted.join(", ")
                }
            ));
        };
        self.out.outcomes_ok += 1;
        if let Some(v) = self.pending.get_mut(&cause).filter(|_| finishes(&r.event)) {
            v.remove(i);
            if v.is_empty() {
                self.pending.remove(&cause);
            }
        }
        Ok(())
    }

    fn remember(&mut self, r: &Record, commands: &[Command]) {
        // derived events come next, depth-first, in emission order
        for c in commands.iter().rev() {
            if let Command::Append(e) = c {
                self.derived.push_front((r.seq, e.clone()));
            }
        }
        let keys: Vec<Expect> = commands.iter().filter_map(expectation).collect();
        if !keys.is_empty() {
            self.pending.insert(r.seq, keys);
            while self.pending.len() > MAX_REMEMBERED_CAUSES {
                if let Some((seq, _)) = self.pending.pop_first() {
                    self.forgotten_before = seq + 1;
                }
            }
        }
    }
}

/// Re-folds `input` (until `until`) and checks every caused record.
pub fn verify(
    input: impl BufRead + Send,
    until: Option<Until>,
) -> Result<Verification, ReplayError> {
    let mut v = Verifier::default();
    replay_with(input, until, |f| match f {
        Fold::Snapshot { seq } => v.base_seq = seq,
        Fold::Record {
            record,
            commands,
            line,
            ..
        } => {
            v.out.records += 1;
            v.check(record, line);
            v.remember(record, commands);
        }
    })?;
    Ok(v.out)
}

/// The report `replay --verify` prints.
pub fn render(v: &Verification) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "verify: {} records re-folded; {} derived records match their cause's fold; {} outcomes answer a command their cause emitted; {} could not be checked (cause before the start of the ledger)",
        v.records, v.derived_ok, v.outcomes_ok, v.unverifiable
    );
    if v.passed() {
        let _ = writeln!(s, "verify: OK: the node did what its code says");
    } else {
        let _ = writeln!(
            s,
            "verify: FAILED: {} record(s) no command of the fold explains:",
            v.violations
        );
        for x in &v.reported {
            let _ = writeln!(s, "  {x}");
        }
        if v.violations as usize > v.reported.len() {
            let _ = writeln!(
                s,
                "  … and {} more",
                v.violations as usize - v.reported.len()
            );
        }
    }
    s
}
