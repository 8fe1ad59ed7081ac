//! The merge of pod and container security contexts and their CRI mapping, case by case
//! against the kubelet's `determineEffectiveSecurityContext` and `verifyRunAsNonRoot`.

use std::path::Path;

use super::*;

fn pod(pod_sc: serde_json::Value, container_sc: serde_json::Value) -> Pod {
    let mut c = serde_json::json!({"name": "main", "image": "busybox"});
    if !container_sc.is_null() {
        c["securityContext"] = container_sc;
    }
    let mut spec = serde_json::json!({"containers": [c]});
    if !pod_sc.is_null() {
        spec["securityContext"] = pod_sc;
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "spec": spec
    }))
    .unwrap()
}

fn main(p: &Pod) -> &Container {
    &p.spec.as_ref().unwrap().containers[0]
}

fn cri(p: &Pod) -> v1::LinuxContainerSecurityContext {
    cri_with(p, false)
}

/// The container's CRI security context on a node with `--seccomp-default` as given.
fn cri_with(p: &Pod, seccomp_default: bool) -> v1::LinuxContainerSecurityContext {
    container_security_context(
        Path::new("/var/lib/kubelet/seccomp"),
        seccomp_default,
        p,
        main(p),
        Default::default(),
    )
    .unwrap()
}

#[test]
fn the_container_overrides_the_pods_user_group_and_non_root_and_inherits_the_rest() {
    use serde_json::json;
    // (pod securityContext, container securityContext, runAsUser, runAsGroup, runAsNonRoot)
    let cases = [
        (json!(null), json!(null), None, None, None),
        (
            json!({"runAsUser": 1000, "runAsGroup": 2000}),
            json!(null),
            Some(1000),
            Some(2000),
            None,
        ),
        (
            json!({"runAsUser": 1000}),
            json!({"runAsUser": 3000}),
            Some(3000),
            None,
            None,
        ),
        (
            json!({"runAsGroup": 5}),
            json!({"runAsGroup": 6, "runAsNonRoot": true}),
            None,
            Some(6),
            Some(true),
        ),
        (
            json!({"runAsNonRoot": true}),
            json!({"runAsNonRoot": false}),
            None,
            None,
            Some(false),
        ),
        (json!(null), json!({"runAsUser": 7}), Some(7), None, None),
    ];
    for (psc, csc, user, group, non_root) in cases {
        let p = pod(psc.clone(), csc.clone());
        let sc = effective(&p, main(&p));
        let what = format!("pod {psc} container {csc}");
        assert_eq!(sc.run_as_user, user, "{what}");
        assert_eq!(sc.run_as_group, group, "{what}");
        assert_eq!(sc.run_as_non_root, non_root, "{what}");
        let c = cri(&p);
        assert_eq!(c.run_as_user.map(|v| v.value), user, "{what}");
        assert_eq!(c.run_as_group.map(|v| v.value), group, "{what}");
    }
}

#[test]
fn fs_group_comes_first_then_the_supplemental_groups_on_container_and_sandbox() {
    let p = pod(
        serde_json::json!({"fsGroup": 3000, "supplementalGroups": [4000, 5000], "runAsUser": 1000}),
        serde_json::Value::Null,
    );
    assert_eq!(cri(&p).supplemental_groups, vec![3000, 4000, 5000]);
    let sandbox = sandbox_security_context(&p, Default::default());
    assert_eq!(sandbox.supplemental_groups, vec![3000, 4000, 5000]);
    assert_eq!(sandbox.run_as_user.map(|v| v.value), Some(1000));
}

#[test]
fn container_only_fields_map_to_their_cri_fields() {
    let p = pod(
        serde_json::Value::Null,
        serde_json::json!({
            "privileged": true,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
        }),
    );
    let c = cri(&p);
    assert!(c.privileged && c.readonly_rootfs && c.no_new_privs);
    let caps = c.capabilities.unwrap();
    assert_eq!(caps.add_capabilities, vec!["NET_ADMIN"]);
    assert_eq!(caps.drop_capabilities, vec!["ALL"]);
    assert!(sandbox_security_context(&p, Default::default()).privileged);
}

