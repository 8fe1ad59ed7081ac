//! Volumes the node writes, on a real control plane with containerd, as a kubelet-run node
//! gives them: `configMap`, `secret`, `downwardAPI` and `projected` (all four sources) with
//! `items`, `defaultMode` and `mode`, `optional`, `subPath` and `subPathExpr`, a
//! `medium: Memory` emptyDir's `sizeLimit`, updates reaching running pods through the `..data`
//! swap within the sync period, the `FailedMount` wait for a missing ConfigMap or a missing
//! `hostPath` directory, and Secret values kept out of the node's ledger and log. Each
//! container writes what it sees into an emptyDir that the test reads on the node.

mod support;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use support::on_containerd::IMAGE;
use support::on_containerd::{agent_log, bound_pod, ledger_text, main_status, phase, volume_dir};
use support::real_cluster::{Kube, RealCluster};

const NODE: &str = "vol-node";
const NS: &str = "default";
/// The node's `--sync-frequency-ms`: how often it rewrites ConfigMap and Secret volumes.
const SYNC_FREQUENCY_MS: u64 = 2_000;

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd_with(NODE, &["--sync-frequency-ms=2000"])
}

fn create<K>(admin: &Kube, object: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    admin
        .run(admin.api::<K>(NS).create(&PostParams::default(), &object))
        .unwrap()
}

/// A pod bound to the node whose container `main` runs `script` with `mounts`, with the
/// volumes `volumes` and an emptyDir `out` mounted at `/out`.
fn pod_with_volumes(
    name: &str,
    script: &str,
    volumes: serde_json::Value,
    mounts: serde_json::Value,
    env: serde_json::Value,
) -> Pod {
    let mut volumes = volumes.as_array().unwrap().clone();
    volumes.push(serde_json::json!({"name": "out", "emptyDir": {}}));
    let mut mounts = mounts.as_array().unwrap().clone();
    mounts.push(serde_json::json!({"name": "out", "mountPath": "/out"}));
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "volumes": volumes,
            "containers": [{
                "name": "main", "image": IMAGE, "command": ["sh", "-c", script],
                "volumeMounts": mounts, "env": env
            }]
        }
    }))
    .unwrap()
}

/// The pod `name` once it runs.
fn running(admin: &Kube, name: &str) -> Pod {
    let pods = admin.api::<Pod>(NS);
    admin.wait_for(&format!("{name} Running"), 120, |k| {
        let p = k.run(pods.get(name)).ok()?;
        assert_ne!(phase(&p), Some("Failed"), "{:?}", p.status);
        (phase(&p) == Some("Running")).then_some(p)
    })
}

/// The running pod `name` and the node's directory of its `out` emptyDir.
fn running_with_out(c: &RealCluster, admin: &Kube, name: &str) -> (Pod, PathBuf) {
    let p = running(admin, name);
    let uid = p.metadata.uid.clone().unwrap();
    let out = volume_dir(&c.dir, &uid, "kubernetes.io~empty-dir", "out").expect("out volume");
    (p, out)
}

/// The text of `file` once it exists.
fn read_when_there(admin: &Kube, file: &Path, secs: u64) -> String {
    admin.wait_for(&format!("{}", file.display()), secs, |_| {
        std::fs::read_to_string(file).ok()
    })
}

