//! Property tests over random histories of pod-worker and status-manager inputs:
//! BEHAVIOUR.md §Invariants 2, 3, 4, 5, 6, 7, 8 and 10.
//!
//! A history is a random sequence of UpdatePod (every update type, with and without
//! deletion timestamps, terminal phases, grace overrides, evictions, waiters and runtime-only
//! pods), SyncFinished (ok, terminal, error, canceled, and stale ids), runtime status
//! observations (including errors), SyncKnownPods, timer firings (including stale ones and
//! the periodic status pass) and the outcomes of status syncs (patched, failed, not found,
//! recreated with another UID), applied to a model of the API server's pod statuses with the
//! same merge the shell's syncer uses. The node has an API source, so every status change
//! becomes a `SyncPodStatus`. Each is appended as a ledger record through the real engine; the invariants are checked
//! after every step, and determinism (10) over the whole ledger at the end.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use k8s_openapi::api::core::v1::PodStatus;
use ledgerlet::core::command::{Command, SyncPodStatusCommand, WorkType};
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::pod_status::phase::is_terminal;
use ledgerlet::core::record::event::{
    RuntimeStatusObserved, StatusSyncFinished, StatusSyncOutcome, SyncFinished, SyncKnownPods,
    SyncOutcome, TimerFired,
};
use ledgerlet::core::record::{Event, Time};
use ledgerlet::core::runtime_status::{ContainerState, RunningPod, RuntimePodStatus};
use ledgerlet::core::status::merge_pod_status;
use ledgerlet::core::update::{KillPodOptions, PodStatusOverride, UpdatePod, UpdateType};
use ledgerlet::core::{fold, Node, Uid};
use ledgerlet::ledger::{codec, Line, Reader};
use support::core_harness::{container_status, pod, runtime_pod, Harness};

const PODS: usize = 6;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

#[derive(Clone, Debug)]
enum Outcome {
    Ok,
    Terminal,
    Error,
    NetworkNotReady,
    Canceled,
}

#[derive(Clone, Debug)]
enum Action {
    Update {
        pod: usize,
        kind: UpdateType,
        deletion_grace: Option<i64>,
        terminal: bool,
        kill: Option<(Option<i64>, bool, bool)>,
        relabel: bool,
    },
    KillRuntimePod {
        pod: usize,
    },
    Finish {
        pod: usize,
        outcome: Outcome,
        stale: bool,
    },
    Observe {
        pod: usize,
        running: bool,
        error: bool,
    },
    SyncKnown {
        mask: u8,
    },
    Fire {
        index: usize,
        stale: bool,
    },
    Advance {
        ms: u64,
    },
    /// The shell's status sync of `pod` (if one is in flight) ends.
    StatusOutcome {
        pod: usize,
        outcome: StatusOutcome,
    },
}

#[derive(Clone, Debug)]
enum StatusOutcome {
    Patched,
    Failed,
    NotFound,
    Recreated,
}

fn status_outcome() -> impl Strategy<Value = StatusOutcome> {
    prop_oneof![
        6 => Just(StatusOutcome::Patched),
        2 => Just(StatusOutcome::Failed),
        1 => Just(StatusOutcome::NotFound),
        1 => Just(StatusOutcome::Recreated),
    ]
}

