//! Sources: turn the outside world (manifest directory, API server, PLEG) into events.
//!
//! Owns translation from external change to ledger events. Must not decide what a change
//! means for a pod worker; that is `core::dispatch`.

pub mod pleg;
