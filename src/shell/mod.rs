//! The shell: carries out the core's commands (CRI calls, timers, events) and reports every
//! outcome as a new ledger record.
//!
//! Owns side effects. Must not decide anything the core could decide from records: a command
//! says what to do, the shell does it and says what happened.

pub mod api;
pub mod cri_config;
pub mod events;
pub mod executor;
pub mod hooks;
pub mod http_get;
pub mod machine;
pub mod pod_cidr;
pub mod prober;
pub mod projected;
pub mod redact;
pub mod runtime_health;
pub mod runtime_view;
pub mod secrets;
pub mod timers;
pub mod volumes;

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
}

impl Report {
    /// A report handle and the engine's receiving end, holding at most `capacity` inputs.
    pub fn channel(capacity: usize) -> (Report, mpsc::Receiver<Input>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Report { tx }, rx)
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