/// VO-01, VO-03, VO-06: a ConfigMap and a Secret change reach the mounted files within the
/// sync period
/// (the `..data` symlink swapped to a new payload directory), while a `subPath` mount of the
/// same key keeps the content it started with.
#[test]
fn configmap_and_secret_updates_reach_the_volume_within_the_sync_period_but_not_a_subpath() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    create::<ConfigMap>(
        &admin,
        serde_json::json!({"metadata": {"name": "live"}, "data": {"greeting": "v1"}}),
    );
    create::<Secret>(
        &admin,
        serde_json::json!({"metadata": {"name": "live-creds"}, "stringData": {"key": "k-one"}}),
    );
    let script = "while true; do { cat /cfg/greeting; echo; cat /sub/greeting; echo; \
                  cat /sec/key; echo; } > /out/seen.tmp; mv /out/seen.tmp /out/seen; sleep 0.2; done";
    let p = pod_with_volumes(
        "live-reader",
        script,
        serde_json::json!([
            {"name": "cfg", "configMap": {"name": "live"}},
            {"name": "sec", "secret": {"secretName": "live-creds"}}
        ]),
        serde_json::json!([
            {"name": "cfg", "mountPath": "/cfg"},
            {"name": "sec", "mountPath": "/sec"},
            {"name": "cfg", "mountPath": "/sub/greeting", "subPath": "greeting"}
        ]),
        serde_json::json!([]),
    );
    admin
        .run(admin.api::<Pod>(NS).create(&PostParams::default(), &p))
        .unwrap();
    let (p, out) = running_with_out(c, &admin, "live-reader");
    let seen = out.join("seen");
    admin.wait_for("v1 in both mounts", 30, |_| {
        (std::fs::read_to_string(&seen).ok()? == "v1\nv1\nk-one\n").then_some(())
    });
    let uid = p.metadata.uid.unwrap();
    let vol = volume_dir(&c.dir, &uid, "kubernetes.io~configmap", "cfg").unwrap();
    let data_before = std::fs::read_link(vol.join("..data")).unwrap();
    assert_eq!(
        std::fs::read_link(vol.join("greeting")).unwrap(),
        Path::new("..data/greeting")
    );
    let configmaps = admin.api::<ConfigMap>(NS);
    let patch = serde_json::json!({"data": {"greeting": "v2"}});
    admin
        .run(configmaps.patch("live", &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap();
    let secrets = admin.api::<Secret>(NS);
    let patch = serde_json::json!({"stringData": {"key": "k-two"}});
    admin
        .run(secrets.patch("live-creds", &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap();
    // the sync period, plus the jitter and time for a GET and a write
    let bound = SYNC_FREQUENCY_MS / 1000 * 3 + 10;
    admin.wait_for(
        "v2 and k-two in the volumes, v1 in the subPath mount",
        bound,
        |_| {
            let text = std::fs::read_to_string(&seen).ok()?;
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(
                lines.get(1),
                Some(&"v1"),
                "the subPath mount changed: {text:?}"
            );
            (text == "v2\nv1\nk-two\n").then_some(())
        },
    );
    let data_after = std::fs::read_link(vol.join("..data")).unwrap();
    assert_ne!(data_before, data_after, "..data was not swapped");
    assert!(!vol.join(&data_before).exists(), "the old payload is kept");
}

/// VO-02: a pod whose non-optional ConfigMap is missing gets the kubelet's `FailedMount`
/// event and stays Pending in ContainerCreating, another pod keeps running, and the pod
/// starts once the ConfigMap exists.
#[test]
fn a_missing_configmap_keeps_the_pod_creating_with_failed_mount_until_it_exists() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>(NS);
    let bystander = bound_pod(NODE, "mount-bystander", "sleep 3600", 1, "Never");
    admin
        .run(pods.create(&PostParams::default(), &bystander))
        .unwrap();
    running(&admin, "mount-bystander");
    let p = pod_with_volumes(
        "mount-waits",
        "cat /cfg/k > /out/k; sleep 3600",
        serde_json::json!([{"name": "cfg", "configMap": {"name": "late"}}]),
        serde_json::json!([{"name": "cfg", "mountPath": "/cfg"}]),
        serde_json::json!([]),
    );
    admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    let events = admin.api::<Event>(NS);
    let params = ListParams::default().fields("involvedObject.name=mount-waits");
    // the first read may come before the API server's node authorizer links the new pod to
    // the ConfigMap (a 403 FailedMount, as a kubelet would get too); the not-found one follows
    let not_found = "MountVolume.SetUp failed for volume \"cfg\" : configmap \"late\" not found";
    let event = admin.wait_for("the FailedMount event of the missing ConfigMap", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedMount") && e.message.as_deref() == Some(not_found)
        })
    });
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let waiting = admin.run(pods.get("mount-waits")).unwrap();
    assert_eq!(phase(&waiting), Some("Pending"));
    let s = main_status(&waiting).expect("the container's status");
    let reason = s.state.as_ref().and_then(|s| s.waiting.as_ref());
    assert_eq!(
        reason.and_then(|w| w.reason.as_deref()),
        Some("ContainerCreating"),
        "{s:?}"
    );
    let bystander = admin.run(pods.get("mount-bystander")).unwrap();
    assert_eq!(phase(&bystander), Some("Running"));
    create::<ConfigMap>(
        &admin,
        serde_json::json!({"metadata": {"name": "late"}, "data": {"k": "here"}}),
    );
    let (_, out) = running_with_out(c, &admin, "mount-waits");
    assert_eq!(read_when_there(&admin, &out.join("k"), 30), "here");
}

