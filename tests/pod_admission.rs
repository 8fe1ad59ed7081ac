//! Admission as the kubelet's, on a real control plane with containerd (AM-*): pods bound
//! straight to the node (`spec.nodeName`, bypassing the scheduler) that the kubelet would
//! refuse end Failed with its reason and message and a Warning Event, and stay so; the Node
//! reports its allocatable net of `--kube-reserved`, `--system-reserved` and the hard
//! eviction thresholds, keeps an extended resource an admin advertised, and holds at most
//! `--max-pods` active pods; a static pod is exempt from the `NoExecute` taints.

mod support;

use std::collections::BTreeMap;
use std::sync::RwLock;

use k8s_openapi::api::core::v1::{Container, Event, Node, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use support::on_containerd::{
    assert_an_update_starts_nothing, bound_pod, ledger_text, main_status, phase, pod_records,
};
use support::real_cluster::{Kube, RealCluster};

const NODE: &str = "adm-node";
const KUBE_RESERVED: &str = "--kube-reserved=cpu=100m,memory=100Mi,ephemeral-storage=1Gi";
const SYSTEM_RESERVED: &str = "--system-reserved=cpu=50m,memory=50Mi";
/// Small, so the pod count test can fill the node; the other tests hold a few pods at once.
const MAX_PODS: usize = 6;

/// Tests that change the node for every pod on it (a taint) or hold part of its allocatable
/// (or all of its pod count) run alone; the others share the node.
static ALONE: RwLock<()> = RwLock::new(());

fn cluster() -> Option<&'static RealCluster> {
    let max_pods = format!("--max-pods={MAX_PODS}");
    RealCluster::shared_containerd_with(NODE, &[KUBE_RESERVED, SYSTEM_RESERVED, &max_pods])
}

fn node(admin: &Kube) -> Node {
    admin.run(admin.all::<Node>().get(NODE)).expect("the node")
}

fn quantity<'a>(list: &'a Option<BTreeMap<String, Quantity>>, name: &str) -> &'a str {
    &list.as_ref().expect("a resource list")[name].0
}

/// Bytes (or cores) of a quantity this test's node reports (`2`, `123Ki`, `7Gi`, plain).
fn amount(q: &str) -> u64 {
    let (n, shift) = match q {
        _ if q.ends_with("Ki") => (&q[..q.len() - 2], 10),
        _ if q.ends_with("Mi") => (&q[..q.len() - 2], 20),
        _ if q.ends_with("Gi") => (&q[..q.len() - 2], 30),
        _ => (q, 0),
    };
    n.parse::<u64>().unwrap_or_else(|_| panic!("{q}")) << shift
}

/// A pod sleeping in `main`, bound to the node.
fn sleeper(name: &str) -> Pod {
    bound_pod(
        NODE,
        name,
        "trap 'exit 0' TERM; sleep 3600 & wait",
        2,
        "Never",
    )
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

/// Waits for `name` to be Failed; returns its (reason, message).
fn failed(admin: &Kube, name: &str) -> (String, String) {
    let pods = admin.api::<Pod>("default");
    let status = admin.wait_for(&format!("{name} Failed"), 90, |k| {
        let p = k.run(pods.get(name)).ok()?;
        (phase(&p) == Some("Failed")).then_some(p.status?)
    });
    (
        status.reason.unwrap_or_default(),
        status.message.unwrap_or_default(),
    )
}

/// Waits for `name` to be rejected as the kubelet rejects it: Failed with `reason` and
/// `Pod was rejected: <message>`, and a Warning Event with `reason` and `message`.
fn rejected(admin: &Kube, name: &str, reason: &str, message: &str) {
    assert_eq!(
        failed(admin, name),
        (reason.to_string(), format!("Pod was rejected: {message}"))
    );
    warning_event(admin, name, reason, message);
}

/// Waits for `name` to be Running.
fn running(admin: &Kube, name: &str) {
    let pods = admin.api::<Pod>("default");
    admin.wait_for(&format!("{name} Running"), 90, |k| {
        let p = k.run(pods.get(name)).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
}

/// Waits for the Warning Event `reason` with `message` about pod `name`.
fn warning_event(admin: &Kube, name: &str, reason: &str, message: &str) {
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    admin.wait_for(&format!("the {reason} event of {name}"), 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref() == Some(message)
            })
            .then_some(())
    });
}

