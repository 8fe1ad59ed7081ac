//! Span export: one bounded queue between the agent and its OTLP exporter, and the thread
//! that drains it.
//!
//! Owns the queue (`--tracing-max-queue-size` spans), the export thread (its own
//! single-threaded tokio runtime, so a slow or dead collector never touches the agent's
//! runtime), and the queue's metrics: `ledgerlet_trace_spans_dropped_total`,
//! `ledgerlet_trace_spans_exported_total`, `ledgerlet_trace_export_errors_total`,
//! `ledgerlet_trace_queue_spans` and `ledgerlet_trace_queue_capacity_spans`. A push never
//! blocks and never waits for the exporter: when the queue is full the span is dropped and
//! counted. Must not create spans or decide sampling.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks, SpanProcessor};
use opentelemetry_sdk::Resource;

use crate::ledger::TraceParent;

/// Spans dropped because the queue was full (or tracing was shutting down).
pub const SPANS_DROPPED_TOTAL: &str = "ledgerlet_trace_spans_dropped_total";
/// Spans the collector accepted.
pub const SPANS_EXPORTED_TOTAL: &str = "ledgerlet_trace_spans_exported_total";
/// Export calls that failed or timed out (their spans are lost).
pub const EXPORT_ERRORS_TOTAL: &str = "ledgerlet_trace_export_errors_total";
/// Spans waiting in the queue.
pub const QUEUE_SPANS: &str = "ledgerlet_trace_queue_spans";
/// The queue's bound.
pub const QUEUE_CAPACITY_SPANS: &str = "ledgerlet_trace_queue_capacity_spans";

/// The instrumentation scope of every ledgerlet span.
pub const SCOPE: &str = "ledgerlet";

/// A fold span, recorded on the engine's hot path in a compact form and turned into OTLP
/// `SpanData` on the export thread.
#[derive(Clone, Debug)]
pub struct FoldSpan {
    /// The span's own context (also the record's `trace`).
    pub ctx: TraceParent,
    /// The parent's span id; 0 for a root.
    pub parent_span_id: u64,
    /// The record's kind, as its index in `Event::KINDS` (`fold <kind>` is the span name).
    pub kind: usize,
    /// The record's seq.
    pub seq: u64,
    /// Wall time the fold started.
    pub start: SystemTime,
    /// How long the fold took.
    pub duration_ns: u64,
    /// A pod worker transition the fold made (`from`, `to`, pod): a span event.
    pub transition: Option<Box<(&'static str, &'static str, crate::core::Uid)>>,
}

impl FoldSpan {
    fn into_span_data(self, scope: &InstrumentationScope) -> SpanData {
        let start = self.start;
        let end = start + Duration::from_nanos(self.duration_ns);
        let mut events = SpanEvents::default();
        if let Some(t) = self.transition {
            let (from, to, uid) = *t;
            events.events.push(opentelemetry::trace::Event::new(
                "pod worker transition",
                end,
                vec![
                    KeyValue::new("from", from),
                    KeyValue::new("to", to),
                    KeyValue::new("k8s.pod.uid", uid.as_str().to_string()),
                ],
                0,
            ));
        }
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(self.ctx.trace_id()),
                SpanId::from(self.ctx.span_id()),
                TraceFlags::new(self.ctx.flags()),
                false,
                TraceState::default(),
            ),
            parent_span_id: if self.parent_span_id == 0 {
                SpanId::INVALID
            } else {
                SpanId::from(self.parent_span_id)
            },
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed(fold_span_name(self.kind)),
            start_time: start,
            end_time: end,
            attributes: vec![
                KeyValue::new("ledgerlet.record.seq", self.seq as i64),
                KeyValue::new(
                    "ledgerlet.record.kind",
                    crate::ledger::Event::KINDS
                        .get(self.kind)
                        .copied()
                        .unwrap_or("unknown"),
                ),
            ],
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope.clone(),
        }
    }
}

/// `fold <kind>` for each kind, made once.
fn fold_span_name(kind: usize) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| {
            crate::ledger::Event::KINDS
                .iter()
                .map(|k| format!("fold {k}"))
                .collect()
        })
        .get(kind)
        .map_or("fold", String::as_str)
}

