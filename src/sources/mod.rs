//! Sources: turn the outside world (manifest directory, API server, PLEG) into events.
//!
//! Owns translation from external change to ledger events. Must not decide what a change
//! means for a pod worker; that is `core::dispatch`.

pub mod api;
pub mod file;
pub mod node;
pub mod pleg;

/// What a source sends towards the engine: one ledger event, appended as an input record
/// (no cause).
pub type SourceEvent = crate::core::record::Event;
