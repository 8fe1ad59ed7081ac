//! A container's environment on a real control plane with containerd, as a kubelet-run node
//! gives it (`makeEnvironmentVariables` of the pinned release): ConfigMap and Secret
//! references, `fieldRef`, `resourceFieldRef`, `envFrom` with `prefix`, `$(VAR)` expansion of
//! env and command, service links, and the failure of a missing non-optional ConfigMap.
//! Each container prints `env`; the test reads what it printed from its log file on the
//! node. Each test has its own namespace, so service links do not mix.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, Service};
use kube::api::{ListParams, PostParams};
use ledgerlet::core::record::event::{ActionOutcome, RuntimeAction};
use ledgerlet::core::record::Event as Record;
use support::agent::Agent;
use support::fault_proxy::FaultProxy;
use support::on_containerd::{agent_log, ledger_text, main_status, phase, IMAGE};
use support::real_cluster::{Kube, RealCluster};

const NODE: &str = "env-node";

fn cluster() -> Option<&'static RealCluster> {
    RealCluster::shared_containerd(NODE)
}

fn create<K>(admin: &Kube, api: &kube::Api<K>, object: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    // a fresh namespace admits pods once its ServiceAccount exists: retry until then
    admin.wait_for("the object to be created", 60, |k| {
        k.run(api.create(&PostParams::default(), &object)).ok()
    })
}

fn namespace(admin: &Kube, name: &str) {
    let api = admin.all::<Namespace>();
    let _ = admin.run(api.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap(),
    ));
}

/// A pod bound to the node whose container `main` runs `script` once.
fn pod(ns: &str, name: &str, script: &str, main: serde_json::Value) -> serde_json::Value {
    let mut container = serde_json::json!({
        "name": "main", "image": IMAGE, "command": ["sh", "-c", script]
    });
    for (k, v) in main.as_object().into_iter().flatten() {
        container[k] = v.clone();
    }
    serde_json::json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "containers": [container]
        }
    })
}

/// What container `main` of pod `ns/name` printed (its CRI log on the node), once the pod
/// has succeeded.
fn output(c: &RealCluster, admin: &Kube, ns: &str, name: &str) -> Vec<String> {
    let pods = admin.api::<Pod>(ns);
    let p = admin.wait_for(&format!("{ns}/{name} Succeeded"), 120, |k| {
        let p = k.run(pods.get(name)).ok()?;
        assert_ne!(phase(&p), Some("Failed"), "{:?}", p.status);
        (phase(&p) == Some("Succeeded")).then_some(p)
    });
    let uid = p.metadata.uid.unwrap();
    let log = c
        .dir
        .join("node/pod-logs")
        .join(format!("{ns}_{name}_{uid}"))
        .join("main/0.log");
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    // CRI log lines: `<time> <stream> <F|P> <text>`
    text.lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3))
        .map(str::to_string)
        .collect()
}