/// VO-09: a `hostPath` volume of type `Directory` whose path does not exist yet is the
/// kubelet's volume mount failure: a Warning `FailedMount` event in its words, the pod Pending
/// with its container waiting in ContainerCreating (no sandbox), another pod keeps running,
/// and the pod runs once the directory exists (a later sync sets the volume up).
#[test]
fn a_host_path_directory_that_is_missing_keeps_the_pod_creating_with_failed_mount_until_it_exists()
{
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>(NS);
    let bystander = bound_pod(NODE, "hostpath-bystander", "sleep 3600", 1, "Never");
    admin
        .run(pods.create(&PostParams::default(), &bystander))
        .unwrap();
    running(&admin, "hostpath-bystander");
    let host = tempfile::tempdir().unwrap();
    let dir = host.path().join("later");
    let p = pod_with_volumes(
        "hostpath-waits",
        "cat /host/k > /out/k; sleep 3600",
        serde_json::json!([{"name": "host", "hostPath": {"path": dir, "type": "Directory"}}]),
        serde_json::json!([{"name": "host", "mountPath": "/host"}]),
        serde_json::json!([]),
    );
    admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    let events = admin.api::<Event>(NS);
    let params = ListParams::default().fields("involvedObject.name=hostpath-waits");
    let event = admin.wait_for("the FailedMount event", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedMount"))
    });
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let message = format!(
        "MountVolume.SetUp failed for volume \"host\" : hostPath type check failed: {} is not a \
         directory",
        dir.display()
    );
    assert_eq!(event.message.as_deref(), Some(message.as_str()));
    // the event and the status are separate writes, in no set order: wait for the status
    let waiting = admin.wait_for("the container waiting in ContainerCreating", 30, |k| {
        let p = k.run(pods.get("hostpath-waits")).ok()?;
        let creating = main_status(&p)
            .and_then(|s| s.state.as_ref()?.waiting.as_ref()?.reason.clone())
            .is_some_and(|r| r == "ContainerCreating");
        creating.then_some(p)
    });
    assert_eq!(phase(&waiting), Some("Pending"));
    let uid = waiting.metadata.uid.clone().unwrap();
    let sandboxes = ledger_text(c)
        .lines()
        .filter(|l| l.contains(&uid) && l.contains("\"create_sandbox\""))
        .count();
    assert_eq!(sandboxes, 0, "no sandbox before the volume is set up");
    let bystander = admin.run(pods.get("hostpath-bystander")).unwrap();
    assert_eq!(phase(&bystander), Some("Running"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("k"), "from the host").unwrap();
    let (_, out) = running_with_out(c, &admin, "hostpath-waits");
    assert_eq!(read_when_there(&admin, &out.join("k"), 30), "from the host");
}

