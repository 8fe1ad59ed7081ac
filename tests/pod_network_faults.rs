//! Faults of the pod network on containerd, made by changing the CNI configuration containerd
//! loads (so they run on a cluster of their own, this test binary's, one at a time):
//! - RT-46: while the network is not ready (no configuration), the node goes NotReady, a pod
//!   without the host network is not started and gets the kubelet's Warning
//!   `NetworkNotReady`, and a host-network pod still starts; once the configuration is back,
//!   the waiting pod starts.
//! - RT-43: a sandbox that cannot be stopped (its network's CNI plugin cannot be found for
//!   the teardown) fails the pod's kill with the kubelet's Warning `FailedToKillPod`; the kill
//!   is retried and the pod goes once the network can be torn down.

mod support;

use std::path::PathBuf;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, PostParams};
use support::on_containerd::{bound_pod, main_status, phase};
use support::real_cluster::{node_ready, RealCluster};

const NODE: &str = "net-node";

/// One CNI fault at a time.
static CNI: Mutex<()> = Mutex::new(());

fn conf_path(c: &RealCluster) -> PathBuf {
    c.dir.join("containerd/cni/conf/10-containerd-net.conflist")
}

/// The CNI configuration containerd rendered, moved out of its configuration directory;
/// written back when dropped (containerd reloads on a rename or a write, not on a create).
struct CniConfAway {
    conf: PathBuf,
    content: Vec<u8>,
}

impl CniConfAway {
    fn take(conf: PathBuf) -> CniConfAway {
        let content = std::fs::read(&conf).expect("read the CNI configuration");
        let away = conf.with_extension("away");
        std::fs::rename(&conf, &away).expect("move the CNI configuration away");
        std::fs::remove_file(&away).expect("remove the moved CNI configuration");
        CniConfAway { conf, content }
    }
}

impl Drop for CniConfAway {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.conf, &self.content);
    }
}

fn running(p: &Pod) -> bool {
    main_status(p)
        .and_then(|s| s.state.as_ref()?.running.as_ref())
        .is_some()
}

#[test]
fn while_the_pod_network_is_not_ready_only_host_network_pods_start() {
    let Some(c) = RealCluster::shared_containerd(NODE) else {
        return;
    };
    let _one = CNI.lock().unwrap_or_else(|e| e.into_inner());
    let admin = c.admin();
    admin.wait_node_ready(NODE);
    let nodes = admin.all::<Node>();
    let conf = conf_path(c);
    admin.wait_for("containerd's rendered CNI configuration", 60, |_| {
        conf.exists().then_some(())
    });
    let away = CniConfAway::take(conf);
    let message = admin.wait_for("the node NotReady for its network", 60, |k| {
        let n = k.run(nodes.get(NODE)).ok()?;
        let ready = n.status.as_ref()?.conditions.as_ref()?;
        let ready = ready.iter().find(|c| c.type_ == "Ready")?;
        (ready.status == "False").then(|| ready.message.clone().unwrap_or_default())
    });
    assert!(
        message.contains("container runtime network not ready"),
        "{message}"
    );

    let pods = admin.api::<Pod>("default");
    let looping = "trap 'exit 0' TERM; while true; do sleep 0.1; done";
    let waits = bound_pod(NODE, "waits-for-network", looping, 1, "Always");
    let mut host = bound_pod(NODE, "host-network", looping, 1, "Always");
    host.spec.as_mut().unwrap().host_network = Some(true);
    for p in [&waits, &host] {
        admin.run(pods.create(&PostParams::default(), p)).unwrap();
    }
    admin.wait_for("the host-network pod running", 120, |k| {
        running(&k.run(pods.get("host-network")).ok()?).then_some(())
    });
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=waits-for-network");
    let event = admin.wait_for("NetworkNotReady on the waiting pod", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("NetworkNotReady"))
    });
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let text = event.message.unwrap_or_default();
    assert!(
        text.starts_with("network is not ready: container runtime network not ready"),
        "{text}"
    );
    let p = admin.run(pods.get("waits-for-network")).unwrap();
    assert_eq!(phase(&p), Some("Pending"));
    assert!(!running(&p), "started without a network: {:#?}", p.status);

    drop(away);
    admin.wait_for(
        "the waiting pod running once the network is back",
        120,
        |k| running(&k.run(pods.get("waits-for-network")).ok()?).then_some(()),
    );
    let n = admin.wait_node_ready(NODE);
    assert_eq!(node_ready(&n).as_deref(), Some("True"));
    for name in ["waits-for-network", "host-network"] {
        let _ = admin.run(pods.delete(name, &Default::default()));
    }
}

#[test]
fn a_sandbox_that_cannot_be_stopped_fails_the_kill_with_failed_to_kill_pod_until_it_can() {
    let Some(c) = RealCluster::shared_containerd(NODE) else {
        return;
    };
    let _one = CNI.lock().unwrap_or_else(|e| e.into_inner());
    let admin = c.admin();
    admin.wait_node_ready(NODE);
    let pods = admin.api::<Pod>("default");
    let looping = "trap 'exit 0' TERM; while true; do sleep 0.1; done";
    let pod = bound_pod(NODE, "stuck-network", looping, 1, "Always");
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    admin.wait_for("stuck-network running", 120, |k| {
        running(&k.run(pods.get("stuck-network")).ok()?).then_some(())
    });
    // the network's teardown now names a plugin that is not installed
    let conf = conf_path(c);
    let good = std::fs::read_to_string(&conf).expect("read the CNI configuration");
    assert!(good.contains(r#""type": "bridge""#), "{good}");
    let broken = good.replace(r#""type": "bridge""#, r#""type": "ledgerlet-missing""#);
    std::fs::write(&conf, broken).expect("write the broken CNI configuration");
    // containerd reloads on the write (fsnotify); give it a moment before the kill
    std::thread::sleep(std::time::Duration::from_secs(2));
    admin
        .run(pods.delete("stuck-network", &Default::default()))
        .unwrap();
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=stuck-network");
    let event = admin.wait_for("FailedToKillPod on the pod", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedToKillPod"))
    });
    std::fs::write(&conf, &good).expect("write the CNI configuration back");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let text = event.message.unwrap_or_default();
    assert!(
        text.starts_with(r#"error killing pod: failed to "KillPodSandbox" for ""#)
            && text.contains("with KillPodSandboxError: ")
            && text.contains("ledgerlet-missing"),
        "{text}"
    );
    admin.wait_for("the pod gone once its network can be torn down", 120, |k| {
        k.run(pods.get_opt("stuck-network"))
            .ok()?
            .is_none()
            .then_some(())
    });
}
