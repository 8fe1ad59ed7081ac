//! How many bytes a retained record costs.
//!
//! Owns the estimate used for the ledger's byte budget: the record's inline size, the heap
//! it owns, and the objects it shares behind `Arc` (pods, runtime statuses), which are
//! counted once however many records point at them. Must not serialise per record: shared
//! objects are measured once, when first seen.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Arc;

use crate::core::record::event::Event;
use crate::core::record::Record;

/// A shared object a record points at.
pub(crate) struct Shared<'a> {
    addr: usize,
    measure: Box<dyn FnOnce() -> usize + 'a>,
}

/// Heap bytes a Kubernetes object decoded by k8s-openapi (`Pod`, `Node`) holds per byte of
/// its JSON: 6.2 measured for an API server's pod with its status as the node keeps it
/// (without managed fields; 7.0 with them), rounded up. Every optional field is inline
/// whether set or not, and every string and map node is an allocation of its own
/// (`tests/ledger_memory.rs` checks the whole count against a counting allocator).
const K8S_OBJECT_HEAP_PER_JSON_BYTE: usize = 7;

/// The same for ledgerlet's own runtime types (`RuntimePodStatus`, the running pod): 2.6
/// measured for a running pod's status.
const RUNTIME_HEAP_PER_JSON_BYTE: usize = 3;

/// `a`, measured as its allocation (`Arc` counters and the value) and `heap_per_json_byte`
/// times its JSON length for the heap it owns: serialising is the one walk of a foreign type
/// there is, and the factors are measured.
fn shared<T: serde::Serialize>(a: &Arc<T>, heap_per_json_byte: usize) -> Shared<'_> {
    Shared {
        addr: Arc::as_ptr(a) as *const () as usize,
        measure: Box::new(move || {
            let json = serde_json::to_vec(&**a).map(|v| v.len()).unwrap_or(0);
            16 + size_of::<T>() + heap_per_json_byte * json
        }),
    }
}

fn for_each_shared<'a>(e: &'a Event, mut f: impl FnMut(Shared<'a>)) {
    match e {
        Event::PodAdded(c)
        | Event::PodUpdated(c)
        | Event::PodRemoved(c)
        | Event::PodDeleted(c)
        | Event::PodReconcile(c) => f(shared(&c.pod, K8S_OBJECT_HEAP_PER_JSON_BYTE)),
        Event::NodeInfoObserved(n) => f(shared(&n.node, K8S_OBJECT_HEAP_PER_JSON_BYTE)),
        Event::UpdatePod(u) => {
            if let Some(p) = &u.pod {
                f(shared(p, K8S_OBJECT_HEAP_PER_JSON_BYTE));
            }
            if let Some(p) = &u.mirror_pod {
                f(shared(p, K8S_OBJECT_HEAP_PER_JSON_BYTE));
            }
            if let Some(r) = &u.running_pod {
                f(shared(r, RUNTIME_HEAP_PER_JSON_BYTE));
            }
        }
        Event::RuntimeStatusObserved(o) => {
            if let Some(s) = &o.status {
                f(shared(s, RUNTIME_HEAP_PER_JSON_BYTE));
            }
        }
        _ => {}
    }
}

