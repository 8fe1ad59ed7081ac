//! What a container sees of its node's naming and what it leaves behind, as on a kubelet-run
//! node, on a real control plane with containerd: its `/etc/resolv.conf` per `dnsPolicy`
//! and `dnsConfig` (the node runs with `--cluster-dns 10.96.0.10 --cluster-domain
//! cluster.local`, as a kubeadm node), the kubelet-managed `/etc/hosts`, termination
//! messages (the file, and the log's end with `FallbackToLogsOnError`), and the
//! RuntimeClass handler its sandbox runs with. Every check reads what the container printed
//! or what the API and the runtime report.

mod support;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{ListParams, PostParams};
use ledgerlet::cri::{v1, CriClient, CriClientOptions};
use support::on_containerd::{main_status, phase, pod_ip, IMAGE};
use support::real_cluster::{Kube, RealCluster};

const NODE: &str = "dns-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd(NODE)
}

/// A pod bound to the node, no service-account token, never restarted, from `spec` (its
/// `containers` use the test image unless they name one).
fn pod(name: &str, mut spec: serde_json::Value) -> Pod {
    for c in spec["containers"].as_array_mut().expect("containers") {
        c.as_object_mut()
            .unwrap()
            .entry("image")
            .or_insert(IMAGE.into());
    }
    let spec = spec.as_object_mut().unwrap();
    spec.entry("nodeName").or_insert(NODE.into());
    spec.insert("automountServiceAccountToken".into(), false.into());
    spec.insert("terminationGracePeriodSeconds".into(), 1.into());
    spec.insert("restartPolicy".into(), "Never".into());
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

/// One container `main` running `sh -c script`.
fn one(script: &str) -> serde_json::Value {
    serde_json::json!([{"name": "main", "command": ["sh", "-c", script]}])
}

/// Creates `p` and waits until it has ended (Succeeded or Failed) → the pod.
fn run_to_end(admin: &Kube, p: &Pod) -> Pod {
    let pods = admin.api::<Pod>("default");
    let name = p.metadata.name.clone().unwrap();
    let _ = admin.run(pods.delete(&name, &Default::default()));
    admin.wait_for(&format!("{name} gone before it is created"), 60, |k| {
        k.run(pods.get_opt(&name)).ok()?.is_none().then_some(())
    });
    admin
        .run(pods.create(&PostParams::default(), p))
        .expect("create pod");
    admin.wait_for(&format!("{name} ended"), 120, |k| {
        let p = k.run(pods.get(&name)).ok()?;
        matches!(phase(&p), Some("Succeeded") | Some("Failed")).then_some(p)
    })
}

/// What the pod's container `main` printed: its CRI log file in the node's pod log
/// directory, without the time, stream and tag of each line. (The API server's `pods/log`
/// needs the node's HTTPS API, which this test bed's node does not serve.)
fn log(c: &RealCluster, p: &Pod) -> String {
    let dir = c.dir.join("node/pod-logs").join(format!(
        "default_{}_{}",
        p.metadata.name.as_deref().unwrap(),
        p.metadata.uid.as_deref().unwrap()
    ));
    let text = std::fs::read_to_string(dir.join("main/0.log"))
        .unwrap_or_else(|e| panic!("the log in {}: {e}", dir.display()));
    let mut out = String::new();
    for line in text.lines() {
        let mut fields = line.splitn(4, ' ');
        let (_, _, tag) = (fields.next(), fields.next(), fields.next());
        out.push_str(fields.next().unwrap_or_default());
        if tag != Some("P") {
            out.push('\n');
        }
    }
    out
}

/// `status.containerStatuses[name].state.terminated.message`.
fn terminated_message(p: &Pod, container: &str) -> Option<String> {
    let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
    let s = statuses.iter().find(|s| s.name == container)?;
    s.state.as_ref()?.terminated.as_ref()?.message.clone()
}

fn delete(admin: &Kube, name: &str) {
    let _ = admin.run(
        admin
            .api::<Pod>("default")
            .delete(name, &Default::default()),
    );
}

/// The node's resolv.conf nameservers (what `dnsPolicy: Default` pods get).
fn node_nameservers() -> Vec<String> {
    std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver "))
        .map(|s| s.trim().to_string())
        .collect()
}

/// PC-01: `ClusterFirst`, the default.
#[test]
fn a_cluster_first_pod_resolves_through_the_cluster_dns_with_the_namespace_search_path() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let p = run_to_end(
        &admin,
        &pod(
            "dns-cluster-first",
            serde_json::json!({"containers": one("cat /etc/resolv.conf")}),
        ),
    );
    assert_eq!(phase(&p), Some("Succeeded"));
    let conf = log(c, &p);
    let lines: Vec<&str> = conf.lines().map(str::trim).collect();
    assert!(lines.contains(&"nameserver 10.96.0.10"), "{conf}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("nameserver")).count(),
        1,
        "the cluster DNS is the only nameserver:\n{conf}"
    );
    let search = lines
        .iter()
        .find(|l| l.starts_with("search "))
        .unwrap_or_else(|| panic!("no search line in\n{conf}"));
    assert!(
        search.starts_with("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{conf}"
    );
    assert!(lines.contains(&"options ndots:5"), "{conf}");
    delete(&admin, "dns-cluster-first");
}

/// PC-01: `None` with `dnsConfig`, and `Default`.
#[test]
fn dns_policy_none_takes_only_the_pod_dns_config_and_default_takes_the_nodes_resolver() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let none = pod(
        "dns-none",
        serde_json::json!({
            "dnsPolicy": "None",
            "dnsConfig": {
                "nameservers": ["192.0.2.53"],
                "searches": ["corp.example"],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]
            },
            "containers": one("cat /etc/resolv.conf")
        }),
    );
    let p = run_to_end(&admin, &none);
    assert_eq!(phase(&p), Some("Succeeded"));
    let conf = log(c, &p);
    let lines: Vec<&str> = conf.lines().map(str::trim).collect();
    assert!(lines.contains(&"nameserver 192.0.2.53"), "{conf}");
    assert!(!conf.contains("10.96.0.10"), "{conf}");
    assert!(lines.contains(&"search corp.example"), "{conf}");
    let options = lines
        .iter()
        .find(|l| l.starts_with("options "))
        .unwrap_or_else(|| panic!("no options line in\n{conf}"));
    assert!(
        options.contains("ndots:2") && options.contains("edns0"),
        "{conf}"
    );
    delete(&admin, "dns-none");

    let default = pod(
        "dns-default",
        serde_json::json!({"dnsPolicy": "Default", "containers": one("cat /etc/resolv.conf")}),
    );
    let p = run_to_end(&admin, &default);
    assert_eq!(phase(&p), Some("Succeeded"));
    let conf = log(c, &p);
    assert!(!conf.contains("10.96.0.10"), "{conf}");
    assert!(!conf.contains("svc.cluster.local"), "{conf}");
    for ns in node_nameservers().iter().take(3) {
        assert!(
            conf.contains(&format!("nameserver {ns}")),
            "{ns} in\n{conf}"
        );
    }
    delete(&admin, "dns-default");
}