#[test]
fn no_new_privs_is_set_only_by_an_explicit_allow_privilege_escalation_false() {
    for (csc, want) in [
        (serde_json::Value::Null, false),
        (serde_json::json!({"allowPrivilegeEscalation": true}), false),
        (serde_json::json!({"allowPrivilegeEscalation": false}), true),
    ] {
        assert_eq!(
            cri(&pod(serde_json::Value::Null, csc.clone())).no_new_privs,
            want,
            "{csc}"
        );
    }
}

#[test]
fn proc_mount_default_masks_and_unmasked_does_not() {
    let c = cri(&pod(serde_json::Value::Null, serde_json::Value::Null));
    assert!(c.masked_paths.iter().any(|p| p == "/proc/kcore"));
    assert!(c.readonly_paths.iter().any(|p| p == "/proc/sys"));
    let c = cri(&pod(
        serde_json::Value::Null,
        serde_json::json!({"procMount": "Unmasked"}),
    ));
    assert!(c.masked_paths.is_empty() && c.readonly_paths.is_empty());
}

#[test]
fn seccomp_comes_from_the_container_else_the_pod_else_unconfined() {
    use serde_json::json;
    use v1::security_profile::ProfileType::*;
    let cases = [
        (json!(null), json!(null), Unconfined, ""),
        (
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            json!(null),
            RuntimeDefault,
            "",
        ),
        (
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            json!({"seccompProfile": {"type": "Unconfined"}}),
            Unconfined,
            "",
        ),
        (
            json!(null),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "prof.json"}}),
            Localhost,
            "/var/lib/kubelet/seccomp/prof.json",
        ),
    ];
    for (psc, csc, want, reference) in cases {
        let s = cri(&pod(psc.clone(), csc.clone())).seccomp.unwrap();
        assert_eq!(s.profile_type, want as i32, "pod {psc} container {csc}");
        assert_eq!(s.localhost_ref, reference);
    }
    let p = pod(
        serde_json::Value::Null,
        json!({"seccompProfile": {"type": "Localhost"}}),
    );
    let e = container_security_context(Path::new("/s"), false, &p, main(&p), Default::default());
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("localhostProfile must be set"));
    // the sandbox always runs with the runtime's default profile
    let sandbox = sandbox_security_context(&p, Default::default())
        .seccomp
        .unwrap();
    assert_eq!(sandbox.profile_type, RuntimeDefault as i32);
}

#[test]
fn with_seccomp_default_a_container_without_any_profile_gets_runtime_default() {
    use serde_json::json;
    use v1::security_profile::ProfileType::*;
    let cases = [
        (json!(null), json!(null), RuntimeDefault),
        (
            json!({"seccompProfile": {"type": "Unconfined"}}),
            json!(null),
            Unconfined,
        ),
        (
            json!(null),
            json!({"seccompProfile": {"type": "Unconfined"}}),
            Unconfined,
        ),
        (
            json!({"seccompProfile": {"type": "Unconfined"}}),
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            RuntimeDefault,
        ),
        (
            json!(null),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
            Localhost,
        ),
    ];
    for (psc, csc, want) in cases {
        let s = cri_with(&pod(psc.clone(), csc.clone()), true)
            .seccomp
            .unwrap();
        assert_eq!(s.profile_type, want as i32, "pod {psc} container {csc}");
    }
}

