//! The kubelet's sysctl admission (`--allowed-unsafe-sysctls`, AM-08) and
//! `--seccomp-default` (SC-03): through the core's dispatch, at the command line, and on a
//! real control plane whose node is ledgerlet on containerd + runc started with
//! `--allowed-unsafe-sysctls kernel.msg* --seccomp-default`, seen from inside the containers.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Event as KubeEvent, Node as ApiNode, NodeStatus, NodeSystemInfo, Pod,
};
use kube::api::{ListParams, PostParams};
use ledgerlet::core::command::{Command, EventType};
use ledgerlet::core::config::{CoreConfig, PodSource};
use ledgerlet::core::record::event::{NodeInfoObserved, PodConfigChange, SourceReady};
use ledgerlet::core::record::Event;
use support::agent::cli;
use support::core_harness::{pod as core_pod, uid, Harness};
use support::on_containerd::{
    assert_an_update_starts_nothing, bound_pod, ledger_text, main_status, outputs_of_completed,
    phase, IMAGE,
};
use support::real_cluster::{Kube, RealCluster};

const NODE: &str = "sysctl-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd_with(
        NODE,
        &[
            "--allowed-unsafe-sysctls",
            "kernel.msg*",
            "--seccomp-default",
        ],
    )
}

// --- through the core ---------------------------------------------------------------------