/// PC-03 for a pod with its own network.
#[test]
fn a_pods_etc_hosts_holds_its_ip_hostname_fully_qualified_name_and_host_aliases() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let p = pod(
        "hosts-pod",
        serde_json::json!({
            "hostname": "db",
            "subdomain": "peers",
            "hostAliases": [
                {"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]},
                {"ip": "10.1.2.3", "hostnames": ["foo.remote"]}
            ],
            "containers": one("cat /etc/hosts")
        }),
    );
    let p = run_to_end(&admin, &p);
    assert_eq!(phase(&p), Some("Succeeded"));
    let ip = pod_ip(&p).expect("the pod's IP");
    let hosts = log(c, &p);
    assert!(
        hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"),
        "{hosts}"
    );
    assert!(
        hosts.contains(&format!("\n{ip}\tdb.peers.default.svc.cluster.local\tdb\n")),
        "{hosts}"
    );
    assert!(
        hosts.ends_with(
            "\n# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n10.1.2.3\tfoo.remote\n"
        ),
        "{hosts}"
    );
    delete(&admin, "hosts-pod");
}

/// PC-03: the kernel hostname, short or (`setHostnameAsFQDN`) fully qualified.
#[test]
fn a_pods_hostname_is_its_spec_hostname_or_with_set_hostname_as_fqdn_its_full_name() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    for (name, fqdn, want) in [
        ("hostname-short", false, "db"),
        ("hostname-fqdn", true, "db.peers.default.svc.cluster.local"),
    ] {
        let p = pod(
            name,
            serde_json::json!({
                "hostname": "db",
                "subdomain": "peers",
                "setHostnameAsFQDN": fqdn,
                "containers": one("hostname")
            }),
        );
        let p = run_to_end(&admin, &p);
        assert_eq!(phase(&p), Some("Succeeded"));
        assert_eq!(log(c, &p).trim(), want);
        delete(&admin, name);
    }
}

