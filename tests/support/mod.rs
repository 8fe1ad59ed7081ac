//! Shared test support.
#![allow(dead_code)]

pub mod agent;
pub mod core_harness;
