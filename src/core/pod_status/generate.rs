//! `generateAPIPodStatus`: one pass from the inputs to a complete API status.
//!
//! Owns the order of the steps (container statuses, probes, phase, phase stickiness and
//! reason carry-over, eviction, conditions, IPs, start time, QoS) and the choice of the "old"
//! status (the status manager's cached one, else the API's). Must not hold rules of its own
//! beyond GS-08/09/11 and SM-01/02: each step's rule lives in its module.

use k8s_openapi::api::core::v1::{
    ContainerStatus as ApiContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};

use super::api_time::{from_api, to_api};
use super::conditions::{self, DISRUPTION_TARGET};
use super::containers::{
    convert_to_api_container_statuses, ContainerList, ConvertInputs, SpecContainer,
};
use super::network;
use super::phase::{self, get_phase, FAILED};
use super::qos;
use super::readiness::apply_probe_results;
use super::spec;
use super::StatusInputs;
use crate::core::record::time::Time;

fn none_if_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

fn spec_lists(pod: &Pod) -> [(Vec<SpecContainer<'_>>, ContainerList); 3] {
    let regular = spec::containers(pod)
        .iter()
        .map(|c| SpecContainer {
            name: &c.name,
            image: c.image.as_deref().unwrap_or(""),
            sidecar: false,
            volume_mounts: c.volume_mounts.as_deref().unwrap_or(&[]),
            resources: c.resources.as_ref(),
        })
        .collect();
    let init = spec::init_containers(pod)
        .iter()
        .map(|c| SpecContainer {
            name: &c.name,
            image: c.image.as_deref().unwrap_or(""),
            sidecar: spec::is_sidecar(c),
            volume_mounts: c.volume_mounts.as_deref().unwrap_or(&[]),
            resources: c.resources.as_ref(),
        })
        .collect();
    let ephemeral = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or(&[])
        .iter()
        .map(|c| SpecContainer {
            name: &c.name,
            image: c.image.as_deref().unwrap_or(""),
            sidecar: false,
            volume_mounts: c.volume_mounts.as_deref().unwrap_or(&[]),
            resources: c.resources.as_ref(),
        })
        .collect();
    [
        (regular, ContainerList::Regular),
        (init, ContainerList::Init),
        (ephemeral, ContainerList::Ephemeral),
    ]
}

fn previous(old: &PodStatus, kind: ContainerList) -> &[ApiContainerStatus] {
    match kind {
        ContainerList::Regular => old.container_statuses.as_deref(),
        ContainerList::Init => old.init_container_statuses.as_deref(),
        ContainerList::Ephemeral => old.ephemeral_container_statuses.as_deref(),
    }
    .unwrap_or(&[])
}

/// GS-08/09/11: terminal phases are sticky, reason and message carry over while the phase is
/// unchanged, an eviction forces Failed, and the API's terminal phase always wins.
fn settle_phase(
    computed: String,
    old: &PodStatus,
    api: &PodStatus,
    evict: Option<(&str, &str)>,
) -> (String, Option<String>, Option<String>) {
    let old_phase = old.phase.as_deref().unwrap_or("");
    let api_phase = api.phase.as_deref().unwrap_or("");
    let mut phase = computed;
    if !phase::is_terminal(&phase) {
        if phase::is_terminal(old_phase) {
            phase = old_phase.to_string();
        } else if phase::is_terminal(api_phase) {
            phase = api_phase.to_string();
        }
    }
    let (mut reason, mut message) = (None, None);
    if phase == old_phase {
        reason = non_empty(old.reason.as_ref()).or_else(|| non_empty(api.reason.as_ref()));
        message = non_empty(old.message.as_ref()).or_else(|| non_empty(api.message.as_ref()));
    }
    if let Some((r, m)) = evict {
        phase = FAILED.to_string();
        reason = Some(r.to_string()).filter(|s| !s.is_empty());
        message = Some(m.to_string()).filter(|s| !s.is_empty());
    }
    if phase::is_terminal(api_phase) && phase != api_phase {
        // "Pod attempted illegal phase transition": the API server's terminal phase wins.
        phase = api_phase.to_string();
    }
    (phase, reason, message)
}

/// GS-12: non-kubelet conditions from the API status, DisruptionTarget from the old status,
/// then the kubelet's own, stamped `now`.
fn build_conditions(
    inputs: &StatusInputs,
    api: &PodStatus,
    old: &PodStatus,
    statuses: Option<&[ApiContainerStatus]>,
    phase: &str,
) -> Vec<PodCondition> {
    let pod = inputs.pod;
    // the conditions others own, then the five the kubelet generates (no regrowth)
    let others = api.conditions.as_deref().unwrap_or(&[]);
    let mut out: Vec<PodCondition> = Vec::with_capacity(others.len() + 6);
    out.extend(
        others
            .iter()
            .filter(|c| !conditions::is_kubelet_owned(&c.type_))
            .cloned(),
    );
    if let Some(dt) = old
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_TARGET)
    {
        match out.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET) {
            Some(existing) => *existing = dt.clone(),
            None => out.push(dt.clone()),
        }
    }
    let first_generated = out.len();
    let sandbox_changed = network::pod_sandbox_changed(pod, inputs.runtime);
    out.push(conditions::ready_to_start_containers_condition(
        sandbox_changed,
    ));
    out.push(conditions::initialized_condition(pod, statuses, phase));
    // Ready is derived from ContainersReady: generate that once
    let containers_ready = conditions::containers_ready_condition(pod, statuses, phase);
    let ready = conditions::ready_condition_from(pod, &out, &containers_ready);
    out.push(ready);
    out.push(containers_ready);
    out.push(conditions::scheduled_condition());
    let now = to_api(inputs.now);
    // PodObservedGenerationTracking (on in the pinned release): the generation the kubelet
    // generated each condition from
    let generation = observed_generation(pod);
    for c in &mut out[first_generated..] {
        c.last_transition_time = Some(now.clone());
        c.observed_generation = generation;
    }
    out
}