/// Waits until pod `name` no longer exists.
fn gone(admin: &Kube, name: &str) {
    admin.wait_for(&format!("{name} gone"), 90, |k| {
        k.run(k.api::<Pod>("default").get_opt(name))
            .ok()?
            .is_none()
            .then_some(())
    });
}

fn delete(admin: &Kube, name: &str) {
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete(name, &Default::default()),
    );
}

/// AM-02: allocatable = capacity − kube-reserved − system-reserved − hard eviction
/// (memory.available<100Mi, nodefs.available<10%).
#[test]
fn the_node_reports_allocatable_net_of_reservations_and_eviction_thresholds() {
    let Some(c) = cluster() else { return };
    let _shared = ALONE.read();
    let status = node(&c.admin()).status.expect("a node status");
    let (cap, alloc) = (&status.capacity, &status.allocatable);
    let cores = amount(quantity(cap, "cpu"));
    assert_eq!(
        quantity(alloc, "cpu"),
        format!("{}m", cores * 1000 - 150),
        "cpu: {cap:?} → {alloc:?}"
    );
    let mem = amount(quantity(cap, "memory"));
    assert_eq!(
        amount(quantity(alloc, "memory")),
        mem - (250 << 20),
        "100Mi kube + 50Mi system + 100Mi eviction"
    );
    let disk = amount(quantity(cap, "ephemeral-storage"));
    let eviction = (disk as f64 * f64::from(0.1f32)) as u64;
    assert_eq!(
        amount(quantity(alloc, "ephemeral-storage")),
        disk - (1 << 30) - eviction
    );
    assert_eq!(quantity(alloc, "pods"), quantity(cap, "pods"));
}

/// AM-03: requests over the node's allocatable → Failed/OutOfcpu, OutOfmemory or
/// OutOfephemeral-storage, with the
/// kubelet's message and a Warning Event; the container never starts.
#[test]
fn a_pod_requesting_more_than_allocatable_fails_out_of_cpu_memory_or_ephemeral_storage() {
    let Some(c) = cluster() else { return };
    let _shared = ALONE.read();
    let admin = c.admin();
    let alloc = node(&admin).status.unwrap().allocatable;
    let alloc_milli = quantity(&alloc, "cpu").trim_end_matches('m').to_string();
    let alloc_mem = amount(quantity(&alloc, "memory"));
    let alloc_disk = amount(quantity(&alloc, "ephemeral-storage"));
    let cases = [
        ("too-much-cpu", "cpu", "1000", "OutOfcpu", format!(
            "Node didn't have enough resource: cpu, requested: 1000000, used: 0, capacity: {alloc_milli}"
        )),
        ("too-much-memory", "memory", "1Ti", "OutOfmemory", format!(
            "Node didn't have enough resource: memory, requested: 1099511627776, used: 0, capacity: {alloc_mem}"
        )),
        ("too-much-disk", "ephemeral-storage", "100Ti", "OutOfephemeral-storage", format!(
            "Node didn't have enough resource: ephemeral-storage, requested: 109951162777600, used: 0, capacity: {alloc_disk}"
        )),
    ];
    for (name, resource, amount, _, _) in &cases {
        let mut p = sleeper(name);
        let requests = BTreeMap::from([(resource.to_string(), Quantity(amount.to_string()))]);
        p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
            requests: Some(requests),
            ..Default::default()
        });
        create(&admin, &p);
    }
    for (name, _, _, reason, message) in &cases {
        rejected(&admin, name, reason, message);
        let p = admin.run(admin.api::<Pod>("default").get(name)).unwrap();
        assert!(
            main_status(&p).is_none_or(|s| s.state.as_ref().is_none_or(|s| s.running.is_none()))
        );
        delete(&admin, name);
    }
}

