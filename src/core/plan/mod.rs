//! The runtime plan: what the node must do to a pod's sandbox and containers next (kubelet
//! `computePodActions` with `computeInitContainerActions`, `PodSandboxChanged`,
//! `ShouldContainerBeRestarted`, the kill grace period and the instance bookkeeping the
//! shell needs around a sync).
//!
//! Owns the decision only. Must not talk to a runtime, read a clock, run hooks or wait: the
//! shell executes a [`PodActions`] against CRI (RT-34) and reports the outcome as records.
//! Every function here is a pure function of the pod spec, the runtime's report
//! ([`RuntimePodStatus`](crate::core::runtime_status::RuntimePodStatus)) and the prober's
//! cached results ([`ProbeResults`](crate::core::probe_results::ProbeResults)).
//!
//! The `SidecarContainers` behaviour (GA upstream) is the only one implemented: init
//! containers are always planned with `InitContainersToStart`, never with the legacy
//! `NextInitContainerToStart`. See docs/runtime-plan.md for the other deviations.

mod compute;
mod grace;
mod hash;
mod init;
mod instances;
mod policy;
mod sandbox;
mod types;

#[cfg(test)]
mod tests;

pub use compute::compute_pod_actions;
pub use grace::{
    kill_grace_base_s, kill_grace_period_s, killing_event_message, stop_timeout_s,
    termination_prerequisites, MINIMUM_GRACE_PERIOD_S,
};
pub use hash::container_hash;
pub use instances::{next_restart_count, purgeable_init_containers, removable_containers};
pub use policy::{is_restartable_init_container, should_container_be_restarted};
pub use sandbox::pod_sandbox_changed;
pub use types::{ContainerKind, ContainerToKill, KillReason, PodActions};