fn update_type() -> impl Strategy<Value = UpdateType> {
    prop_oneof![
        Just(UpdateType::Create),
        Just(UpdateType::Update),
        Just(UpdateType::Sync),
        Just(UpdateType::Kill),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        4 => Just(Outcome::Ok),
        1 => Just(Outcome::Terminal),
        1 => Just(Outcome::Error),
        1 => Just(Outcome::NetworkNotReady),
        1 => Just(Outcome::Canceled),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    let p = 0..PODS;
    prop_oneof![
        6 => (
            p.clone(),
            update_type(),
            proptest::option::weighted(0.2, 0i64..40),
            proptest::bool::weighted(0.1),
            proptest::option::weighted(0.3, (proptest::option::of(0i64..40), any::<bool>(), any::<bool>())),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(pod, kind, deletion_grace, terminal, kill, relabel)| Action::Update {
                pod,
                kind,
                deletion_grace,
                terminal,
                kill,
                relabel,
            }),
        1 => p.clone().prop_map(|pod| Action::KillRuntimePod { pod }),
        8 => (p.clone(), outcome(), proptest::bool::weighted(0.1))
            .prop_map(|(pod, outcome, stale)| Action::Finish { pod, outcome, stale }),
        6 => (p, any::<bool>(), proptest::bool::weighted(0.1))
            .prop_map(|(pod, running, error)| Action::Observe { pod, running, error }),
        1 => any::<u8>().prop_map(|mask| Action::SyncKnown { mask }),
        3 => (any::<usize>(), proptest::bool::weighted(0.1))
            .prop_map(|(index, stale)| Action::Fire { index, stale }),
        2 => (0u64..120_000).prop_map(|ms| Action::Advance { ms }),
        6 => (0..PODS, status_outcome())
            .prop_map(|(pod, outcome)| Action::StatusOutcome { pod, outcome }),
    ]
}

fn uid_of(i: usize) -> String {
    format!("p{i}")
}

/// Pods 0–2 are static pods sharing one full name; 3 and 4 are ordinary pods; 5 is an
/// ordinary pod with the statics' full name.
fn make_pod(
    i: usize,
    deletion: Option<i64>,
    terminal: bool,
    relabel: bool,
) -> Arc<k8s_openapi::api::core::v1::Pod> {
    let (name, ns) = match i {
        0..=2 | 5 => ("web", "ns"),
        _ => ("other", "ns"),
    };
    let name = if i == 3 || i == 4 {
        format!("{name}{i}")
    } else {
        name.to_string()
    };
    let mut b = pod(&uid_of(i), &name, ns);
    if i <= 2 {
        b = b.static_pod();
    }
    if let Some(g) = deletion {
        b = b.deleted(g);
    }
    if terminal {
        b = b.phase("Succeeded");
    }
    if relabel {
        b = b.label("v", "2");
    }
    b.build()
}

fn runtime_status(running: bool) -> RuntimePodStatus {
    let state = if running {
        ContainerState::Running
    } else {
        ContainerState::Exited
    };
    let main = container_status("c", "main", state);
    runtime_pod("web", "ns", running, None, vec![main])
}

/// What the checker remembers between steps.
#[derive(Default)]
struct Checker {
    /// Outstanding sync ids per UID (emitted, not yet finished by a matching record).
    outstanding: BTreeMap<Uid, BTreeSet<u64>>,
    /// Grace periods seen in terminating commands per UID life (synced_at identifies a life).
    grace: BTreeMap<Uid, (Time, i64)>,
}

impl Checker {
    /// SyncKnownPods purged the finished workers in `finished`: a later worker of the same UID
    /// is a new life, whose grace period starts afresh (its `synced_at` may equal the old
    /// life's when no time passed, so it cannot tell the lives apart).
    fn purged(&mut self, finished: &BTreeSet<Uid>) {
        self.grace.retain(|uid, _| !finished.contains(uid));
    }

    fn step(
        &mut self,
        node: &Node,
        finished_sync: Option<(Uid, u64)>,
        cmds: &[Command],
        finished_before: &BTreeSet<Uid>,
    ) -> Result<(), TestCaseError> {
        // A SyncFinished folded in this step retires its sync before any successor starts.
        if let Some((uid, id)) = finished_sync {
            if let Some(out) = self.outstanding.get_mut(&uid) {
                out.remove(&id);
            }
        }
        for c in cmds {
            if let Some((uid, id)) = c.sync_id() {
                // Invariant 3: nothing syncs for a finished UID until it is purged.
                prop_assert!(
                    !finished_before.contains(uid),
                    "invariant 3: {} emitted for finished {uid}",
                    c.name()
                );
                // Invariant 7: at most one sync in flight per pod.
                let out = self.outstanding.entry(uid.clone()).or_default();
                prop_assert!(
                    out.is_empty(),
                    "invariant 7: {uid} already has {out:?} in flight, got {id}"
                );
                out.insert(id);
            }
            if let Command::SyncTerminatingPod(t) = c {
                // Invariant 2: the grace period never grows and is never below 1 s.
                if let Some(g) = t.grace_period_s {
                    prop_assert!(g >= 1, "invariant 2: grace {g} < 1 for {}", t.uid);
                    let life = node
                        .pod_workers
                        .status(&t.uid)
                        .map(|s| s.synced_at)
                        .unwrap_or(Time::ZERO);
                    if let Some((l, prev)) = self.grace.get(&t.uid) {
                        if *l == life {
                            prop_assert!(
                                g <= *prev,
                                "invariant 2: grace grew {prev} -> {g} for {}",
                                t.uid
                            );
                        }
                    }
                    self.grace.insert(t.uid.clone(), (life, g));
                }
            }
        }
        // Drop outstanding ids the node no longer considers running (a matching
        // SyncFinished was folded).
        for (uid, ids) in self.outstanding.iter_mut() {
            let running = match node.pod_workers.status(uid).map(|s| &s.activity) {
                Some(ledgerlet::core::pod_workers::WorkerActivity::Syncing { sync_id, .. }) => {
                    Some(*sync_id)
                }
                _ => None,
            };
            ids.retain(|id| Some(*id) == running);
        }
        for (uid, s) in node.pod_workers.statuses() {
            // Invariant 2 on the state itself.
            if s.is_termination_requested() && s.grace_period_s() != 0 {
                prop_assert!(
                    s.grace_period_s() >= 1,
                    "invariant 2: {uid} grace {}",
                    s.grace_period_s()
                );
            }
        }
        // Invariant 6: at most one static pod per full name started and not terminated.
        let mut started: BTreeMap<&str, Vec<&Uid>> = BTreeMap::new();
        for (uid, s) in node.pod_workers.statuses() {
            let is_static = s
                .active_update
                .as_ref()
                .and_then(|u| u.pod.as_ref())
                .is_some_and(|p| ledgerlet::core::pod::is_static(p));
            if is_static && s.is_started() && !s.is_terminated() {
                started.entry(&s.fullname).or_default().push(uid);
            }
        }
        for (name, uids) in started {
            prop_assert!(uids.len() <= 1, "invariant 6: {name} has {uids:?} started");
        }
        Ok(())
    }
}

fn is_ready_true(s: &PodStatus) -> bool {
    s.conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn phase_is_terminal(s: &PodStatus) -> bool {
    s.phase.as_deref().is_some_and(is_terminal)
}

/// The API server's side of the status manager: what it holds and what is being written.
#[derive(Default)]
struct ApiModel {
    /// The status the API server holds, by API object UID.
    held: BTreeMap<Uid, PodStatus>,
    /// The sync in flight per pod, as the core emitted it, whether the pod worker is still
    /// in the life it was emitted in (a finished worker purged by SyncKnownPods may start a
    /// new life of the same UID, whose containers an old sync knows nothing about), and
    /// whether it could have had running containers at that moment.
    in_flight: BTreeMap<Uid, (SyncPodStatusCommand, bool, bool)>,
    /// The newest version the API server acknowledged per pod, in the pod status' current
    /// life (a status the node deleted and made again starts again at 1).
    acked: BTreeMap<Uid, u64>,
}

impl ApiModel {
    /// Invariant 5 on what the core emitted: one sync in flight per pod, never a version the
    /// API server already has a newer (or the same) acknowledgement for, and always the
    /// node's newest version.
    fn emitted(&mut self, node: &Node, cmds: &[Command]) -> Result<(), TestCaseError> {
        for c in cmds {
            let Command::SyncPodStatus(c) = c else {
                continue;
            };
            prop_assert!(
                !self.in_flight.contains_key(&c.uid),
                "invariant 5: a second status sync for {} while version {:?} is in flight",
                c.uid,
                self.in_flight.get(&c.uid).map(|i| i.0.version)
            );
            if let Some(acked) = self.acked.get(&c.uid) {
                prop_assert!(
                    c.version > *acked,
                    "invariant 5: {} sends version {} after {acked} was acknowledged",
                    c.uid,
                    c.version
                );
            }
            let newest = node.statuses.get(&c.uid).map(|v| v.version);
            prop_assert_eq!(
                Some(c.version),
                newest,
                "{} does not send its newest",
                &c.uid
            );
            let could_run = node.pod_workers.could_have_running_containers(&c.uid);
            self.in_flight
                .insert(c.uid.clone(), (c.clone(), true, could_run));
        }
        // a status the node deleted (and so forgot the API server's version of) begins a new
        // life when it comes back
        self.acked
            .retain(|uid, _| node.statuses.api_version(uid).is_some());
        Ok(())
    }

    /// SyncKnownPods purged the finished workers in `finished`: their lives ended.
    fn purged(&mut self, finished: &BTreeSet<Uid>) {
        for (uid, entry) in self.in_flight.iter_mut() {
            if finished.contains(uid) {
                entry.1 = false;
            }
        }
    }

    /// The shell's syncer: merges as it does, checks invariants 4, 5 and 8 on what would
    /// reach the API server, and says how the sync ended.
    fn finish(
        &mut self,
        node: &Node,
        pod: usize,
        outcome: &StatusOutcome,
        now: Time,
    ) -> Result<Option<StatusSyncFinished>, TestCaseError> {
        let uid = Uid::new(uid_of(pod));
        let Some((c, same_life, could_run_then)) = self.in_flight.remove(&uid) else {
            return Ok(None);
        };
        // the node deleted the status this sync carries: what lands is an old life's
        let orphaned = node.statuses.in_flight(&uid).is_some_and(|i| i.orphaned);
        let outcome = match outcome {
            StatusOutcome::Patched => {
                let old = self.held.get(&c.api_uid).cloned().unwrap_or_default();
                let merged =
                    merge_pod_status(&old, &c.status, c.could_have_running_containers, now);
                if phase_is_terminal(&merged) && !phase_is_terminal(&old) {
                    // when the sync was decided, and (in the same worker life: a reused UID
                    // starts a new one) when it lands
                    let could_run_now =
                        same_life && node.pod_workers.could_have_running_containers(&uid);
                    prop_assert!(
                        !could_run_then && !could_run_now,
                        "invariant 4: {uid} reported {:?} while it could have running containers \
                         (then: {could_run_then}, now: {could_run_now}, flag: {}, sent: {:?}, v{})",
                        merged.phase,
                        c.could_have_running_containers,
                        c.status.phase,
                        c.version
                    );
                }
                prop_assert!(
                    !(phase_is_terminal(&merged) && is_ready_true(&merged)),
                    "invariant 8: {uid} reported Ready=True with phase {:?}",
                    merged.phase
                );
                if !orphaned {
                    if let Some(acked) = self.acked.get(&uid) {
                        prop_assert!(
                            c.version > *acked,
                            "invariant 5: {uid} version {} lands after {acked}",
                            c.version
                        );
                    }
                    self.acked.insert(uid.clone(), c.version);
                }
                let changed = merged != old;
                self.held.insert(c.api_uid.clone(), merged);
                if changed {
                    StatusSyncOutcome::Patched {
                        patch_bytes: 1,
                        deleted: false,
                    }
                } else {
                    StatusSyncOutcome::Unchanged { deleted: false }
                }
            }
            StatusOutcome::Failed => StatusSyncOutcome::Failed {
                code: Some(500),
                message: "injected".into(),
            },
            StatusOutcome::NotFound => StatusSyncOutcome::NotFound,
            StatusOutcome::Recreated => StatusSyncOutcome::UidChanged {
                api_uid: format!("{uid}-recreated"),
            },
        };
        Ok(Some(StatusSyncFinished {
            uid,
            version: c.version,
            outcome,
        }))
    }
}

fn run(actions: &[Action]) -> Result<Harness, TestCaseError> {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        ..CoreConfig::default()
    });
    let mut checker = Checker::default();
    let mut api = ApiModel::default();
    for a in actions {
        let finished_before: BTreeSet<Uid> = h
            .workers()
            .statuses()
            .filter(|(_, s)| s.is_finished())
            .map(|(u, _)| u.clone())
            .collect();
        let seq_before = h.engine.ledger().last_seq();
        let finished_sync = match &a {
            Action::Finish {
                pod, stale: false, ..
            } => h
                .syncing(&uid_of(*pod))
                .map(|(id, _)| (Uid::new(uid_of(*pod)), id)),
            _ => None,
        };
        let cmds = match a.clone() {
            Action::Update {
                pod,
                kind,
                deletion_grace,
                terminal,
                kill,
                relabel,
            } => {
                let p = make_pod(pod, deletion_grace, terminal, relabel);
                let mut u = UpdatePod::for_pod(kind, p);
                u.kill = kill.map(|(grace, evict, wait)| KillPodOptions {
                    evict,
                    grace_period_override_s: grace,
                    status_override: evict.then(|| {
                        Box::new(PodStatusOverride {
                            phase: Some("Failed".into()),
                            reason: Some("Evicted".into()),
                            ..PodStatusOverride::default()
                        })
                    }),
                    wait_for_completion: wait,
                });
                h.submit(Event::UpdatePod(u))
            }
            Action::KillRuntimePod { pod } => {
                h.submit(Event::UpdatePod(UpdatePod::kill_running_pod(
                    Arc::new(RunningPod {
                        uid: Uid::new(uid_of(pod)),
                        name: "web".into(),
                        namespace: "ns".into(),
                        containers: vec![],
                        sandboxes: vec![],
                    }),
                    1,
                )))
            }
            Action::Finish {
                pod,
                outcome,
                stale,
            } => {
                let uid = uid_of(pod);
                let (sync_id, work) = match h.syncing(&uid) {
                    Some((id, w)) if !stale => (id, w),
                    Some((id, w)) => (id + 1000, w),
                    None => (999_999, WorkType::Sync),
                };
                let outcome = match outcome {
                    Outcome::Ok => SyncOutcome::Ok,
                    Outcome::Terminal => SyncOutcome::Terminal,
                    Outcome::Error => SyncOutcome::Failed {
                        message: "boom".into(),
                    },
                    Outcome::NetworkNotReady => SyncOutcome::Failed {
                        message: "network is not ready: cni".into(),
                    },
                    Outcome::Canceled => SyncOutcome::Canceled,
                };
                h.submit(Event::SyncFinished(SyncFinished {
                    uid: Uid::new(uid),
                    sync_id,
                    work,
                    outcome,
                }))
            }
            Action::Observe {
                pod,
                running,
                error,
            } => {
                let uid = Uid::new(uid_of(pod));
                h.submit(Event::RuntimeStatusObserved(RuntimeStatusObserved {
                    uid,
                    status: (!error).then(|| Arc::new(runtime_status(running))),
                    error: error.then(|| "rpc error: code = Unavailable".to_string()),
                    read_after_seq: Some(h.engine.ledger().last_seq()),
                }))
            }
            Action::SyncKnown { mask } => {
                let desired = (0..PODS)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| Uid::new(uid_of(i)))
                    .collect();
                h.submit(Event::SyncKnownPods(SyncKnownPods {
                    desired: Some(desired),
                }))
            }
            Action::Fire { index, stale } => {
                let armed: Vec<_> = h.node().timers.armed().collect();
                if armed.is_empty() {
                    continue;
                }
                let t = &armed[index % armed.len()];
                let generation = if stale {
                    t.generation + 1000
                } else {
                    t.generation
                };
                if t.due > h.now {
                    h.now = t.due;
                }
                h.submit(Event::TimerFired(TimerFired {
                    key: t.key.clone(),
                    generation,
                }))
            }
            Action::Advance { ms } => {
                h.advance(ms);
                continue;
            }
            Action::StatusOutcome { pod, outcome } => {
                match api.finish(h.node(), pod, &outcome, h.now)? {
                    Some(done) => h.submit(Event::StatusSyncFinished(done)),
                    None => continue,
                }
            }
        };
        // A step that folds SyncKnownPods may purge a finished UID (and housekeeping may then
        // start a new life for it): invariant 3 holds "until SyncKnownPods purges it".
        let purged = h
            .engine
            .ledger()
            .since(seq_before + 1)
            .any(|r| matches!(r.event, Event::SyncKnownPods(_)));
        if purged {
            api.purged(&finished_before);
            checker.purged(&finished_before);
        }
        api.emitted(h.node(), &cmds)?;
        let finished_before = if purged {
            BTreeSet::new()
        } else {
            finished_before
        };
        checker.step(h.node(), finished_sync, &cmds, &finished_before)?;
    }
    Ok(h)
}

