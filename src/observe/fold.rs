//! The fold, observed: a span `fold <kind>` per record, per-kind fold statistics, pod-worker
//! transitions and the kubelet's pod start metrics.
//!
//! Owns, for the engine: the trace context of each record (a child of its parent record's
//! span, of the command span that reported it, or of the pod's root span; else a new root
//! sampled by ratio), the compact fold spans handed to the SDK's batch processor (`observe::otel`), and the metrics
//! that must be counted per record (`ledgerlet_ledger_records_total{kind}`,
//! `ledgerlet_fold_duration_seconds{kind}`, `ledgerlet_pod_worker_transitions_total{from,to}`,
//! `ledgerlet_pod_worker_transition_duration_seconds{from,to}`,
//! `kubelet_pod_worker_start_duration_seconds`, `kubelet_pod_start_duration_seconds`,
//! `kubelet_pod_start_sli_duration_seconds`, `kubelet_pod_start_total_duration_seconds`,
//! `kubelet_containers_per_pod_count`, `kubelet_restarted_pods_total{static}`,
//! `kubelet_orphaned_runtime_pods_total`), through the `metrics` facade. Their handles are
//! looked up once (per kind when the observer is made, per transition when it first happens),
//! so a record costs a counter increment and a histogram sample, never a registry lookup.
//!
//! Time is measured in *turns*: a record's turn is the engine's time on it, from the moment
//! the observer takes it up (just before its fold) to the moment it takes up the next record,
//! or to the moment the engine has nothing more to do ([`FoldObserver::idle`]). It covers
//! the fold, the observer's own work on the record, the hand-off of the record's
//! commands and the engine's bookkeeping, so a fold span contains the start of the command
//! spans under it. One clock read per record ([`clock_ns`]), not two.
//!
//! Must not change what the fold does: the core never sees anything from here, and the trace
//! context is data in the record that replay carries but never reads.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use metrics::{Counter, Histogram};

use opentelemetry::trace::{
    Event as SpanEvent, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::KeyValue;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use crate::core::record::event::RuntimeAction;
use crate::core::record::{Event, Record, Time, TraceParent};
use crate::core::runtime_status::RunningPod;
use crate::core::update::UpdateType;
use crate::core::{pod, Command, Node, Uid};

use super::context::{IdGen, RootSampler, SeqSpanIds};
use super::otel::Spans;
use super::rooted_pods::RootedPods;
use super::starting_pods::{PodStart, StartingPods};

/// Records folded, by kind.
pub const RECORDS_TOTAL: &str = "ledgerlet_ledger_records_total";
/// Fold latency, by kind.
pub const FOLD_DURATION_SECONDS: &str = "ledgerlet_fold_duration_seconds";
/// Pod worker lifecycle transitions.
pub const TRANSITIONS_TOTAL: &str = "ledgerlet_pod_worker_transitions_total";
/// Time spent in the `from` state of a transition.
pub const TRANSITION_DURATION_SECONDS: &str = "ledgerlet_pod_worker_transition_duration_seconds";

/// Fold spans buffered on the engine before they are handed to the batch processor.
pub const SPAN_BUFFER: usize = 128;
/// Longest time a fold span waits in the engine's buffer while records keep coming.
pub const SPAN_BUFFER_AGE_MS: u64 = 20;
/// Pods remembered for pod start metrics and as having a root span (oldest forgotten first).
pub const MAX_TRACKED_PODS: usize = 16_384;

/// The fold's clock: nanoseconds on the monotonic clock since its first reading in this
/// process. Turns and fold spans are timed with it; wall times are made from it only when
/// spans are handed on.
#[inline]
pub fn clock_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// A pod worker's lifecycle phase, for transitions (the core's [`WorkerPhase`]).
pub use crate::core::pod_workers::WorkerPhase as Phase;

/// The UID of the pod whose transitions an `UpdatePod` or `SyncFinished` is watched for.
fn watched_uid(event: &Event) -> Option<&str> {
    match event {
        Event::UpdatePod(_) | Event::SyncFinished(_) => event.pod_uid_str(),
        _ => None,
    }
}

/// The watched worker's phase, looked up (debug builds check the phase log with it).
#[cfg(debug_assertions)]
fn watched_phase(node: &Node, event: &Event) -> Option<Phase> {
    watched_uid(event)
        .map(|u| crate::core::pod_workers::worker_phase(node.pod_workers.status_by_str(u)).0)
}

/// Debug builds: the watched worker's phase looked up before and after the fold agrees with
/// the transition read from the core's phase log.
#[cfg(debug_assertions)]
fn check_transition(
    record: &Record,
    before: Option<(Phase, Phase)>,
    logged: Option<(Phase, Phase)>,
) {
    let looked_up = before.filter(|(from, to)| from != to);
    assert_eq!(
        looked_up,
        logged,
        "the fold of record {} ({}): the worker's phases looked up before and after differ from the core's phase log",
        record.seq,
        record.event.kind()
    );
}

/// A fold span as the engine records it: no strings, no allocation, made into the SDK's
/// `SpanData` only when the tracer's buffer is handed on. Its span id is not stored: it is
/// derived from the seq ([`SeqSpanIds`]); its times are [`clock_ns`] readings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldSpan {
    /// The trace id (the bytes of the record's `trace`).
    pub trace_id: [u8; 16],
    /// The parent's span id; 0 for a root.
    pub parent_span_id: u64,
    /// The record's seq.
    pub seq: u64,
    /// [`clock_ns`] when the record's turn started.
    pub start_ns: u64,
    /// The turn's length in nanoseconds.
    pub duration_ns: u64,
    /// The record's kind, as its index in `Event::KINDS` (`fold <kind>` is the span name).
    pub kind: u8,
    /// The trace flags (sampled).
    pub flags: u8,
}

/// What a few fold spans carry beyond the fixed fields (a few per pod life).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Note {
    /// The record's fold made a pod worker transition: a `pod worker transition` event.
    Transition {
        from: &'static str,
        to: &'static str,
        uid: String,
    },
    /// The span is a pod's root span (its own id, derived from the pod's UID): named `pod`,
    /// with the pod's attributes.
    PodRoot {
        span_id: u64,
        uid: String,
        namespace: String,
        name: String,
    },
}

/// `fold <kind>` for every record kind.
fn fold_span_name(kind: usize) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| Event::KINDS.iter().map(|k| format!("fold {k}")).collect())
        .get(kind)
        .map_or("fold", String::as_str)
}

