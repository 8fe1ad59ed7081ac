//! The pod's and its containers' `securityContext` as a kubelet-run node applies them, seen
//! from inside the containers on a real control plane with containerd + runc: the user and
//! groups a process runs with, `fsGroup` on the volumes the node writes, capabilities,
//! no_new_privs, seccomp, a read-only root, masked paths, sysctls, and the runAsNonRoot check.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::api::{ListParams, PostParams};
use support::on_containerd::{
    bound_pod, container_output, main_status, outputs_of_completed, phase, IMAGE,
};
use support::real_cluster::RealCluster;

const NODE: &str = "sec-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd(NODE)
}

/// A pod bound to the node that runs once (`restartPolicy: Never`), with the given
/// pod-level `securityContext`, volumes and containers (each `(name, securityContext,
/// script)`, run by `sh -c` from the test image; volumes are mounted in every container at
/// `/<volume name>`).
fn run_once_pod(
    name: &str,
    pod_sc: serde_json::Value,
    volumes: serde_json::Value,
    containers: &[(&str, serde_json::Value, &str)],
) -> Pod {
    let mounts: Vec<serde_json::Value> = volumes
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| serde_json::json!({"name": v["name"], "mountPath": format!("/{}", v["name"].as_str().unwrap())}))
        .collect();
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|(n, sc, script)| {
            serde_json::json!({
                "name": n, "image": IMAGE, "command": ["sh", "-c", script],
                "securityContext": sc, "volumeMounts": mounts,
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
            "volumes": volumes,
            "containers": containers,
        }
    }))
    .unwrap()
}

/// The value of `key=` on a line of `log`: `key=value` pairs separated by spaces, a value
/// running to the next ` key=` or the end of the line.
fn field<'a>(log: &'a str, key: &str) -> &'a str {
    let start = format!("{key}=");
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix(&start) {
            return rest.trim();
        }
    }
    panic!("no {key}= line in {log:?}")
}

/// The `Name:\tvalue` line of `/proc/self/status` output in `log`.
fn status_line<'a>(log: &'a str, name: &str) -> &'a str {
    log.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name}: in {log:?}"))
}

fn cap_eff(log: &str) -> u64 {
    u64::from_str_radix(status_line(log, "CapEff"), 16).expect("CapEff is hex")
}

/// The capability bit of `CAP_SYS_ADMIN`.
const CAP_SYS_ADMIN: u64 = 1 << 21;
/// The capability bit of `CAP_NET_ADMIN`.
const CAP_NET_ADMIN: u64 = 1 << 12;

/// SC-01 and SC-04: the merged user and groups, and `fsGroup` on the volumes the node writes.
#[test]
fn containers_run_as_the_merged_user_and_groups_and_fs_group_owns_the_nodes_volumes() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let cms = admin.api::<ConfigMap>("default");
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sec-conf"}, "data": {"key": "conf-value"}
    }))
    .unwrap();
    admin.run(cms.create(&PostParams::default(), &cm)).unwrap();
    let script = "echo uid=$(id -u) gid=$(id -g) \
        && echo groups=$(id -G) \
        && echo scratch=$(stat -c '%g %a' /scratch) \
        && touch /scratch/new && echo new=$(stat -c %g /scratch/new) \
        && echo conf=$(cat /conf/key) $(stat -L -c '%g %a' /conf/key) \
        && echo info=$(cat /info/name) $(stat -L -c '%g %a' /info/name)";
    let pod = run_once_pod(
        "ids",
        serde_json::json!({
            "runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]
        }),
        serde_json::json!([
            {"name": "scratch", "emptyDir": {}},
            {"name": "conf", "configMap": {"name": "sec-conf", "defaultMode": 0o400}},
            {"name": "info", "downwardAPI": {"defaultMode": 0o400, "items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}
            ]}}
        ]),
        &[
            ("override", serde_json::json!({"runAsUser": 1001}), script),
            (
                "inherit",
                serde_json::json!({}),
                "echo uid=$(id -u) gid=$(id -g)",
            ),
        ],
    );
    let logs = outputs_of_completed(c, &admin, &pod);
    let (over, inherit) = (&logs["override"], &logs["inherit"]);
    // the container's runAsUser wins; the pod's group applies to both
    assert_eq!(field(over, "uid"), "1001 gid=3000", "{over}");
    assert_eq!(field(inherit, "uid"), "1000 gid=3000", "{inherit}");
    // fsGroup and the supplemental groups are the process's groups
    let groups: Vec<&str> = field(over, "groups").split(' ').collect();
    assert!(
        groups.contains(&"2000") && groups.contains(&"4000"),
        "{groups:?}"
    );
    // the emptyDir belongs to the fsGroup, setgid, so new files do too
    assert_eq!(field(over, "scratch"), "2000 2777", "{over}");
    assert_eq!(field(over, "new"), "2000", "{over}");
    // files of mode 0400 the node wrote are group-readable by the fsGroup: a non-root user
    // in that group reads them
    assert_eq!(field(over, "conf"), "conf-value 2000 440", "{over}");
    assert_eq!(field(over, "info"), "ids 2000 440", "{over}");
    let _ = admin.run(cms.delete("sec-conf", &Default::default()));
}

