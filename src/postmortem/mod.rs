//! Postmortem tools: the flight recorder in the agent, and the offline tools over an
//! exported or durable ledger: replay (with the restarts read along the way), `replay
//! --verify`, `diff` and `explain`.
//!
//! Owns reading a node's past. Must not talk to a live agent or the runtime: everything
//! here is computation over records (the flight recorder only writes a file).

pub mod diff;
pub mod explain;
pub mod flight_recorder;
pub mod progress;
pub mod replay;
pub mod restarts;
pub mod verify;