/// PC-03: a fully qualified hostname over 64 characters fails the sandbox, not the node.
#[test]
fn a_pod_whose_fully_qualified_hostname_is_too_long_gets_no_sandbox_and_says_why() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let pods = admin.api::<Pod>("default");
    let p = pod(
        "fqdn-too-long",
        serde_json::json!({
            "hostname": "a-rather-long-host-name",
            "subdomain": "an-even-longer-subdomain-name",
            "setHostnameAsFQDN": true,
            "containers": one("true")
        }),
    );
    let _ = admin.run(pods.delete("fqdn-too-long", &Default::default()));
    admin.wait_for("fqdn-too-long gone before it is created", 60, |k| {
        k.run(pods.get_opt("fqdn-too-long"))
            .ok()?
            .is_none()
            .then_some(())
    });
    admin
        .run(pods.create(&PostParams::default(), &p))
        .expect("create pod");
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=fqdn-too-long");
    let message = admin.wait_for("the FailedCreatePodSandBox event", 90, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedCreatePodSandBox"))
            .and_then(|e| e.message)
    });
    assert!(
        message.starts_with("Failed to create pod sandbox: ")
            && message.contains("failed to construct FQDN from pod hostname and cluster domain")
            && message.contains("is too long (64 characters is the max, 79 characters requested)"),
        "{message}"
    );
    let p = admin.run(pods.get("fqdn-too-long")).expect("the pod");
    assert_eq!(phase(&p), Some("Pending"));
    // the node runs other pods meanwhile
    let other = run_to_end(
        &admin,
        &pod("fqdn-other", serde_json::json!({"containers": one("true")})),
    );
    assert_eq!(phase(&other), Some("Succeeded"));
    delete(&admin, "fqdn-too-long");
    delete(&admin, "fqdn-other");
}

/// PC-03 on the host network (kubelet 1.31+: the file does not wait for a pod IP).
#[test]
fn a_host_network_pods_etc_hosts_is_the_nodes_with_its_host_aliases() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let p = pod(
        "hosts-hostnet",
        serde_json::json!({
            "hostNetwork": true,
            "hostAliases": [{"ip": "10.9.8.7", "hostnames": ["alias.hostnet"]}],
            "containers": one("cat /etc/hosts")
        }),
    );
    let p = run_to_end(&admin, &p);
    assert_eq!(phase(&p), Some("Succeeded"));
    let hosts = log(c, &p);
    let node = std::fs::read_to_string("/etc/hosts").expect("the node's /etc/hosts");
    assert_eq!(
        hosts,
        format!(
            "# Kubernetes-managed hosts file (host network).\n{node}\n\
             # Entries added by HostAliases.\n10.9.8.7\talias.hostnet\n"
        )
    );
    delete(&admin, "hosts-hostnet");
}