/// VO-02, VO-04, VO-06, VO-07, VO-08: every file source with `items`, `defaultMode` and
/// `mode` (0644 by default, Secrets too), an absent optional ConfigMap as an empty volume, a
/// projected volume of all four sources, `subPathExpr` from the container's env, a
/// `medium: Memory` emptyDir sized by `sizeLimit` (capped by the pod's memory limit) and a
/// hostPath, in one pod that also takes env from every source (`configMapKeyRef`,
/// `secretKeyRef`, `fieldRef`, `resourceFieldRef`, `envFrom` with prefixes, `$(VAR)`); the
/// Secret's value and the token never reach the node's ledger or log.
#[test]
fn volume_files_have_the_kubelets_modes_items_and_sources_and_secrets_stay_out_of_the_ledger() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let password = format!("s3cr3t-vol-{}", std::process::id());
    create::<Secret>(
        &admin,
        serde_json::json!({"metadata": {"name": "vol-creds"},
            "stringData": {"password": password, "other": "o"}}),
    );
    create::<ConfigMap>(
        &admin,
        serde_json::json!({"metadata": {"name": "vol-cfg"}, "data": {"a": "A", "b": "B"}}),
    );
    let host_dir = c.dir.join("host-path-volume");
    let volumes = serde_json::json!([
        {"name": "sec", "secret": {"secretName": "vol-creds"}},
        {"name": "secmode", "secret": {"secretName": "vol-creds", "defaultMode": 0o400,
            "items": [{"key": "password", "path": "deep/pw", "mode": 0o440},
                      {"key": "other", "path": "other"}]}},
        {"name": "cfgitems", "configMap": {"name": "vol-cfg", "items": [{"key": "a", "path": "x/a"}]}},
        {"name": "optcm", "configMap": {"name": "vol-absent", "optional": true}},
        {"name": "dapi", "downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"name": "proj", "projected": {"sources": [
            {"configMap": {"name": "vol-cfg", "items": [{"key": "b", "path": "b"}]}},
            {"secret": {"name": "vol-creds", "items": [{"key": "password", "path": "pw"}]}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}},
        {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        {"name": "memcap", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"name": "host", "hostPath": {"path": host_dir, "type": "DirectoryOrCreate"}}
    ]);
    let mounts = serde_json::json!([
        {"name": "sec", "mountPath": "/sec"},
        {"name": "secmode", "mountPath": "/secmode"},
        {"name": "cfgitems", "mountPath": "/cfgitems"},
        {"name": "optcm", "mountPath": "/optcm"},
        {"name": "dapi", "mountPath": "/dapi"},
        {"name": "proj", "mountPath": "/proj"},
        {"name": "mem", "mountPath": "/mem"},
        {"name": "memcap", "mountPath": "/memcap"},
        {"name": "host", "mountPath": "/host"},
        {"name": "out", "mountPath": "/named", "subPathExpr": "$(POD_NAME)"}
    ]);
    // every env source at once too
    let env = serde_json::json!([
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "CM_A", "valueFrom": {"configMapKeyRef": {"name": "vol-cfg", "key": "a"}}},
        {"name": "SEC_PW", "valueFrom": {"secretKeyRef": {"name": "vol-creds", "key": "password"}}},
        {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "JOINED", "value": "$(CM_A)-$(POD_NAME)"}
    ]);
    let files = "/sec/password /sec/other /secmode/deep/pw /secmode/other /cfgitems/x/a \
                 /dapi/name /proj/b /proj/pw /proj/ns /proj/token";
    let script = format!(
        "for f in {files}; do stat -L -c '%a %n' $f; done > /out/modes; \
         cat /sec/password > /out/password; cat /proj/pw > /out/proj-pw; \
         cat /proj/token > /out/token; cat /cfgitems/x/a /proj/b /proj/ns /dapi/name > /out/text; \
         ls -A /optcm | grep -v '^\\.\\.' | wc -l > /out/optcm; \
         df -k /mem | tail -1 | awk '{{print $2}}' > /out/mem; \
         df -k /memcap | tail -1 | awk '{{print $2}}' > /out/memcap; echo hi > /named/hello; echo there > /host/file; \
         echo \"$CM_A $MEM_MI $JOINED $cfg_b $sec_other\" > /out/env; \
         [ \"$SEC_PW\" = \"$(cat /sec/password)\" ] && echo same > /out/secret-env; \
         touch /out/done; sleep 3600"
    );
    let mut p = pod_with_volumes("vol-files", &script, volumes, mounts, env);
    p.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(serde_json::json!({"limits": {"memory": "64Mi"}})).unwrap());
    p.spec.as_mut().unwrap().containers[0].env_from = Some(
        serde_json::from_value(serde_json::json!([
            {"configMapRef": {"name": "vol-cfg"}, "prefix": "cfg_"},
            {"secretRef": {"name": "vol-creds"}, "prefix": "sec_"}
        ]))
        .unwrap(),
    );
    admin
        .run(admin.api::<Pod>(NS).create(&PostParams::default(), &p))
        .unwrap();
    let (_, out) = running_with_out(c, &admin, "vol-files");
    read_when_there(&admin, &out.join("done"), 60);
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    assert_eq!(
        read("modes"),
        "644 /sec/password\n644 /sec/other\n440 /secmode/deep/pw\n400 /secmode/other\n\
         644 /cfgitems/x/a\n644 /dapi/name\n644 /proj/b\n644 /proj/pw\n644 /proj/ns\n\
         644 /proj/token\n"
    );
    assert_eq!(read("password"), password);
    assert_eq!(read("proj-pw"), password);
    assert_eq!(read("text"), "ABdefaultvol-files");
    assert_eq!(read("optcm").trim(), "0");
    assert_eq!(read("env"), "A 64 A-vol-files B o\n");
    assert_eq!(read("secret-env"), "same\n");
    assert_eq!(read("mem").trim(), "16384", "the tmpfs is sizeLimit");
    assert_eq!(
        read("memcap").trim(),
        "65536",
        "the tmpfs is the pod's memory limit"
    );
    assert_eq!(
        read("vol-files/hello"),
        "hi\n",
        "subPathExpr names the subdirectory"
    );
    let on_host = std::fs::read_to_string(host_dir.join("file")).unwrap();
    assert_eq!(
        on_host, "there\n",
        "the hostPath volume is the node's directory"
    );
    let token = read("token");
    assert!(token.len() > 20, "{token}");
    let (ledger, log) = (ledger_text(c), agent_log(c));
    for (what, value) in [
        ("the Secret value", password.as_str()),
        ("the token", &token),
    ] {
        assert!(!ledger.contains(value), "{what} is in the ledger");
        assert!(!log.contains(value), "{what} is in the agent log");
    }
}