/// A fold span as the SDK exports it, with its notes.
fn span_data(
    s: &FoldSpan,
    span_id: u64,
    (start, end): (SystemTime, SystemTime),
    notes: &[&Note],
) -> SpanData {
    let seq = KeyValue::new("ledgerlet.record.seq", s.seq as i64);
    let mut name = fold_span_name(usize::from(s.kind));
    let mut attributes = Vec::with_capacity(2);
    let mut events = SpanEvents::default();
    let mut root = false;
    for n in notes {
        match n {
            Note::PodRoot {
                uid,
                namespace,
                name: pod,
                ..
            } => {
                root = true;
                name = "pod";
                attributes.extend([
                    KeyValue::new("k8s.pod.uid", uid.clone()),
                    KeyValue::new("k8s.pod", format!("{namespace}/{pod}")),
                    KeyValue::new("k8s.namespace.name", namespace.clone()),
                    KeyValue::new("k8s.pod.name", pod.clone()),
                ]);
            }
            Note::Transition { from, to, uid } => events.events.push(SpanEvent::new(
                "pod worker transition",
                end,
                vec![
                    KeyValue::new("from", *from),
                    KeyValue::new("to", *to),
                    KeyValue::new("k8s.pod.uid", uid.clone()),
                ],
                0,
            )),
        }
    }
    attributes.push(seq);
    if !root {
        let kind = Event::KINDS.get(usize::from(s.kind)).copied();
        attributes.push(KeyValue::new(
            "ledgerlet.record.kind",
            kind.unwrap_or("unknown"),
        ));
    }
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(s.trace_id),
            SpanId::from(span_id),
            TraceFlags::new(s.flags),
            false,
            TraceState::default(),
        ),
        parent_span_id: SpanId::from(s.parent_span_id),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: name.into(),
        start_time: start,
        end_time: end,
        attributes,
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: super::otel::scope(),
    }
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

/// The names of a pod a root span is made for, borrowed from the record that saw it.
#[derive(Clone, Copy, Debug)]
struct PodNames<'a> {
    uid: &'a str,
    namespace: &'a str,
    name: &'a str,
}

/// Creates fold spans and hands them to the batch processor a buffer at a time.
///
/// A pod's trace is derived, not looked up: its trace id and the span id of its root are
/// digests of the pod's UID (foldhash) with seeds drawn once per tracer, so a record
/// without a parent span joins its pod's trace with a few multiplications instead of a
/// hash-map lookup per record. The root span itself (`pod`, with the pod's attributes) is
/// made once, when the pod is first seen ([`FoldTracer::saw_pod`]: its first `PodAdded`, or
/// the `UpdatePod` that finds it in the runtime as an orphan).
pub struct FoldTracer {
    sampler: RootSampler,
    /// Trace ids of traces that are not a pod's.
    ids: IdGen,
    /// Every record's span id, from its seq.
    span_ids: SeqSpanIds,
    spans: Arc<Spans>,
    /// Finished spans (and the running turn's, last), in the order the records were folded.
    buffer: Vec<FoldSpan>,
    /// `(index in buffer, note)`, by index.
    notes: Vec<(usize, Note)>,
    /// [`clock_ns`] when the oldest buffered span was finished.
    buffered_since: Option<u64>,
    /// Seeds of the pods' trace ids and root span ids.
    pod_seeds: [u64; 2],
    /// Pods whose root span was made, so a pod seen again (a static pod's manifest added
    /// back, a pod recreated with its UID) gets no second root. Only read when a pod is
    /// seen, never per record; the oldest are forgotten past [`MAX_TRACKED_PODS`].
    rooted: RootedPods,
}

impl FoldTracer {
    /// A tracer feeding `spans`.
    pub fn new(sampler: RootSampler, mut ids: IdGen, spans: Arc<Spans>) -> FoldTracer {
        let pod_seeds = [ids.span_id(), ids.span_id()];
        let span_ids = SeqSpanIds::new(ids.span_id());
        FoldTracer {
            sampler,
            ids,
            span_ids,
            spans,
            buffer: Vec::with_capacity(SPAN_BUFFER),
            notes: Vec::new(),
            buffered_since: None,
            pod_seeds,
            rooted: RootedPods::new(MAX_TRACKED_PODS),
        }
    }

    /// The span of the record with `seq`, under `parent`.
    #[inline]
    fn child(&self, parent: TraceParent, seq: u64) -> Opened {
        Opened {
            ctx: parent.child(self.span_ids.of(seq)),
            parent_span_id: parent.span_id(),
        }
    }

    #[inline]
    fn open(&mut self, parent: Parent, event: &Event, seq: u64) -> Opened {
        match parent {
            Parent::Record(Some(p)) | Parent::Input(Some(p)) => self.child(p, seq),
            Parent::Record(None) | Parent::Input(None) => self.open_root(event, seq),
        }
    }

    /// The root span of the pod with `uid`: the same for every record about the pod, made
    /// from the UID alone (sampled by its trace id, as any root).
    ///
    /// One 64-bit digest of the UID makes both ids (the low half of the trace id, which the
    /// sampler reads, and the span id are the digest's bits rotated and mixed with the
    /// second seed), so two pods share a trace only if their digests collide: about 10⁻¹¹
    /// among the [`MAX_TRACKED_PODS`] pods.
    #[inline]
    fn pod_root(&self, uid: &str) -> TraceParent {
        self.pod_root_of(self.pod_digest(uid))
    }

    /// The digest of a pod's UID that its trace id and root span id are made of.
    #[inline]
    fn pod_digest(&self, uid: &str) -> u64 {
        foldhash::quality::FixedState::with_seed(self.pod_seeds[0]).hash_one(uid)
    }

    /// [`FoldTracer::pod_root`] from the pod's digest.
    #[inline]
    fn pod_root_of(&self, d: u64) -> TraceParent {
        let other = self.pod_seeds[1];
        let low = (d.rotate_left(29) ^ other).max(1);
        let trace_id = (u128::from(d) << 64) | u128::from(low);
        let span_id = (d.rotate_left(43) ^ other.rotate_left(17))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .max(1);
        TraceParent::new(trace_id, span_id, self.sampler.sample_root(trace_id))
    }

    /// A record without a parent span joins its pod's trace, else starts a trace.
    #[inline]
    fn open_root(&mut self, event: &Event, seq: u64) -> Opened {
        if let Some(uid) = event.pod_uid_str() {
            let root = self.pod_root(uid);
            return self.child(root, seq);
        }
        let trace_id = self.ids.trace_id();
        let ctx = TraceParent::new(
            trace_id,
            self.span_ids.of(seq),
            self.sampler.sample_root(trace_id),
        );
        Opened {
            ctx,
            parent_span_id: 0,
        }
    }