/// VO-05: the file, and its 4096-byte bound.
#[test]
fn a_container_that_writes_its_termination_message_reports_it_when_it_ends() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let p = pod(
        "term-msg",
        serde_json::json!({"containers": [
            {"name": "main", "command": ["sh", "-c", "printf bye-from-main > /dev/termination-log"]},
            // a custom path, and a message over the 4096-byte bound: its end is kept
            {"name": "long", "terminationMessagePath": "/tmp/why",
             "command": ["sh", "-c", "for i in $(seq 1 1000); do printf xxxxx; done > /tmp/why; printf THE-END >> /tmp/why; exit 2"]}
        ]}),
    );
    let p = run_to_end(&admin, &p);
    assert_eq!(phase(&p), Some("Failed"));
    assert_eq!(
        terminated_message(&p, "main").as_deref(),
        Some("bye-from-main")
    );
    let long = terminated_message(&p, "long").expect("long's message");
    assert_eq!(long.len(), 4096, "{long}");
    assert!(long.ends_with("xxTHE-END"), "{long}");
    // the terminated pod's directory (and the files) go; the messages stay in its status
    let dir = c
        .dir
        .join("node/pods")
        .join(p.metadata.uid.as_deref().unwrap());
    admin.wait_for("the terminated pod's directory removed", 60, |_| {
        (!dir.exists()).then_some(())
    });
    std::thread::sleep(std::time::Duration::from_secs(12));
    let p = admin
        .run(admin.api::<Pod>("default").get("term-msg"))
        .unwrap();
    assert_eq!(
        terminated_message(&p, "main").as_deref(),
        Some("bye-from-main")
    );
    delete(&admin, "term-msg");
}

/// VO-05: `FallbackToLogsOnError`.
#[test]
fn a_failed_container_with_fallback_to_logs_on_error_reports_the_end_of_its_log() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let p = pod(
        "term-fallback",
        serde_json::json!({"containers": [
            {"name": "main", "terminationMessagePolicy": "FallbackToLogsOnError",
             "command": ["sh", "-c", "for i in $(seq 1 100); do echo line $i; done; exit 3"]},
            // it succeeded: no message, whatever its log
            {"name": "ok", "terminationMessagePolicy": "FallbackToLogsOnError",
             "command": ["sh", "-c", "echo all good"]}
        ]}),
    );
    let p = run_to_end(&admin, &p);
    assert_eq!(phase(&p), Some("Failed"));
    let msg = terminated_message(&p, "main").expect("main's message");
    // the last 80 lines
    assert!(msg.starts_with("line 21\n"), "{msg}");
    assert!(msg.ends_with("line 99\nline 100\n"), "{msg}");
    assert_eq!(terminated_message(&p, "ok"), None);
    let main = main_status(&p).expect("main's status");
    assert_eq!(
        main.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        3
    );
    delete(&admin, "term-fallback");
}

/// The runtime handler containerd reports for the pod's newest sandbox (CRI
/// `PodSandboxStatus.runtime_handler`, what `crictl inspectp` shows).
fn sandbox_handler(c: &RealCluster, uid: &str) -> Option<String> {
    let endpoint = format!(
        "unix://{}",
        c.dir.join("containerd/containerd.sock").display()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cri = CriClient::connect(&endpoint, CriClientOptions::default())
            .await
            .ok()?;
        let filter = v1::PodSandboxFilter {
            label_selector: [("io.kubernetes.pod.uid".to_string(), uid.to_string())].into(),
            ..Default::default()
        };
        let mut sandboxes = cri.list_pod_sandbox(Some(filter)).await.ok()?;
        sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        let status = cri
            .pod_sandbox_status(&sandboxes.first()?.id, false)
            .await
            .ok()?;
        Some(status.status?.runtime_handler)
    })
}

fn runtime_class(name: &str, handler: &str) -> RuntimeClass {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "handler": handler,
    }))
    .unwrap()
}