/// SC-03: capabilities, no_new_privs, seccomp, the read-only root, masked paths and sysctls.
#[test]
fn capabilities_no_new_privs_seccomp_read_only_root_and_masked_paths_apply_per_container() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let report = "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status \
        && echo timer_list=$(wc -c < /proc/timer_list) \
        && echo shm=$(cat /proc/sys/kernel/shm_rmid_forced) \
        && (touch /rootfile 2>/dev/null && echo root=writable || echo root=read-only)";
    let pod = run_once_pod(
        "caps",
        serde_json::json!({"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}),
        serde_json::json!([]),
        &[
            (
                "locked",
                serde_json::json!({
                    "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "seccompProfile": {"type": "RuntimeDefault"},
                }),
                report,
            ),
            ("plain", serde_json::json!({}), report),
            (
                "privileged",
                serde_json::json!({"privileged": true}),
                report,
            ),
        ],
    );
    let logs = outputs_of_completed(c, &admin, &pod);
    let (locked, plain, privileged) = (&logs["locked"], &logs["plain"], &logs["privileged"]);
    // capabilities: exactly what was added after dropping all
    assert_eq!(cap_eff(locked), CAP_NET_ADMIN, "{locked}");
    // the runtime's default set has neither, a privileged container has both
    assert_eq!(
        cap_eff(plain) & (CAP_NET_ADMIN | CAP_SYS_ADMIN),
        0,
        "{plain}"
    );
    assert_eq!(
        cap_eff(privileged) & (CAP_NET_ADMIN | CAP_SYS_ADMIN),
        CAP_NET_ADMIN | CAP_SYS_ADMIN,
        "{privileged}"
    );
    // allowPrivilegeEscalation: false is no_new_privs; unset is not
    assert_eq!(status_line(locked, "NoNewPrivs"), "1");
    assert_eq!(status_line(plain, "NoNewPrivs"), "0");
    // seccomp: RuntimeDefault filters (mode 2); without a profile the kubelet's default is
    // Unconfined (mode 0)
    assert_eq!(status_line(locked, "Seccomp"), "2");
    assert_eq!(status_line(plain, "Seccomp"), "0");
    assert_eq!(field(locked, "root"), "read-only");
    assert_eq!(field(plain, "root"), "writable");
    // procMount Default masks /proc/timer_list; a privileged container sees it
    assert_eq!(field(locked, "timer_list"), "0", "{locked}");
    assert_eq!(field(plain, "timer_list"), "0", "{plain}");
    assert_ne!(field(privileged, "timer_list"), "0", "{privileged}");
    // the pod's sysctls are set in its sandbox, which every container shares
    for log in [locked, plain, privileged] {
        assert_eq!(field(log, "shm"), "1", "{log}");
    }
}

/// SC-03: a `Localhost` seccomp profile under `<root-dir>/seccomp`.
#[test]
fn a_localhost_seccomp_profile_is_read_from_the_nodes_seccomp_directory() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let dir = c.dir.join("node/seccomp/profiles");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = serde_json::json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]
    });
    std::fs::write(dir.join("no-mkdir.json"), profile.to_string()).unwrap();
    let pod = run_once_pod(
        "seccomp-local",
        serde_json::json!({
            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/no-mkdir.json"}
        }),
        serde_json::json!([]),
        &[(
            "main",
            serde_json::json!({}),
            "grep '^Seccomp:' /proc/self/status; \
             mkdir /tmp/d 2>/dev/null && echo mkdir=allowed || echo mkdir=denied",
        )],
    );
    let logs = outputs_of_completed(c, &admin, &pod);
    assert_eq!(status_line(&logs["main"], "Seccomp"), "2");
    assert_eq!(field(&logs["main"], "mkdir"), "denied");
}

