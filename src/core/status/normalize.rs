//! `normalizeStatus` (SM-19, SM-20): the status as the API server will store it.
//!
//! Owns timestamp truncation to whole seconds (the API server keeps RFC 3339 seconds), the
//! termination-message budget, and the order of container statuses, so that two statuses that
//! differ only in what the API server would lose compare equal. Must not change anything else.

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as ApiTime;
use k8s_openapi::jiff::Timestamp;

/// `kubecontainer.MaxPodTerminationMessageLogLength`: the termination-message bytes a pod may
/// report in all, shared equally by its containers.
pub const MAX_POD_TERMINATION_MESSAGE_BYTES: usize = 12 * 1024;

fn truncate_time(t: &mut Option<ApiTime>) {
    if let Some(k) = t {
        if let Ok(ts) = Timestamp::from_second(k.0.as_second()) {
            k.0 = ts;
        }
    }
}

/// The first `max` bytes of `s`, cut back to a character boundary (Go cuts bytes and may
/// split a character; a Rust string cannot hold half a character).
fn truncate_message(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

fn normalize_state(state: Option<&mut ContainerState>, message_bytes: Option<usize>) {
    let Some(state) = state else { return };
    if let Some(r) = state.running.as_mut() {
        truncate_time(&mut r.started_at);
    }
    if let Some(t) = state.terminated.as_mut() {
        truncate_time(&mut t.started_at);
        truncate_time(&mut t.finished_at);
        if let (Some(m), Some(max)) = (t.message.as_mut(), message_bytes) {
            truncate_message(m, max);
        }
    }
}

fn normalize_list(list: Option<&mut Vec<ContainerStatus>>, message_bytes: Option<usize>) {
    for cs in list.into_iter().flatten() {
        normalize_state(cs.state.as_mut(), message_bytes);
        normalize_state(cs.last_state.as_mut(), message_bytes);
    }
}

fn times_and_messages(s: &mut PodStatus, message_bytes: Option<usize>) {
    truncate_time(&mut s.start_time);
    for c in s.conditions.iter_mut().flatten() {
        truncate_time(&mut c.last_probe_time);
        truncate_time(&mut c.last_transition_time);
    }
    normalize_list(s.container_statuses.as_mut(), message_bytes);
    normalize_list(s.init_container_statuses.as_mut(), message_bytes);
    normalize_list(s.ephemeral_container_statuses.as_mut(), message_bytes);
}

/// Every timestamp of `s` cut to whole seconds (the timestamp part of `normalizeStatus`).
pub fn normalize_times(s: &mut PodStatus) {
    times_and_messages(s, None);
}

/// The termination-message budget of one container status of `pod` (SM-20): 12 KiB shared by
/// every container, init container and ephemeral container of the spec.
pub fn termination_message_bytes_per_status(pod: &Pod) -> usize {
    let n = pod.spec.as_ref().map_or(0, |s| {
        s.containers.len()
            + s.init_containers.as_ref().map_or(0, Vec::len)
            + s.ephemeral_containers.as_ref().map_or(0, Vec::len)
    });
    MAX_POD_TERMINATION_MESSAGE_BYTES
        .checked_div(n)
        .unwrap_or(MAX_POD_TERMINATION_MESSAGE_BYTES)
}

/// `normalizeStatus`: timestamps to whole seconds, termination messages cut to their budget,
/// container and ephemeral container statuses sorted by name, init container statuses in
/// spec order (unknown names last, in their original order).
pub fn normalize_status(pod: &Pod, s: &mut PodStatus) {
    times_and_messages(s, Some(termination_message_bytes_per_status(pod)));
    if let Some(list) = s.container_statuses.as_mut() {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if let Some(list) = s.ephemeral_container_statuses.as_mut() {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if let Some(list) = s.init_container_statuses.as_mut() {
        let spec = super::super::pod_status::spec::init_containers(pod);
        list.sort_by_key(|cs| {
            spec.iter()
                .position(|c| c.name == cs.name)
                .unwrap_or(usize::MAX)
        });
    }
}
