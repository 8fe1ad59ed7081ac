//! The fold, observed: a span `fold <kind>` per record, per-kind fold statistics, pod-worker
//! transitions and the kubelet's pod start metrics.
//!
//! Owns, for the engine: the trace context of each record (a child of its parent record's
//! span, of the command span that reported it, or of the pod's first span; else a new root
//! sampled by ratio), the compact fold spans handed to `observe::export`, and the metrics
//! that must be counted per record (`ledgerlet_ledger_records_total{kind}`,
//! `ledgerlet_fold_duration_seconds{kind}`, `ledgerlet_pod_worker_transitions_total{from,to}`,
//! `ledgerlet_pod_worker_transition_duration_seconds{from,to}`,
//! `kubelet_pod_worker_start_duration_seconds`, `kubelet_pod_start_duration_seconds`,
//! `kubelet_pod_start_sli_duration_seconds`, `kubelet_pod_start_total_duration_seconds`,
//! `kubelet_containers_per_pod_count`, `kubelet_restarted_pods_total{static}`,
//! `kubelet_orphaned_runtime_pods_total`). They are plain integers read under the engine's
//! lock at scrape time: a registry lookup per record would cost more than the fold.
//!
//! Must not change what the fold does: the core never sees anything from here, and the trace
//! context is data in the record that replay carries but never reads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::core::pod_workers::{PodSyncStatus, PodWorkerState};
use crate::core::update::UpdatePod;
use crate::core::update::UpdateType;
use crate::core::{pod, Command, Node, Uid};
use crate::ledger::event::{RuntimeAction, SyncFinished, SyncOutcome};
use crate::ledger::{Event, Record, Time, TraceParent};

use super::clock::{Stopwatch, TickHistograms};
use super::context::{IdGen, RootSampler};
use super::export::{FoldBatch, FoldSpan, SpanQueue, Transition};
use super::exposition::{Histogram, Text};
use super::fasthash::{FxHashMap, UidCache, UID_CACHE_MAX_LEN};
use super::metrics::{DEF_BUCKETS, FAST_BUCKETS, POD_STARTUP_BUCKETS};
use super::starting::FilteredUidMap;

/// Records folded, by kind.
pub const RECORDS_TOTAL: &str = "ledgerlet_ledger_records_total";
/// Fold latency, by kind.
pub const FOLD_DURATION_SECONDS: &str = "ledgerlet_fold_duration_seconds";
/// Pod worker lifecycle transitions.
pub const TRANSITIONS_TOTAL: &str = "ledgerlet_pod_worker_transitions_total";
/// Time spent in the `from` state of a transition.
pub const TRANSITION_DURATION_SECONDS: &str = "ledgerlet_pod_worker_transition_duration_seconds";

/// Buckets of `kubelet_containers_per_pod_count` (ExponentialBuckets(1, 2, 5)).
pub const CONTAINERS_PER_POD_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0];
/// Buckets of the transition durations (a pod may live for hours).
pub const TRANSITION_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
];
/// Fold spans buffered on the engine before they are moved to the export queue.
pub const SPAN_BUFFER: usize = 128;
/// Longest time a fold span waits in the engine's buffer while records keep coming.
pub const SPAN_BUFFER_AGE_MS: u64 = 20;
/// Pods remembered for trace parenting and pod start metrics (oldest forgotten first).
pub const MAX_TRACKED_PODS: usize = 16_384;

/// A pod worker's lifecycle, for transitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// No worker.
    None,
    /// `sync`.
    Sync,
    /// `terminating`.
    Terminating,
    /// `terminated`.
    Terminated,
    /// `SyncTerminatedPod` completed.
    Finished,
}

impl Phase {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::None => "none",
            Phase::Sync => "sync",
            Phase::Terminating => "terminating",
            Phase::Terminated => "terminated",
            Phase::Finished => "finished",
        }
    }
}