/// VO-02: once a pod's volumes are set up, deleting its ConfigMap does not stop its
/// container from restarting (the kubelet keeps a mounted volume mounted when a remount
/// fails); the restarted container reads the files it had.
#[test]
fn a_deleted_configmap_keeps_its_files_and_the_container_restarts() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    create::<ConfigMap>(
        &admin,
        serde_json::json!({"metadata": {"name": "short-lived"}, "data": {"k": "kept"}}),
    );
    let mut p = pod_with_volumes(
        "restarts-without-cfg",
        "cat /cfg/k >> /out/seen; echo >> /out/seen; sleep 1; exit 1",
        serde_json::json!([{"name": "cfg", "configMap": {"name": "short-lived"}}]),
        serde_json::json!([{"name": "cfg", "mountPath": "/cfg"}]),
        serde_json::json!([]),
    );
    p.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    let pods = admin.api::<Pod>(NS);
    admin.run(pods.create(&PostParams::default(), &p)).unwrap();
    let (_, out) = running_with_out(c, &admin, "restarts-without-cfg");
    read_when_there(&admin, &out.join("seen"), 30);
    admin
        .run(
            admin
                .api::<ConfigMap>(NS)
                .delete("short-lived", &Default::default()),
        )
        .unwrap();
    let seen = |_: &Kube| std::fs::read_to_string(out.join("seen")).unwrap_or_default();
    let before = seen(&admin).lines().count();
    // the next start after the deletion (CrashLoopBackOff: 10 s, then 20 s)
    let text = admin.wait_for("a start after the deletion", 90, |k| {
        let text = seen(k);
        (text.lines().count() > before + 1).then_some(text)
    });
    assert!(text.lines().all(|l| l == "kept"), "{text:?}");
}

/// EV-01 on containerd: a pod writing 4 MiB into an `emptyDir` with `sizeLimit: 1Mi` is
/// evicted as the kubelet's eviction manager does it (Failed/Evicted, the kubelet's message,
/// DisruptionTarget, a Warning `Evicted` event), while a pod within its limit keeps running.
#[test]
fn an_empty_dir_over_its_size_limit_evicts_its_pod_and_one_within_it_keeps_running() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let scratch = |name: &str, mib: u32| {
        pod_with_volumes(
            name,
            &format!("dd if=/dev/zero of=/scratch/fill bs=1048576 count={mib} && sync; sleep 3600"),
            serde_json::json!([{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}]),
            serde_json::json!([{"name": "scratch", "mountPath": "/scratch"}]),
            serde_json::json!([]),
        )
    };
    let pods = admin.api::<Pod>(NS);
    for (name, mib) in [("outgrown", 4), ("within", 0)] {
        admin
            .run(pods.create(&PostParams::default(), &scratch(name, mib)))
            .unwrap();
    }
    let message = "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ";
    let p = admin.wait_for("outgrown evicted", 120, |k| {
        let p = k.run(pods.get("outgrown")).ok()?;
        (phase(&p) == Some("Failed")).then_some(p)
    });
    let s = p.status.as_ref().unwrap();
    assert_eq!(s.reason.as_deref(), Some("Evicted"), "{s:?}");
    assert_eq!(s.message.as_deref(), Some(message));
    let dt = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap_or_else(|| panic!("no DisruptionTarget: {s:?}"));
    assert_eq!(
        (dt.status.as_str(), dt.reason.as_deref()),
        ("True", Some("TerminationByKubelet"))
    );
    let events = admin.api::<Event>(NS);
    admin.wait_for("the Warning Evicted event", 60, |k| {
        let params = ListParams::default().fields("involvedObject.name=outgrown");
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("Evicted")
                    && e.message.as_deref() == Some(message)
            })
            .then_some(())
    });
    let within = running(&admin, "within");
    assert!(main_status(&within).is_some_and(|s| s.restart_count == 0));
    for name in ["outgrown", "within"] {
        let _ = admin.run(pods.delete(name, &Default::default()));
    }
}
