use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::{admit, validate_allowed_unsafe, Allowlist, PatternError, FORBIDDEN_REASON};
use crate::core::admission::Admission;

const KERNEL: &str = "6.8.0-45-generic";

fn patterns(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn pod(sysctls: &[&str], host_network: bool, host_ipc: bool) -> Pod {
    let sysctls: Vec<_> = sysctls
        .iter()
        .map(|n| json!({"name": n, "value": "1"}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "hostNetwork": host_network,
            "hostIPC": host_ipc,
            "securityContext": {"sysctls": sysctls},
            "containers": [{"name": "main"}],
        }
    }))
    .unwrap()
}

fn rejection(message: &str) -> Option<Admission> {
    Some(Admission::Reject {
        reason: FORBIDDEN_REASON.into(),
        message: message.into(),
    })
}

#[test]
fn a_pod_with_only_safe_sysctls_or_none_is_admitted() {
    let safe = [
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_rmem",
    ];
    assert_eq!(admit(&pod(&safe, false, false), &[], KERNEL), None);
    assert_eq!(admit(&pod(&[], false, false), &[], KERNEL), None);
    let mut bare = pod(&[], false, false);
    bare.spec.as_mut().unwrap().security_context = None;
    assert_eq!(admit(&bare, &[], KERNEL), None);
}