/// The pod a record can move between worker phases, found before its fold: a `Uid` from the
/// event, a `Uid` in the observer's [`UidCache`] slot, or (a pod without a worker yet) the
/// text of its `metadata.uid`. A `Uid` is looked up by its inline prefix, text by comparing
/// strings, which is several times slower.
#[derive(Clone, Copy)]
enum Subject<'a> {
    Uid(&'a Uid),
    Cached(usize),
    Text(&'a str),
}

impl Subject<'_> {
    fn status<'n>(self, node: &'n Node, uids: &UidCache) -> Option<&'n PodSyncStatus> {
        match self {
            Subject::Uid(u) => node.pod_workers.status(u),
            Subject::Cached(i) => node.pod_workers.status(uids.at(i)),
            Subject::Text(t) => node.pod_workers.status_by_str(t),
        }
    }

    fn phase(self, node: &Node, uids: &UidCache) -> (Phase, Option<Time>) {
        phase_of(self.status(node, uids))
    }

    /// True if the pod is desired (in the pod manager) and its worker is live: started, not
    /// asked to terminate, not finished. See [`FoldObserver::fold`] for what that buys.
    #[cfg(debug_assertions)]
    fn live(self, node: &Node, uids: &UidCache) -> bool {
        self.live_given(self.status(node, uids), node, uids)
    }

    /// [`Subject::live`] with the worker's status already looked up.
    fn live_given(self, status: Option<&PodSyncStatus>, node: &Node, uids: &UidCache) -> bool {
        let live =
            status.is_some_and(|s| s.is_started() && !s.is_termination_requested() && !s.finished);
        live && match self {
            Subject::Uid(u) => node.pod_manager.get(u).is_some(),
            Subject::Cached(i) => node.pod_manager.get(uids.at(i)).is_some(),
            Subject::Text(t) => node.pod_manager.get(t).is_some(),
        }
    }

    fn to_uid(self, uids: &UidCache) -> Uid {
        match self {
            Subject::Uid(u) => u.clone(),
            Subject::Cached(i) => uids.at(i).clone(),
            Subject::Text(t) => Uid::new(t),
        }
    }
}

/// The worker phase of a pod worker's status and when it entered it.
fn phase_of(status: Option<&PodSyncStatus>) -> (Phase, Option<Time>) {
    match status {
        None => (Phase::None, None),
        Some(s) if s.finished => (Phase::Finished, s.terminated_at),
        Some(s) => match s.state() {
            PodWorkerState::Sync => (Phase::Sync, Some(s.synced_at)),
            PodWorkerState::Terminating => (Phase::Terminating, s.terminating_at),
            PodWorkerState::Terminated => (Phase::Terminated, s.terminated_at),
        },
    }
}

/// Debug builds: a fold watched as [`Watch::Quiet`] did not move the worker between phases,
/// and a live worker stayed live.
#[cfg(debug_assertions)]
fn check_quiet(
    node: &Node,
    uids: &UidCache,
    record: &Record,
    subject: Subject<'_>,
    (phase, live): (Phase, bool),
) {
    let after = subject.phase(node, uids).0;
    assert_eq!(
        phase,
        after,
        "the fold of record {} ({}) moved a worker the observer took for quiet",
        record.seq,
        record.event.kind()
    );
    assert!(
        !live || subject.live(node, uids),
        "the fold of record {} ({}) ended a live worker the observer took for quiet",
        record.seq,
        record.event.kind()
    );
}

/// Where a record's span hangs.
#[derive(Clone, Copy, Debug)]
pub enum Parent {
    /// A derived record: its parent is the span of the record whose fold emitted it.
    Record(Option<TraceParent>),
    /// An input: the span that reported it (a command's), if any.
    Input(Option<TraceParent>),
}

/// A record's span before the record is appended.
#[derive(Clone, Copy, Debug)]
pub struct Opened {
    /// The span's context (the record's `trace`).
    pub ctx: TraceParent,
    /// The parent span id (0 for a root).
    pub parent_span_id: u64,
}

/// Creates fold spans and hands them to the export queue in batches.
pub struct FoldTracer {
    sampler: RootSampler,
    ids: IdGen,
    queue: Arc<SpanQueue>,
    buffer: FoldBatch,
    /// Stopwatch ticks when the oldest buffered span was finished.
    buffered_since: Option<u64>,
    /// [`SPAN_BUFFER_AGE_MS`] in stopwatch ticks.
    max_age_ticks: u64,
    /// The first span of each pod's trace: later inputs about the pod join that trace.
    pods: FxHashMap<Uid, TraceParent>,
    pod_order: std::collections::VecDeque<Uid>,
}

impl FoldTracer {
    /// A tracer feeding `queue`.
    pub fn new(sampler: RootSampler, ids: IdGen, queue: Arc<SpanQueue>) -> FoldTracer {
        static MAX_AGE_TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        FoldTracer {
            sampler,
            ids,
            queue,
            buffer: FoldBatch::with_capacity(SPAN_BUFFER),
            buffered_since: None,
            max_age_ticks: *MAX_AGE_TICKS
                .get_or_init(|| Stopwatch::new().ticks_within(SPAN_BUFFER_AGE_MS * 1_000_000)),
            pods: FxHashMap::default(),
            pod_order: std::collections::VecDeque::new(),
        }
    }

    #[inline]
    fn child(&mut self, parent: TraceParent) -> Opened {
        Opened {
            ctx: TraceParent::new(parent.trace_id(), self.ids.span_id(), parent.sampled()),
            parent_span_id: parent.span_id(),
        }
    }

