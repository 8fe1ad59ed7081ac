//! RT-46 on containerd: while the runtime's pod network is not ready (its CNI configuration
//! removed), the node goes NotReady, a pod without the host network is not started and gets
//! the kubelet's Warning `NetworkNotReady`, and a host-network pod still starts; once the
//! configuration is back, the waiting pod starts. It takes the network of the node away, so
//! it runs on a cluster of its own (this test binary's).

mod support;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, PostParams};
use support::on_containerd::{bound_pod, main_status, phase};
use support::real_cluster::{node_ready, RealCluster};

const NODE: &str = "net-node";

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
    let admin = c.admin();
    admin.wait_node_ready(NODE);
    let nodes = admin.all::<Node>();
    let conf = c.dir.join("containerd/cni/conf/10-containerd-net.conflist");
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
