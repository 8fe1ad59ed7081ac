//! Fires the core's timers: `SetTimer` in, `TimerFired` out when due.
//!
//! Owns the wall-clock wait. Must not interpret timers: a re-armed key replaces the previous
//! one here too, and the core ignores a firing whose generation is stale anyway.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Report;
use crate::core::record::event::TimerFired;
use crate::core::record::{Event, Time};
use crate::core::timers::{ArmedTimer, TimerKey};

/// A timer to arm, with the seq of the record that armed it.
pub type Arm = (ArmedTimer, u64);

/// Runs until `arms` closes: keeps one pending timer per key and reports each when due.
pub async fn run(mut arms: mpsc::UnboundedReceiver<Arm>, report: Report) {
    let mut pending: BTreeMap<TimerKey, Arm> = BTreeMap::new();
    loop {
        let next = pending
            .values()
            .min_by_key(|(t, _)| t.due)
            .map(|(t, _)| t.due);
        let sleep = match next {
            Some(due) => due.since(Time::from_system()),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            arm = arms.recv() => match arm {
                Some(a) => { pending.insert(a.0.key.clone(), a); }
                None => return,
            },
            _ = tokio::time::sleep(sleep) => {
                let now = Time::from_system();
                let due: Vec<TimerKey> = pending
                    .iter()
                    .filter(|(_, (t, _))| t.due <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in due {
                    if let Some((t, cause)) = pending.remove(&key) {
                        let fired = Event::TimerFired(TimerFired { key: t.key, generation: t.generation });
                        if !report.send(fired, Some(cause)).await {
                            return;
                        }
                    }
                }
            }
        }
    }
}