    #[inline]
    fn open(&mut self, parent: Parent, event: &Event) -> Opened {
        match parent {
            Parent::Record(Some(p)) | Parent::Input(Some(p)) => self.child(p),
            Parent::Record(None) | Parent::Input(None) => self.open_root(event),
        }
    }

    /// A record without a parent span joins its pod's trace, else starts a trace.
    #[inline(never)]
    fn open_root(&mut self, event: &Event) -> Opened {
        // by text: no `Uid` is made (for a pod object, allocated) unless a trace starts
        let uid = event.pod_uid_str();
        if let Some(root) = uid.and_then(|u| self.pods.get(u)).copied() {
            return self.child(root);
        }
        let trace_id = self.ids.trace_id();
        let ctx = TraceParent::new(
            trace_id,
            self.ids.span_id(),
            self.sampler.sample_root(trace_id),
        );
        if let Some(u) = event.pod_uid() {
            self.remember(u, ctx);
        }
        Opened {
            ctx,
            parent_span_id: 0,
        }
    }

    fn remember(&mut self, uid: Uid, ctx: TraceParent) {
        if self.pods.len() >= MAX_TRACKED_PODS {
            while let Some(old) = self.pod_order.pop_front() {
                if self.pods.remove(&old).is_some() {
                    break;
                }
            }
        }
        self.pod_order.push_back(uid.clone());
        self.pods.insert(uid, ctx);
    }

    #[cold]
    #[inline(never)]
    fn forget(&mut self, uid: &Uid) {
        self.pods.remove(uid);
        if self.pod_order.len() > 2 * MAX_TRACKED_PODS {
            let pods = &self.pods;
            self.pod_order.retain(|u| pods.contains_key(u));
        }
    }

    #[inline]
    fn finished(&mut self, span: FoldSpan, transition: Option<Transition>, now_ticks: u64) {
        if self.buffer.is_empty() {
            self.buffered_since = Some(now_ticks);
        }
        match transition {
            None => self.buffer.push(span),
            Some(t) => self.buffer.push_with_transition(span, t),
        }
        if self.buffer.len() >= SPAN_BUFFER {
            self.flush();
        }
    }

    #[inline]
    fn flush_if_old(&mut self, now_ticks: u64) {
        if self
            .buffered_since
            .is_some_and(|t| now_ticks.wrapping_sub(t) >= self.max_age_ticks)
        {
            self.flush();
        }
    }

    #[inline(never)]
    fn flush(&mut self) {
        self.queue.push_folds(&mut self.buffer);
        self.buffered_since = None;
    }
}

/// A pod between its first sighting and its start.
#[derive(Clone, Debug)]
struct PodStart {
    first_seen: Time,
    created: Option<Time>,
    worker_started: bool,
    running_seen: bool,
    pull_started: Option<Time>,
    pull_finished: Option<Time>,
}

/// What the observer knows before a fold that may move a pod worker between phases.
#[derive(Clone, Copy)]
struct Before<'a> {
    subject: Subject<'a>,
    phase: Phase,
    entered: Option<Time>,
}

/// How a fold of an `UpdatePod` or `SyncFinished` is watched for a transition.
#[derive(Clone, Copy)]
enum Watch<'a> {
    /// The worker's phase is looked up before and after the fold.
    Exact(Before<'a>),
    /// The fold cannot move the worker between phases (a live worker and a benign record,
    /// or a record the workers ignore). Debug builds check it with the lookups anyway.
    Quiet {
        subject: Subject<'a>,
        /// The phase before the fold, and whether the worker was marked live.
        #[cfg(debug_assertions)]
        check: (Phase, bool),
    },
}

/// The fold statistics, transitions and pod start metrics of one engine, plus its tracer.
pub struct FoldObserver {
    watch: Stopwatch,
    /// Fold durations by kind (their counts are `ledgerlet_ledger_records_total`).
    folds: TickHistograms,
    transitions: BTreeMap<(Phase, Phase), (u64, Histogram)>,
    starting: FilteredUidMap<PodStart>,
    /// The pod workers' `Uid`s by text, for records that name their pod by text.
    uids: UidCache,
    worker_start: Histogram,
    pod_start: Histogram,
    pod_start_sli: Histogram,
    pod_start_total: Histogram,
    containers_per_pod: Histogram,
    restarted_pods: [u64; 2],
    orphaned_runtime_pods: u64,
    /// The current input's `at` (Unix ns) and the stopwatch ticks of its first fold: a fold
    /// span starts at `at` plus the time elapsed since.
    input_at_unix_ns: u64,
    input_base_ticks: u64,
    base_pending: bool,
    last_end_ticks: u64,
    /// The tag of live workers in `uids`; bumped (forgetting every live mark) when a record
    /// may have orphaned any pod.
    live_tag: u16,
    tracer: Option<FoldTracer>,
    /// Folds watched as quiet (tests check the fast path is taken).
    #[cfg(test)]
    quiet_folds: u64,
}