/// Invariant 10: folding the same records from the same snapshot gives the same state and
/// the same commands. The snapshot goes through the NDJSON codec, as an export would.
fn check_determinism(h: &Harness, split: usize) -> Result<(), TestCaseError> {
    let records: Vec<_> = h.engine.ledger().since(0).cloned().collect();
    let split = split % (records.len() + 1);
    let mut a = Node::default();
    for r in &records[..split] {
        fold(&mut a, r);
    }
    let mut buf = Vec::new();
    codec::write_snapshot(
        &mut buf,
        &ledgerlet::ledger::Snapshot {
            seq: a.last_seq,
            at: a.last_at,
            state: a.clone(),
        },
    )
    .unwrap();
    let line: Line<Node> = Reader::new(&buf[..]).next().unwrap().unwrap();
    let Line::Snapshot(snap) = line else {
        panic!("not a snapshot")
    };
    let mut b = snap.state;
    prop_assert_eq!(&a, &b, "the snapshot round-trips");
    for r in &records[split..] {
        let ca = fold(&mut a, r);
        let cb = fold(&mut b, r);
        prop_assert_eq!(ca, cb, "commands differ at seq {}", r.seq);
    }
    prop_assert_eq!(&a, &b);
    prop_assert_eq!(&a, h.node(), "replay equals the live node");
    let (with_memo, without_memo) = fold_with_and_without_status_memo(&records);
    prop_assert!(
        with_memo == without_memo,
        "the status memo changed a command or the state"
    );
    let (with_memo, without_memo) = fold_with_and_without_housekeeping_memo(&records);
    prop_assert!(
        with_memo == without_memo,
        "the housekeeping memo changed a command or the state"
    );
    Ok(())
}

