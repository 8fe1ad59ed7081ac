//! The daemon: wiring of sources, the engine and the shell into one running agent.
//!
//! Owns start-up and shutdown order. Must not decide anything: one task owns the `Engine`
//! (ledger + node) and runs append → fold → dispatch; sources and shell executors talk to it
//! through bounded channels. The runtime-facing parts arrive with the CRI work (issue 3).