impl Default for FoldObserver {
    fn default() -> Self {
        FoldObserver::new(None)
    }
}

impl FoldObserver {
    /// An observer; with a tracer, records get trace contexts and fold spans are exported.
    pub fn new(tracer: Option<FoldTracer>) -> FoldObserver {
        FoldObserver {
            watch: Stopwatch::new(),
            folds: TickHistograms::new(FAST_BUCKETS, Event::KINDS.len()),
            transitions: BTreeMap::new(),
            starting: FilteredUidMap::default(),
            uids: UidCache::default(),
            worker_start: Histogram::new(DEF_BUCKETS),
            pod_start: Histogram::new(POD_STARTUP_BUCKETS),
            pod_start_sli: Histogram::new(POD_STARTUP_BUCKETS),
            pod_start_total: Histogram::new(POD_STARTUP_BUCKETS),
            containers_per_pod: Histogram::new(CONTAINERS_PER_POD_BUCKETS),
            restarted_pods: [0; 2],
            orphaned_runtime_pods: 0,
            input_at_unix_ns: 0,
            input_base_ticks: 0,
            base_pending: true,
            last_end_ticks: 0,
            live_tag: 1,
            tracer,
            #[cfg(test)]
            quiet_folds: 0,
        }
    }

    /// True when records get trace contexts.
    pub fn tracing(&self) -> bool {
        self.tracer.is_some()
    }

    /// Marks the start of an input appended at `at` (span times are `at` plus the monotonic
    /// time elapsed since).
    #[inline]
    pub fn begin_input(&mut self, at: Time) {
        // the monotonic base is taken by the input's first fold (one clock read less)
        self.input_at_unix_ns = at.unix_nanos().max(0) as u64;
        self.base_pending = true;
    }

    /// The span (and so the `trace`) of a record about to be appended.
    #[inline]
    pub fn open(&mut self, parent: Parent, event: &Event) -> Option<Opened> {
        self.tracer.as_mut().map(|t| t.open(parent, event))
    }

    /// The first span of a pod's trace, if the pod is known.
    pub fn pod_trace(&self, uid: &Uid) -> Option<TraceParent> {
        self.tracer.as_ref()?.pods.get(uid).copied()
    }

    /// The span a command's own span hangs under: the span of the record whose fold emitted
    /// it (its `trace`), or for a status sync started by a node-wide pass, the pod's first
    /// span. `None` without tracing.
    #[inline]
    pub fn command_parent(
        &self,
        cause_trace: Option<TraceParent>,
        cause: &Event,
        command: &Command,
    ) -> Option<TraceParent> {
        let trace = cause_trace?;
        match command {
            Command::SyncPodStatus(c) if cause.pod_uid_str() != Some(c.uid.as_str()) => {
                Some(self.pod_trace(&c.uid).unwrap_or(trace))
            }
            _ => Some(trace),
        }
    }