/// One fold of a ledger: the commands of each record and the final state as JSON.
type FoldRun = (Vec<Vec<Command>>, String);

/// Folds `records` twice: once normally, once forgetting the status memo before every
/// record (so every status is generated). Returns each run's commands per record and final
/// state, serialised (the memo itself is not state and is not serialised).
fn fold_with_and_without_status_memo(
    records: &[Arc<ledgerlet::core::record::Record>],
) -> (FoldRun, FoldRun) {
    fold_with_and_without(records, |n| n.statuses.memo.clear())
}

/// Folds `records` twice: once normally, once forgetting the housekeeping memo before every
/// record (so every housekeeping pass walks every map). As above.
fn fold_with_and_without_housekeeping_memo(
    records: &[Arc<ledgerlet::core::record::Record>],
) -> (FoldRun, FoldRun) {
    fold_with_and_without(records, |n| n.housekeeping_memo.clear())
}

/// Folds `records` twice, the second time calling `forget` before every record.
fn fold_with_and_without(
    records: &[Arc<ledgerlet::core::record::Record>],
    forget: impl Fn(&mut Node),
) -> (FoldRun, FoldRun) {
    let mut a = Node::default();
    let mut b = Node::default();
    let mut ca = Vec::new();
    let mut cb = Vec::new();
    for r in records {
        ca.push(fold(&mut a, r));
        forget(&mut b);
        cb.push(fold(&mut b, r));
    }
    let state = |n: &Node| serde_json::to_string(n).unwrap();
    ((ca, state(&a)), (cb, state(&b)))
}

