//! Unit tests of the status manager, named after BEHAVIOUR.md §B (SM-xx).

mod container_flags;
mod merge;
mod store;
mod sync;
mod terminate;
mod transition;
