//! RT-07…RT-09b and RT-14…RT-16: sandbox recreation and attempts.

use super::*;
use crate::core::plan::pod_sandbox_changed;

/// Kill and recreate everything in a new sandbox, starting every regular container.
fn restart_all(attempt: u32) -> PodActions {
    PodActions {
        containers_to_start: vec![0, 1, 2],
        ..recreate(attempt)
    }
}

#[test]
fn rt_07_sandbox_not_ready_recreates_everything_with_next_attempt() {
    // The old sandbox's ID is kept (`no_action`'s): the shell emits SandboxChanged.
    let fx = base().policy("Always").sandbox_not_ready(0);
    assert_eq!(fx.actions(), restart_all(1));
}

#[test]
fn rt_07_attempt_counts_from_the_highest_sandbox_attempt() {
    let mut fx = base().sandbox_not_ready(1);
    let older = SandboxStatus {
        id: "older".into(),
        attempt: 4,
        ..fx.rt.sandboxes[0].clone()
    };
    fx.rt.sandboxes.push(older);
    let want = (true, 5, "sandboxID".to_string());
    assert_eq!(pod_sandbox_changed(&fx.pod, &fx.rt), want);
}

#[test]
fn rt_07_healthy_sandbox_is_reused_with_its_attempt() {
    let mut fx = base();
    fx.rt.sandboxes[0].attempt = 3;
    let want = (false, 3, "sandboxID".to_string());
    assert_eq!(pod_sandbox_changed(&fx.pod, &fx.rt), want);
    assert_eq!(fx.actions().attempt, 3);
}

#[test]
fn rt_08_on_failure_recreate_skips_succeeded_containers() {
    let fx = base()
        .policy("OnFailure")
        .sandbox_not_ready(0)
        .exited("id2", 0);
    let want = PodActions {
        containers_to_start: vec![0, 2],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_09_sandbox_whose_network_status_has_an_empty_ip_is_recreated() {
    let mut fx = base();
    fx.rt.sandboxes[0].ip = Some(String::new());
    assert_eq!(fx.actions(), restart_all(1));
}

#[test]
fn rt_09_sandbox_without_a_network_status_is_not_recreated() {
    let mut fx = base();
    fx.rt.sandboxes[0].ip = None;
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_09_host_network_sandbox_needs_no_ip() {
    let mut fx = base();
    fx.spec_mut().host_network = Some(true);
    fx.rt.sandboxes[0].host_network = true;
    fx.rt.sandboxes[0].ip = None;
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_09b_network_namespace_change_recreates_without_sandbox_id() {
    let mut fx = base();
    fx.spec_mut().host_network = Some(true);
    let want = PodActions {
        sandbox_id: String::new(),
        ..restart_all(1)
    };
    assert_eq!(fx.actions(), want);
    // And back from host network to pod network.
    let mut fx = base();
    fx.rt.sandboxes[0].host_network = true;
    let want = (true, 1, String::new());
    assert_eq!(pod_sandbox_changed(&fx.pod, &fx.rt), want);
}

#[test]
fn rt_09b_more_than_one_ready_sandbox_recreates() {
    let mut fx = base();
    let other = SandboxStatus {
        id: "other".into(),
        ..fx.rt.sandboxes[0].clone()
    };
    fx.rt.sandboxes.push(other);
    assert_eq!(fx.actions(), restart_all(1));
    // A second sandbox that is not ready is harmless.
    fx.rt.sandboxes[1].state = SandboxState::SandboxNotready;
    assert_eq!(fx.actions(), no_action());
}

/// Every container exited 0 and the sandbox (attempt 1) is dead.
fn all_exited_dead_sandbox(policy: &str) -> Fx {
    let fx = base().policy(policy).sandbox_not_ready(1);
    fx.exited("id1", 0).exited("id2", 0).exited("id3", 0)
}

#[test]
fn rt_14_never_with_dead_sandbox_and_exited_containers_only_kills() {
    assert_eq!(all_exited_dead_sandbox("Never").actions(), kill_pod(2));
}

#[test]
fn rt_15_on_failure_with_dead_sandbox_and_all_succeeded_only_kills() {
    assert_eq!(all_exited_dead_sandbox("OnFailure").actions(), kill_pod(2));
}

#[test]
fn rt_16_never_with_dead_sandbox_and_no_containers_retries_the_sandbox() {
    let fx = base().policy("Never").sandbox_not_ready(2).keep(0);
    assert_eq!(fx.actions(), restart_all(3));
}