/// PC-04: the handler containerd ran the sandbox with.
#[test]
fn a_pod_of_a_runtime_class_runs_its_sandbox_with_the_class_handler() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let classes = admin.all::<RuntimeClass>();
    let _ = admin.run(classes.create(
        &PostParams::default(),
        &runtime_class("test-class", "ledgerlet-test"),
    ));
    let p = pod(
        "rc-pod",
        serde_json::json!({"runtimeClassName": "test-class", "containers": one("echo ran")}),
    );
    let p = run_to_end(&admin, &p);
    assert_eq!(phase(&p), Some("Succeeded"));
    assert_eq!(log(c, &p).trim(), "ran");
    let uid = p.metadata.uid.clone().unwrap();
    assert_eq!(
        sandbox_handler(c, &uid).as_deref(),
        Some("ledgerlet-test"),
        "the handler containerd ran the sandbox with"
    );
    // a pod without a class runs with the runtime's default handler
    let plain = run_to_end(
        &admin,
        &pod("rc-plain", serde_json::json!({"containers": one("true")})),
    );
    let uid = plain.metadata.uid.clone().unwrap();
    assert_eq!(sandbox_handler(c, &uid).as_deref(), Some(""));
    delete(&admin, "rc-pod");
    delete(&admin, "rc-plain");
}

/// PC-04: a missing RuntimeClass.
#[test]
fn a_pod_whose_runtime_class_is_gone_gets_no_sandbox_and_a_failed_create_pod_sandbox_event() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let classes = admin.all::<RuntimeClass>();
    let pods = admin.api::<Pod>("default");
    admin
        .run(classes.create(&PostParams::default(), &runtime_class("gone-class", "runc")))
        .expect("create RuntimeClass");
    // created unscheduled (the API server's RuntimeClass admission wants the class to
    // exist), the class deleted, then bound to the node: the node finds no class
    let mut p = pod(
        "rc-gone",
        serde_json::json!({
            "nodeName": "",
            "schedulerName": "nobody",
            "runtimeClassName": "gone-class",
            "containers": one("echo never")
        }),
    );
    p.spec.as_mut().unwrap().node_name = None;
    let _ = admin.run(pods.delete("rc-gone", &Default::default()));
    admin.wait_for("rc-gone gone before it is created", 60, |k| {
        k.run(pods.get_opt("rc-gone")).ok()?.is_none().then_some(())
    });
    admin
        .run(pods.create(&PostParams::default(), &p))
        .expect("create pod");
    admin
        .run(classes.delete("gone-class", &Default::default()))
        .expect("delete RuntimeClass");
    let binding = serde_json::json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "rc-gone", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}
    });
    admin
        .run(pods.create_subresource::<_, serde_json::Value>(
            "binding",
            "rc-gone",
            &PostParams::default(),
            &binding,
        ))
        .expect("bind the pod to the node");
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=rc-gone");
    let message = admin.wait_for("the FailedCreatePodSandBox event", 90, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedCreatePodSandBox"))
            .and_then(|e| e.message)
    });
    assert_eq!(
        message,
        "Failed to create pod sandbox: runtimeclass.node.k8s.io \"gone-class\" not found"
    );
    let p = admin.run(pods.get("rc-gone")).expect("the pod");
    assert_eq!(phase(&p), Some("Pending"));
    let uid = p.metadata.uid.clone().unwrap();
    assert_eq!(sandbox_handler(c, &uid), None, "no sandbox");
    delete(&admin, "rc-gone");
}

/// PC-05: a missing pull secret does not stop a pod whose image is there.
#[test]
fn a_pod_with_a_missing_image_pull_secret_runs_and_gets_a_failed_to_retrieve_warning() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let p = pod(
        "pull-secret-missing",
        serde_json::json!({
            "imagePullSecrets": [{"name": "no-such-secret"}],
            "containers": one("true")
        }),
    );
    let p = run_to_end(&admin, &p);
    assert_eq!(phase(&p), Some("Succeeded"));
    let events = admin.api::<Event>("default");
    let params = ListParams::default().fields("involvedObject.name=pull-secret-missing");
    let message = admin.wait_for("the FailedToRetrieveImagePullSecret event", 60, |k| {
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedToRetrieveImagePullSecret")
                    && e.type_.as_deref() == Some("Warning")
            })
            .and_then(|e| e.message)
    });
    assert_eq!(
        message,
        "Unable to retrieve some image pull secrets (no-such-secret); attempting to pull the \
         image may not succeed."
    );
    delete(&admin, "pull-secret-missing");
}