/// The `NAME=value` lines of an `env` print.
fn env_map(lines: &[String]) -> BTreeMap<String, String> {
    lines
        .iter()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn assert_vars(env: &BTreeMap<String, String>, want: &[(&str, &str)]) {
    for (k, v) in want {
        assert_eq!(env.get(*k).map(String::as_str), Some(*v), "{k} in {env:#?}");
    }
}

/// The node's allocatable `resource` in units of `per` nano-units (1e9: units, 1e6: milli).
fn node_allocatable(admin: &Kube, resource: &str, per: i128) -> String {
    let node = admin.run(admin.all::<Node>().get(NODE)).unwrap();
    let q = node.status.unwrap().allocatable.unwrap()[resource]
        .0
        .clone();
    let nanos = ledgerlet::core::pod_status::quantity::parse_nanos(&q).unwrap();
    (nanos / per).to_string()
}

/// ENV-01, ENV-02, ENV-03: ConfigMap and Secret keys, optional references left out, every
/// env `fieldRef`, `resourceFieldRef` with divisors and the node's allocatable for an unset
/// limit, and `$(VAR)` expansion of env values and of the command.
#[test]
fn a_container_sees_config_map_secret_field_and_resource_references_as_the_kubelet_gives_them() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let ns = "env-refs";
    namespace(&admin, ns);
    create::<ConfigMap>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "cfg"}, "data": {"mode": "fast", "raw": "$(MODE)"}
        }),
    );
    create::<Secret>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "creds"}, "stringData": {"user": "admin"}
        }),
    );
    let fields = [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
        ("APP", "metadata.labels['app']"),
        ("TEAM", "metadata.annotations['team']"),
        ("NODE_NAME", "spec.nodeName"),
        ("SA", "spec.serviceAccountName"),
        ("HOST_IP", "status.hostIP"),
        ("HOST_IPS", "status.hostIPs"),
        ("POD_IP", "status.podIP"),
        ("POD_IPS", "status.podIPs"),
    ];
    let mut env: Vec<serde_json::Value> = fields
        .iter()
        .map(|(n, f)| serde_json::json!({"name": n, "valueFrom": {"fieldRef": {"fieldPath": f}}}))
        .collect();
    env.extend([
        serde_json::json!({"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}}),
        serde_json::json!({"name": "RAW", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "raw"}}}),
        serde_json::json!({"name": "USER", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "user"}}}),
        serde_json::json!({"name": "NO_KEY", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "absent", "optional": true}}}),
        serde_json::json!({"name": "NO_CM", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k", "optional": true}}}),
        serde_json::json!({"name": "NO_SECRET", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": true}}}),
        serde_json::json!({"name": "CPU_LIMIT_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}}),
        serde_json::json!({"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}),
        serde_json::json!({"name": "MEM_REQUEST_MI", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}}),
        serde_json::json!({"name": "MEM_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}),
        serde_json::json!({"name": "EXPANDED", "value": "$(MODE)-$(USER)-$(POD_NAME)"}),
        serde_json::json!({"name": "ESCAPED", "value": "$$(MODE)"}),
        serde_json::json!({"name": "FORWARD", "value": "$(LATER)|$(UNDEFINED)"}),
        serde_json::json!({"name": "LATER", "value": "later"}),
    ]);
    let script = "env; echo 'CMD=$(MODE) $$(MODE)'";
    let mut p = pod(
        ns,
        "refs",
        script,
        serde_json::json!({
            "env": env,
            "resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "250m", "memory": "32Mi"}}
        }),
    );
    p["metadata"]["labels"] = serde_json::json!({"app": "shop"});
    p["metadata"]["annotations"] = serde_json::json!({"team": "blue"});
    let created = create::<Pod>(&admin, &admin.api(ns), p);
    let lines = output(c, &admin, ns, "refs");
    let got = env_map(&lines);
    let running = admin.run(admin.api::<Pod>(ns).get("refs")).unwrap();
    let status = running.status.unwrap();
    let (host_ip, pod_ip) = (status.host_ip.unwrap(), status.pod_ip.unwrap());
    let uid = created.metadata.uid.unwrap();
    let mem_limit = node_allocatable(&admin, "memory", 1_000_000_000);
    assert_vars(
        &got,
        &[
            ("POD_NAME", "refs"),
            ("POD_NAMESPACE", ns),
            ("POD_UID", &uid),
            ("APP", "shop"),
            ("TEAM", "blue"),
            ("NODE_NAME", NODE),
            ("SA", "default"),
            ("HOST_IP", &host_ip),
            ("HOST_IPS", &host_ip),
            ("POD_IP", &pod_ip),
            ("POD_IPS", &pod_ip),
            ("MODE", "fast"),
            ("RAW", "$(MODE)"),
            ("USER", "admin"),
            ("CPU_LIMIT_M", "500"),
            ("CPU_LIMIT", "1"),
            ("MEM_REQUEST_MI", "32"),
            ("MEM_LIMIT", &mem_limit),
            ("EXPANDED", "fast-admin-refs"),
            ("ESCAPED", "$(MODE)"),
            ("FORWARD", "$(LATER)|$(UNDEFINED)"),
            ("LATER", "later"),
        ],
    );
    for unset in ["NO_KEY", "NO_CM", "NO_SECRET"] {
        assert!(!got.contains_key(unset), "{unset} is set: {got:#?}");
    }
    assert!(
        lines.contains(&"CMD=fast $(MODE)".to_string()),
        "{lines:#?}"
    );
}

/// ENV-04: `envFrom` sets every key of a ConfigMap and a Secret, each with the source's
/// `prefix`, before `env` (which replaces a variable of the same name). The pinned release
/// validates env names the relaxed way (any printable ASCII but `=`), so keys that are not C
/// identifiers are set too, and no `InvalidEnvironmentVariableNames` event is recorded.
#[test]
fn env_from_sets_every_key_with_its_prefix_before_env_including_keys_that_are_not_identifiers() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let ns = "env-from";
    namespace(&admin, ns);
    create::<ConfigMap>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "settings"},
            "data": {"mode": "fast", "dash-key": "d", "1st": "one", "dot.key": "dot"}
        }),
    );
    create::<Secret>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "creds"}, "stringData": {"user": "admin", "token": "t0k3n-from-env"}
        }),
    );
    // `env` itself, not under a shell: a shell passes on only the names it can export
    let p = pod(
        ns,
        "from",
        "",
        serde_json::json!({
            "command": ["env"],
            "envFrom": [
                {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
                {"secretRef": {"name": "creds"}},
                {"configMapRef": {"name": "absent", "optional": true}}
            ],
            "env": [{"name": "CFG_mode", "value": "slow-not-$(CFG_mode)"}]
        }),
    );
    create::<Pod>(&admin, &admin.api(ns), p);
    let got = env_map(&output(c, &admin, ns, "from"));
    assert_vars(
        &got,
        &[
            ("CFG_mode", "slow-not-fast"),
            ("CFG_dash-key", "d"),
            ("CFG_1st", "one"),
            ("CFG_dot.key", "dot"),
            ("user", "admin"),
            ("token", "t0k3n-from-env"),
        ],
    );
    let events = admin.api::<Event>(ns);
    let list = admin
        .run(events.list(&ListParams::default().fields("involvedObject.name=from")))
        .unwrap();
    let reasons: Vec<_> = list.items.iter().filter_map(|e| e.reason.clone()).collect();
    assert!(reasons.iter().any(|r| r == "Started"), "{reasons:?}");
    assert!(
        !reasons
            .iter()
            .any(|r| r == "InvalidEnvironmentVariableNames"),
        "{reasons:?}"
    );
}

