//! Shared test support: the agent harness, a real control plane and a fault proxy in front
//! of it, containerd, the embedded runtime as a process, and scenario fixtures.
#![allow(dead_code)]

pub mod agent;
pub mod containerd;
pub mod core_harness;
pub mod differential;
pub mod fault_proxy;
pub mod node_shutdown;
pub mod on_containerd;
pub mod real_cluster;
pub mod runtime_process;
pub mod scenarios;