/// A registry stand-in on the loopback (containerd speaks plain HTTP to 127.0.0.1): every
/// request without credentials gets a Basic challenge, every one with them a 404. Returns
/// its port and the `Authorization` headers it saw.
fn challenging_registry() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut reader = BufReader::new(&stream);
            let mut auth = None;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("authorization") {
                        auth = Some(v.trim().to_string());
                    }
                }
                line.clear();
            }
            let reply = match &auth {
                None => {
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\n\
                         Content-Length: 0\r\nConnection: close\r\n\r\n"
                }
                Some(_) => {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                }
            };
            if let Some(a) = auth {
                out.lock().unwrap().push(a);
            }
            let _ = (&stream).write_all(reply.as_bytes());
        }
    });
    (port, seen)
}

/// PC-05: the matching `imagePullSecrets` credentials go to the registry with the pull, and
/// stay out of the node's records, log and events.
#[test]
fn a_pull_sends_the_image_pull_secret_credentials_and_they_stay_secret() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let (port, seen) = challenging_registry();
    let password = "pull-pass-7f3a9c";
    let config = serde_json::json!({"auths": {
        format!("127.0.0.1:{port}"): {"username": "puller", "password": password}
    }});
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "regcred", "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()}
    }))
    .unwrap();
    let secrets = admin.api::<k8s_openapi::api::core::v1::Secret>("default");
    let _ = admin.run(secrets.delete("regcred", &Default::default()));
    admin
        .run(secrets.create(&PostParams::default(), &secret))
        .expect("create the pull secret");
    let pods = admin.api::<Pod>("default");
    let p = pod(
        "pull-with-secret",
        serde_json::json!({
            "imagePullSecrets": [{"name": "regcred"}],
            "containers": [{
                "name": "main",
                "image": format!("127.0.0.1:{port}/private/app:1"),
                "imagePullPolicy": "Always",
                "command": ["true"]
            }]
        }),
    );
    let _ = admin.run(pods.delete("pull-with-secret", &Default::default()));
    admin.wait_for("pull-with-secret gone before it is created", 60, |k| {
        k.run(pods.get_opt("pull-with-secret"))
            .ok()?
            .is_none()
            .then_some(())
    });
    admin
        .run(pods.create(&PostParams::default(), &p))
        .expect("create pod");
    let reason = admin.wait_for("the pull to fail", 90, |k| {
        let p = k.run(pods.get("pull-with-secret")).ok()?;
        let waiting = main_status(&p)?.state.as_ref()?.waiting.as_ref()?;
        waiting
            .reason
            .clone()
            .filter(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
    });
    assert!(reason.contains("ImagePull"), "{reason}");
    let expected = format!(
        "Basic {}",
        base64_encode(format!("puller:{password}").as_bytes())
    );
    assert!(
        seen.lock().unwrap().contains(&expected),
        "the registry saw {:?}",
        seen.lock().unwrap()
    );
    let ledger = support::on_containerd::ledger_text(c);
    assert!(!ledger.contains(password), "the password in the ledger");
    let log = support::on_containerd::agent_log(c);
    assert!(!log.contains(password), "the password in the agent's log");
    let events = admin
        .run(admin.api::<Event>("default").list(&ListParams::default()))
        .unwrap();
    assert!(!format!("{:?}", events.items).contains(password));
    delete(&admin, "pull-with-secret");
    let _ = admin.run(secrets.delete("regcred", &Default::default()));
}

fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// PC-02: `MissingClusterDNS` is recorded on the pod and, without the pod's prefix, on the
/// node (the core's fold of the warning the shell reports).
#[test]
fn missing_cluster_dns_is_recorded_on_the_pod_and_on_the_node() {
    use ledgerlet::core::command::{Command, EventType};
    use ledgerlet::core::config::{CoreConfig, PodSource};
    use ledgerlet::core::record::event::{
        ActionOutcome, PodConfigChange, RuntimeAction, RuntimeActionFinished, SourceReady,
    };
    use ledgerlet::core::record::Event as Record;
    use support::core_harness::{pod as core_pod, Harness};

    let mut h = Harness::with_config(CoreConfig {
        node_name: "n1".into(),
        sources: vec![PodSource::Api],
        ..CoreConfig::default()
    });
    h.submit(Record::SourceReady(SourceReady {
        source: PodSource::Api,
    }));
    h.submit(Record::PodAdded(PodConfigChange {
        source: PodSource::Api,
        pod: core_pod("a", "web", "ns").build(),
    }));
    h.drain();
    let node_message = "kubelet does not have ClusterDNS IP configured and cannot create Pod \
                        using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
    let pod_message = format!("pod: \"web_ns(a)\". {node_message}");
    let cmds = h.submit(Record::RuntimeActionFinished(RuntimeActionFinished {
        uid: "a".into(),
        sync_id: 1,
        action: RuntimeAction::PodConfigWarning {
            reason: "MissingClusterDNS".into(),
            message: pod_message.clone(),
        },
        outcome: ActionOutcome::Ok {
            id: None,
            detail: None,
        },
        duration_ms: 0,
    }));
    let events: Vec<(String, String, EventType, String, String)> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::RecordEvent(e) => Some((
                e.object.kind.clone(),
                e.object.name.clone(),
                e.event_type,
                e.reason.clone(),
                e.message.clone(),
            )),
            _ => None,
        })
        .collect();
    let warning = |kind: &str, name: &str, message: &str| {
        (
            kind.to_string(),
            name.to_string(),
            EventType::Warning,
            "MissingClusterDNS".to_string(),
            message.to_string(),
        )
    };
    assert!(
        events.contains(&warning("Pod", "web", &pod_message)),
        "{events:?}"
    );
    assert!(
        events.contains(&warning("Node", "n1", node_message)),
        "{events:?}"
    );
}

/// PC-06: a container's `hostPort` answers on the node's address.
#[test]
fn a_container_host_port_answers_on_the_nodes_address() {
    use std::io::{Read, Write};
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    // the node's address: the one the API server advertises for the kubernetes Service
    let endpoints = admin
        .run(
            admin
                .api::<k8s_openapi::api::core::v1::Endpoints>("default")
                .get("kubernetes"),
        )
        .expect("the kubernetes endpoints");
    let node_ip: std::net::Ipv4Addr = endpoints.subsets.unwrap()[0].addresses.as_ref().unwrap()[0]
        .ip
        .parse()
        .unwrap();
    let host_port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pods = admin.api::<Pod>("default");
    let mut p = pod(
        "host-port",
        serde_json::json!({"containers": [{
            "name": "main",
            "command": ["sh", "-c", "mkdir -p /www && echo via-host-port > /www/index.html && exec httpd -f -p 8080 -h /www"],
            "ports": [{"containerPort": 8080, "hostPort": host_port}]
        }]}),
    );
    p.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    let _ = admin.run(pods.delete("host-port", &Default::default()));
    admin.wait_for("host-port gone before it is created", 60, |k| {
        k.run(pods.get_opt("host-port"))
            .ok()?
            .is_none()
            .then_some(())
    });
    admin
        .run(pods.create(&PostParams::default(), &p))
        .expect("create pod");
    admin.wait_for("host-port running", 90, |k| {
        let p = k.run(pods.get("host-port")).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
    let body = admin.wait_for(&format!("{node_ip}:{host_port} answering"), 60, |_| {
        let addr = (node_ip, host_port).into();
        let mut s =
            std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .ok()?;
        write!(s, "GET / HTTP/1.0\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.contains("via-host-port").then_some(out)
    });
    assert!(body.contains(" 200 OK"), "{body}");
    delete(&admin, "host-port");
}
