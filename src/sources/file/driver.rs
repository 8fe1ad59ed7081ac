//! The static pod source's task: scan the manifest path every period and send the changes
//! as ledger events.
//!
//! Owns the polling loop and the mapping of `SourceChange` to `Event`. Must not decide
//! anything about pods and must never stop because of a bad file or an unreadable path:
//! those are reported (once per change) and the loop goes on. It stops only when the
//! receiver is gone. The kubelet watches with inotify and resyncs every 20 s; this polls,
//! which also catches what inotify misses (bind mounts, network filesystems).

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use super::source::{FileSource, SourceChange};
use crate::core::config::PodSource;
use crate::core::record::event::{ManifestRejected, PodConfigChange, SourceReady};
use crate::core::record::{Event, Time};
use crate::sources::SourceEvent;

/// The default period between scans, in milliseconds.
pub const DEFAULT_PERIOD_MS: u64 = 1000;

/// The ledger event for a change: `PodAdded`, `PodUpdated`, `PodRemoved` (source `file`) or
/// `ManifestRejected`.
pub fn change_event(change: SourceChange) -> Event {
    let config = |pod| PodConfigChange {
        source: PodSource::File,
        pod,
    };
    match change {
        SourceChange::Added(pod) => Event::PodAdded(config(pod)),
        SourceChange::Updated(pod) => Event::PodUpdated(config(pod)),
        SourceChange::Removed(pod) => Event::PodRemoved(config(pod)),
        SourceChange::Rejected { path, error } => Event::ManifestRejected(ManifestRejected {
            path: path.display().to_string(),
            error: error.to_string(),
        }),
    }
}

/// Watches `dir` (a manifest directory or one manifest file) for node `node_name`: scans
/// at once, sends the changes, then `SourceReady { source: file }`, then rescans every
/// `period_ms` milliseconds (at least 1). Returns when `tx`'s receiver is dropped.
pub async fn run(dir: PathBuf, node_name: String, period_ms: u64, tx: mpsc::Sender<SourceEvent>) {
    let mut source = FileSource::new(dir, node_name);
    let period = Duration::from_millis(period_ms.max(1));
    let mut ready_sent = false;
    loop {
        let now = Time::from_system();
        // The scan reads files: keep it off the async workers (a hung mount must not
        // stall them).
        let scanned = tokio::task::spawn_blocking(move || {
            let changes = source.scan(now);
            (source, changes)
        })
        .await;
        let changes = match scanned {
            Ok((scanned, changes)) => {
                source = scanned;
                changes
            }
            Err(e) => {
                // A panic in the scan is a bug; the source's memory is lost with it.
                tracing::error!(error = %e, "static pod source: scan failed; stopping");
                return;
            }
        };
        for change in changes {
            if tx.send(change_event(change)).await.is_err() {
                return;
            }
        }
        if !ready_sent {
            let ready = Event::SourceReady(SourceReady {
                source: PodSource::File,
            });
            if tx.send(ready).await.is_err() {
                return;
            }
            ready_sent = true;
        }
        tokio::time::sleep(period).await;
        if tx.is_closed() {
            return;
        }
    }
}