/// ENV-05: service links. A pod gets the variables of its namespace's Services and of
/// `default/kubernetes`; with `enableServiceLinks: false` only the latter.
#[test]
fn service_links_give_the_namespaces_services_and_enable_service_links_false_only_the_masters() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let ns = "env-links";
    namespace(&admin, ns);
    let svc = create::<Service>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "web-front"},
            "spec": {"selector": {"app": "none"}, "ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                {"name": "metrics", "port": 9090, "protocol": "UDP"}
            ]}
        }),
    );
    let ip = svc.spec.unwrap().cluster_ip.expect("a cluster IP");
    let master = admin
        .run(admin.api::<Service>("default").get("kubernetes"))
        .unwrap();
    let master_ip = master.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    let master_port = master.spec.unwrap().ports.unwrap()[0].port.to_string();
    create::<Pod>(
        &admin,
        &admin.api(ns),
        pod(ns, "linked", "env", serde_json::json!({})),
    );
    let mut off = pod(ns, "unlinked", "env", serde_json::json!({}));
    off["spec"]["enableServiceLinks"] = serde_json::json!(false);
    create::<Pod>(&admin, &admin.api(ns), off);
    let master_url = format!("tcp://{master_ip}:{master_port}");
    let master_addr = format!("KUBERNETES_PORT_{master_port}_TCP_ADDR");
    let masters = [
        ("KUBERNETES_SERVICE_HOST", master_ip.as_str()),
        ("KUBERNETES_SERVICE_PORT", &master_port),
        ("KUBERNETES_SERVICE_PORT_HTTPS", &master_port),
        ("KUBERNETES_PORT", &master_url),
        (&master_addr, &master_ip),
    ];
    let linked = env_map(&output(c, &admin, ns, "linked"));
    assert_vars(&linked, &masters);
    let (url80, url9090) = (format!("tcp://{ip}:80"), format!("udp://{ip}:9090"));
    assert_vars(
        &linked,
        &[
            ("WEB_FRONT_SERVICE_HOST", &ip),
            ("WEB_FRONT_SERVICE_PORT", "80"),
            ("WEB_FRONT_SERVICE_PORT_HTTP", "80"),
            ("WEB_FRONT_SERVICE_PORT_METRICS", "9090"),
            ("WEB_FRONT_PORT", &url80),
            ("WEB_FRONT_PORT_80_TCP", &url80),
            ("WEB_FRONT_PORT_80_TCP_PROTO", "tcp"),
            ("WEB_FRONT_PORT_80_TCP_PORT", "80"),
            ("WEB_FRONT_PORT_80_TCP_ADDR", &ip),
            ("WEB_FRONT_PORT_9090_UDP", &url9090),
            ("WEB_FRONT_PORT_9090_UDP_PROTO", "udp"),
            ("WEB_FRONT_PORT_9090_UDP_PORT", "9090"),
            ("WEB_FRONT_PORT_9090_UDP_ADDR", &ip),
        ],
    );
    let unlinked = env_map(&output(c, &admin, ns, "unlinked"));
    assert_vars(&unlinked, &masters);
    let web: Vec<_> = unlinked
        .keys()
        .filter(|k| k.starts_with("WEB_FRONT"))
        .collect();
    assert!(
        web.is_empty(),
        "service links despite enableServiceLinks: false: {web:?}"
    );
}