#[test]
#[allow(deprecated)] // the deprecated profile name the kubelet also sets
fn apparmor_comes_from_the_container_field_then_its_annotation_then_the_pod() {
    use v1::security_profile::ProfileType;
    let mut p = pod(
        serde_json::json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
        serde_json::Value::Null,
    );
    let c = cri(&p);
    assert_eq!(
        c.apparmor.unwrap().profile_type,
        ProfileType::RuntimeDefault as i32
    );
    assert_eq!(c.apparmor_profile, "runtime/default");
    p.metadata.annotations = Some(
        [(
            format!("{}main", soft_admission::APPARMOR_ANNOTATION_PREFIX),
            "localhost/k8s-deny".to_string(),
        )]
        .into(),
    );
    let c = cri(&p);
    assert_eq!(c.apparmor.as_ref().unwrap().localhost_ref, "k8s-deny");
    assert_eq!(c.apparmor_profile, "localhost/k8s-deny");
    assert!(cri(&pod(serde_json::Value::Null, serde_json::Value::Null))
        .apparmor
        .is_none());
}

#[test]
fn run_as_non_root_checks_the_run_as_user_then_the_images_user_with_the_kubelets_messages() {
    use serde_json::json;
    let non_root = |csc: serde_json::Value| pod(json!({"runAsNonRoot": true}), csc);
    let p = non_root(json!({"runAsUser": 0}));
    let e = verify_run_as_non_root(&p, main(&p), Some(1000), "").unwrap_err();
    assert_eq!(
        e.message,
        "container's runAsUser breaks non-root policy (pod: \"p_ns(u-1)\", container: main)"
    );
    let p = non_root(json!({"runAsUser": 1000}));
    assert!(verify_run_as_non_root(&p, main(&p), Some(0), "").is_ok());
    let p = non_root(serde_json::Value::Null);
    assert!(needs_image_user(&p, main(&p)));
    let e = verify_run_as_non_root(&p, main(&p), Some(0), "").unwrap_err();
    assert_eq!(
        e.message,
        "container has runAsNonRoot and image will run as root (pod: \"p_ns(u-1)\", container: main)"
    );
    let e = verify_run_as_non_root(&p, main(&p), None, "nobody").unwrap_err();
    assert!(
        e.message.contains("image has non-numeric user (nobody)"),
        "{}",
        e.message
    );
    assert!(verify_run_as_non_root(&p, main(&p), Some(65534), "").is_ok());
    let e = verify_run_as_non_root(&p, main(&p), Some(-1), "").unwrap_err();
    assert!(
        e.message.starts_with(
            "container has runAsNonRoot and image has an invalid user id (-1). (Must be \
             1-(2147483647)): must be between 0 and 2147483647, inclusive"
        ),
        "{}",
        e.message
    );
    // not asked, or asked off: no check
    let p = pod(json!({"runAsNonRoot": false}), serde_json::Value::Null);
    assert!(verify_run_as_non_root(&p, main(&p), Some(0), "").is_ok());
    assert!(!needs_image_user(&p, main(&p)));
}

#[test]
fn the_images_user_is_its_uid_else_its_name_else_root() {
    let image = |uid: Option<i64>, name: &str| v1::Image {
        uid: uid.map(|value| v1::Int64Value { value }),
        username: name.into(),
        ..Default::default()
    };
    assert_eq!(
        image_user(Some(&image(Some(5), "x"))),
        (Some(5), String::new())
    );
    assert_eq!(image_user(Some(&image(None, "x"))), (None, "x".to_string()));
    assert_eq!(image_user(Some(&image(None, ""))), (Some(0), String::new()));
    assert_eq!(image_user(None), (Some(0), String::new()));
}

#[test]
fn sysctls_go_to_the_sandbox_with_dotted_names() {
    let p = pod(
        serde_json::json!({"sysctls": [
            {"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
            {"name": "net/ipv4/tcp_syncookies", "value": "1"},
            {"name": "net/ipv4/conf/eno2.100/rp_filter", "value": "1"},
        ]}),
        serde_json::Value::Null,
    );
    let s = sandbox_sysctls(&p);
    assert_eq!(s["net.ipv4.ip_local_port_range"], "1024 65000");
    assert_eq!(s["net.ipv4.tcp_syncookies"], "1");
    assert_eq!(s["net.ipv4.conf.eno2/100.rp_filter"], "1");
}
