//! Tests of `core::pod_status`, named after the BEHAVIOUR IDs they pin.

mod conditions;
mod containers;
pub(crate) mod fixtures;
mod generate;
mod phase_tables;
mod status_fields;
