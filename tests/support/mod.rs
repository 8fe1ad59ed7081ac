//! Shared test support. The test API server (`apiserver.rs`) is large, so only the tests
//! that need it include it: `#[path = "support/apiserver.rs"] mod apiserver;`.
#![allow(dead_code)]

pub mod agent;
pub mod containerd;
pub mod core_harness;
pub mod fault_proxy;
pub mod real_cluster;
pub mod runtime_process;
pub mod scenarios;
