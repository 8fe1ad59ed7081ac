//! The spec hash (RT-10), RT-38 restart counts and the instance pruning helpers.

use super::*;
use crate::core::plan::{next_restart_count, purgeable_init_containers, removable_containers};

#[test]
fn rt_10_container_hash_is_fnv1a64_of_the_canonical_json() {
    let c = container("foo", "busybox");
    // The canonical JSON: fields in k8s-openapi order, unset fields omitted.
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(json, r#"{"image":"busybox","name":"foo"}"#);
    // FNV-1a 64 of those bytes, computed independently.
    assert_eq!(container_hash(&c), "33c3d0e4ebb4953b");
}

#[test]
fn rt_10_container_hash_changes_with_any_spec_field_and_only_then() {
    let c = container("foo", "busybox");
    assert_eq!(container_hash(&c), container_hash(&c.clone()));
    let variants = [
        container("foo", "busybox:2"),
        container("bar", "busybox"),
        Container {
            args: Some(vec!["-v".into()]),
            ..c.clone()
        },
        Container {
            restart_policy: Some("Always".into()),
            ..c.clone()
        },
    ];
    for v in &variants {
        let h = container_hash(v);
        assert_ne!(h, container_hash(&c), "{v:?}");
        // Lowercase hex without leading zeros (Go's FormatUint(h, 16)).
        let hex = h.chars().all(|ch| matches!(ch, '0'..='9' | 'a'..='f'));
        assert!(h.len() <= 16 && !h.starts_with('0') && hex, "{h}");
    }
}

#[test]
fn rt_38_next_instance_gets_previous_restart_count_plus_one() {
    let mut fx = base();
    fx.st("id2").restart_count = 3;
    assert_eq!(next_restart_count(&fx.rt, "foo2"), 4);
    assert_eq!(next_restart_count(&fx.rt, "foo1"), 1);
    // No previous instance: 0 (the shell may then consult the log directory).
    assert_eq!(next_restart_count(&fx.rt, "nope"), 0);
}

#[test]
fn rt_38_restart_count_comes_from_the_newest_instance() {
    let mut fx = base();
    let mut old = fx.rt.containers[1].clone();
    old.id = "old2".into();
    old.restart_count = 9;
    fx.rt.containers.push(old);
    fx.st("id2").restart_count = 5;
    assert_eq!(next_restart_count(&fx.rt, "foo2"), 6);
}

#[test]
fn removable_containers_keep_the_newest_exited_instance_per_name() {
    // Upstream TestPruneInitContainers: init1 ×4 (one unknown), init2 ×2, newest first.
    let mut fx = with_init();
    let i1 = container("init1", "bar-image");
    let i2 = container("init2", "bar-image");
    use ContainerState::{Exited, Unknown};
    fx.rt.containers = vec![
        status("a", &i1, Exited),
        status("b", &i1, Exited),
        status("c", &i2, Exited),
        status("d", &i1, Unknown),
        status("e", &i2, Exited),
        status("f", &i1, Exited),
    ];
    assert_eq!(removable_containers(&fx.rt), vec!["b", "d", "e", "f"]);
}

#[test]
fn removable_containers_never_include_running_or_created_instances() {
    let mut fx = base();
    let c = container("foo1", "busybox");
    use ContainerState::{Created, Exited, Running};
    fx.rt.containers = vec![
        status("run", &c, Running),
        status("created", &c, Created),
        status("x1", &c, Exited),
        status("x2", &c, Exited),
        status("x3", &c, Exited),
    ];
    assert_eq!(removable_containers(&fx.rt), vec!["x2", "x3"]);
}

#[test]
fn rt_07_purge_removes_every_init_instance_on_sandbox_recreation() {
    let mut fx = with_init();
    fx.regulars(ContainerState::Exited, 0);
    let mut again = fx.rt.containers[0].clone();
    again.id = "initid1-old".into();
    fx.rt.containers.push(again);
    let purged = purgeable_init_containers(&fx.pod, &fx.rt);
    assert_eq!(purged, ["initid1", "initid2", "initid3", "initid1-old"]);
}
