//! The pod phase from its container statuses (kubelet `getPhase`, BEHAVIOUR §D).
//!
//! Owns the counting rules for regular init containers, sidecars and regular containers, and
//! the decision table. Must not look at the previous phase: stickiness of terminal phases is
//! `generate`'s job (GS-08).
//!
//! "Initialized" for sidecar purposes is the v1.30 rule: some regular container is Running or
//! Terminated in the API statuses (`has_any_regular_container_started`). A pending *regular*
//! init container keeps the pod Pending regardless (PH-04).

use k8s_openapi::api::core::v1::{ContainerStatus as ApiContainerStatus, Pod};

use super::spec::{
    self, find_status, is_running, is_started, is_waiting, last_terminated, terminated,
    RestartPolicy,
};

/// `PodPending`.
pub const PENDING: &str = "Pending";
/// `PodRunning`.
pub const RUNNING: &str = "Running";
/// `PodSucceeded`.
pub const SUCCEEDED: &str = "Succeeded";
/// `PodFailed`.
pub const FAILED: &str = "Failed";

/// True for `Succeeded` and `Failed`.
pub fn is_terminal(phase: &str) -> bool {
    phase == SUCCEEDED || phase == FAILED
}

/// `HasAnyRegularContainerStarted`: some regular container of the spec is Running or
/// Terminated in `statuses`.
pub fn has_any_regular_container_started(pod: &Pod, statuses: &[ApiContainerStatus]) -> bool {
    spec::containers(pod).iter().any(|c| {
        find_status(statuses, &c.name).is_some_and(|s| is_running(s) || terminated(s).is_some())
    })
}

#[derive(Default)]
struct Counts {
    pending_regular_init: u32,
    pending_sidecar: u32,
    failed_init: u32,
    unknown: u32,
    running: u32,
    waiting: u32,
    stopped: u32,
    succeeded: u32,
}

/// `getPhase`. `all_statuses` holds the regular container statuses (it may also hold the init
/// statuses: names are unique across a pod's containers); `init_statuses` the init container
/// statuses, which are looked up first for init containers. `is_static` replaces the
/// config-source annotation check: a static pod never gets a terminal phase from
/// `pod_is_terminal` alone (PH-09).
pub fn get_phase(
    pod: &Pod,
    all_statuses: &[ApiContainerStatus],
    init_statuses: &[ApiContainerStatus],
    pod_is_terminal: bool,
    is_static: bool,
) -> String {
    let mut n = Counts::default();
    let init_status =
        |name: &str| find_status(init_statuses, name).or_else(|| find_status(all_statuses, name));

    for c in spec::init_containers(pod) {
        let status = init_status(&c.name);
        if spec::is_sidecar(c) {
            count_sidecar(&mut n, status);
        } else {
            count_regular_init(&mut n, status);
        }
    }
    for c in spec::containers(pod) {
        count_regular(&mut n, find_status(all_statuses, &c.name));
    }

    let policy = spec::restart_policy(pod);
    let phase = if n.failed_init > 0 && policy == RestartPolicy::Never {
        FAILED
    } else if n.pending_regular_init > 0
        || (n.pending_sidecar > 0 && !has_any_regular_container_started(pod, all_statuses))
        || n.waiting > 0
    {
        PENDING
    } else if n.running > 0 && n.unknown == 0 {
        RUNNING
    } else if n.running == 0 && n.stopped > 0 && n.unknown == 0 {
        all_stopped(&n, policy, pod_is_terminal && !is_static)
    } else {
        PENDING
    };
    phase.to_string()
}

/// Every counted container is stopped: the restart policy decides, unless the pod is
/// terminal (then nothing restarts).
fn all_stopped(n: &Counts, policy: RestartPolicy, terminal: bool) -> &'static str {
    let all_succeeded = n.stopped == n.succeeded;
    if terminal {
        return if all_succeeded { SUCCEEDED } else { FAILED };
    }
    match policy {
        RestartPolicy::Always => RUNNING,
        _ if all_succeeded => SUCCEEDED,
        RestartPolicy::Never => FAILED,
        RestartPolicy::OnFailure => RUNNING,
    }
}

fn count_regular_init(n: &mut Counts, status: Option<&ApiContainerStatus>) {
    let Some(s) = status else {
        n.pending_regular_init += 1;
        return;
    };
    if is_running(s) {
        n.pending_regular_init += 1;
    } else if let Some(t) = terminated(s) {
        if t.exit_code != 0 {
            n.failed_init += 1;
        }
    } else if is_waiting(s) {
        match last_terminated(s) {
            Some(t) if t.exit_code != 0 => n.failed_init += 1,
            Some(_) => {}
            None => n.pending_regular_init += 1,
        }
    } else {
        n.pending_regular_init += 1;
    }
}

fn count_sidecar(n: &mut Counts, status: Option<&ApiContainerStatus>) {
    let Some(s) = status else {
        n.unknown += 1;
        return;
    };
    if is_running(s) {
        if !is_started(s) {
            n.pending_sidecar += 1;
        }
        n.running += 1;
    } else if terminated(s).is_some() {
        // A stopped sidecar does not count towards the phase.
    } else if is_waiting(s) {
        if last_terminated(s).is_none() {
            n.pending_sidecar += 1;
            n.waiting += 1;
        }
    } else {
        n.pending_sidecar += 1;
        n.unknown += 1;
    }
}

fn count_regular(n: &mut Counts, status: Option<&ApiContainerStatus>) {
    let Some(s) = status else {
        n.unknown += 1;
        return;
    };
    if is_running(s) {
        n.running += 1;
    } else if let Some(t) = terminated(s) {
        n.stopped += 1;
        if t.exit_code == 0 {
            n.succeeded += 1;
        }
    } else if is_waiting(s) {
        if last_terminated(s).is_some() {
            n.stopped += 1;
        } else {
            n.waiting += 1;
        }
    } else {
        n.unknown += 1;
    }
}