/// Invariant 10 for the status memo (`core::status_memo`): on a busy node where most syncs
/// are steady resyncs, skipping their generation changes no command and no state.
#[test]
fn invariant_10_status_memo_changes_no_command_or_state_on_a_busy_node() {
    let sim = ledgerlet::sim::scenarios::busy_node(60, 5 * 60 * 1000);
    let records: Vec<_> = sim.engine().ledger().since(0).cloned().collect();
    let mut probe = Node::default();
    let mut hits_possible = 0;
    for r in &records {
        fold(&mut probe, r);
        hits_possible = hits_possible.max(probe.statuses.memo.len());
    }
    assert!(
        hits_possible > 0,
        "the workload never left a status unchanged, so this test would prove nothing"
    );
    let (with_memo, without_memo) = fold_with_and_without_status_memo(&records);
    assert_eq!(with_memo.0.len(), without_memo.0.len());
    for (i, (x, y)) in with_memo.0.iter().zip(&without_memo.0).enumerate() {
        assert_eq!(x, y, "commands differ at record {}", records[i].seq);
    }
    assert!(with_memo.1 == without_memo.1, "final states differ");
}

/// Invariant 10 for the housekeeping memo (`core::housekeeping_memo`): on a busy node
/// (pods added, resynced, some failing, some completing, some deleted), reusing
/// housekeeping's set differences while the key sets are unchanged gives the same commands
/// and state as walking every map on every pass.
#[test]
fn invariant_10_housekeeping_memo_changes_no_command_or_state_on_a_busy_node() {
    let sim = ledgerlet::sim::scenarios::busy_node(60, 7 * 60 * 1000);
    let records: Vec<_> = sim.engine().ledger().since(0).cloned().collect();
    let mut probe = Node::default();
    for r in &records {
        fold(&mut probe, r);
    }
    assert!(
        probe.housekeeping_memo.hits() > 100,
        "housekeeping never reused an answer, so this test would prove nothing"
    );
    let (with_memo, without_memo) = fold_with_and_without_housekeeping_memo(&records);
    assert_eq!(with_memo.0.len(), without_memo.0.len());
    for (i, (x, y)) in with_memo.0.iter().zip(&without_memo.0).enumerate() {
        assert_eq!(x, y, "commands differ at record {}", records[i].seq);
    }
    assert!(with_memo.1 == without_memo.1, "final states differ");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, .. ProptestConfig::default() })]

    #[test]
    fn invariants_2_3_4_5_6_7_8_hold_over_random_histories(actions in proptest::collection::vec(action(), 1..160)) {
        run(&actions)?;
    }

    #[test]
    fn invariant_10_same_records_from_the_same_snapshot_fold_identically(
        actions in proptest::collection::vec(action(), 1..120),
        split in any::<usize>(),
    ) {
        let h = run(&actions)?;
        check_determinism(&h, split)?;
    }
}