/// The waiting state of container `name` of `p`: (reason, message).
fn waiting(p: &Pod, name: &str) -> Option<(String, String)> {
    let s = p.status.as_ref()?.container_statuses.as_ref()?;
    let w = s
        .iter()
        .find(|s| s.name == name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?;
    Some((w.reason.clone()?, w.message.clone().unwrap_or_default()))
}

/// SC-02: runAsNonRoot with a root image, while another pod and container run.
#[test]
fn a_pod_with_run_as_non_root_and_a_root_image_fails_create_container_config() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let neighbour = bound_pod(NODE, "neighbour", "sleep 3600", 1, "Always");
    admin
        .run(pods.create(&PostParams::default(), &neighbour))
        .unwrap();
    let mut pod = bound_pod(NODE, "nonroot", "sleep 3600", 1, "Always");
    let spec = pod.spec.as_mut().unwrap();
    spec.security_context =
        Some(serde_json::from_value(serde_json::json!({"runAsNonRoot": true})).unwrap());
    // a second container that names a non-root user runs
    let mut named = spec.containers[0].clone();
    named.name = "named".into();
    named.security_context =
        Some(serde_json::from_value(serde_json::json!({"runAsUser": 1000})).unwrap());
    spec.containers.push(named);
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    let (p, (reason, message)) =
        admin.wait_for("main waiting in CreateContainerConfigError", 120, |k| {
            let p = k.run(pods.get("nonroot")).ok()?;
            let w = waiting(&p, "main").filter(|(r, _)| r == "CreateContainerConfigError")?;
            Some((p, w))
        });
    assert_eq!(reason, "CreateContainerConfigError");
    let uid = p.metadata.uid.clone().unwrap();
    assert!(
        message.contains(&format!(
            "container has runAsNonRoot and image will run as root (pod: \"nonroot_default({uid})\", container: main)"
        )),
        "{message}"
    );
    // the Event the kubelet records for it
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=nonroot");
    admin.wait_for("a Failed event about runAsNonRoot", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Failed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("runAsNonRoot"))
            })
            .then_some(())
    });
    // the other container of the pod, and the other pod of the node, run
    admin.wait_for("named and the neighbour running", 120, |k| {
        let p = k.run(pods.get("nonroot")).ok()?;
        let named = p
            .status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .iter()
            .find(|s| s.name == "named")?;
        named.state.as_ref()?.running.as_ref()?;
        let n = k.run(pods.get("neighbour")).ok()?;
        main_status(&n)?.state.as_ref()?.running.as_ref()?;
        (phase(&n) == Some("Running")).then_some(())
    });
    for name in ["nonroot", "neighbour"] {
        let _ = admin.run(pods.delete(name, &Default::default()));
    }
}

/// A pod of one container `main` with the given `resources`, printing its OOM score
/// adjustment and its cgroup's memory and memory+swap limits.
fn resources_pod(name: &str, resources: serde_json::Value) -> Pod {
    let mut pod = run_once_pod(
        name,
        serde_json::json!({}),
        serde_json::json!([]),
        &[(
            "main",
            serde_json::json!({}),
            "echo oom=$(cat /proc/self/oom_score_adj) \
             && echo mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) \
             && echo memsw=$(cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null)",
        )],
    );
    pod.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(resources).unwrap());
    pod
}