    /// A pod is seen (added, or found in the runtime) by the record with `seq` of `kind`,
    /// whose turn starts at `now` ([`clock_ns`]): the first time, its root span (if its
    /// trace is sampled) is buffered, starting and ending there.
    #[cold]
    #[inline(never)]
    fn saw_pod(&mut self, pod: PodNames<'_>, seq: u64, kind: u8, now: u64) {
        let digest = self.pod_digest(pod.uid);
        if !self.rooted.insert_new(digest) {
            return;
        }
        let ctx = self.pod_root_of(digest);
        if !ctx.sampled() {
            return;
        }
        let root = Note::PodRoot {
            span_id: ctx.span_id(),
            uid: pod.uid.to_string(),
            namespace: pod.namespace.to_string(),
            name: pod.name.to_string(),
        };
        self.make_room(now);
        self.notes.push((self.buffer.len(), root));
        self.buffer.push(FoldSpan {
            trace_id: ctx.trace_id_bytes(),
            parent_span_id: 0,
            seq,
            start_ns: now,
            duration_ns: 0,
            kind,
            flags: ctx.flags(),
        });
    }

    #[inline]
    fn make_room(&mut self, now: u64) {
        if self.buffer.len() >= SPAN_BUFFER {
            self.flush();
        }
        if self.buffer.is_empty() {
            self.buffered_since = Some(now);
        }
    }

    /// Buffers the span of the record whose turn starts now; its duration is set when the
    /// turn ends ([`FoldTracer::end_last`]). Every span already buffered is finished.
    #[inline]
    fn begin(&mut self, span: FoldSpan, now: u64) {
        self.make_room(now);
        self.buffer.push(span);
    }

    /// The last buffered span (the running turn's) made a pod worker transition.
    #[cold]
    #[inline(never)]
    fn note_transition(&mut self, from: &'static str, to: &'static str, uid: &str) {
        if let Some(i) = self.buffer.len().checked_sub(1) {
            let uid = uid.to_string();
            self.notes.push((i, Note::Transition { from, to, uid }));
        }
    }

    /// Sets the duration of the last buffered span (its turn ended after `ns`).
    #[inline]
    fn end_last(&mut self, ns: u64) {
        if let Some(s) = self.buffer.last_mut() {
            s.duration_ns = ns;
        }
    }

    #[inline]
    fn flush_if_old(&mut self, now: u64) {
        if self
            .buffered_since
            .is_some_and(|t| now.saturating_sub(t) >= SPAN_BUFFER_AGE_MS * 1_000_000)
        {
            self.flush();
        }
    }

    /// Hands every buffered span on, to be made into `SpanData` on the conversion thread
    /// (`observe::otel`): the engine's thread only swaps its buffers.
    #[inline(never)]
    fn flush(&mut self) {
        self.buffered_since = None;
        if self.buffer.is_empty() {
            return;
        }
        let spans = std::mem::replace(&mut self.buffer, Vec::with_capacity(SPAN_BUFFER));
        let notes = std::mem::take(&mut self.notes);
        let ids = self.span_ids;
        let n = spans.len();
        self.spans
            .push_later(n, Box::new(move || span_datas(&spans, &notes, ids)));
    }
}

/// How far the wall clock may be stepped against the monotonic one before fold span times
/// are anchored anew.
pub const WALL_STEP_MS: u64 = 1_000;

/// Makes [`clock_ns`] readings wall times, from one anchor (a reading of both clocks) shared
/// by every batch, so a turn that ends where the next begins still does in the exported
/// spans however they were batched. The anchor is taken anew when the wall clock has been
/// stepped by more than [`WALL_STEP_MS`] since.
fn wall_clock() -> impl Fn(u64) -> SystemTime {
    static ANCHOR: Mutex<Option<(u64, SystemTime)>> = Mutex::new(None);
    fn at((ns, wall): (u64, SystemTime), t: u64) -> SystemTime {
        match t.checked_sub(ns) {
            Some(ahead) => wall + Duration::from_nanos(ahead),
            None => wall - Duration::from_nanos(ns - t),
        }
    }
    let (now_ns, now) = (clock_ns(), SystemTime::now());
    let mut anchor = ANCHOR.lock().unwrap_or_else(|p| p.into_inner());
    let off = |a| {
        let t = at(a, now_ns);
        t.duration_since(now).unwrap_or_else(|e| e.duration())
    };
    if anchor.is_none_or(|a| off(a) > Duration::from_millis(WALL_STEP_MS)) {
        *anchor = Some((now_ns, now));
    }
    let a = anchor.expect("anchored");
    move |t| at(a, t)
}

/// Buffered fold spans as the SDK exports them, their [`clock_ns`] readings made wall times
/// ([`wall_clock`]).
fn span_datas(spans: &[FoldSpan], notes: &[(usize, Note)], ids: SeqSpanIds) -> Vec<SpanData> {
    let wall = wall_clock();
    let mut notes = notes.iter().peekable();
    let mut mine = Vec::new();
    spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            mine.clear();
            while let Some((_, n)) = notes.next_if(|(j, _)| *j == i) {
                mine.push(n);
            }
            let span_id = mine
                .iter()
                .find_map(|n| match n {
                    Note::PodRoot { span_id, .. } => Some(*span_id),
                    Note::Transition { .. } => None,
                })
                .unwrap_or_else(|| ids.of(s.seq));
            let start = wall(s.start_ns);
            let end = start + Duration::from_nanos(s.duration_ns);
            span_data(s, span_id, (start, end), &mine)
        })
        .collect()
}

/// The record the engine is on: its turn ends when the next record's fold starts or the
/// engine goes idle, and only then is its duration known.
#[derive(Clone, Copy, Debug)]
struct Turn {
    /// The record's kind (index in `Event::KINDS`).
    kind: usize,
    /// [`clock_ns`] when its fold started.
    started: u64,
    /// Its fold span is the last one in the tracer's buffer, duration still 0.
    traced: bool,
}

