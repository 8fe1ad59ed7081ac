//! Kubernetes Events the core asked for: logged now, sent to the API server once the node
//! joins a cluster, and kept in a bounded ring for `/debug/events`.
//!
//! Owns the ring and the log line. Must not change an event's content.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;

use crate::core::command::{EventType, KubeEvent};
use crate::core::record::Time;

/// A recorded event with when it was recorded.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded {
    /// When.
    pub at: Time,
    /// What.
    #[serde(flatten)]
    pub event: KubeEvent,
}

/// The last `capacity` events.
pub struct EventLog {
    ring: Mutex<VecDeque<Recorded>>,
    capacity: usize,
}

impl EventLog {
    /// A log keeping at most `capacity` events.
    pub fn new(capacity: usize) -> EventLog {
        EventLog {
            ring: Mutex::new(VecDeque::with_capacity(capacity.min(1024))),
            capacity: capacity.max(1),
        }
    }

    /// Logs and keeps an event.
    pub fn record(&self, event: KubeEvent) {
        let o = &event.object;
        match event.event_type {
            EventType::Normal => tracing::info!(
                object = %format!("{}/{}/{}", o.kind, o.namespace, o.name),
                reason = %event.reason,
                "{}",
                event.message
            ),
            EventType::Warning => tracing::warn!(
                object = %format!("{}/{}/{}", o.kind, o.namespace, o.name),
                reason = %event.reason,
                "{}",
                event.message
            ),
        }
        let mut ring = self.ring.lock().expect("event ring");
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back(Recorded {
            at: Time::from_system(),
            event,
        });
    }

    /// The kept events, oldest first.
    pub fn snapshot(&self) -> Vec<Recorded> {
        self.ring
            .lock()
            .expect("event ring")
            .iter()
            .cloned()
            .collect()
    }
}