    /// Folds `record` and records what the fold did.
    ///
    /// This runs once per record on the engine's thread, so its common path is short and
    /// touches little memory: two stopwatch reads, a bucket counter and, with tracing, one
    /// 64-byte [`FoldSpan`] written to a batch. Names, attributes and OTLP types are made on
    /// the export thread; bucket sums and seconds at scrape time.
    ///
    /// Transitions: only `UpdatePod` and `SyncFinished` are watched (as before this fast
    /// path existed), and a transition is a difference between the worker's phase looked up
    /// before and after the fold. Most of these records cannot move the worker, and skip
    /// both lookups: once a looked-up fold leaves a worker *live* (started, not asked to
    /// terminate, not finished, its pod desired), the observer marks it so (a tag in the
    /// [`UidCache`]); while it is marked, an update that does not kill it and carries neither
    /// a deleted nor a terminal pod, and a sync result other than `Terminal`, leave its phase
    /// as it is (`PodWorkers::update_pod`, `on_sync_finished`). Only these two records,
    /// `RuntimeStatusObserved`, `KillDeadline` timers and `SyncKnownPods` touch the workers:
    /// a runtime status and a kill deadline cannot change a started worker's phase, and
    /// `SyncKnownPods` only orphans pods that are no longer desired. A `PodRemoved` unmarks its pod, and a
    /// `SyncKnownPods` with an explicit list unmarks every pod. Debug builds do the lookups on
    /// the fast path too and panic if the worker moved, so every test that runs the engine
    /// checks the reasoning against the core as it is. The rarer work (new pods, looked-up
    /// folds, transitions, pods still starting, records without a parent span) is out of
    /// line.
    pub fn fold(
        &mut self,
        node: &mut Node,
        record: &Record,
        opened: Option<Opened>,
    ) -> Vec<Command> {
        let watch = match &record.event {
            Event::UpdatePod(u) => self.watch_update(node, u),
            Event::SyncFinished(f) => self.watch_sync_finished(node, f),
            Event::PodAdded(c) => {
                self.pod_added(node, record.at, &c.pod);
                None
            }
            Event::PodRemoved(c) => {
                // no longer desired: the next SyncKnownPods may orphan it
                if let Some(i) = self.uids.find(pod::uid_str(&c.pod)) {
                    self.uids.set_tag(i, 0);
                }
                None
            }
            Event::SyncKnownPods(k) if k.desired.is_some() => {
                self.forget_live();
                None
            }
            _ => None,
        };
        let started = self.watch.ticks();
        let commands = crate::core::fold(node, record);
        let ended = self.watch.ticks();
        if self.base_pending {
            self.input_base_ticks = started;
            self.base_pending = false;
        }
        self.last_end_ticks = ended;
        let kind = record.event.kind_index();
        self.folds.observe(kind, ended.wrapping_sub(started));
        let transition = match watch {
            Some(Watch::Exact(b)) => self.after(node, record, b),
            Some(Watch::Quiet {
                subject,
                #[cfg(debug_assertions)]
                check,
            }) => {
                #[cfg(debug_assertions)]
                check_quiet(node, &self.uids, record, subject, check);
                #[cfg(test)]
                {
                    self.quiet_folds += 1;
                }
                let _ = subject;
                None
            }
            None => None,
        };
        if !self.starting.is_empty() {
            self.pod_start_progress(node, record, &commands);
        }
        if let Event::UpdatePod(u) = &record.event {
            if u.running_pod.is_some() && u.pod.is_none() {
                self.orphaned_runtime_pods += 1;
            }
        }
        if let (Some(t), Some(o)) = (self.tracer.as_mut(), opened) {
            if o.ctx.sampled() {
                let w = &self.watch;
                t.finished(
                    FoldSpan {
                        ctx: o.ctx,
                        parent_span_id: o.parent_span_id,
                        seq: record.seq,
                        start_unix_ns: self.input_at_unix_ns
                            + w.nanos(self.input_base_ticks, started),
                        duration_ns: w.nanos(started, ended),
                        kind: kind as u16,
                    },
                    transition,
                    ended,
                );
            }
            if let Event::SyncFinished(SyncFinished {
                uid,
                work: crate::core::command::WorkType::Terminated,
                ..
            }) = &record.event
            {
                t.forget(uid);
            }
        }
        commands
    }

