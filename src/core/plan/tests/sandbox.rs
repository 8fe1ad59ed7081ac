//! RT-07…RT-09b and RT-14…RT-16: sandbox recreation and attempts.

use super::*;
use crate::core::plan::pod_sandbox_changed;

#[test]
fn rt_07_sandbox_not_ready_recreates_everything_with_next_attempt() {
    let mut fx = base().policy("Always");
    fx.sandbox_not_ready(0);
    let want = PodActions {
        containers_to_start: vec![0, 1, 2],
        ..recreate(1)
    };
    // The old sandbox's ID is kept (`no_action`'s): the shell emits SandboxChanged.
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_07_attempt_counts_from_the_highest_sandbox_attempt() {
    let mut fx = base();
    fx.sandbox_not_ready(1);
    let mut older = fx.rt.sandboxes[0].clone();
    older.id = "older".into();
    older.attempt = 4;
    fx.rt.sandboxes.push(older);
    assert_eq!(
        pod_sandbox_changed(&fx.pod, &fx.rt),
        (true, 5, "sandboxID".to_string())
    );
}

#[test]
fn rt_07_healthy_sandbox_is_reused_with_its_attempt() {
    let mut fx = base();
    fx.rt.sandboxes[0].attempt = 3;
    assert_eq!(
        pod_sandbox_changed(&fx.pod, &fx.rt),
        (false, 3, "sandboxID".to_string())
    );
    assert_eq!(fx.actions().attempt, 3);
}

#[test]
fn rt_08_on_failure_recreate_skips_succeeded_containers() {
    let mut fx = base().policy("OnFailure");
    fx.sandbox_not_ready(0).exited("id2", 0);
    let want = PodActions {
        containers_to_start: vec![0, 2],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_09_sandbox_without_ip_is_recreated() {
    for ip in [Some(String::new()), None] {
        let mut fx = base();
        fx.rt.sandboxes[0].ip = ip.clone();
        let want = PodActions {
            containers_to_start: vec![0, 1, 2],
            ..recreate(1)
        };
        assert_eq!(fx.actions(), want, "ip {ip:?}");
    }
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
        containers_to_start: vec![0, 1, 2],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);
    // And back from host network to pod network.
    let mut fx = base();
    fx.rt.sandboxes[0].host_network = true;
    assert_eq!(
        pod_sandbox_changed(&fx.pod, &fx.rt),
        (true, 1, String::new())
    );
}

#[test]
fn rt_09b_more_than_one_ready_sandbox_recreates() {
    let mut fx = base();
    let mut other = fx.rt.sandboxes[0].clone();
    other.id = "other".into();
    fx.rt.sandboxes.push(other);
    let want = PodActions {
        containers_to_start: vec![0, 1, 2],
        ..recreate(1)
    };
    assert_eq!(fx.actions(), want);
    // A second sandbox that is not ready is harmless.
    fx.rt.sandboxes[1].state = SandboxState::SandboxNotready;
    assert_eq!(fx.actions(), no_action());
}

#[test]
fn rt_14_never_with_dead_sandbox_and_exited_containers_only_kills() {
    let mut fx = base().policy("Never");
    fx.sandbox_not_ready(1)
        .exited("id1", 0)
        .exited("id2", 0)
        .exited("id3", 0);
    let want = PodActions {
        kill_pod: true,
        create_sandbox: false,
        attempt: 2,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_15_on_failure_with_dead_sandbox_and_all_succeeded_only_kills() {
    let mut fx = base().policy("OnFailure");
    fx.sandbox_not_ready(1)
        .exited("id1", 0)
        .exited("id2", 0)
        .exited("id3", 0);
    let want = PodActions {
        kill_pod: true,
        create_sandbox: false,
        attempt: 2,
        ..no_action()
    };
    assert_eq!(fx.actions(), want);
}

#[test]
fn rt_16_never_with_dead_sandbox_and_no_containers_retries_the_sandbox() {
    let mut fx = base().policy("Never");
    fx.sandbox_not_ready(2);
    fx.rt.containers.clear();
    let want = PodActions {
        containers_to_start: vec![0, 1, 2],
        ..recreate(3)
    };
    assert_eq!(fx.actions(), want);
}
