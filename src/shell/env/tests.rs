use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;

fn ctx() -> NodeContext {
    NodeContext {
        pod_logs_dir: PathBuf::from("/var/log/pods"),
        node_name: "n1".into(),
        node_ip: "10.0.0.7".into(),
        pods_dir: PathBuf::from("/var/lib/ledgerlet/pods"),
        dns: Default::default(),
        managed_files: true,
        seccomp_default: false,
    }
}

fn pod(container: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1",
                     "labels": {"app": "web"}, "annotations": {"team": "blue"}},
        "spec": {"nodeName": "n1", "serviceAccountName": "robot", "containers": [container]}
    }))
    .unwrap()
}

fn env_of(p: &Pod, src: &EnvSources) -> Result<Vec<(String, String)>, String> {
    let c = &p.spec.as_ref().unwrap().containers[0];
    make_environment(&ctx(), p, c, "10.244.0.5", src)
        .map(|kvs| kvs.into_iter().map(|kv| (kv.key, kv.value)).collect())
        .map_err(|e| e.to_string())
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn keys(v: &[(&str, &str)]) -> EnvKeys {
    Some(
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn joined() -> EnvSources {
    EnvSources {
        joined: true,
        ..EnvSources::default()
    }
}

#[test]
fn values_are_expanded_against_earlier_variables_and_service_links_only() {
    let p = pod(serde_json::json!({"name": "c", "env": [
        {"name": "A", "value": "a"},
        {"name": "B", "value": "$(A)-$(LATER)-$(SVC_SERVICE_HOST)-$(NOPE)"},
        {"name": "LATER", "value": "l"},
        {"name": "ESC", "value": "$$(A) $$$(A)"},
        {"name": "A", "value": "again-$(A)"}
    ]}));
    let mut src = joined();
    src.service_env = BTreeMap::from([
        ("SVC_SERVICE_HOST".to_string(), "10.96.0.3".to_string()),
        ("LATER".to_string(), "from-service".to_string()),
    ]);
    let got = env_of(&p, &src).unwrap();
    assert_eq!(
        got,
        pairs(&[
            ("A", "again-a"),
            ("B", "a-from-service-10.96.0.3-$(NOPE)"),
            ("LATER", "l"),
            ("ESC", "$(A) $a"),
            ("SVC_SERVICE_HOST", "10.96.0.3"),
        ])
    );
}

#[test]
fn env_from_comes_first_with_its_prefix_and_env_replaces_it() {
    let p = pod(serde_json::json!({"name": "c",
    "envFrom": [
        {"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
        {"secretRef": {"name": "creds"}},
        {"configMapRef": {"name": "absent", "optional": true}}
    ],
    "env": [
        {"name": "CFG_mode", "value": "override-$(CFG_mode)"},
        {"name": "USE", "value": "$(user)"}
    ]}));
    let mut src = joined();
    src.config_maps
        .insert("cfg".into(), keys(&[("mode", "fast"), ("dash-key", "1")]));
    src.config_maps.insert("absent".into(), None);
    src.secrets
        .insert("creds".into(), keys(&[("user", "admin")]));
    let got = env_of(&p, &src).unwrap();
    assert_eq!(
        got,
        pairs(&[
            ("CFG_dash-key", "1"),
            ("CFG_mode", "override-fast"),
            ("user", "admin"),
            ("USE", "admin"),
        ])
    );
}

#[test]
fn value_from_values_are_not_expanded() {
    let p = pod(serde_json::json!({"name": "c", "env": [
        {"name": "A", "value": "a"},
        {"name": "RAW", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}
    ]}));
    let mut src = joined();
    src.config_maps.insert("cfg".into(), keys(&[("k", "$(A)")]));
    let got = env_of(&p, &src).unwrap();
    assert_eq!(got, pairs(&[("A", "a"), ("RAW", "$(A)")]));
}

#[test]
fn field_refs_are_the_pods_and_the_nodes() {
    let fields = [
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "metadata.labels['app']",
        "metadata.annotations['team']",
        "metadata.labels['missing']",
        "spec.nodeName",
        "spec.serviceAccountName",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    ];
    let env: Vec<_> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| serde_json::json!({"name": format!("F{i}"), "valueFrom": {"fieldRef": {"fieldPath": f}}}))
        .collect();
    let p = pod(serde_json::json!({"name": "c", "env": env}));
    let got: Vec<String> = env_of(&p, &joined())
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let want = [
        "web",
        "shop",
        "u-1",
        "web",
        "blue",
        "",
        "n1",
        "robot",
        "10.0.0.7",
        "10.0.0.7",
        "10.244.0.5",
        "10.244.0.5",
    ];
    assert_eq!(got, want);
}

#[test]
fn missing_sources_fail_with_the_kubelets_messages_unless_optional() {
    let cases = [
        (
            serde_json::json!({"configMapKeyRef": {"name": "cfg", "key": "k"}}),
            "env[0] (X): configmap \"cfg\" not found",
        ),
        (
            serde_json::json!({"secretKeyRef": {"name": "creds", "key": "k"}}),
            "env[0] (X): secret \"creds\" not found",
        ),
        (
            serde_json::json!({"configMapKeyRef": {"name": "present", "key": "nokey"}}),
            "env[0] (X): couldn't find key nokey in ConfigMap shop/present",
        ),
        (
            serde_json::json!({"secretKeyRef": {"name": "s", "key": "nokey"}}),
            "env[0] (X): couldn't find key nokey in Secret shop/s",
        ),
    ];
    let mut src = joined();
    src.config_maps.insert("cfg".into(), None);
    src.config_maps
        .insert("present".into(), keys(&[("k", "v")]));
    src.secrets.insert("creds".into(), None);
    src.secrets.insert("s".into(), keys(&[("k", "v")]));
    for (from, want) in cases {
        let p = pod(
            serde_json::json!({"name": "c", "env": [{"name": "X", "valueFrom": from.clone()}]}),
        );
        assert_eq!(env_of(&p, &src).unwrap_err(), want);
        let mut optional = from.clone();
        let inner = optional
            .as_object_mut()
            .unwrap()
            .values_mut()
            .next()
            .unwrap();
        inner["optional"] = serde_json::json!(true);
        let p =
            pod(serde_json::json!({"name": "c", "env": [{"name": "X", "valueFrom": optional}]}));
        assert_eq!(env_of(&p, &src).unwrap(), Vec::new(), "{from}");
    }
    let p = pod(serde_json::json!({"name": "c", "envFrom": [{"secretRef": {"name": "creds"}}]}));
    assert_eq!(
        env_of(&p, &src).unwrap_err(),
        "envFrom[0].secretRef: secret \"creds\" not found"
    );
}

#[test]
fn a_standalone_node_cannot_resolve_config_maps_or_secrets() {
    let p = pod(serde_json::json!({"name": "c", "env": [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}]}));
    assert_eq!(
        env_of(&p, &EnvSources::default()).unwrap_err(),
        "env[0] (X): couldn't get configMap shop/cfg, no kubeClient defined"
    );
}

#[test]
fn resource_field_refs_use_the_own_container_and_the_nodes_allocatable() {
    let p = pod(serde_json::json!({"name": "c",
    "resources": {"requests": {"memory": "64Mi"}},
    "env": [
        {"name": "MEM_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}},
        {"name": "CPU_LIM", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}}
    ]}));
    let mut src = joined();
    src.allocatable = Some(BTreeMap::from([("cpu".to_string(), Quantity("2".into()))]));
    let got = env_of(&p, &src).unwrap();
    assert_eq!(got, pairs(&[("MEM_REQ", "64"), ("CPU_LIM", "2000")]));
}

#[test]
fn command_and_args_expand_against_the_final_environment() {
    let c: Container = serde_json::from_value(serde_json::json!({"name": "c",
        "command": ["sh", "-c", "echo $(A) $$(A) $(B)"], "args": ["$(KUBERNETES_SERVICE_HOST)"]}))
    .unwrap();
    let env = [("A", "1"), ("KUBERNETES_SERVICE_HOST", "10.96.0.1")].map(|(k, v)| v1::KeyValue {
        key: k.into(),
        value: v.into(),
    });
    let (command, args) = expand_command_and_args(&c, &env);
    assert_eq!(command, ["sh", "-c", "echo 1 $(A) $(B)"]);
    assert_eq!(args, ["10.96.0.1"]);
}

#[test]
fn debug_of_the_sources_never_shows_a_value() {
    let mut src = joined();
    src.secrets
        .insert("creds".into(), keys(&[("password", "s3cr3t")]));
    let shown = format!("{src:?}");
    assert!(
        shown.contains("creds") && !shown.contains("s3cr3t"),
        "{shown}"
    );
}