    /// How to watch the fold of an `UpdatePod` (the cases follow `PodWorkers::update_pod`).
    #[inline]
    fn watch_update<'a>(&mut self, node: &Node, u: &'a UpdatePod) -> Option<Watch<'a>> {
        let subject = match (&u.pod, &u.running_pod) {
            (Some(p), _) => {
                let text = pod::uid_str(p);
                let workers = &node.pod_workers;
                let slot = self.uids.find_or(text, || workers.uid_key(text).cloned());
                // A live worker only leaves its phase when the update kills it, or its pod is
                // deleted or in a terminal phase.
                let benign = u.update_type != UpdateType::Kill
                    && !pod::is_deleted(p)
                    && !pod::has_terminal_phase(p);
                match slot {
                    Some(i) if benign && self.uids.tag(i) == self.live_tag => {
                        return Some(self.quiet(node, Subject::Cached(i), true));
                    }
                    Some(i) => Subject::Cached(i),
                    // not cached because the workers do not know the pod (or its UID is too
                    // long to cache)
                    None if text.len() <= UID_CACHE_MAX_LEN => {
                        return Some(Watch::Exact(Before {
                            subject: Subject::Text(text),
                            phase: Phase::None,
                            entered: None,
                        }));
                    }
                    None => Subject::Text(text),
                }
            }
            // runtime pods can only be killed: anything else leaves the workers as they are
            (None, Some(r)) if u.update_type != UpdateType::Kill => {
                return Some(self.quiet(node, Subject::Uid(&r.uid), false));
            }
            (None, Some(r)) => Subject::Uid(&r.uid),
            (None, None) => return None,
        };
        Some(self.exact(node, subject))
    }

    /// How to watch the fold of a `SyncFinished` (the cases follow
    /// `PodWorkers::on_sync_finished`): a live worker's sync is a `Sync` work, which moves it
    /// to terminating only when the pod turned out terminal.
    #[inline]
    fn watch_sync_finished<'a>(&mut self, node: &Node, f: &'a SyncFinished) -> Option<Watch<'a>> {
        if f.outcome != SyncOutcome::Terminal {
            if let Some(i) = self.uids.find(f.uid.as_str()) {
                if self.uids.tag(i) == self.live_tag {
                    return Some(self.quiet(node, Subject::Cached(i), true));
                }
            }
        }
        Some(self.exact(node, Subject::Uid(&f.uid)))
    }

    #[inline]
    fn quiet<'a>(&self, node: &Node, subject: Subject<'a>, live: bool) -> Watch<'a> {
        #[cfg(debug_assertions)]
        let check = {
            assert!(
                !live || subject.live(node, &self.uids),
                "a worker marked live is not"
            );
            (subject.phase(node, &self.uids).0, live)
        };
        #[cfg(not(debug_assertions))]
        let _ = (node, live);
        Watch::Quiet {
            subject,
            #[cfg(debug_assertions)]
            check,
        }
    }

    /// The worker's phase before the fold, looked up.
    #[inline(never)]
    fn exact<'a>(&self, node: &Node, subject: Subject<'a>) -> Watch<'a> {
        let (phase, entered) = subject.phase(node, &self.uids);
        Watch::Exact(Before {
            subject,
            phase,
            entered,
        })
    }

    /// Forgets which workers are live (a record may have orphaned any pod).
    #[cold]
    fn forget_live(&mut self) {
        self.live_tag = self.live_tag.wrapping_add(1);
        if self.live_tag == 0 {
            self.uids.clear_tags();
            self.live_tag = 1;
        }
    }

    /// Counts the transition a fold made, if it made one; with tracing, its span event.
    #[inline(never)]
    fn after(&mut self, node: &Node, record: &Record, before: Before<'_>) -> Option<Transition> {
        // a pod known by text only: find the workers' `Uid` once (then look up by it and
        // cache it)
        let subject = match before.subject {
            Subject::Text(t) => match node.pod_workers.uid_key(t) {
                Some(key) => {
                    let key = key.clone();
                    match self.uids.find_or(t, || Some(key.clone())) {
                        Some(i) => Subject::Cached(i),
                        None => {
                            let status = node.pod_workers.status(&key);
                            return self.after_status(record, before, status, None);
                        }
                    }
                }
                None => Subject::Text(t),
            },
            s => s,
        };
        let status = subject.status(node, &self.uids);
        let live = subject.live_given(status, node, &self.uids);
        let slot = match subject {
            Subject::Cached(i) => Some(i),
            Subject::Uid(u) if live => {
                let text = u.as_str();
                let workers = &node.pod_workers;
                self.uids.find_or(text, || workers.uid_key(text).cloned())
            }
            Subject::Uid(u) => self.uids.find(u.as_str()),
            Subject::Text(_) => None,
        };
        let before = Before { subject, ..before };
        self.after_status(record, before, status, slot.map(|i| (i, live)))
    }

    /// Marks the worker live or not (so its next benign records skip the lookups) and counts
    /// a transition if the fold made one.
    fn after_status(
        &mut self,
        record: &Record,
        before: Before<'_>,
        status: Option<&PodSyncStatus>,
        mark: Option<(usize, bool)>,
    ) -> Option<Transition> {
        let (to, _) = phase_of(status);
        if let Some((i, live)) = mark {
            self.uids.set_tag(i, if live { self.live_tag } else { 0 });
        }
        if to == before.phase {
            return None;
        }
        self.transition(record, before, to)
    }

    /// Counts a transition (rare: a few per pod life) and, with tracing, makes its span event.
    #[cold]
    #[inline(never)]
    fn transition(&mut self, record: &Record, before: Before<'_>, to: Phase) -> Option<Transition> {
        let from = before.phase;
        let e = self
            .transitions
            .entry((from, to))
            .or_insert_with(|| (0, Histogram::new(TRANSITION_BUCKETS)));
        e.0 += 1;
        if let Some(t) = before.entered {
            e.1.observe(record.at.since(t).as_secs_f64());
        }
        self.tracer.as_ref()?;
        Some(Transition {
            from: from.as_str(),
            to: to.as_str(),
            uid: before.subject.to_uid(&self.uids),
        })
    }

    /// Marks the end of an input: buffered fold spans older than [`SPAN_BUFFER_AGE_MS`] go to
    /// the export queue.
    #[inline]
    pub fn end_input(&mut self) {
        if let Some(t) = self.tracer.as_mut() {
            t.flush_if_old(self.last_end_ticks);
        }
    }

    /// Moves every buffered fold span to the export queue (the engine is idle).
    pub fn flush_spans(&mut self) {
        if let Some(t) = self.tracer.as_mut() {
            t.flush();
        }
    }

    #[cold]
    #[inline(never)]
    fn pod_added(&mut self, node: &Node, at: Time, p: &k8s_openapi::api::core::v1::Pod) {
        let uid = pod::uid(p);
        let is_static = pod::is_static(p);
        // kubelet_restarted_pods_total: the same UID comes back after its worker finished
        if let Some(s) = node.pod_workers.status(&uid) {
            if s.finished || s.is_terminated() {
                self.restarted_pods[usize::from(is_static)] += 1;
            }
            return;
        }
        if self.starting.contains_key(uid.as_str()) {
            return;
        }
        if self.starting.len() >= MAX_TRACKED_PODS {
            return;
        }
        let created = p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(crate::core::pod_status::time_from_api);
        self.starting.insert(
            uid,
            PodStart {
                first_seen: at,
                created,
                worker_started: false,
                running_seen: false,
                pull_started: None,
                pull_finished: None,
            },
        );
    }

    /// Pod start metrics: what a fold did for the pods between their first sighting and
    /// their start (only called while there are such pods).
    #[inline(never)]
    fn pod_start_progress(&mut self, node: &Node, record: &Record, commands: &[Command]) {
        for c in commands {
            if let Command::SyncPod(s) = c {
                if s.update_type != UpdateType::Create {
                    continue;
                }
                if let Some(st) = self.starting.get_mut(s.uid.as_str()) {
                    if !st.worker_started {
                        st.worker_started = true;
                        self.worker_start
                            .observe(record.at.since(st.first_seen).as_secs_f64());
                        let n = s.pod.spec.as_ref().map_or(0, |sp| sp.containers.len());
                        self.containers_per_pod.observe(n as f64);
                    }
                }
            }
        }
        let uid = match &record.event {
            Event::RuntimeActionFinished(a) => {
                if let (RuntimeAction::PullImage { .. }, Some(st)) =
                    (&a.action, self.starting.get_mut(a.uid.as_str()))
                {
                    let begun = Time::from_unix_nanos(
                        record.at.unix_nanos() - (a.duration_ms as i64) * 1_000_000,
                    );
                    st.pull_started = Some(st.pull_started.map_or(begun, |t| t.min(begun)));
                    st.pull_finished =
                        Some(st.pull_finished.map_or(record.at, |t| t.max(record.at)));
                }
                &a.uid
            }
            Event::RuntimeStatusObserved(o) => &o.uid,
            Event::PlegEvent(p) => &p.uid,
            Event::SyncFinished(f) => {
                if f.work != crate::core::command::WorkType::Sync {
                    self.starting.remove(f.uid.as_str());
                    return;
                }
                &f.uid
            }
            Event::PodRemoved(c) | Event::PodDeleted(c) => {
                self.starting.remove(pod::uid_str(&c.pod));
                return;
            }
            _ => return,
        };
        let Some(st) = self.starting.get_mut(uid.as_str()) else {
            return;
        };
        let Some(v) = node.statuses.get(uid) else {
            return;
        };
        let status = &v.status;
        let running = status.phase.as_deref() == Some("Running");
        if running && !st.running_seen {
            st.running_seen = true;
            self.pod_start
                .observe(record.at.since(st.first_seen).as_secs_f64());
        }
        let all_started = running
            && status.container_statuses.as_ref().is_some_and(|cs| {
                !cs.is_empty()
                    && cs
                        .iter()
                        .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            });
        if all_started {
            let from = st.created.unwrap_or(st.first_seen);
            let total = record.at.since(from);
            let pulling = match (st.pull_started, st.pull_finished) {
                (Some(a), Some(b)) => b.since(a),
                _ => Duration::ZERO,
            };
            self.pod_start_total.observe(total.as_secs_f64());
            self.pod_start_sli
                .observe(total.saturating_sub(pulling).as_secs_f64());
            self.starting.remove(uid.as_str());
        }
    }

    /// Writes the families this observer keeps.
    pub fn render(&self, out: &mut Text) {
        out.family(RECORDS_TOTAL, "counter", "Ledger records folded, by kind.");
        for (i, kind) in Event::KINDS.iter().enumerate() {
            out.sample(RECORDS_TOTAL, &[("kind", kind)], self.folds.count(i) as f64);
        }
        out.family(
            FOLD_DURATION_SECONDS,
            "histogram",
            "Time to fold one record into the node state, by kind.",
        );
        for (i, kind) in Event::KINDS.iter().enumerate() {
            if self.folds.count(i) > 0 {
                let h = self.folds.to_seconds(i, &self.watch);
                out.histogram(FOLD_DURATION_SECONDS, &[("kind", kind)], &h);
            }
        }
        out.family(
            TRANSITIONS_TOTAL,
            "counter",
            "Pod worker lifecycle transitions (none, sync, terminating, terminated, finished).",
        );
        for ((from, to), (n, _)) in &self.transitions {
            out.sample(
                TRANSITIONS_TOTAL,
                &[("from", from.as_str()), ("to", to.as_str())],
                *n as f64,
            );
        }
        out.family(
            TRANSITION_DURATION_SECONDS,
            "histogram",
            "Time a pod worker spent in the `from` state before the transition.",
        );
        for ((from, to), (_, h)) in &self.transitions {
            if *from != Phase::None {
                out.histogram(
                    TRANSITION_DURATION_SECONDS,
                    &[("from", from.as_str()), ("to", to.as_str())],
                    h,
                );
            }
        }
        for (name, help, h) in [
            (
                "kubelet_pod_worker_start_duration_seconds",
                "Duration in seconds from seeing a pod to starting a worker.",
                &self.worker_start,
            ),
            (
                "kubelet_pod_start_duration_seconds",
                "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
                &self.pod_start,
            ),
            (
                "kubelet_pod_start_sli_duration_seconds",
                "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
                &self.pod_start_sli,
            ),
            (
                "kubelet_pod_start_total_duration_seconds",
                "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
                &self.pod_start_total,
            ),
            (
                "kubelet_containers_per_pod_count",
                "The number of containers per pod.",
                &self.containers_per_pod,
            ),
        ] {
            out.family(name, "histogram", help);
            out.histogram(name, &[], h);
        }
        out.family(
            "kubelet_restarted_pods_total",
            "counter",
            "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)",
        );
        out.sample(
            "kubelet_restarted_pods_total",
            &[("static", "false")],
            self.restarted_pods[0] as f64,
        );
        out.sample(
            "kubelet_restarted_pods_total",
            &[("static", "true")],
            self.restarted_pods[1] as f64,
        );
        out.family(
            "kubelet_orphaned_runtime_pods_total",
            "counter",
            "Number of pods that have been detected in the container runtime without being already known to the pod worker. This typically indicates the kubelet was restarted while a pod was force deleted in the API or in the local configuration, which is unusual.",
        );
        out.sample(
            "kubelet_orphaned_runtime_pods_total",
            &[],
            self.orphaned_runtime_pods as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Transitions by the plain definition: the worker's phase looked up before and after
    /// every `UpdatePod` and `SyncFinished`.
    fn reference(records: &[Arc<Record>]) -> BTreeMap<(Phase, Phase), u64> {
        let mut node = Node::default();
        let mut out = BTreeMap::new();
        for r in records {
            let uid: Option<String> = match &r.event {
                Event::UpdatePod(u) => u.uid().map(|u| u.as_str().to_string()),
                Event::SyncFinished(f) => Some(f.uid.as_str().to_string()),
                _ => None,
            };
            let before = uid
                .as_deref()
                .map(|u| phase_of(node.pod_workers.status_by_str(u)).0);
            let _ = crate::core::fold(&mut node, r);
            if let (Some(u), Some(from)) = (uid.as_deref(), before) {
                let to = phase_of(node.pod_workers.status_by_str(u)).0;
                if to != from {
                    *out.entry((from, to)).or_insert(0) += 1;
                }
            }
        }
        out
    }

    #[test]
    fn pod_uid_str_is_pod_uid_as_text() {
        let sim = crate::sim::scenarios::busy_node(20, 6 * 60 * 1000);
        let mut kinds = std::collections::BTreeSet::new();
        for r in sim.engine().ledger().since(0) {
            let owned = r.event.pod_uid();
            assert_eq!(
                r.event.pod_uid_str(),
                owned.as_ref().map(Uid::as_str),
                "record {}",
                r.seq
            );
            kinds.insert(r.event.kind());
        }
        assert!(kinds.len() > 8, "{kinds:?}");
    }

    #[test]
    fn transitions_are_those_of_lookups_before_and_after_every_update_and_sync_finished() {
        // deletions after 5 min, failing first syncs, jobs that complete: every transition
        let sim = crate::sim::scenarios::busy_node(40, 7 * 60 * 1000);
        let records: Vec<Arc<Record>> = sim.engine().ledger().since(0).cloned().collect();
        let mut node = Node::default();
        let mut observer = FoldObserver::default();
        for r in &records {
            observer.begin_input(r.at);
            let _ = observer.fold(&mut node, r, None);
            observer.end_input();
        }
        let got: BTreeMap<(Phase, Phase), u64> = observer
            .transitions
            .iter()
            .map(|(k, (n, _))| (*k, *n))
            .collect();
        let want = reference(&records);
        assert_eq!(got, want);
        assert!(
            want.contains_key(&(Phase::Sync, Phase::Terminating)),
            "{want:?}"
        );
        assert!(
            want.contains_key(&(Phase::Terminated, Phase::Finished)),
            "{want:?}"
        );
        // most updates and sync results skip the lookups
        let watched = records
            .iter()
            .filter(|r| matches!(r.event, Event::UpdatePod(_) | Event::SyncFinished(_)))
            .count() as u64;
        assert!(
            observer.quiet_folds * 2 > watched,
            "{} of {watched} quiet",
            observer.quiet_folds
        );
    }
}