/// The fold statistics, transitions and pod start metrics of one engine, plus its tracer.
pub struct FoldObserver {
    /// `ledgerlet_ledger_records_total`, by kind (counted when a record is folded).
    records: Box<[Counter]>,
    /// `ledgerlet_fold_duration_seconds`, by kind (observed when a turn ends), registered
    /// at the kind's first turn so kinds never folded have no series.
    durations: Box<[Option<Histogram>]>,
    /// The record whose turn is still running.
    turn: Option<Turn>,
    /// Each transition's count and, from a phase other than `none`, its duration.
    transitions: BTreeMap<(Phase, Phase), (Counter, Option<Histogram>)>,
    /// Pods between their first sighting and their start.
    starting: StartingPods,
    worker_start: Histogram,
    pod_start: Histogram,
    pod_start_sli: Histogram,
    pod_start_total: Histogram,
    containers_per_pod: Histogram,
    /// `kubelet_restarted_pods_total{static="false"}`, then `{static="true"}`.
    restarted_pods: [Counter; 2],
    orphaned_runtime_pods: Counter,
    tracer: Option<FoldTracer>,
    /// Folds that changed some worker's phase (tests check that most folds skip the lookup).
    #[cfg(test)]
    logged_folds: u64,
}

impl Default for FoldObserver {
    fn default() -> Self {
        FoldObserver::new(None)
    }
}

impl FoldObserver {
    /// An observer recording into the recorder in scope (the process's, or a test's local
    /// one); with a tracer, records get trace contexts and fold spans are exported.
    pub fn new(tracer: Option<FoldTracer>) -> FoldObserver {
        use metrics::{counter, histogram};
        FoldObserver {
            records: Event::KINDS
                .iter()
                .map(|k| counter!(RECORDS_TOTAL, "kind" => *k))
                .collect(),
            durations: vec![None; Event::KINDS.len()].into_boxed_slice(),
            turn: None,
            transitions: BTreeMap::new(),
            starting: StartingPods::default(),
            worker_start: histogram!("kubelet_pod_worker_start_duration_seconds"),
            pod_start: histogram!("kubelet_pod_start_duration_seconds"),
            pod_start_sli: histogram!("kubelet_pod_start_sli_duration_seconds"),
            pod_start_total: histogram!("kubelet_pod_start_total_duration_seconds"),
            containers_per_pod: histogram!("kubelet_containers_per_pod_count"),
            restarted_pods: [
                counter!("kubelet_restarted_pods_total", "static" => "false"),
                counter!("kubelet_restarted_pods_total", "static" => "true"),
            ],
            orphaned_runtime_pods: counter!("kubelet_orphaned_runtime_pods_total"),
            tracer,
            #[cfg(test)]
            logged_folds: 0,
        }
    }

    /// True when records get trace contexts.
    pub fn tracing(&self) -> bool {
        self.tracer.is_some()
    }

    /// The span (and so the `trace`) of the record about to be appended with `seq`.
    #[inline]
    pub fn open(&mut self, parent: Parent, event: &Event, seq: u64) -> Option<Opened> {
        self.tracer.as_mut().map(|t| t.open(parent, event, seq))
    }

    /// The root span of a pod's trace (`None` without tracing).
    pub fn pod_trace(&self, uid: &Uid) -> Option<TraceParent> {
        Some(self.tracer.as_ref()?.pod_root(uid.as_str()))
    }