/// Heap owned by the record itself (strings and vectors not behind a shared `Arc`).
fn own_heap_bytes(r: &Record) -> usize {
    use crate::core::timers::TimerKey;
    // An `Arc<str>` allocation: two counters and the text.
    fn uid(u: &crate::core::uid::Uid) -> usize {
        16 + u.as_str().len()
    }
    fn opt(s: &Option<String>) -> usize {
        s.as_ref().map_or(0, String::len)
    }
    // the trace context is inline in the record (no heap)
    match &r.event {
        Event::ConfigApplied(c) => c.config.node_name.len() + c.config.sources.len(),
        Event::SourceReady(_) | Event::NodeShutdown(_) => 0,
        Event::VolumeUsageObserved(u) => uid(&u.uid) + u.volume.len(),
        Event::PodAdded(_)
        | Event::PodUpdated(_)
        | Event::PodRemoved(_)
        | Event::PodDeleted(_)
        | Event::PodReconcile(_) => 0,
        Event::UpdatePod(u) => u
            .kill
            .as_ref()
            .and_then(|k| k.status_override.as_ref())
            .map_or(0, |s| {
                size_of::<crate::core::update::PodStatusOverride>()
                    + opt(&s.phase)
                    + opt(&s.reason)
                    + opt(&s.message)
                    + s.conditions.len() * 256
            }),
        Event::PlegEvent(p) => uid(&p.uid) + opt(&p.container_id),
        Event::RuntimeStatusObserved(o) => uid(&o.uid) + opt(&o.error),
        Event::SyncFinished(f) => {
            uid(&f.uid)
                + match &f.outcome {
                    crate::core::record::event::SyncOutcome::Failed { message } => message.len(),
                    _ => 0,
                }
        }
        Event::TimerFired(t) => match &t.key {
            TimerKey::PodWork { uid: u }
            | TimerKey::KillDeadline { uid: u, .. }
            | TimerKey::BackoffExpiry { uid: u }
            | TimerKey::ActiveDeadline { uid: u }
            | TimerKey::PodContentRemoval { uid: u } => uid(u),
            TimerKey::Probe {
                uid: u, container, ..
            } => uid(u) + container.len(),
            TimerKey::Housekeeping
            | TimerKey::StatusSync
            | TimerKey::NodeStatusUpdate
            | TimerKey::LeaseRenew
            | TimerKey::NodeRegister
            | TimerKey::NodeShutdownGroup => 0,
        },
        Event::SyncKnownPods(s) => s.desired.as_ref().map_or(0, |d| {
            d.len() * size_of::<crate::core::uid::Uid>() + d.iter().map(uid).sum::<usize>()
        }),
        Event::KillCompleted(k) => uid(&k.uid) + k.requests.len() * 8,
        Event::PodRejected(p) => uid(&p.uid) + p.reason.len() + p.message.len(),
        Event::RuntimeActionFinished(a) => {
            use crate::core::record::event::{ActionOutcome, RuntimeAction};
            let action = match &a.action {
                RuntimeAction::KillContainer { id, name, message } => {
                    id.len() + name.len() + message.len()
                }
                RuntimeAction::StopSandbox { id }
                | RuntimeAction::RemoveContainer { id }
                | RuntimeAction::RemoveSandbox { id } => id.len(),
                RuntimeAction::CreateSandbox { .. } => 0,
                RuntimeAction::PodConfigWarning { reason, message } => reason.len() + message.len(),
                RuntimeAction::PullImage { container, image }
                | RuntimeAction::PullingImage { container, image } => container.len() + image.len(),
                RuntimeAction::CreateContainer { container, .. } => container.len(),
                RuntimeAction::StartContainer { container, id, .. }
                | RuntimeAction::PostStartHook { container, id }
                | RuntimeAction::PreStopHook {
                    name: container,
                    id,
                } => container.len() + id.len(),
            };
            let outcome = match &a.outcome {
                ActionOutcome::Ok { id, detail } => opt(id) + opt(detail),
                ActionOutcome::Failed {
                    reason,
                    message,
                    detail,
                } => reason.len() + message.len() + opt(detail),
            };
            uid(&a.uid) + action + outcome
        }
        Event::ManifestRejected(m) => m.path.len() + m.error.len(),
        Event::AgentRestarted(a) => a.dropped.as_ref().map_or(0, String::len),
        Event::NodeInfoObserved(_) => 0,
        Event::NodeObserved(n) => {
            let labels: usize = n.labels.iter().map(|(k, v)| k.len() + v.len()).sum();
            let taints: usize = n
                .taints
                .iter()
                .map(|t| {
                    size_of::<k8s_openapi::api::core::v1::Taint>()
                        + t.key.len()
                        + t.effect.len()
                        + t.value.as_ref().map_or(0, String::len)
                })
                .sum();
            let extended: usize = n
                .extended_capacity
                .iter()
                .chain(&n.extended_allocatable)
                .map(|(k, v)| k.len() + v.0.len())
                .sum();
            labels + taints + extended
        }
        Event::RuntimeHealth(h) => h.message.len(),
        Event::NodeSyncFinished(n) => {
            n.uid.as_ref().map_or(0, uid)
                + match &n.outcome {
                    crate::core::record::event::NodeSyncOutcome::Failed { message, .. } => {
                        message.len()
                    }
                    crate::core::record::event::NodeSyncOutcome::Ok => 0,
                }
        }
        Event::ProbeFinished(f) => {
            uid(&f.uid) + f.container.len() + f.container_id.len() + f.output.len()
        }
        Event::ProbeResult(r) => uid(&r.uid) + r.container.len() + r.container_id.len(),
        Event::StatusSyncFinished(f) => {
            uid(&f.uid)
                + match &f.outcome {
                    crate::core::record::event::StatusSyncOutcome::UidChanged { api_uid } => {
                        api_uid.len()
                    }
                    crate::core::record::event::StatusSyncOutcome::Failed { message, .. } => {
                        message.len()
                    }
                    _ => 0,
                }
        }
    }
}

/// Tracks shared objects by address with a count of retained records pointing at each.
#[derive(Default)]
pub(crate) struct SharedTally {
    objects: HashMap<usize, (usize, u32)>,
    bytes: u64,
}

impl SharedTally {
    /// Accounts a newly retained record; returns its own (unshared) bytes.
    pub fn retain(&mut self, r: &Record) -> u64 {
        for_each_shared(&r.event, |s| {
            let entry = self.objects.entry(s.addr).or_insert_with(|| {
                let n = (s.measure)();
                (n, 0)
            });
            if entry.1 == 0 {
                self.bytes += entry.0 as u64;
            }
            entry.1 += 1;
        });
        // ArcInner counters + the record + its slot in the deque (pointer and size)
        (16 + size_of::<Record>() + 16 + own_heap_bytes(r)) as u64
    }

    /// Accounts an evicted record.
    pub fn release(&mut self, r: &Record) {
        for_each_shared(&r.event, |s| {
            if let Some(entry) = self.objects.get_mut(&s.addr) {
                entry.1 -= 1;
                if entry.1 == 0 {
                    self.bytes -= entry.0 as u64;
                    self.objects.remove(&s.addr);
                }
            }
        });
    }

    /// Bytes of all shared objects still referenced by retained records.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}
