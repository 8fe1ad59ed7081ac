//! The shell: carries out the core's commands (CRI calls, timers, API writes) and reports
//! every outcome as a new ledger record.
//!
//! Owns side effects. Must not decide anything the core could decide from records. The
//! executors arrive with the CRI work (issue 3).