/// A container that requests `milli` millicores of CPU.
fn requesting_cpu(mut c: Container, milli: u64) -> Container {
    c.resources = Some(ResourceRequirements {
        requests: Some(BTreeMap::from([(
            "cpu".to_string(),
            Quantity(format!("{milli}m")),
        )])),
        ..Default::default()
    });
    c
}

/// AM-03 (`PodRequests`): an init container counts by its peak, so one of 60 % of the CPU
/// before a main container of 60 % is admitted and runs; a sidecar runs beside the main
/// container, so the same pair as sidecar and main container asks for 120 % → OutOfcpu.
#[test]
fn an_init_container_counts_by_its_peak_and_a_sidecar_beside_the_main_container() {
    let Some(c) = cluster() else { return };
    let _alone = ALONE.write();
    let admin = c.admin();
    let alloc = node(&admin).status.unwrap().allocatable;
    let alloc_milli: u64 = quantity(&alloc, "cpu")
        .trim_end_matches('m')
        .parse()
        .unwrap();
    let share = alloc_milli * 6 / 10;
    let pod_with = |name: &str, init_script: &str, restart: Option<&str>| {
        let mut p = sleeper(name);
        let spec = p.spec.as_mut().unwrap();
        let main = spec.containers[0].clone();
        let mut init = Container {
            name: "init".into(),
            image: main.image.clone(),
            command: Some(vec!["sh".into(), "-c".into(), init_script.into()]),
            restart_policy: restart.map(String::from),
            ..Default::default()
        };
        init = requesting_cpu(init, share);
        spec.init_containers = Some(vec![init]);
        spec.containers[0] = requesting_cpu(main, share);
        p
    };
    create(
        &admin,
        &pod_with("sidecar-sum", "sleep 3600", Some("Always")),
    );
    let message = format!(
        "Node didn't have enough resource: cpu, requested: {}, used: 0, capacity: {alloc_milli}",
        2 * share
    );
    rejected(&admin, "sidecar-sum", "OutOfcpu", &message);
    delete(&admin, "sidecar-sum");
    create(&admin, &pod_with("init-peak", "true", None));
    running(&admin, "init-peak");
    delete(&admin, "init-peak");
    gone(&admin, "init-peak");
}

/// AM-04 and AM-01: a nodeSelector the node does not match → Failed/NodeAffinity; a later
/// label update of the rejected pod does not start it.
#[test]
fn a_pod_whose_node_selector_the_node_does_not_match_fails_and_an_update_does_not_start_it() {
    let Some(c) = cluster() else { return };
    let _shared = ALONE.read();
    let admin = c.admin();
    let mut p = sleeper("elsewhere");
    p.spec.as_mut().unwrap().node_selector =
        Some(BTreeMap::from([("disk".to_string(), "tape".to_string())]));
    let uid = create(&admin, &p).metadata.uid.unwrap();
    let message =
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector";
    rejected(&admin, "elsewhere", "NodeAffinity", message);

    // the node sees a later update and starts nothing
    assert_an_update_starts_nothing(c, &admin, "elsewhere", &uid);
    // deleted, the rejected pod goes away: the node finishes it and deletes its object
    delete(&admin, "elsewhere");
    gone(&admin, "elsewhere");
}