/// ENV-01: a missing non-optional ConfigMap fails the container with
/// `CreateContainerConfigError` and the kubelet's message (a Warning `Failed` event too),
/// the namespace's other pod runs meanwhile, and once the ConfigMap exists a later sync
/// starts the container.
#[test]
fn a_missing_config_map_fails_create_container_config_until_it_is_created() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let ns = "env-missing";
    namespace(&admin, ns);
    let pods = admin.api::<Pod>(ns);
    let waiting = pod(
        ns,
        "waiting",
        "env",
        serde_json::json!({
            "env": [{"name": "LATE", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "k"}}}]
        }),
    );
    create::<Pod>(&admin, &pods, waiting);
    let mut other = pod(ns, "other", "sleep 3600", serde_json::json!({}));
    other["spec"]["restartPolicy"] = serde_json::json!("Always");
    create::<Pod>(&admin, &pods, other);
    let message = admin.wait_for("waiting: CreateContainerConfigError", 120, |k| {
        let p = k.run(pods.get("waiting")).ok()?;
        let w = main_status(&p)?.state.as_ref()?.waiting.clone()?;
        (w.reason.as_deref() == Some("CreateContainerConfigError")).then_some(w.message?)
    });
    // the kubelet's words alone; the field is in the ledger's detail
    assert_eq!(message, "configmap \"late\" not found");
    assert_eq!(
        phase(&admin.run(pods.get("waiting")).unwrap()),
        Some("Pending")
    );
    let events = admin.api::<Event>(ns);
    admin.wait_for("the Warning Failed event", 60, |k| {
        let params = ListParams::default().fields("involvedObject.name=waiting");
        let list = k.run(events.list(&params)).ok()?;
        list.items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("Failed")
                    && e.message.as_deref() == Some("Error: configmap \"late\" not found")
            })
            .then_some(())
    });
    // the node's ledger says where: the container and the field
    let where_ = "container main of pod env-missing/waiting, env[0] (LATE)";
    assert!(
        ledger_text(c).contains(&format!("\"detail\":\"{where_}\"")),
        "no CreateContainer detail {where_:?} in the ledger"
    );
    admin.wait_for("the other pod Running", 120, |k| {
        let p = k.run(pods.get("other")).ok()?;
        (phase(&p) == Some("Running")).then_some(())
    });
    create::<ConfigMap>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "late"}, "data": {"k": "arrived"}
        }),
    );
    let got = env_map(&output(c, &admin, ns, "waiting"));
    assert_vars(&got, &[("LATE", "arrived")]);
}

/// A Secret's value reaches the container (`secretKeyRef` and `envFrom`) but
/// neither the node's ledger nor its log.
#[test]
fn a_secret_value_in_env_reaches_the_container_but_not_the_ledger_or_the_log() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let ns = "env-secret";
    namespace(&admin, ns);
    let value = format!("s3cr3t-env-{}", std::process::id());
    let other = format!("0th3r-env-{}", std::process::id());
    create::<Secret>(
        &admin,
        &admin.api(ns),
        serde_json::json!({
            "metadata": {"name": "db"}, "stringData": {"password": value, "other": other}
        }),
    );
    let p = pod(
        ns,
        "secretive",
        "env",
        serde_json::json!({
            "envFrom": [{"secretRef": {"name": "db"}, "prefix": "DB_"}],
            "env": [
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "DSN", "value": "user:$(PASSWORD)@db"}
            ]
        }),
    );
    create::<Pod>(&admin, &admin.api(ns), p);
    let got = env_map(&output(c, &admin, ns, "secretive"));
    let dsn = format!("user:{value}@db");
    assert_vars(
        &got,
        &[
            ("PASSWORD", &value),
            ("DB_password", &value),
            ("DB_other", &other),
            ("DSN", &dsn),
        ],
    );
    let (ledger, log) = (ledger_text(c), agent_log(c));
    assert!(ledger.contains("secretive"), "the pod is in the ledger");
    for secret in [&value, &other] {
        assert!(
            !ledger.contains(secret.as_str()),
            "a Secret value in the ledger"
        );
        assert!(
            !log.contains(secret.as_str()),
            "a Secret value in the agent's log"
        );
    }
}