    /// The span a command's own span hangs under: the span of the record whose fold emitted
    /// it (its `trace`), or for a status sync started by a node-wide pass, the pod's root
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
                self.pod_trace(&c.uid)
            }
            _ => Some(trace),
        }
    }

    /// Folds `record` and records what the fold did.
    ///
    /// This runs once per record on the engine's thread, so its common path is short and
    /// touches little memory: one clock read (which ends the last record's turn and starts
    /// this one's), a counter increment, a histogram sample (the last turn's) and, with
    /// tracing, one [`FoldSpan`] written to a buffer (its length filled in when the turn
    /// ends). Span ids, names, attributes and wall times are made when the buffer is handed
    /// on, a buffer at a time.
    ///
    /// Transitions: only `UpdatePod` and `SyncFinished` are watched, and a transition is a
    /// difference between the watched worker's phase before and after the fold. The core
    /// notes every worker's phase just before it changes it (`PodWorkers::phase_log`, emptied
    /// before each record), so the phase before is the first note of the watched pod and
    /// the phase after is looked up only then; a fold that changed no phase (most of them)
    /// costs one length check. Debug builds also look the phase up before and after every
    /// watched fold and panic if that disagrees with the log, so every test that runs the
    /// engine checks the core's notes. The rarer work (new pods, transitions, pods still
    /// starting) is out of line.
    #[inline]
    pub fn fold(
        &mut self,
        node: &mut Node,
        record: &Record,
        opened: Option<Opened>,
    ) -> Vec<Command> {
        // one clock read per record: the start of this record's turn is the end of the last
        let started = clock_ns();
        self.end_turn(started);
        let kind = record.event.kind_index();
        self.records[kind].increment(1);
        match &record.event {
            Event::PodAdded(c) => self.pod_added(node, record, &c.pod, kind, started),
            Event::UpdatePod(u) => {
                if let (None, Some(p)) = (&u.pod, &u.running_pod) {
                    self.orphan_found(p, record.seq, kind, started);
                }
            }
            Event::PodUpdated(c) | Event::PodDeleted(c) | Event::PodRemoved(c)
                if self.tracer.is_some() =>
            {
                self.config_pod_seen(&c.pod, record.seq, kind, started);
            }
            _ => {}
        }
        #[cfg(debug_assertions)]
        let before = watched_phase(node, &record.event);
        #[cfg(not(debug_assertions))]
        let before: Option<Phase> = None;
        let commands = crate::core::fold(node, record);
        let mut traced = false;
        if let Some(t) = self.tracer.as_mut() {
            if let Some(o) = opened.filter(|o| o.ctx.sampled()) {
                t.begin(
                    FoldSpan {
                        trace_id: o.ctx.trace_id_bytes(),
                        parent_span_id: o.parent_span_id,
                        seq: record.seq,
                        start_ns: started,
                        duration_ns: 0,
                        kind: kind as u8,
                        flags: o.ctx.flags(),
                    },
                    started,
                );
                traced = true;
            }
        }
        if node.pod_workers.phase_log().is_empty() {
            #[cfg(debug_assertions)]
            check_transition(record, before.zip(watched_phase(node, &record.event)), None);
        } else {
            self.logged_transition(node, record, before, traced);
        }
        if !self.starting.is_empty() {
            self.pod_start_progress(node, record, &commands);
        }
        self.turn = Some(Turn {
            kind,
            started,
            traced,
        });
        commands
    }

    /// A `PodAdded` of `kind` whose turn started at `started` (before its fold): pod start
    /// metrics, and the pod's root span the first time it is seen.
    #[cold]
    #[inline(never)]
    fn pod_added(
        &mut self,
        node: &Node,
        record: &Record,
        p: &k8s_openapi::api::core::v1::Pod,
        kind: usize,
        started: u64,
    ) {
        self.track_start(node, record.at, p);
        self.config_pod_seen(p, record.seq, kind, started);
    }

    /// A source's addition, update, deletion or removal of `p`, of `kind` whose turn started
    /// at `started`: the pod's root span, if this is the first record about it (its
    /// `PodAdded`, or a deletion of a pod ledgerlet was never given, say), so the record's
    /// span has a parent.
    #[cold]
    #[inline(never)]
    fn config_pod_seen(
        &mut self,
        p: &k8s_openapi::api::core::v1::Pod,
        seq: u64,
        kind: usize,
        started: u64,
    ) {
        if let Some(t) = self.tracer.as_mut() {
            let names = PodNames {
                uid: pod::uid_str(p),
                namespace: pod::namespace(p),
                name: pod::name(p),
            };
            t.saw_pod(names, seq, kind as u8, started);
        }
    }

    /// An `UpdatePod` that found `p` in the runtime with no config pod (an orphan), of `kind`
    /// whose turn started at `started`: counted, and the pod's root span made the first time
    /// it is seen.
    #[cold]
    #[inline(never)]
    fn orphan_found(&mut self, p: &RunningPod, seq: u64, kind: usize, started: u64) {
        self.orphaned_runtime_pods.increment(1);
        if let Some(t) = self.tracer.as_mut() {
            let names = PodNames {
                uid: p.uid.as_str(),
                namespace: &p.namespace,
                name: &p.name,
            };
            t.saw_pod(names, seq, kind as u8, started);
        }
    }

    /// Ends the running turn at `now` ([`clock_ns`]): its duration is observed and its
    /// span, if sampled, finished; buffered spans older than [`SPAN_BUFFER_AGE_MS`] then go
    /// to the batch processor.
    #[inline]
    fn end_turn(&mut self, now: u64) {
        let Some(turn) = self.turn else {
            return;
        };
        let ns = now.saturating_sub(turn.started);
        self.durations[turn.kind]
            .get_or_insert_with(
                || metrics::histogram!(FOLD_DURATION_SECONDS, "kind" => Event::KINDS[turn.kind]),
            )
            .record(ns as f64 / 1e9);
        if let Some(t) = self.tracer.as_mut() {
            if turn.traced {
                t.end_last(ns);
            }
            t.flush_if_old(now);
        }
    }

    /// The watched worker's transition in a fold that changed some worker's phase: from its
    /// first note in the core's phase log to its phase now, counted and, if the record's span
    /// was buffered (`traced`), noted on it. `before` (debug builds) is its phase looked up
    /// before the fold, checked against the log.
    #[inline(never)]
    fn logged_transition(
        &mut self,
        node: &Node,
        record: &Record,
        before: Option<Phase>,
        traced: bool,
    ) {
        #[cfg(test)]
        {
            self.logged_folds += 1;
        }
        let uid = watched_uid(&record.event);
        let change = uid.and_then(|u| node.pod_workers.phase_log().first_for(u));
        let logged = change.map(|c| {
            let to = crate::core::pod_workers::worker_phase(node.pod_workers.status(&c.uid)).0;
            (c.from, to)
        });
        #[cfg(debug_assertions)]
        check_transition(
            record,
            before.zip(watched_phase(node, &record.event)),
            logged.filter(|(f, t)| f != t),
        );
        #[cfg(not(debug_assertions))]
        let _ = before;
        let (Some((from, to)), Some(change)) = (logged, change) else {
            return;
        };
        if from != to {
            self.transition(record, (from, to), change.entered, &change.uid, traced);
        }
    }

    /// Counts a transition (rare: a few per pod life) and, if the record's span was buffered
    /// (`traced`), notes its span event on it.
    #[cold]
    #[inline(never)]
    fn transition(
        &mut self,
        record: &Record,
        (from, to): (Phase, Phase),
        entered: Option<Time>,
        uid: &Uid,
        traced: bool,
    ) {
        let (count, duration) = self.transitions.entry((from, to)).or_insert_with(|| {
            let (f, t) = (from.as_str(), to.as_str());
            (
                metrics::counter!(TRANSITIONS_TOTAL, "from" => f, "to" => t),
                (from != Phase::None).then(
                    || metrics::histogram!(TRANSITION_DURATION_SECONDS, "from" => f, "to" => t),
                ),
            )
        });
        count.increment(1);
        if let (Some(h), Some(t)) = (duration, entered) {
            h.record(record.at.since(t).as_secs_f64());
        }
        if let Some(t) = self.tracer.as_mut().filter(|_| traced) {
            t.note_transition(from.as_str(), to.as_str(), uid.as_str());
        }
    }

    /// The engine has nothing more to do: the last record's turn ends now, and every buffered
    /// fold span goes to the batch processor.
    pub fn idle(&mut self) {
        if self.turn.is_some() {
            self.end_turn(clock_ns());
            self.turn = None;
        }
        if let Some(t) = self.tracer.as_mut() {
            t.flush();
        }
    }

    /// Pod start metrics: a pod seen for the first time starts being tracked (a UID seen
    /// again after its worker finished counts as a restarted pod).
    fn track_start(&mut self, node: &Node, at: Time, p: &k8s_openapi::api::core::v1::Pod) {
        let uid = pod::uid(p);
        let is_static = pod::is_static(p);
        // kubelet_restarted_pods_total: the same UID comes back after its worker finished
        if let Some(s) = node.pod_workers.status(&uid) {
            if s.is_finished() || s.is_terminated() {
                self.restarted_pods[usize::from(is_static)].increment(1);
            }
            return;
        }
        if self.starting.contains(uid.as_str()) || self.starting.len() >= MAX_TRACKED_PODS {
            return;
        }
        let created = p.metadata.creation_timestamp.as_ref();
        let created = created.map(crate::core::pod_status::time_from_api);
        self.starting.track(uid, PodStart::new(at, created));
    }

    /// Pod start metrics: what a fold did for the pods between their first sighting and
    /// their start (only called while there are such pods).
    #[inline(never)]
    fn pod_start_progress(&mut self, node: &Node, record: &Record, commands: &[Command]) {
        if self.starting.awaiting_worker() > 0 {
            self.worker_starts(record, commands);
        }
        match &record.event {
            Event::RuntimeActionFinished(a)
                if matches!(a.action, RuntimeAction::PullImage { .. }) =>
            {
                if let Some(st) = self.starting.get_mut(a.uid.as_str()) {
                    let begun = Time::from_unix_nanos(
                        record.at.unix_nanos() - (a.duration_ms as i64) * 1_000_000,
                    );
                    st.pull_started = Some(st.pull_started.map_or(begun, |t| t.min(begun)));
                    st.pull_finished =
                        Some(st.pull_finished.map_or(record.at, |t| t.max(record.at)));
                }
            }
            Event::SyncFinished(f) if f.work != crate::core::command::WorkType::Sync => {
                self.starting.forget(f.uid.as_str());
                return;
            }
            Event::PodRemoved(c) | Event::PodDeleted(c) => {
                self.starting.forget(pod::uid_str(&c.pod));
                return;
            }
            _ => {}
        }
        // a pod starts when its status says so: only statuses this fold changed are read
        for uid in node.statuses.recorded().entries() {
            self.status_progress(node, record, uid);
        }
    }

    /// Pod start metrics: the workers of tracked pods that `record`'s fold started (a
    /// `SyncPod` that creates the worker), of pods still awaiting theirs.
    fn worker_starts(&mut self, record: &Record, commands: &[Command]) {
        for c in commands {
            let s = match c {
                Command::SyncPod(s) if s.update_type == UpdateType::Create => s,
                _ => continue,
            };
            if let Some(st) = self.starting.worker_started(s.uid.as_str()) {
                self.worker_start
                    .record(record.at.since(st.first_seen).as_secs_f64());
                let n = s.pod.spec.as_ref().map_or(0, |sp| sp.containers.len());
                self.containers_per_pod.record(n as f64);
            }
        }
    }

    /// Pod start metrics for a starting pod whose status `record`'s fold changed.
    fn status_progress(&mut self, node: &Node, record: &Record, uid: &Uid) {
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
                .record(record.at.since(st.first_seen).as_secs_f64());
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
            self.pod_start_total.record(total.as_secs_f64());
            self.pod_start_sli
                .record(total.saturating_sub(pulling).as_secs_f64());
            self.starting.forget(uid.as_str());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pod_workers::worker_phase;
    use crate::observe::metrics::testing::{recorded, total};
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
                .map(|u| worker_phase(node.pod_workers.status_by_str(u)).0);
            let _ = crate::core::fold(&mut node, r);
            if let (Some(u), Some(from)) = (uid.as_deref(), before) {
                let to = worker_phase(node.pod_workers.status_by_str(u)).0;
                if to != from {
                    *out.entry((from, to)).or_insert(0) += 1;
                }
            }
        }
        out
    }

    /// The records of a busy node's simulation (`pods` pods for `ms`), its own metrics
    /// discarded (a test folds the records into a recorder of its own).
    fn busy_records(pods: usize, ms: u64) -> Vec<Arc<Record>> {
        metrics::with_local_recorder(&metrics::NoopRecorder, || {
            let sim = crate::sim::scenarios::busy_node(pods, ms);
            sim.engine().ledger().since(0).cloned().collect()
        })
    }

    use crate::observe::otel::testing::Sink;
    use crate::observe::otel::{ExportOptions, Tracing};

    /// An observer with a tracer (every trace sampled, ids seeded with `seed`) whose spans
    /// a pipeline with `options` exports to a new sink.
    fn traced_observer(options: ExportOptions, seed: u64) -> (FoldObserver, Tracing, Sink) {
        let (exporting, sink) = crate::observe::otel::testing::pipeline(options);
        let tracer = FoldTracer::new(
            RootSampler::new(1_000_000),
            IdGen::seeded(seed),
            exporting.spans().clone(),
        );
        (FoldObserver::new(Some(tracer)), exporting, sink)
    }

    /// Folds `records` with a tracer (every trace sampled) as the engine does for inputs
    /// without a parent span, and returns the exported spans.
    fn traced_spans(records: &[Arc<Record>]) -> Vec<opentelemetry_sdk::trace::SpanData> {
        let options = ExportOptions {
            max_queue_size: 1 << 20,
            ..Default::default()
        };
        let (mut observer, exporting, sink) = traced_observer(options, 11);
        let mut node = Node::default();
        for r in records {
            let opened = observer.open(Parent::Input(None), &r.event, r.seq);
            let _ = observer.fold(&mut node, r, opened);
        }
        observer.idle();
        assert!(exporting.flush());
        exporting.shutdown(Duration::from_secs(1));
        sink.received()
    }

    /// The value of the attribute `k` of `s`.
    fn attr(s: &SpanData, k: &str) -> Option<String> {
        let kv = s.attributes.iter().find(|kv| kv.key.as_str() == k);
        kv.map(|kv| kv.value.to_string())
    }

    #[test]
    fn a_fold_span_and_a_pod_root_carry_their_names_ids_attributes_and_events() {
        use opentelemetry::trace::SpanId;
        let span = FoldSpan {
            trace_id: 1u128.to_be_bytes(),
            parent_span_id: 99,
            seq: 5,
            start_ns: 0,
            duration_ns: 0,
            kind: Event::KINDS.iter().position(|k| *k == "UpdatePod").unwrap() as u8,
            flags: 1,
        };
        let (start, end) = (SystemTime::UNIX_EPOCH, SystemTime::now());
        let moved = Note::Transition {
            from: "none",
            to: "sync",
            uid: "uid-1".into(),
        };
        let fold = span_data(&span, 7, (start, end), &[&moved]);
        assert_eq!(fold.name, "fold UpdatePod");
        assert_eq!(fold.span_context.span_id(), SpanId::from(7u64));
        assert_eq!(fold.parent_span_id, SpanId::from(99u64));
        assert_eq!(attr(&fold, "ledgerlet.record.seq").as_deref(), Some("5"));
        assert_eq!(
            attr(&fold, "ledgerlet.record.kind").as_deref(),
            Some("UpdatePod")
        );
        assert_eq!((fold.start_time, fold.end_time), (start, end));
        assert_eq!(fold.events.len(), 1);
        assert_eq!(fold.events[0].name, "pod worker transition");
        assert_eq!(fold.events[0].timestamp, end);
        let root = Note::PodRoot {
            span_id: 99,
            uid: "uid-1".into(),
            namespace: "default".into(),
            name: "web".into(),
        };
        let root = span_data(
            &FoldSpan {
                parent_span_id: 0,
                ..span
            },
            99,
            (start, start),
            &[&root],
        );
        assert_eq!(root.name, "pod");
        assert_eq!(root.parent_span_id, SpanId::INVALID);
        assert_eq!(attr(&root, "k8s.pod.uid").as_deref(), Some("uid-1"));
        assert_eq!(attr(&root, "k8s.pod").as_deref(), Some("default/web"));
        assert_eq!(attr(&root, "k8s.pod.name").as_deref(), Some("web"));
        assert_eq!(
            attr(&root, "k8s.namespace.name").as_deref(),
            Some("default")
        );
        assert_eq!(attr(&root, "ledgerlet.record.kind"), None);
    }

    #[test]
    fn records_without_a_parent_join_their_pods_trace_under_one_root_made_when_the_pod_is_first_seen(
    ) {
        use opentelemetry::trace::SpanId;
        let mut records = busy_records(20, 6 * 60 * 1000);
        // a pod added again later (a static pod's manifest back) gets no second root
        let again = records
            .iter()
            .find(|r| matches!(r.event, Event::PodAdded(_)))
            .cloned()
            .unwrap();
        let last = records.last().unwrap().seq;
        records.push(Arc::new(Record {
            seq: last + 1,
            ..(*again).clone()
        }));
        // a source deletes a pod ledgerlet was never given: its first record roots it; and a
        // known pod deleted gets no second root
        let Event::PodAdded(change) = &again.event else {
            unreachable!()
        };
        let mut stranger = (*change.pod).clone();
        stranger.metadata.uid = Some("never-added-uid".into());
        stranger.metadata.name = Some("stranger".into());
        for (i, pod) in [stranger, (*change.pod).clone()].into_iter().enumerate() {
            records.push(Arc::new(Record {
                seq: last + 2 + i as u64,
                at: again.at,
                cause: None,
                trace: None,
                event: Event::PodDeleted(crate::core::record::event::PodConfigChange {
                    source: change.source,
                    pod: Arc::new(pod),
                }),
            }));
        }
        let spans = traced_spans(&records);
        let roots: BTreeMap<String, &opentelemetry_sdk::trace::SpanData> = spans
            .iter()
            .filter(|s| s.name == "pod")
            .map(|s| (attr(s, "k8s.pod.uid").expect("a root names its pod"), s))
            .collect();
        let added: std::collections::BTreeSet<String> = records
            .iter()
            .filter_map(|r| match &r.event {
                Event::PodAdded(c)
                | Event::PodUpdated(c)
                | Event::PodDeleted(c)
                | Event::PodRemoved(c) => Some(pod::uid(&c.pod).as_str().to_string()),
                _ => None,
            })
            .collect();
        assert!(added.contains("never-added-uid"));
        assert_eq!(
            spans.iter().filter(|s| s.name == "pod").count(),
            added.len(),
            "one root per pod, however often it is added"
        );
        assert_eq!(
            roots.keys().cloned().collect::<Vec<_>>(),
            added.into_iter().collect::<Vec<_>>()
        );
        for root in roots.values() {
            assert_eq!(root.parent_span_id, SpanId::INVALID);
            assert!(attr(root, "k8s.pod").is_some_and(|p| p.contains('/')));
        }
        // every record about a pod is a child of that pod's root, in its trace; each span's
        // id is its own
        let by_seq: BTreeMap<u64, &Record> = records.iter().map(|r| (r.seq, &**r)).collect();
        let mut about_pods = 0;
        let mut ids = std::collections::BTreeSet::new();
        for s in spans.iter().filter(|s| s.name != "pod") {
            assert!(
                ids.insert(s.span_context.span_id().to_bytes()),
                "{} repeats a span id",
                s.name
            );
            let seq: u64 = attr(s, "ledgerlet.record.seq").unwrap().parse().unwrap();
            let Some(uid) = by_seq[&seq].event.pod_uid_str() else {
                assert_eq!(s.parent_span_id, SpanId::INVALID, "{}: a new root", s.name);
                continue;
            };
            about_pods += 1;
            let root = roots[uid];
            assert_eq!(s.span_context.trace_id(), root.span_context.trace_id());
            assert_eq!(s.parent_span_id, root.span_context.span_id(), "{}", s.name);
        }
        assert!(about_pods > 100, "{about_pods} records about pods");
        // pods' traces are apart
        let traces: std::collections::BTreeSet<_> = roots
            .values()
            .map(|r| r.span_context.trace_id().to_bytes())
            .collect();
        assert_eq!(traces.len(), roots.len());
    }

    #[test]
    fn batches_of_fold_spans_share_one_wall_clock_anchor() {
        let first = wall_clock();
        std::thread::sleep(Duration::from_millis(5));
        let second = wall_clock();
        let t = clock_ns();
        assert_eq!(first(t), second(t));
        let near = SystemTime::now().duration_since(second(clock_ns()));
        let off = near.unwrap_or_else(|e| e.duration());
        assert!(off <= Duration::from_millis(WALL_STEP_MS), "{off:?}");
    }

    #[test]
    fn a_records_turn_runs_until_the_next_fold_starts_or_the_engine_is_idle() {
        recorded(|metrics| {
            let (mut observer, exporting, sink) = traced_observer(Default::default(), 7);
            let records = &busy_records(3, 30 * 1000)[..5];
            let mut node = Node::default();
            // one input: five records folded back to back
            let kind = |r: &Record| r.event.kind_index();
            for (i, r) in records.iter().enumerate() {
                let opened = observer.open(Parent::Input(None), &r.event, r.seq);
                let _ = observer.fold(&mut node, r, opened);
                std::thread::sleep(Duration::from_millis(2));
                // records are counted when folded; a turn is timed when it ends
                let text = metrics.render();
                let timed = total(&text, &format!("{FOLD_DURATION_SECONDS}_count"));
                assert_eq!(timed, i as f64, "turns ended after record {i}");
                assert_eq!(total(&text, RECORDS_TOTAL), (i + 1) as f64);
                assert!(observer.turn.is_some_and(|t| t.kind == kind(r)));
            }
            let counted = total(&metrics.render(), RECORDS_TOTAL);
            assert_eq!(counted, 5.0, "the running turn's record is counted");
            observer.idle();
            assert!(observer.turn.is_none());
            let timed = total(&metrics.render(), &format!("{FOLD_DURATION_SECONDS}_count"));
            assert_eq!(timed, 5.0);
            assert!(exporting.flush());
            let (roots, mut spans): (Vec<_>, Vec<_>) =
                sink.received().into_iter().partition(|s| s.name == "pod");
            spans.sort_by_key(|s| s.start_time);
            assert_eq!(spans.len(), 5);
            // the pods added among the five records start their traces with a root span each
            let added = records
                .iter()
                .filter(|r| matches!(r.event, Event::PodAdded(_)))
                .count();
            assert!(added > 0);
            assert_eq!(roots.len(), added);
            for (a, b) in spans.iter().zip(&spans[1..]) {
                // each turn ends where the next begins (to the nanosecond: each end is converted
                // on its own)
                let gap = b
                    .start_time
                    .duration_since(a.end_time)
                    .unwrap_or_else(|e| e.duration());
                assert!(gap <= Duration::from_nanos(1), "{gap:?} between turns");
            }
            for s in &spans {
                // the sleep after each fold is inside its turn, the last one ended by idle()
                let d = s.end_time.duration_since(s.start_time).unwrap();
                assert!(d >= Duration::from_millis(2), "{}: {d:?}", s.name);
            }
            exporting.shutdown(Duration::from_secs(1));
        });
    }

    #[test]
    fn pods_start_at_the_first_record_after_which_their_status_says_so() {
        recorded(|metrics| {
            // the plain definition: after every record, every pod first seen in a PodAdded and
            // not yet started is looked up; it is Running (pod start) and has every container
            // running (total) at the first record whose fold made its status say so
            let records = busy_records(40, 4 * 60 * 1000);
            let mut node = Node::default();
            // first seen, created, seen running
            let mut first_seen: BTreeMap<Uid, (Time, Option<Time>, bool)> = BTreeMap::new();
            let (mut running, mut totals) = (Vec::new(), Vec::new());
            // pods first seen whose worker started (a SyncPod that creates it), and its delay
            let mut workers: BTreeMap<Uid, f64> = BTreeMap::new();
            for r in &records {
                if let Event::PodAdded(c) = &r.event {
                    let uid = pod::uid(&c.pod);
                    if node.pod_workers.status(&uid).is_none() && !first_seen.contains_key(&uid) {
                        let created = c.pod.metadata.creation_timestamp.as_ref();
                        let created = created.map(crate::core::pod_status::time_from_api);
                        first_seen.insert(uid, (r.at, created, false));
                    }
                }
                for c in crate::core::fold(&mut node, r) {
                    if let Command::SyncPod(s) = c {
                        let first = first_seen.get(&s.uid).map(|f| f.0);
                        if let Some(seen) = first.filter(|_| s.update_type == UpdateType::Create) {
                            let delay = r.at.since(seen).as_secs_f64();
                            workers.entry(s.uid.clone()).or_insert(delay);
                        }
                    }
                }
                if let Event::SyncFinished(f) = &r.event {
                    if f.work != crate::core::command::WorkType::Sync {
                        first_seen.remove(&f.uid);
                    }
                }
                if let Event::PodRemoved(c) | Event::PodDeleted(c) = &r.event {
                    first_seen.remove(&pod::uid(&c.pod));
                }
                let mut started = Vec::new();
                for (uid, (seen, created, seen_running)) in first_seen.iter_mut() {
                    let Some(v) = node.statuses.get(uid) else {
                        continue;
                    };
                    let is_running = v.status.phase.as_deref() == Some("Running");
                    if is_running && !*seen_running {
                        *seen_running = true;
                        running.push(r.at.since(*seen).as_secs_f64());
                    }
                    let all = is_running
                        && v.status.container_statuses.as_ref().is_some_and(|cs| {
                            !cs.is_empty()
                                && cs
                                    .iter()
                                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                        });
                    if all {
                        totals.push(r.at.since(created.unwrap_or(*seen)).as_secs_f64());
                        started.push(uid.clone());
                    }
                }
                for u in started {
                    first_seen.remove(&u);
                }
            }
            let mut observer = FoldObserver::default();
            let mut node = Node::default();
            for r in &records {
                let _ = observer.fold(&mut node, r, None);
                assert_eq!(
                    observer.starting.awaiting_worker(),
                    observer.starting.count_awaiting(),
                    "after record {}",
                    r.seq
                );
            }
            assert!(totals.len() > 20, "{} pods started", totals.len());
            let worker_delays: Vec<f64> = workers.into_values().collect();
            let workers = worker_delays.len();
            assert!(workers >= totals.len(), "{workers} workers");
            let text = metrics.render();
            let holds = |name: &str, want: &[f64]| {
                let sum: f64 = want.iter().sum();
                let got = total(&text, &format!("{name}_sum"));
                let count = total(&text, &format!("{name}_count"));
                assert_eq!(count, want.len() as f64, "{name}");
                assert!((got - sum).abs() < 1e-6, "{name}: {got} vs {sum}");
            };
            holds("kubelet_pod_start_total_duration_seconds", &totals);
            holds("kubelet_pod_start_duration_seconds", &running);
            holds("kubelet_pod_worker_start_duration_seconds", &worker_delays);
        });
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
        recorded(|metrics| {
            // deletions after 5 min, failing first syncs, jobs that complete: every transition
            let records = busy_records(40, 7 * 60 * 1000);
            let mut node = Node::default();
            let mut observer = FoldObserver::default();
            for r in &records {
                let _ = observer.fold(&mut node, r, None);
            }
            let text = metrics.render();
            let want = reference(&records);
            let got: BTreeMap<(Phase, Phase), u64> = observer
                .transitions
                .keys()
                .map(|(from, to)| {
                    let series = format!(
                        "{TRANSITIONS_TOTAL}{{from=\"{}\",to=\"{}\"}}",
                        from.as_str(),
                        to.as_str()
                    );
                    ((*from, *to), total(&text, &series) as u64)
                })
                .collect();
            assert_eq!(got, want);
            assert_eq!(
                total(&text, TRANSITIONS_TOTAL),
                want.values().sum::<u64>() as f64,
                "no other transition is counted"
            );
            assert!(
                want.contains_key(&(Phase::Sync, Phase::Terminating)),
                "{want:?}"
            );
            assert!(
                want.contains_key(&(Phase::Terminated, Phase::Finished)),
                "{want:?}"
            );
            // most folds change no worker's phase, and skip the lookups
            assert!(
                observer.logged_folds * 10 < records.len() as u64,
                "{} of {} folds changed a phase",
                observer.logged_folds,
                records.len()
            );
        });
    }
}