/// AM-05: a second pod on a host port an active pod uses → Failed/NodePorts.
#[test]
fn a_second_pod_on_a_host_port_the_first_uses_fails_node_ports() {
    let Some(c) = cluster() else { return };
    let _shared = ALONE.read();
    let admin = c.admin();
    let with_port = |name: &str| {
        let mut p = sleeper(name);
        p.spec.as_mut().unwrap().containers[0].ports =
            Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                container_port: 8080,
                host_port: Some(18080),
                ..Default::default()
            }]);
        p
    };
    create(&admin, &with_port("port-first"));
    running(&admin, "port-first");
    create(&admin, &with_port("port-second"));
    let message =
        "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports";
    rejected(&admin, "port-second", "NodePorts", message);
    let pods = admin.api::<Pod>("default");
    let first = admin.run(pods.get("port-first")).unwrap();
    assert_eq!(
        phase(&first),
        Some("Running"),
        "the first pod keeps running"
    );
    delete(&admin, "port-second");
    delete(&admin, "port-first");
}

/// AM-06: a NoExecute taint the pod does not tolerate, put on the Node through the API →
/// Failed/TaintToleration; a pod tolerating it runs, and so does a static pod without the
/// toleration (static pods are exempt). The taint is removed after.
#[test]
fn a_pod_not_tolerating_a_no_execute_taint_on_the_node_fails_taint_toleration() {
    let Some(c) = cluster() else { return };
    let _alone = ALONE.write();
    let admin = c.admin();
    let nodes = admin.all::<Node>();
    let taint = serde_json::json!({"spec": {"taints": [
        {"key": "adm-test", "value": "x", "effect": "NoExecute"}
    ]}});
    let untaint = Untaint(c);
    admin
        .run(nodes.patch(NODE, &PatchParams::default(), &Patch::Merge(&taint)))
        .unwrap();
    admin.wait_for("the node to record the taint", 30, |_| {
        ledger_text(c)
            .lines()
            .any(|l| l.contains("\"NodeObserved\"") && l.contains("adm-test"))
            .then_some(())
    });
    // the taint eviction controller deletes such pods too: a finalizer keeps the object
    // (and the node's verdict in its status) until the test has read it
    let mut p = sleeper("untolerated");
    p.metadata.finalizers = Some(vec!["ledgerlet.test/keep".into()]);
    create(&admin, &p);
    let mut tolerating = sleeper("tolerating");
    tolerating.spec.as_mut().unwrap().tolerations =
        Some(vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("adm-test".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        }]);
    create(&admin, &tolerating);
    // a static pod (the node's --pod-manifest-path) is exempt: it runs on the tainted node
    let manifest = StaticPod::write(c, "static-untolerated");
    let message =
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate";
    rejected(&admin, "untolerated", "TaintToleration", message);
    running(&admin, "tolerating");
    let static_uid = manifest.wait_output(c, "static pod up");
    let rejections: Vec<_> = pod_records(c, &static_uid)
        .into_iter()
        .filter(|(kind, _)| kind == "PodRejected")
        .collect();
    assert!(rejections.is_empty(), "{rejections:?}");
    manifest.remove(c, &static_uid);
    drop(untaint);
    let pods = admin.api::<Pod>("default");
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    admin
        .run(pods.patch(
            "untolerated",
            &PatchParams::default(),
            &Patch::Merge(&release),
        ))
        .unwrap();
    delete(&admin, "untolerated");
    delete(&admin, "tolerating");
}

/// The pods bound to the node that the kubelet counts as active (not Failed or Succeeded),
/// once none of them is still terminating (a deleted pod counts until it is gone).
fn settled_active_pods(admin: &Kube) -> Vec<String> {
    let params = ListParams::default().fields(&format!("spec.nodeName={NODE}"));
    admin.wait_for("the node's deleted pods gone", 120, |k| {
        let list = k.run(k.api::<Pod>("default").list(&params)).ok()?;
        let active: Vec<&Pod> = list
            .items
            .iter()
            .filter(|p| !matches!(phase(p), Some("Failed" | "Succeeded")))
            .collect();
        if active
            .iter()
            .any(|p| p.metadata.deletion_timestamp.is_some())
        {
            return None;
        }
        Some(
            active
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect(),
        )
    })
}

