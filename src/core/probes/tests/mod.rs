//! PR-01…PR-22 as the core owns them (the shell's probes, PR-16…PR-19, are pinned in
//! `shell::prober`): the worker on its own, and the prober inside a node driven by hand.

mod fixture;
mod node;
mod worker;
