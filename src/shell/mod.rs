//! The shell: carries out the core's commands (CRI calls, timers, events) and reports every
//! outcome as a new ledger record.
//!
//! Owns side effects. Must not decide anything the core could decide from records: a command
//! says what to do, the shell does it and says what happened.

pub mod api;
pub mod container_log_rotation;
pub mod container_resources;
pub mod cri_config;
pub mod dns;
pub mod empty_dir_usage;
pub mod env;
pub mod etc_hosts;
pub mod events;
pub mod executor;
pub mod fs_group;
pub mod hooks;
pub mod http_get;
pub mod key_objects;
pub mod machine;
pub mod node_allocatable;
pub mod pod_cgroups;
pub mod pod_cidr;
pub mod ports;
pub mod prober;
pub mod projected;
pub mod pull_secrets;
pub mod redact;
pub mod resource_field;
pub mod runtime_class;
pub mod runtime_health;
pub mod runtime_view;
pub mod security_context;
pub mod stats;
pub mod termination_message;
pub mod timers;
pub mod volumes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::core::record::{Event, TraceParent};

/// Something for the engine to append: an outcome of a command (with `cause`) or an input
/// from a source (without).
#[derive(Debug)]
pub struct Input {
    /// What happened.
    pub event: Event,
    /// The record whose command this is the outcome of.
    pub cause: Option<u64>,
    /// Trace context to record.
    pub trace: Option<TraceParent>,
}

/// The way back to the engine: a bounded channel (senders wait when the engine is behind,
/// so nothing is dropped and nothing grows without bound).
#[derive(Clone, Debug)]
pub struct Report {
    tx: mpsc::Sender<Input>,
    /// The seq of the newest record the engine has folded (0: none yet).
    folded: Arc<AtomicU64>,
}

impl Report {
    /// A report handle and the engine's receiving end, holding at most `capacity` inputs.
    pub fn channel(capacity: usize) -> (Report, mpsc::Receiver<Input>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let folded = Arc::new(AtomicU64::new(0));
        (Report { tx, folded }, rx)
    }

    /// The seq of the newest record folded so far. Read before asking the runtime, it says
    /// what the answer is at least as fresh as (`RuntimeStatusObserved::read_after_seq`).
    pub fn folded_seq(&self) -> u64 {
        self.folded.load(Ordering::Acquire)
    }

    /// Called by the engine's owner after folding the record `seq` (and what it derived).
    pub fn set_folded_seq(&self, seq: u64) {
        self.folded.fetch_max(seq, Ordering::Release);
    }

    /// Sends an event for the engine to append. Returns false if the engine has stopped.
    /// Sent from inside a command's span (tracing on), the record's span becomes its child.
    pub async fn send(&self, event: Event, cause: Option<u64>) -> bool {
        self.tx
            .send(Input {
                event,
                cause,
                trace: crate::observe::context::current(),
            })
            .await
            .is_ok()
    }
}