/// AM-03 (`OutOfpods`): with `--max-pods` active pods on the node, one more is rejected with
/// the kubelet's message, and the pods already there keep running.
#[test]
fn a_pod_beyond_max_pods_fails_out_of_pods_and_the_running_pods_keep_running() {
    let Some(c) = cluster() else { return };
    let _alone = ALONE.write();
    let admin = c.admin();
    let before = settled_active_pods(&admin);
    assert!(before.len() < MAX_PODS, "{before:?}");
    let fill: Vec<String> = (0..MAX_PODS - before.len())
        .map(|i| format!("fill-{i}"))
        .collect();
    for name in &fill {
        create(&admin, &sleeper(name));
    }
    for name in &fill {
        running(&admin, name);
    }
    create(&admin, &sleeper("one-too-many"));
    let message = format!(
        "Node didn't have enough resource: pods, requested: 1, used: {MAX_PODS}, capacity: \
         {MAX_PODS}"
    );
    rejected(&admin, "one-too-many", "OutOfpods", &message);
    let pods = admin.api::<Pod>("default");
    for name in &fill {
        let p = admin.run(pods.get(name)).unwrap();
        assert_eq!(phase(&p), Some("Running"), "{name} keeps running");
    }
    delete(&admin, "one-too-many");
    for name in &fill {
        delete(&admin, name);
    }
    for name in &fill {
        gone(&admin, name);
    }
}

/// A sleeper whose container requests (and is limited to) `amount` of `resource`.
fn requesting(name: &str, resource: &str, amount: &str) -> Pod {
    let mut p = sleeper(name);
    let list = BTreeMap::from([(resource.to_string(), Quantity(amount.to_string()))]);
    p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        requests: Some(list.clone()),
        limits: Some(list),
        ..Default::default()
    });
    p
}

/// The Node's `status.<list>[resource]` as the API server has it.
fn node_resource(admin: &Kube, list: &str, resource: &str) -> Option<String> {
    let status = node(admin).status?;
    let list = match list {
        "capacity" => status.capacity,
        _ => status.allocatable,
    };
    Some(list?.get(resource)?.0.clone())
}

/// AM-03 with an extended resource: an admin advertises `example.com/widget: 2` in the
/// Node's capacity (as "Advertise Extended Resources for a Node" does); the node keeps it
/// and makes it allocatable; a pod requesting 1 runs, a second requesting 2 fails
/// `OutOfexample.com/widget`, and a pod requesting a resource the node does not advertise
/// is admitted (a cluster-level resource). Removed from capacity, it leaves allocatable.
#[test]
fn an_extended_resource_an_admin_advertises_is_allocatable_and_pods_beyond_it_fail() {
    let Some(c) = cluster() else { return };
    let _shared = ALONE.read();
    let admin = c.admin();
    let nodes = admin.all::<Node>();
    let advertise = serde_json::json!({"status": {"capacity": {"example.com/widget": "2"}}});
    admin
        .run(nodes.patch_status(NODE, &PatchParams::default(), &Patch::Merge(&advertise)))
        .unwrap();
    admin.wait_for("the widgets allocatable", 60, |k| {
        (node_resource(k, "allocatable", "example.com/widget")? == "2").then_some(())
    });
    create(&admin, &requesting("widget-one", "example.com/widget", "1"));
    running(&admin, "widget-one");
    create(&admin, &requesting("widget-two", "example.com/widget", "2"));
    let message = "Node didn't have enough resource: example.com/widget, requested: 2, used: 1, \
                   capacity: 2";
    rejected(&admin, "widget-two", "OutOfexample.com/widget", message);
    create(&admin, &requesting("gadget", "other.example/gadget", "5"));
    running(&admin, "gadget");
    let pods = admin.api::<Pod>("default");
    let one = admin.run(pods.get("widget-one")).unwrap();
    assert_eq!(phase(&one), Some("Running"), "the first keeps running");
    // the node's status updates since kept the admin's capacity
    assert_eq!(
        node_resource(&admin, "capacity", "example.com/widget").as_deref(),
        Some("2")
    );
    for name in ["widget-one", "widget-two", "gadget"] {
        delete(&admin, name);
    }
    let withdraw = serde_json::json!({"status": {"capacity": {"example.com/widget": null}}});
    admin
        .run(nodes.patch_status(NODE, &PatchParams::default(), &Patch::Merge(&withdraw)))
        .unwrap();
    admin.wait_for("the widgets no longer allocatable", 60, |k| {
        node_resource(k, "allocatable", "example.com/widget")
            .is_none()
            .then_some(())
    });
    for name in ["widget-one", "gadget"] {
        gone(&admin, name);
    }
}