#[test]
fn a_sysctl_neither_safe_nor_allowed_is_forbidden_with_the_kubelets_message() {
    let p = pod(&["kernel.shm_rmid_forced", "kernel.sem"], false, false);
    assert_eq!(
        admit(&p, &patterns(&["kernel.msg*"]), KERNEL),
        rejection(r#"forbidden sysctl: "kernel.sem" not allowlisted"#)
    );
    let p = pod(&["net.core.somaxconn"], false, false);
    assert_eq!(
        admit(&p, &[], KERNEL),
        rejection(r#"forbidden sysctl: "net.core.somaxconn" not allowlisted"#)
    );
}

#[test]
fn a_sysctl_that_is_not_namespaced_at_all_is_never_allowlisted() {
    let p = pod(&["vm.swappiness"], false, false);
    assert_eq!(
        admit(&p, &patterns(&["net.*", "kernel.msg*"]), KERNEL),
        rejection(r#"forbidden sysctl: "vm.swappiness" not allowlisted"#)
    );
}

#[test]
fn unsafe_sysctls_are_allowed_by_name_or_by_star_prefix() {
    let allowed = patterns(&["kernel.msg*", "net.core.somaxconn"]);
    let p = pod(
        &["kernel.msgmax", "kernel.msgmnb", "net.core.somaxconn"],
        false,
        false,
    );
    assert_eq!(admit(&p, &allowed, KERNEL), None);
    // an exact name is not a prefix
    let p = pod(&["net.core.somaxconn_more"], false, false);
    assert_eq!(
        admit(&p, &allowed, KERNEL),
        rejection(r#"forbidden sysctl: "net.core.somaxconn_more" not allowlisted"#)
    );
}

#[test]
fn slash_separated_names_are_normalised_before_matching_and_in_the_message() {
    let allowed = patterns(&["kernel/msg*"]);
    assert_eq!(
        admit(&pod(&["kernel/msgmax"], false, false), &allowed, KERNEL),
        None
    );
    assert_eq!(
        admit(
            &pod(&["net/ipv4/ip_unprivileged_port_start"], false, false),
            &[],
            KERNEL
        ),
        None
    );
    assert_eq!(
        admit(&pod(&["kernel/sem"], false, false), &allowed, KERNEL),
        rejection(r#"forbidden sysctl: "kernel.sem" not allowlisted"#)
    );
}

#[test]
fn a_net_sysctl_with_host_network_and_an_ipc_sysctl_with_host_ipc_are_forbidden() {
    let p = pod(&["net.ipv4.ip_unprivileged_port_start"], true, false);
    assert_eq!(
        admit(&p, &[], KERNEL),
        rejection(
            r#"forbidden sysctl: "net.ipv4.ip_unprivileged_port_start" not allowed with host Net enabled"#
        )
    );
    // the namespace check applies to the operator's entries too
    let p = pod(&["kernel.msgmax"], false, true);
    assert_eq!(
        admit(&p, &patterns(&["kernel.msg*"]), KERNEL),
        rejection(r#"forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled"#)
    );
    let p = pod(&["kernel.shm_rmid_forced"], false, true);
    assert_eq!(
        admit(&p, &[], KERNEL),
        rejection(
            r#"forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled"#
        )
    );
    // the other namespace shared with the host does not matter
    assert_eq!(
        admit(&pod(&["kernel.shm_rmid_forced"], true, false), &[], KERNEL),
        None
    );
    assert_eq!(
        admit(&pod(&["net.ipv4.tcp_syncookies"], false, true), &[], KERNEL),
        None
    );
}

#[test]
fn the_first_forbidden_sysctl_in_pod_order_is_named() {
    let p = pod(&["net.core.somaxconn", "kernel.sem"], false, false);
    assert_eq!(
        admit(&p, &[], KERNEL),
        rejection(r#"forbidden sysctl: "net.core.somaxconn" not allowlisted"#)
    );
}

#[test]
fn kernel_gated_safe_sysctls_are_forbidden_when_the_kernel_is_unknown_or_too_old() {
    let p = pod(&["net.ipv4.tcp_rmem"], false, false);
    assert_eq!(admit(&p, &[], KERNEL), None);
    let forbidden = rejection(r#"forbidden sysctl: "net.ipv4.tcp_rmem" not allowlisted"#);
    assert_eq!(admit(&p, &[], ""), forbidden);
    assert_eq!(admit(&p, &[], "4.14.0"), forbidden);
    // the operator may still allow it
    assert_eq!(admit(&p, &patterns(&["net.ipv4.tcp_rmem"]), ""), None);
}

#[test]
fn an_allowed_unsafe_pattern_that_is_not_a_sysctl_pattern_is_refused_in_the_kubelets_words() {
    let e = validate_allowed_unsafe(&patterns(&["kernel.msg*", "Kernel.Sem"])).unwrap_err();
    assert_eq!(e, PatternError::Syntax("Kernel.Sem".into()));
    assert_eq!(
        e.to_string(),
        r#"sysctl "Kernel.Sem" must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]"#
    );
    for bad in ["net.*.core", "", "net..core", "net.core.**"] {
        assert!(
            matches!(
                validate_allowed_unsafe(&patterns(&[bad])),
                Err(PatternError::Syntax(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn an_allowed_unsafe_sysctl_not_known_to_be_namespaced_is_refused() {
    let e = validate_allowed_unsafe(&patterns(&["vm.*"])).unwrap_err();
    assert_eq!(e, PatternError::NotNamespaced("vm.".into()));
    assert_eq!(
        e.to_string(),
        r#"the sysctls "vm." are not known to be namespaced"#
    );
    for bad in ["kernel.hostname", "kernel.*", "net*", "*", "fs.mqueue*"] {
        assert!(
            matches!(
                validate_allowed_unsafe(&patterns(&[bad])),
                Err(PatternError::NotNamespaced(_))
            ),
            "{bad:?}"
        );
    }
    for good in [
        "net.*",
        "net.core.somaxconn",
        "kernel.msg*",
        "kernel.shm*",
        "kernel.sem",
        "fs.mqueue.*",
        "net/core/somaxconn",
    ] {
        assert_eq!(
            validate_allowed_unsafe(&patterns(&[good])),
            Ok(()),
            "{good}"
        );
    }
}

#[test]
fn the_safe_set_alone_is_a_valid_allowlist() {
    assert!(Allowlist::new(KERNEL, &[]).is_ok());
    assert!(Allowlist::new("", &[]).is_ok());
}