/// SC-05: oom_score_adj by QoS class and no swap beyond the memory limit.
#[test]
fn containers_get_the_oom_score_of_their_qos_class_and_no_swap_beyond_their_memory_limit() {
    use k8s_openapi::api::core::v1::Node;
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let node = admin.run(admin.all::<Node>().get(NODE)).expect("the node");
    let capacity = node.status.unwrap().capacity.unwrap()["memory"].0.clone();
    let capacity_bytes: i64 = capacity
        .strip_suffix("Ki")
        .expect("memory capacity in Ki")
        .parse::<i64>()
        .unwrap()
        * 1024;
    let best_effort = outputs_of_completed(
        c,
        &admin,
        &resources_pod("besteffort", serde_json::json!({})),
    );
    let burstable = outputs_of_completed(
        c,
        &admin,
        &resources_pod(
            "burstable",
            serde_json::json!({"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}),
        ),
    );
    let guaranteed = outputs_of_completed(
        c,
        &admin,
        &resources_pod(
            "guaranteed",
            serde_json::json!({
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"cpu": "100m", "memory": "64Mi"}
            }),
        ),
    );
    let (best_effort, burstable, guaranteed) = (
        &best_effort["main"],
        &burstable["main"],
        &guaranteed["main"],
    );
    assert_eq!(field(best_effort, "oom"), "1000", "{best_effort}");
    let want = (1000 - 1000 * (64 << 20) / capacity_bytes).clamp(3, 999);
    assert_eq!(field(burstable, "oom"), want.to_string(), "{burstable}");
    // -997, raised by containerd's restrict_oom_score_adj to its own score when that is higher
    let oom: i64 = field(guaranteed, "oom").parse().unwrap();
    assert!(oom < want, "{guaranteed}");
    assert_eq!(field(burstable, "mem"), (128 << 20).to_string());
    assert_eq!(field(guaranteed, "mem"), (64 << 20).to_string());
    // with swap accounting, memory+swap is capped at the memory limit (the kubelet's NoSwap)
    if std::path::Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists() {
        assert_eq!(
            field(burstable, "memsw"),
            (128 << 20).to_string(),
            "{burstable}"
        );
        assert_eq!(
            field(guaranteed, "memsw"),
            (64 << 20).to_string(),
            "{guaranteed}"
        );
    }
}

/// SC-06: each pod's cgroup sits under its QoS class's cgroup with the pod-level limits,
/// and goes when the pod does.
#[test]
fn pods_run_in_their_qos_class_cgroup_with_pod_limits_until_they_are_deleted() {
    let Some(c) = cluster() else { return };
    if !std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists() {
        eprintln!("SKIPPED: the pod cgroup limits are written on cgroup v1 hosts only");
        return;
    }
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let script = "echo cg=$(grep ':memory:' /proc/self/cgroup | cut -d: -f3); exec sleep 3600";
    let cases = [
        (
            "qos-besteffort",
            serde_json::json!({}),
            "/kubepods/besteffort/pod",
        ),
        (
            "qos-burstable",
            serde_json::json!({"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}),
            "/kubepods/burstable/pod",
        ),
        (
            "qos-guaranteed",
            serde_json::json!({
                "requests": {"cpu": "200m", "memory": "48Mi"}, "limits": {"cpu": "200m", "memory": "48Mi"}
            }),
            "/kubepods/pod",
        ),
    ];
    let mut uids = BTreeMap::new();
    for (name, resources, _) in &cases {
        let mut pod = bound_pod(NODE, name, script, 1, "Always");
        pod.spec.as_mut().unwrap().containers[0].resources =
            Some(serde_json::from_value(resources.clone()).unwrap());
        let created = admin
            .run(pods.create(&PostParams::default(), &pod))
            .unwrap();
        uids.insert(name.to_string(), created.metadata.uid.unwrap());
    }
    let host = |cgroup: &str, file: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{cgroup}/{file}"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    for (name, _, place) in &cases {
        let uid = &uids[*name];
        let out = admin.wait_for(&format!("{name} reports its cgroup"), 120, |_| {
            let out = container_output(c, name, uid, "main");
            out.contains("cg=").then_some(out)
        });
        // the container's cgroup is inside the pod's, which is under its QoS class
        let pod_cgroup = format!("{place}{uid}");
        assert!(
            field(&out, "cg").starts_with(&format!("{pod_cgroup}/")),
            "{out}"
        );
        let (cpu, memory) = (format!("cpu{pod_cgroup}"), format!("memory{pod_cgroup}"));
        match *name {
            "qos-besteffort" => {
                assert_eq!(host(&cpu, "cpu.shares"), "2");
                assert_eq!(host("cpu/kubepods/besteffort", "cpu.shares"), "2");
            }
            "qos-burstable" => {
                // shares from the requests; no quota as the CPU is not limited; memory is
                assert_eq!(host(&cpu, "cpu.shares"), "102");
                assert_eq!(host(&cpu, "cpu.cfs_quota_us"), "-1");
                assert_eq!(
                    host(&memory, "memory.limit_in_bytes"),
                    (64 << 20).to_string()
                );
            }
            _ => {
                assert_eq!(host(&cpu, "cpu.shares"), "204");
                assert_eq!(host(&cpu, "cpu.cfs_quota_us"), "20000");
                assert_eq!(
                    host(&memory, "memory.limit_in_bytes"),
                    (48 << 20).to_string()
                );
            }
        }
    }
    // deleted, the pods take their cgroups with them
    for (name, _, place) in &cases {
        let _ = admin.run(pods.delete(name, &Default::default()));
        let gone = format!("/sys/fs/cgroup/memory{place}{}", uids[*name]);
        admin.wait_for(&format!("{gone} removed"), 120, |_| {
            (!std::path::Path::new(&gone).exists()).then_some(())
        });
    }
}

/// SC-07: a pod that asks for an AppArmor profile runs only where the host enforces
/// AppArmor; elsewhere it is held Pending with reason `AppArmor` and its containers
/// `Blocked`, while the node's other pods run.
#[test]
fn a_pod_asking_for_apparmor_is_held_pending_on_a_host_without_it() {
    let Some(c) = cluster() else { return };
    let host_has_apparmor = std::path::Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|v| v.starts_with('Y'));
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let other = bound_pod(NODE, "apparmor-neighbour", "sleep 3600", 1, "Always");
    admin
        .run(pods.create(&PostParams::default(), &other))
        .unwrap();
    let mut pod = bound_pod(NODE, "apparmor", "sleep 3600", 1, "Always");
    pod.spec.as_mut().unwrap().containers[0].security_context = Some(
        serde_json::from_value(serde_json::json!({"appArmorProfile": {"type": "RuntimeDefault"}}))
            .unwrap(),
    );
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    if host_has_apparmor {
        admin.wait_for("apparmor Running", 120, |k| {
            let p = k.run(pods.get("apparmor")).ok()?;
            (phase(&p) == Some("Running")).then_some(())
        });
    } else {
        let status = admin.wait_for("apparmor held with reason AppArmor", 120, |k| {
            let p = k.run(pods.get("apparmor")).ok()?;
            let s = p.status.clone()?;
            (s.reason.as_deref() == Some("AppArmor")).then_some(p)
        });
        let s = status.status.as_ref().unwrap();
        assert_eq!(phase(&status), Some("Pending"));
        assert_eq!(
            s.message.as_deref(),
            Some("Cannot enforce AppArmor: AppArmor is not enabled on the host")
        );
        assert_eq!(
            waiting(&status, "main").map(|w| w.0).as_deref(),
            Some("Blocked")
        );
    }
    admin.wait_for("the neighbour Running", 120, |k| {
        let p = k.run(pods.get("apparmor-neighbour")).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
    if !host_has_apparmor {
        // still held, never started
        let p = admin.run(pods.get("apparmor")).unwrap();
        assert_eq!(phase(&p), Some("Pending"));
        assert!(main_status(&p)
            .and_then(|s| s.container_id.as_ref())
            .is_none());
    }
    for name in ["apparmor", "apparmor-neighbour"] {
        let _ = admin.run(pods.delete(name, &Default::default()));
    }
}

/// SC-04: the service-account token is private to the pod's one user, group-readable by
/// its fsGroup.
#[test]
fn the_service_account_token_belongs_to_the_pods_user_and_fs_group() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let script = "t=/var/run/secrets/kubernetes.io/serviceaccount/token; \
        echo token=$(stat -L -c '%u %g %a' $t) && test -s $t && echo readable=yes";
    let mut cases = Vec::new();
    for (name, sc, want) in [
        (
            "token-user",
            serde_json::json!({"runAsUser": 1000}),
            "1000 0 600",
        ),
        (
            "token-group",
            serde_json::json!({"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000}),
            "1000 2000 640",
        ),
        ("token-root", serde_json::json!({}), "0 0 644"),
    ] {
        let mut pod = run_once_pod(
            name,
            sc,
            serde_json::json!([]),
            &[("main", serde_json::json!({}), script)],
        );
        pod.spec.as_mut().unwrap().automount_service_account_token = Some(true);
        cases.push((pod, want));
    }
    for (pod, want) in cases {
        let logs = outputs_of_completed(c, &admin, &pod);
        let out = &logs["main"];
        assert_eq!(field(out, "token"), want, "{out}");
        assert_eq!(field(out, "readable"), "yes", "{out}");
    }
}