/// A static pod in the node's manifest directory (`scripts/cluster.sh` runs the node with
/// `--pod-manifest-path DIR/manifests`), removed when dropped.
struct StaticPod {
    path: std::path::PathBuf,
    name: String,
}

impl StaticPod {
    /// Writes the manifest of a pod `name` that prints "static pod up" and sleeps.
    fn write(c: &RealCluster, name: &str) -> StaticPod {
        let manifest = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "main",
                    "image": support::on_containerd::IMAGE,
                    "command": ["sh", "-c", "echo static pod up; trap 'exit 0' TERM; sleep 3600 & wait"]
                }]
            }
        });
        let path = c.dir.join("manifests").join(format!("{name}.json"));
        std::fs::write(&path, manifest.to_string()).expect("write the manifest");
        StaticPod {
            path,
            name: format!("{name}-{NODE}"),
        }
    }

    /// Waits until its container has written `line` to its log in the node's pod log
    /// directory (`default_<name>_<uid>/main/0.log`); returns the pod's UID.
    fn wait_output(&self, c: &RealCluster, line: &str) -> String {
        let logs = c.dir.join("node/pod-logs");
        let prefix = format!("default_{}_", self.name);
        let admin = c.admin();
        admin.wait_for(&format!("{} to write {line:?}", self.name), 90, |_| {
            std::fs::read_dir(&logs).ok()?.flatten().find_map(|e| {
                let dir = e.file_name().to_string_lossy().to_string();
                let uid = dir.strip_prefix(&prefix)?.to_string();
                let text = std::fs::read_to_string(e.path().join("main/0.log")).ok()?;
                text.contains(line).then_some(uid)
            })
        })
    }

    /// Removes the manifest and waits until the node has finished the pod (its
    /// `SyncTerminatedPod`) and deleted its mirror pod, so it no longer counts as active.
    fn remove(self, c: &RealCluster, uid: &str) {
        let _ = std::fs::remove_file(&self.path);
        let admin = c.admin();
        admin.wait_for(&format!("{} finished", self.name), 90, |_| {
            pod_records(c, uid)
                .iter()
                .any(|(kind, e)| kind == "SyncFinished" && e["work"] == "terminated")
                .then_some(())
        });
        gone(&admin, &self.name);
    }
}

impl Drop for StaticPod {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes the node's taints when dropped (also when the test fails), and waits until the
/// node has recorded that, so the tests after it see an untainted node.
struct Untaint<'a>(&'a RealCluster);

impl Drop for Untaint<'_> {
    fn drop(&mut self) {
        let admin = self.0.admin();
        let untaint = serde_json::json!({"spec": {"taints": null}});
        let nodes = admin.all::<Node>();
        let _ = admin.run(nodes.patch(NODE, &PatchParams::default(), &Patch::Merge(&untaint)));
        admin.wait_for("the node to record the taint's removal", 30, |_| {
            let text = ledger_text(self.0);
            let last = text.lines().rfind(|l| l.contains("\"NodeObserved\""))?;
            (!last.contains("adm-test")).then_some(())
        });
    }
}
