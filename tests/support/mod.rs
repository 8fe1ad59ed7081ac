//! Shared test support.
#![allow(dead_code)]

pub mod core_harness;