enum Item {
    Sdk(Box<SpanData>),
    Fold(FoldSpan),
}

enum Control {
    /// The queue is half full: export now.
    Wake,
    /// Export everything queued, then answer.
    Flush(SyncSender<()>),
    /// Export everything queued (bounded by the deadline), shut the exporter down, answer.
    Shutdown(SyncSender<()>, Instant),
}

/// The bounded queue of finished spans.
pub struct SpanQueue {
    items: Mutex<Vec<Item>>,
    capacity: usize,
    dropped: AtomicU64,
    control: SyncSender<Control>,
}

impl std::fmt::Debug for SpanQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanQueue")
            .field("capacity", &self.capacity)
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

impl SpanQueue {
    /// Spans queued now.
    pub fn len(&self) -> usize {
        self.items.lock().expect("span queue").len()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Spans dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn count_dropped(&self, n: usize) {
        if n > 0 {
            self.dropped.fetch_add(n as u64, Ordering::Relaxed);
            metrics::counter!(SPANS_DROPPED_TOTAL).increment(n as u64);
        }
    }

    fn wake_if_half_full(&self, before: usize, after: usize) {
        let half = self.capacity / 2;
        if before < half && after >= half {
            // never blocks: a full control channel means a wake-up is pending already
            let _ = self.control.try_send(Control::Wake);
        }
    }

    fn push(&self, item: Item) {
        let mut q = self.items.lock().expect("span queue");
        let before = q.len();
        if before >= self.capacity {
            drop(q);
            self.count_dropped(1);
            return;
        }
        q.push(item);
        drop(q);
        self.wake_if_half_full(before, before + 1);
    }

    /// Moves as many fold spans as fit into the queue; the rest are dropped and counted.
    /// `batch` is left empty.
    pub fn push_folds(&self, batch: &mut Vec<FoldSpan>) {
        if batch.is_empty() {
            return;
        }
        let mut q = self.items.lock().expect("span queue");
        let before = q.len();
        let room = self.capacity.saturating_sub(before);
        let take = room.min(batch.len());
        let dropped = batch.len() - take;
        q.extend(batch.drain(..take).map(Item::Fold));
        let after = q.len();
        drop(q);
        batch.clear();
        self.count_dropped(dropped);
        self.wake_if_half_full(before, after);
    }

    fn take(&self, max: usize) -> Vec<Item> {
        let mut q = self.items.lock().expect("span queue");
        let n = q.len().min(max);
        q.drain(..n).collect()
    }
}

/// Hands spans made through `tracing` (and the SDK) to the queue. Sampled spans only.
#[derive(Debug)]
pub struct QueueProcessor {
    queue: Arc<SpanQueue>,
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.queue.push(Item::Sdk(Box::new(span)));
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// How the export thread batches and times out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// The queue's bound, in spans.
    pub max_queue_size: usize,
    /// Spans per export call.
    pub max_export_batch_size: usize,
    /// How often the queue is drained when it is less than half full.
    pub export_period_ms: u64,
    /// Longest time one export call may take (a dead collector costs at most this per batch).
    pub export_timeout_ms: u64,
}

impl Default for ExportOptions {
    /// The OpenTelemetry batch processor's defaults, with a shorter period (1 s, not 5 s) so a
    /// pod's spans show up in Jaeger while one looks at it.
    fn default() -> Self {
        ExportOptions {
            max_queue_size: 2048,
            max_export_batch_size: 512,
            export_period_ms: 1000,
            export_timeout_ms: 10_000,
        }
    }
}

/// The queue, its processor and the export thread.
pub struct Exporting {
    queue: Arc<SpanQueue>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Exporting {
    /// Starts the export thread. `make` builds the exporter on that thread, inside its tokio
    /// runtime (tonic channels need one); an error there is returned here.
    pub fn start<E, F>(
        options: &ExportOptions,
        resource: Resource,
        make: F,
    ) -> Result<Exporting, String>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> Result<E, String> + Send + 'static,
    {
        let capacity = options.max_queue_size.max(1);
        let (control_tx, control_rx) = mpsc::sync_channel(1);
        let queue = Arc::new(SpanQueue {
            items: Mutex::new(Vec::with_capacity(capacity.min(4096))),
            capacity,
            dropped: AtomicU64::new(0),
            control: control_tx,
        });
        metrics::gauge!(QUEUE_CAPACITY_SPANS).set(capacity as f64);
        metrics::gauge!(QUEUE_SPANS).set(0.0);
        metrics::counter!(SPANS_DROPPED_TOTAL).absolute(0);
        metrics::counter!(SPANS_EXPORTED_TOTAL).absolute(0);
        metrics::counter!(EXPORT_ERRORS_TOTAL).absolute(0);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let q = queue.clone();
        let opts = options.clone();
        let thread = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot start the export runtime: {e}")));
                        return;
                    }
                };
                let exporter = rt.block_on(async { make() });
                let mut exporter = match exporter {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                exporter.set_resource(&resource);
                let _ = ready_tx.send(Ok(()));
                export_loop(&rt, &exporter, &q, &opts, control_rx);
            })
            .map_err(|e| format!("cannot start the export thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Exporting {
                queue,
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err("the export thread exited while starting".into())
            }
        }
    }

    /// The queue (fold spans are pushed here directly).
    pub fn queue(&self) -> &Arc<SpanQueue> {
        &self.queue
    }

    /// A span processor feeding the queue, for the SDK tracer provider.
    pub fn processor(&self) -> QueueProcessor {
        QueueProcessor {
            queue: self.queue.clone(),
        }
    }

    /// Exports everything queued now; waits at most `timeout`.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (tx, rx) = mpsc::sync_channel(1);
        let deadline = Instant::now() + timeout;
        loop {
            match self.queue.control.try_send(Control::Flush(tx.clone())) {
                Ok(()) => break,
                Err(TrySendError::Full(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => return false,
            }
        }
        rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }

    /// Exports what is queued (bounded by `timeout`) and stops the thread. Never waits longer
    /// than `timeout` plus one export call's own timeout.
    pub fn shutdown(&self, timeout: Duration) {
        let Some(thread) = self.thread.lock().expect("export thread").take() else {
            return;
        };
        let (tx, rx) = mpsc::sync_channel(1);
        let deadline = Instant::now() + timeout;
        let sent = loop {
            match self
                .queue
                .control
                .try_send(Control::Shutdown(tx.clone(), deadline))
            {
                Ok(()) => break true,
                Err(TrySendError::Full(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => break false,
            }
        };
        if sent && rx.recv_timeout(timeout).is_ok() {
            let _ = thread.join();
        }
        // otherwise the thread is stuck in an export; it is detached and dies with the process
    }
}

fn export_loop<E: SpanExporter>(
    rt: &tokio::runtime::Runtime,
    exporter: &E,
    queue: &SpanQueue,
    opts: &ExportOptions,
    control: Receiver<Control>,
) {
    let scope = InstrumentationScope::builder(SCOPE)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let period = Duration::from_millis(opts.export_period_ms.max(1));
    let timeout = Duration::from_millis(opts.export_timeout_ms.max(1));
    let batch_size = opts.max_export_batch_size.max(1);
    let mut last_error_log: Option<Instant> = None;
    let mut exported = 0u64;
    let mut errors = 0u64;
    loop {
        let msg = control.recv_timeout(period);
        let (reply, deadline) = match msg {
            Ok(Control::Wake) | Err(RecvTimeoutError::Timeout) => (None, None),
            Ok(Control::Flush(r)) => (Some(r), None),
            Ok(Control::Shutdown(r, d)) => (Some(r), Some(d)),
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // drain: at most what was queued when we started (new spans wait for the next round)
        let mut budget = queue.len();
        while budget > 0 {
            let items = queue.take(batch_size.min(budget));
            if items.is_empty() {
                break;
            }
            budget -= items.len();
            let n = items.len() as u64;
            let batch: Vec<SpanData> = items
                .into_iter()
                .map(|i| match i {
                    Item::Sdk(s) => *s,
                    Item::Fold(f) => f.into_span_data(&scope),
                })
                .collect();
            let limit = match deadline {
                Some(d) => timeout.min(d.saturating_duration_since(Instant::now())),
                None => timeout,
            };
            let result = rt.block_on(async {
                match tokio::time::timeout(limit, exporter.export(batch)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {} ms", limit.as_millis())),
                }
            });
            match result {
                Ok(()) => {
                    exported += n;
                    metrics::counter!(SPANS_EXPORTED_TOTAL).absolute(exported);
                }
                Err(e) => {
                    errors += 1;
                    metrics::counter!(EXPORT_ERRORS_TOTAL).absolute(errors);
                    if last_error_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                        last_error_log = Some(Instant::now());
                        tracing::warn!(error = %e, spans = n, "OTLP export failed; spans are dropped (logged at most once a minute)");
                    }
                }
            }
            metrics::gauge!(QUEUE_SPANS).set(queue.len() as f64);
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        metrics::gauge!(QUEUE_SPANS).set(queue.len() as f64);
        if let Some(d) = deadline {
            let rest = queue.take(usize::MAX).len();
            queue.count_dropped(rest);
            let _ = exporter.shutdown_with_timeout(d.saturating_duration_since(Instant::now()));
            if let Some(r) = reply {
                let _ = r.send(());
            }
            return;
        }
        if let Some(r) = reply {
            let _ = r.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects exported spans (a unit-test stand-in for a collector).
    #[derive(Debug, Clone, Default)]
    struct Sink(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Sink {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// Never answers (a collector that accepted the connection and hangs).
    #[derive(Debug)]
    struct Hang;

    impl SpanExporter for Hang {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            std::future::pending::<()>().await;
            Ok(())
        }
    }

    fn fold_span(seq: u64) -> FoldSpan {
        FoldSpan {
            ctx: TraceParent::new(1, seq + 1, true),
            parent_span_id: 0,
            kind: 2,
            seq,
            start: SystemTime::UNIX_EPOCH,
            duration_ns: 1000,
            transition: None,
        }
    }

    #[test]
    fn fold_spans_are_exported_with_their_names_ids_and_parents() {
        let sink = Sink::default();
        let s = sink.clone();
        let ex = Exporting::start(
            &ExportOptions {
                export_period_ms: 10_000,
                ..ExportOptions::default()
            },
            Resource::builder_empty().build(),
            move || Ok(s),
        )
        .unwrap();
        let mut batch = vec![fold_span(1), {
            let mut f = fold_span(2);
            f.parent_span_id = 2;
            f
        }];
        ex.queue().push_folds(&mut batch);
        assert!(batch.is_empty());
        assert!(ex.flush(Duration::from_secs(5)));
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "fold PodAdded");
        assert_eq!(got[0].parent_span_id, SpanId::INVALID);
        assert_eq!(got[1].parent_span_id, SpanId::from(2u64));
        assert_eq!(got[1].span_context.span_id(), SpanId::from(3u64));
        assert_eq!(
            got[1].end_time.duration_since(got[1].start_time).unwrap(),
            Duration::from_micros(1)
        );
        ex.shutdown(Duration::from_secs(1));
    }

    #[test]
    fn a_hanging_exporter_never_blocks_a_push_and_the_queue_stays_bounded() {
        let ex = Exporting::start(
            &ExportOptions {
                max_queue_size: 8,
                max_export_batch_size: 4,
                export_period_ms: 1,
                export_timeout_ms: 60_000,
            },
            Resource::builder_empty().build(),
            || Ok(Hang),
        )
        .unwrap();
        let started = Instant::now();
        for i in 0..10_000 {
            let mut b = vec![fold_span(i)];
            ex.queue().push_folds(&mut b);
        }
        // pushes are not slowed by the hanging export (a generous bound: no wall-clock speed
        // claim, only that nothing waited for the 60 s export timeout)
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(ex.queue().len() <= 8);
        assert!(ex.queue().dropped() >= 10_000 - 8 - 4);
        let t = Instant::now();
        ex.shutdown(Duration::from_millis(200));
        assert!(t.elapsed() < Duration::from_secs(30));
    }
}