/// ENV-02 in a volume: a downward API volume's `resourceFieldRef` to an unset limit is the
/// node's allocatable too, as in env.
#[test]
fn a_downward_api_volume_gives_the_nodes_allocatable_for_an_unset_limit_as_env_does() {
    let Some(c) = cluster() else { return };
    let admin = c.admin();
    let ns = "env-volume";
    namespace(&admin, ns);
    let item = |path: &str, resource: &str, divisor: &str| {
        serde_json::json!({"path": path, "resourceFieldRef": {
            "containerName": "main", "resource": resource, "divisor": divisor}})
    };
    let script = "echo MEM=$(cat /info/mem) CPU=$(cat /info/cpu) REQ=$(cat /info/req)";
    let mut p = pod(
        ns,
        "downward",
        script,
        serde_json::json!({
            "resources": {"requests": {"cpu": "100m"}},
            "volumeMounts": [{"name": "info", "mountPath": "/info"}]
        }),
    );
    p["spec"]["volumes"] = serde_json::json!([{"name": "info", "downwardAPI": {"items": [
        item("mem", "limits.memory", "1"),
        item("cpu", "limits.cpu", "1m"),
        item("req", "requests.cpu", "1m"),
    ]}}]);
    create::<Pod>(&admin, &admin.api(ns), p);
    let lines = output(c, &admin, ns, "downward");
    let want = format!(
        "MEM={} CPU={} REQ=100",
        node_allocatable(&admin, "memory", 1_000_000_000),
        node_allocatable(&admin, "cpu", 1_000_000)
    );
    assert_eq!(lines, [want]);
}

/// Service links do not stop a crashing container from restarting while the API server is
/// away: the node uses the Services it last read, as a kubelet's informer cache does. The
/// node here is a second agent (embedded runtime) behind a fault proxy.
#[test]
fn a_crashing_container_restarts_with_its_service_links_while_the_api_server_is_away() {
    let Some(c) = cluster() else { return };
    let node = "env-proxied";
    let (proxy, kubeconfig) = FaultProxy::for_node(c, node);
    let kubeconfig = kubeconfig.to_str().unwrap();
    let agent = Agent::start(&["--kubeconfig", kubeconfig, "--node-name", node]);
    let admin = c.admin();
    let ns = "env-outage";
    namespace(&admin, ns);
    let script = "echo host=$KUBERNETES_SERVICE_HOST; sleep 1; exit 1";
    let mut p = pod(ns, "crashing", script, serde_json::json!({}));
    p["spec"]["nodeName"] = serde_json::json!(node);
    p["spec"]["restartPolicy"] = serde_json::json!("Always");
    let uid = create::<Pod>(&admin, &admin.api(ns), p)
        .metadata
        .uid
        .unwrap();
    let starts = |a: &Agent| {
        let records = a.ledger();
        let ok_starts = records.iter().filter(|r| {
            matches!(&r.event, Record::RuntimeActionFinished(f)
                if f.uid.as_str() == uid
                    && matches!(f.action, RuntimeAction::StartContainer { .. })
                    && matches!(f.outcome, ActionOutcome::Ok { .. }))
        });
        ok_starts.count()
    };
    agent.wait_for("the first start", 60, |a| (starts(a) >= 1).then_some(()));
    proxy.unreachable();
    // CrashLoopBackOff: the next start is 10 s after the first exit
    agent.wait_for("a restart during the outage", 40, |a| {
        (starts(a) >= 2).then_some(())
    });
    proxy.clear();
    let log = agent.log();
    assert!(
        log.contains("using the Services last read for service links"),
        "the restart did not use the remembered Services"
    );
    let config_errors = agent
        .ledger_text()
        .matches("CreateContainerConfigError")
        .count();
    assert_eq!(config_errors, 0, "a start failed on its configuration");
}