/// The pod's `metadata.generation` when it has one (not 0).
fn observed_generation(pod: &Pod) -> Option<i64> {
    pod.metadata.generation.filter(|g| *g != 0)
}

/// SM-01/02: an existing start time (status manager's, else the API's) is kept, else `now`;
/// either way in whole seconds.
fn start_time(inputs: &StatusInputs, api: &PodStatus) -> Time {
    inputs
        .cached
        .and_then(|c| c.start_time.as_ref())
        .or(api.start_time.as_ref())
        .map_or(inputs.now, from_api)
        .truncated_to_secs()
}

pub(super) fn generate(inputs: &StatusInputs) -> PodStatus {
    let pod = inputs.pod;
    let empty = PodStatus::default();
    let api = pod.status.as_ref().unwrap_or(&empty);
    let old = inputs.cached.unwrap_or(api);

    let convert = ConvertInputs {
        pod,
        runtime: &inputs.runtime.containers,
        runtime_name: inputs.runtime_name,
        start_failures: inputs.start_failures,
    };
    let [mut regular, mut init, ephemeral] = spec_lists(pod).map(|(specs, kind)| {
        convert_to_api_container_statuses(&convert, &specs, previous(old, kind), kind)
    });
    apply_probe_results(pod, &mut regular, &mut init, inputs.probes);

    let computed = get_phase(
        pod,
        &regular,
        &init,
        inputs.pod_is_terminal,
        inputs.is_static,
    );
    let (phase, reason, message) = settle_phase(computed, old, api, inputs.evict);

    // the conditions read init and regular statuses as one list; most pods have no init
    // containers, so the list is usually one of the two as it is
    let all: Vec<ApiContainerStatus>;
    let all: &[ApiContainerStatus] = if init.is_empty() {
        &regular
    } else if regular.is_empty() {
        &init
    } else {
        all = init.iter().chain(regular.iter()).cloned().collect();
        &all
    };
    let statuses = (!all.is_empty()).then_some(all);
    let conditions = build_conditions(inputs, api, old, statuses, &phase);

    let ips = network::pod_ips(pod, inputs.runtime, inputs.host_ip, old);
    // The node IP when known, else whatever the old status had (never wiped for lack of it).
    let (host_ip, host_ips) = match inputs.host_ip.filter(|h| !h.is_empty()) {
        Some(h) => (
            Some(h.to_string()),
            Some(vec![HostIP { ip: h.to_string() }]),
        ),
        None => (non_empty(old.host_ip.as_ref()), old.host_ips.clone()),
    };

    PodStatus {
        phase: Some(phase),
        reason,
        message,
        conditions: Some(conditions),
        host_ip,
        host_ips,
        pod_ip: ips.first().cloned(),
        pod_ips: none_if_empty(ips.into_iter().map(|ip| PodIP { ip }).collect()),
        start_time: Some(to_api(start_time(inputs, api))),
        qos_class: Some(qos::pod_qos_class(pod)),
        container_statuses: none_if_empty(regular),
        init_container_statuses: none_if_empty(init),
        ephemeral_container_statuses: none_if_empty(ephemeral),
        // SetPodStatus: the pod's generation, never lower than the old status's
        observed_generation: observed_generation(pod)
            .max(old.observed_generation)
            .filter(|g| *g != 0),
        ..PodStatus::default()
    }
}