/// A core with the API source ready, `--allowed-unsafe-sysctls` as given, and a machine
/// of kernel release `kernel` observed.
fn core_node(allowed_unsafe: &[&str], kernel: &str) -> Harness {
    let mut h = Harness::with_config(CoreConfig {
        node_name: "node".into(),
        sources: vec![PodSource::Api],
        allowed_unsafe_sysctls: allowed_unsafe.iter().map(|s| s.to_string()).collect(),
        ..CoreConfig::default()
    });
    h.submit(Event::NodeInfoObserved(NodeInfoObserved {
        node: Arc::new(ApiNode {
            status: Some(NodeStatus {
                node_info: Some(NodeSystemInfo {
                    kernel_version: kernel.into(),
                    operating_system: "linux".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }));
    h.submit(Event::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    h
}

/// Adds pod `name` with `sysctls` (`hostNetwork` as given) from the API source; returns
/// the Warning event's (reason, message) if the pod was rejected.
fn add_with_sysctls(
    h: &mut Harness,
    name: &str,
    sysctls: &[&str],
    host_network: bool,
) -> Option<(String, String)> {
    let mut p = (*core_pod(name, name, "ns").build()).clone();
    let spec = p.spec.as_mut().unwrap();
    spec.host_network = Some(host_network);
    spec.security_context = Some(
        serde_json::from_value(serde_json::json!({
            "sysctls": sysctls.iter().map(|n| serde_json::json!({"name": n, "value": "1"})).collect::<Vec<_>>()
        }))
        .unwrap(),
    );
    let cmds = h.submit(Event::PodAdded(PodConfigChange {
        source: PodSource::Api,
        pod: Arc::new(p),
    }));
    cmds.iter().find_map(|c| match c {
        Command::RecordEvent(e) if e.event_type == EventType::Warning => {
            Some((e.reason.clone(), e.message.clone()))
        }
        _ => None,
    })
}

/// AM-08 and AM-01 through dispatch: the safe set follows the observed machine's kernel,
/// the flag's patterns extend it, and a refused pod is Failed `SysctlForbidden` and never
/// started.
#[test]
fn am_08_dispatch_admits_safe_and_flag_allowed_sysctls_and_fails_the_rest_sysctl_forbidden() {
    let mut h = core_node(&["kernel.msg*", "net.core.somaxconn"], "6.8.0-45-generic");
    assert_eq!(
        add_with_sysctls(
            &mut h,
            "safe",
            &["net.ipv4.tcp_rmem", "kernel/msgmax"],
            false
        ),
        None
    );
    assert!(h.has_status("safe"), "admitted pods start");
    assert_eq!(
        add_with_sysctls(&mut h, "somaxconn", &["net.core.somaxconn"], false),
        None
    );

    let refused = add_with_sysctls(&mut h, "sem", &["kernel.sem"], false);
    assert_eq!(
        refused,
        Some((
            "SysctlForbidden".into(),
            r#"forbidden sysctl: "kernel.sem" not allowlisted"#.into()
        ))
    );
    assert!(!h.has_status("sem"), "never started");
    let status = &h.node().statuses.get(&uid("sem")).expect("a status").status;
    assert_eq!(
        (
            status.phase.as_deref(),
            status.reason.as_deref(),
            status.message.as_deref()
        ),
        (
            Some("Failed"),
            Some("SysctlForbidden"),
            Some(r#"Pod was rejected: forbidden sysctl: "kernel.sem" not allowlisted"#)
        )
    );

    // the flag's entries are namespace-checked too
    assert_eq!(
        add_with_sysctls(&mut h, "hostnet", &["net.core.somaxconn"], true),
        Some((
            "SysctlForbidden".into(),
            r#"forbidden sysctl: "net.core.somaxconn" not allowed with host Net enabled"#.into()
        ))
    );
    assert!(
        h.has_status("safe") && h.has_status("somaxconn"),
        "the others run on"
    );
}

/// AM-08: on a machine whose kernel is too old for a gated safe sysctl, or before the
/// machine is known, that sysctl is not safe.
#[test]
fn am_08_a_kernel_gated_safe_sysctl_is_forbidden_on_an_older_kernel() {
    let mut old = core_node(&[], "4.14.0");
    assert_eq!(
        add_with_sysctls(&mut old, "rmem", &["net.ipv4.tcp_rmem"], false),
        Some((
            "SysctlForbidden".into(),
            r#"forbidden sysctl: "net.ipv4.tcp_rmem" not allowlisted"#.into()
        ))
    );
    assert_eq!(
        add_with_sysctls(
            &mut old,
            "ports",
            &["net.ipv4.ip_unprivileged_port_start"],
            false
        ),
        None,
        "ungated safe sysctls stay safe"
    );
}

// --- at the command line --------------------------------------------------------------------

/// AM-08: the kubelet refuses to start on an `--allowed-unsafe-sysctls` entry that is not a
/// namespaced sysctl or pattern; so does ledgerlet, naming the flag.
#[test]
fn a_bad_allowed_unsafe_sysctls_entry_is_refused_at_start_naming_the_flag() {
    let out = cli(&["run", "--allowed-unsafe-sysctls", "kernel.msg*,vm.*"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--allowed-unsafe-sysctls")
            && err.contains(r#"the sysctls "vm." are not known to be namespaced"#),
        "{err}"
    );
    let out = cli(&["run", "--allowed-unsafe-sysctls", "Kernel.Msg*"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--allowed-unsafe-sysctls")
            && err.contains(r#"sysctl "Kernel.Msg*" must have at most 253 characters"#),
        "{err}"
    );
}

// --- on a real control plane with containerd ------------------------------------------------

/// A pod bound to the node that runs once (`restartPolicy: Never`), with the pod-level
/// `securityContext` `pod_sc` and one container per `(name, securityContext, script)`.
fn run_once_pod(
    name: &str,
    pod_sc: serde_json::Value,
    containers: &[(&str, serde_json::Value, &str)],
) -> Pod {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|(n, sc, script)| {
            serde_json::json!({
                "name": n, "image": IMAGE, "command": ["sh", "-c", script], "securityContext": sc,
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "securityContext": pod_sc,
            "containers": containers,
        }
    }))
    .unwrap()
}

fn create(admin: &Kube, p: &Pod) -> Pod {
    admin
        .run(
            admin
                .api::<Pod>("default")
                .create(&PostParams::default(), p),
        )
        .expect("create the pod")
}

fn delete(admin: &Kube, name: &str) {
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete(name, &Default::default()),
    );
}

/// The value of `key=` on a line of `log`.
fn field<'a>(log: &'a str, key: &str) -> &'a str {
    let start = format!("{key}=");
    log.lines()
        .find_map(|l| l.strip_prefix(&start))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key}= line in {log:?}"))
}

/// Waits for `name` to be Running.
fn running(admin: &Kube, name: &str) {
    let pods = admin.api::<Pod>("default");
    admin.wait_for(&format!("{name} Running"), 90, |k| {
        let p = k.run(pods.get(name)).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
}

/// Waits for `name` to be rejected as the kubelet rejects it: Failed `SysctlForbidden` with
/// `Pod was rejected: <message>`, and a Warning Event with the reason and `message`.
fn forbidden(admin: &Kube, name: &str, message: &str) {
    let pods = admin.api::<Pod>("default");
    let status = admin.wait_for(&format!("{name} Failed"), 90, |k| {
        let p = k.run(pods.get(name)).ok()?;
        (phase(&p) == Some("Failed")).then_some(p.status?)
    });
    assert_eq!(
        (status.reason.as_deref(), status.message.as_deref()),
        (
            Some("SysctlForbidden"),
            Some(format!("Pod was rejected: {message}").as_str())
        )
    );
    warning_event(admin, name, message);
}

/// Waits for the Warning Event `SysctlForbidden` with `message` about pod `name`.
fn warning_event(admin: &Kube, name: &str, message: &str) {
    let events = admin.api::<KubeEvent>("default");
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    admin.wait_for(&format!("the SysctlForbidden event of {name}"), 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("SysctlForbidden")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref() == Some(message)
            })
            .then_some(())
    });
}

fn with_sysctls(mut p: Pod, sysctls: serde_json::Value) -> Pod {
    p.spec.as_mut().unwrap().security_context =
        Some(serde_json::from_value(serde_json::json!({ "sysctls": sysctls })).unwrap());
    p
}

/// AM-08 and SC-03: a safe sysctl and sysctls `kernel.msg*` allows (one of them written with
/// `/` separators) are set in the pod's sandbox, and the container sees their values.
#[test]
fn a_safe_sysctl_and_ones_the_flag_allows_are_set_and_visible_in_the_container() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pod = run_once_pod(
        "sysctls",
        serde_json::json!({"sysctls": [
            {"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"},
            {"name": "kernel.msgmax", "value": "12345"},
            {"name": "kernel/msgmnb", "value": "23456"},
        ]}),
        &[(
            "main",
            serde_json::json!({}),
            "echo port=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start) \
             && echo msgmax=$(cat /proc/sys/kernel/msgmax) \
             && echo msgmnb=$(cat /proc/sys/kernel/msgmnb)",
        )],
    );
    let out = &outputs_of_completed(c, &admin, &pod)["main"];
    assert_eq!(field(out, "port"), "80", "{out}");
    assert_eq!(field(out, "msgmax"), "12345", "{out}");
    assert_eq!(field(out, "msgmnb"), "23456", "{out}");
}

/// AM-08 and AM-01: sysctls neither safe nor allowed by the flag, and not namespaced at all,
/// fail `SysctlForbidden` with the kubelet's message and a Warning Event; a later label
/// update starts nothing; a running pod beside them keeps running.
#[test]
fn a_pod_with_a_sysctl_neither_safe_nor_allowed_fails_sysctl_forbidden_and_stays_failed() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let sleeper = bound_pod(
        NODE,
        "bystander",
        "trap 'exit 0' TERM; sleep 3600 & wait",
        2,
        "Never",
    );
    create(&admin, &sleeper);
    running(&admin, "bystander");

    let script = "sleep 3600";
    let cases = [
        (
            "sem",
            "kernel.sem",
            r#"forbidden sysctl: "kernel.sem" not allowlisted"#,
        ),
        (
            "somaxconn",
            "net.core.somaxconn",
            r#"forbidden sysctl: "net.core.somaxconn" not allowlisted"#,
        ),
        (
            "swappiness",
            "vm.swappiness",
            r#"forbidden sysctl: "vm.swappiness" not allowlisted"#,
        ),
    ];
    let mut sem_uid = String::new();
    for (name, sysctl, _) in cases {
        let p = with_sysctls(
            bound_pod(NODE, name, script, 1, "Never"),
            serde_json::json!([{"name": sysctl, "value": "1"}]),
        );
        let uid = create(&admin, &p).metadata.uid.unwrap();
        if name == "sem" {
            sem_uid = uid;
        }
    }
    for (name, _, message) in cases {
        forbidden(&admin, name, message);
    }

    assert_an_update_starts_nothing(c, &admin, "sem", &sem_uid);
    let pods = admin.api::<Pod>("default");

    let bystander = admin.run(pods.get("bystander")).unwrap();
    assert_eq!(phase(&bystander), Some("Running"));
    assert_eq!(main_status(&bystander).map(|s| s.restart_count), Some(0));
    for (name, _, _) in cases {
        delete(&admin, name);
    }
    delete(&admin, "bystander");
}

/// AM-08: a `hostNetwork` pod may not set a `net.*` sysctl, even a safe one (it would set
/// the host's). The API server refuses such a pod, so it comes as a static pod: the node
/// rejects it with the kubelet's message and a Warning Event.
#[test]
fn a_host_network_static_pod_with_a_net_sysctl_fails_sysctl_forbidden() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let manifest = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "hostnet", "namespace": "default"},
        "spec": {
            "hostNetwork": true,
            "securityContext": {"sysctls": [
                {"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"}
            ]},
            "containers": [{"name": "main", "image": IMAGE, "command": ["sleep", "3600"]}],
        }
    });
    let path = c.dir.join("manifests/hostnet.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    let name = format!("hostnet-{NODE}");
    let message = r#"forbidden sysctl: "net.ipv4.ip_unprivileged_port_start" not allowed with host Net enabled"#;
    warning_event(&admin, &name, message);
    let rejected = ledger_text(c)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|r| {
            r["kind"] == "PodRejected"
                && r["event"]["reason"] == "SysctlForbidden"
                && r["event"]["message"] == format!("Pod was rejected: {message}")
        });
    let _ = std::fs::remove_file(&path);
    assert!(rejected, "a PodRejected record");
}

/// SC-03: with `--seccomp-default` a container without a seccomp profile runs under the
/// runtime's default filter (mode 2); one that asks for `Unconfined` runs without (mode 0).
#[test]
fn with_seccomp_default_a_container_without_a_profile_is_filtered_and_unconfined_is_not() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let report = "grep '^Seccomp:' /proc/self/status | sed 's/:[[:space:]]*/=/'";
    let pod = run_once_pod(
        "seccomp",
        serde_json::json!({}),
        &[
            ("plain", serde_json::json!({}), report),
            (
                "unconfined",
                serde_json::json!({"seccompProfile": {"type": "Unconfined"}}),
                report,
            ),
        ],
    );
    let logs = outputs_of_completed(c, &admin, &pod);
    let (plain, unconfined) = (&logs["plain"], &logs["unconfined"]);
    assert_eq!(field(plain, "Seccomp"), "2", "{plain}");
    assert_eq!(field(unconfined, "Seccomp"), "0", "{unconfined}");
}
