//! The pure core: reducers that fold ledger records into node state and commands.
//!
//! Owns every decision the node makes. Must not do I/O, read a clock, use randomness,
//! spawn, or let hash-map iteration order reach commands, events or exported state. Time
//! comes from the record being folded; jitter from its seq.
//!
//! One thing here serves observers rather than the fold: the per-record logs of `fold_log`
//! (which pod workers changed phase, which pod statuses got a new version). They stay
//! because only the code that makes a change knows it happened: without them the fold
//! observer would compare every worker and status before and after every record, which
//! costs more than the fold. Nothing in the core reads them and they are not state.

pub mod active_deadline;
pub mod admission;
pub mod backoff;
pub mod command;
pub mod config;
mod dispatch;
pub mod empty_dir_eviction;
pub mod fold_log;
pub mod go_quote;
pub mod housekeeping_memo;
pub mod jitter;
pub mod kubelet_sync;
pub mod merge;
pub mod mirror;
pub mod node;
pub mod node_shutdown;
pub mod node_status;
pub mod plan;
pub mod pod;
mod pod_content;
pub mod pod_manager;
pub mod pod_status;
pub mod pod_workers;
pub mod probe_results;
pub mod probes;
pub mod reason_cache;
pub mod record;
pub mod runtime_status;
pub mod soft_admission;
pub mod status;
pub mod status_memo;
pub mod timers;
pub mod uid;
pub mod uid_map;
pub mod update;

pub use command::Command;
pub use node::{fold, Node};
pub use uid::Uid;
