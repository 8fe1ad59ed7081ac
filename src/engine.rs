//! The append → fold → derive loop at the centre of the node.
//!
//! Owns the ledger and the folded `Node` together, so nothing else can mutate either: an
//! input is appended, folded, and every `Command::Append` it yields is appended (with
//! `cause` set) and folded before the next input, depth-first in emission order, so a
//! replay of the ledger reproduces the live sequence exactly. Returns the other commands
//! for the shell. Must not execute commands or read a clock (the caller passes `at`).

use std::sync::Arc;

use crate::core::record::{Event, Record, Time, TraceParent};
use crate::core::{fold, Command, Node};
use crate::ledger::durable::{DurableWriter, Loaded};
use crate::ledger::{Ledger, LedgerConfig, Snapshot};
use crate::observe::fold::{FoldObserver, Parent};

/// A command for the shell, with the record whose fold emitted it.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// The record that caused the command (its seq becomes the `cause` of the outcome).
    pub cause: Arc<Record>,
    /// What to do.
    pub command: Command,
    /// The span the command's own span hangs under (tracing on): the cause's span, or for a
    /// status sync started by a node-wide pass, the pod's root span.
    pub parent: Option<TraceParent>,
}

/// Bound on derived records per input: a fold that keeps deriving is a bug, not a workload.
pub const MAX_DERIVED_PER_INPUT: usize = 100_000;

/// The ledger plus the state folded from it.
pub struct Engine {
    ledger: Ledger<Node>,
    node: Node,
    observer: FoldObserver,
    /// The durable ledger, when `--ledger-dir` is set: every record and snapshot goes to it.
    durable: Option<DurableWriter<Node>>,
}

impl Engine {
    /// An engine with an empty ledger and a fresh node.
    pub fn new(config: LedgerConfig) -> Engine {
        Engine {
            ledger: Ledger::new(config, 0),
            node: Node::default(),
            observer: FoldObserver::default(),
            durable: None,
        }
    }

    /// Replaces the fold observer (the daemon installs one with a tracer).
    pub fn set_observer(&mut self, observer: FoldObserver) {
        self.observer = observer;
    }

    /// The fold observer (metrics rendered at scrape time).
    pub fn observer(&self) -> &FoldObserver {
        &self.observer
    }

    /// Tells the engine it has nothing more to do for now (its inbox is empty): the last
    /// record's turn ends (see `observe::fold`) and buffered fold spans go to the export
    /// queue.
    pub fn idle(&mut self) {
        self.observer.idle();
    }

    /// An engine that continues a loaded durable ledger: the snapshot's state with the
    /// loaded records folded onto it (their commands are not emitted: they belong to the
    /// previous lifetime), writing on through `durable`.
    pub fn resume(
        config: LedgerConfig,
        loaded: Loaded<Node>,
        durable: Option<DurableWriter<Node>>,
    ) -> Engine {
        let mut node = loaded
            .snapshot
            .as_ref()
            .map(|s| s.state.clone())
            .unwrap_or_default();
        let records: Vec<Arc<Record>> = loaded.records.into_iter().map(Arc::new).collect();
        for r in &records {
            let _ = fold(&mut node, r);
        }
        let snapshot = loaded.snapshot.map(|s| Snapshot {
            seq: s.seq,
            at: s.at,
            state: Arc::new(s.state),
        });
        Engine {
            ledger: Ledger::resume(config, snapshot, records),
            node,
            observer: FoldObserver::default(),
            durable,
        }
    }

    /// The durable writer, if any.
    pub fn durable(&self) -> Option<&DurableWriter<Node>> {
        self.durable.as_ref()
    }

    /// Writes and fsyncs what the durable ledger has queued (waits at most `timeout`).
    pub fn flush_durable(&self, timeout: std::time::Duration) -> bool {
        self.durable.as_ref().is_none_or(|d| d.flush(timeout))
    }

    /// The folded state.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger<Node> {
        &self.ledger
    }

    /// Appends an external input at `at` and folds it and everything it derives.
    pub fn submit(
        &mut self,
        at: Time,
        cause: Option<u64>,
        trace: Option<TraceParent>,
        event: Event,
    ) -> Vec<Emitted> {
        let mut emitted = Vec::new();
        let mut queue = std::collections::VecDeque::new();
        queue.push_back((cause, Parent::Input(trace), event));
        let mut derived = 0usize;
        while let Some((cause, parent, event)) = queue.pop_front() {
            let seq = self.ledger.last_seq() + 1;
            let opened = self.observer.open(parent, &event, seq);
            let record = self.ledger.append(at, cause, opened.map(|o| o.ctx), event);
            debug_assert_eq!(
                record.seq, seq,
                "the span id is derived from the record's seq"
            );
            if let Some(d) = &self.durable {
                d.append(record.clone());
            }
            let commands = self.observer.fold(&mut self.node, &record, opened);
            let durable_wants = self.durable.as_ref().is_some_and(|d| d.wants_snapshot());
            if self.ledger.wants_snapshot() || durable_wants {
                self.ledger.store_snapshot(Arc::new(self.node.clone()));
                if let (Some(d), Some(s)) = (&self.durable, self.ledger.snapshots().last()) {
                    d.snapshot(s.clone());
                }
            }
            // Derived events are folded in emission order, before any later input; the
            // other commands go to the shell in emission order too.
            let mut appended = Vec::new();
            for command in commands {
                match command {
                    Command::Append(e) => {
                        appended.push((Some(record.seq), Parent::Record(record.trace), e))
                    }
                    other => emitted.push(Emitted {
                        parent: self
                            .observer
                            .command_parent(record.trace, &record.event, &other),
                        cause: record.clone(),
                        command: other,
                    }),
                }
            }
            derived += appended.len();
            assert!(
                derived <= MAX_DERIVED_PER_INPUT,
                "record {} derived more than {MAX_DERIVED_PER_INPUT} records",
                record.seq
            );
            // depth-first: the children of this record come before its later siblings
            for item in appended.into_iter().rev() {
                queue.push_front(item);
            }
        }
        emitted
    }
}
