//! A secret never reaches the ledger in clear. A pod bound to the node (of a real control
//! plane: the Node authorizer lets the node read the Secret only for that pod)
//! takes an env var from a Secret through `secretKeyRef`; one container proves it received
//! the value, another leaks it the way real workloads do (a `$(VAR)` in its command that the
//! runtime's start error repeats), and a `secret` volume holds another key of the Secret.
//! Neither value may appear in `/debug/ledger`, an export, the ledger stream, the durable
//! segments, the spans a real OTLP collector (rotel) receives or the agent's log, while
//! `[redacted]` shows where the env value was.

mod support;

#[path = "support/peers.rs"]
mod peers;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, Pod, PodSpec, PodStatus, Secret, SecretKeySelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use peers::Rotel;
use support::agent::cli;
use support::on_containerd::volume_dir;
use support::real_cluster::RealCluster;

const NODE: &str = "secrets-node";
const SECRET: &str = "s3cr3t-Value-42";
/// A second key of the Secret, which reaches the pod only through a `secret` volume.
const SECRET_FILE: &str = "s3cr3t-File-43";

fn read_all(path: &Path) -> String {
    let mut s = String::new();
    ledgerlet::ledger::export::open_file(path)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    s
}

fn read_all_segments(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
    }
    out
}

#[test]
fn secret_values_in_env_or_a_volume_never_appear_in_the_ledger_an_export_the_stream_segments_spans_or_logs(
) {
    let Some(c) = RealCluster::shared() else {
        return;
    };
    let Some(rotel_bin) = peers::rotel() else {
        return;
    };
    let rotel_dir = tempfile::tempdir().unwrap();
    let rotel = Rotel::start(&rotel_bin, rotel_dir.path());
    let admin = c.admin();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("db".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("token".to_string(), ByteString(SECRET.as_bytes().to_vec())),
            (
                "file".to_string(),
                ByteString(SECRET_FILE.as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    };
    // the node may read it only once a pod bound to it refers to it (Node authorizer)
    admin
        .run(
            admin
                .api::<Secret>("default")
                .create(&PostParams::default(), &secret),
        )
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let ledger_dir = root.path().join("ledger");
    let endpoint = rotel.endpoint();
    let mut agent = c.agent_in(
        root,
        NODE,
        &[
            "--ledger-dir",
            ledger_dir.to_str().unwrap(),
            "--tracing-endpoint",
            &endpoint,
            // every trace sampled (the default, as the kubelet's, samples none)
            "--tracing-sampling-rate-per-million",
            "1000000",
            "--tracing-export-period-ms",
            "200",
        ],
    );
    let proof = agent.root.path().join("proof.txt");
    let token = EnvVar {
        name: "TOKEN".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: "db".into(),
                key: "token".into(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("app".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(NODE.into()),
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(1),
            containers: vec![
                Container {
                    name: "main".into(),
                    image: Some("busybox".into()),
                    env: Some(vec![token.clone()]),
                    command: Some(vec![
                        "sh".into(),
                        "-c".into(),
                        format!("echo \"$TOKEN\" > {}; exec sleep 3600", proof.display()),
                    ]),
                    ..Container::default()
                },
                Container {
                    name: "leak".into(),
                    image: Some("busybox".into()),
                    env: Some(vec![token]),
                    command: Some(vec!["/nonexistent/$(TOKEN)".into()]),
                    ..Container::default()
                },
            ],
            // written by the node whether or not a container mounts it
            volumes: Some(vec![serde_json::from_value(serde_json::json!({
                "name": "db-file",
                "secret": {"secretName": "db", "items": [{"key": "file", "path": "file"}]}
            }))
            .unwrap()]),
            ..PodSpec::default()
        }),
        status: Some(PodStatus::default()),
    };
    let pods = admin.api::<Pod>("default");
    admin
        .run(pods.create(&PostParams::default(), &pod))
        .unwrap();
    // the value reached the container …
    agent.wait_for("the container to receive the secret", 60, |_| {
        std::fs::read_to_string(&proof)
            .ok()
            .filter(|s| s.trim() == SECRET)
    });
    // … the volume holds the other key …
    let uid = admin.run(pods.get("app")).unwrap().metadata.uid.unwrap();
    agent.wait_for("the secret volume's file", 60, |_| {
        let dir = volume_dir(agent.root.path(), &uid, "kubernetes.io~secret", "db-file")?;
        let text = std::fs::read_to_string(dir.join("file")).ok()?;
        (text == SECRET_FILE).then_some(())
    });
    // … and the start error that would have carried it was recorded, redacted
    agent.wait_for(
        "the leaking container's start error in the ledger",
        60,
        |a| {
            a.ledger_text()
                .contains("/nonexistent/[redacted]")
                .then_some(())
        },
    );
    let debug = agent.ledger_text();
    for secret in [SECRET, SECRET_FILE] {
        assert!(!debug.contains(secret), "/debug/ledger carries {secret}");
    }

    let export = agent.root.path().join("export.ndjson.gz");
    let o = cli(&[
        "ledger",
        "export",
        "--root-dir",
        agent.state_dir().to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = read_all(&export);
    assert!(text.contains("[redacted]"));
    for secret in [SECRET, SECRET_FILE] {
        assert!(!text.contains(secret), "the export carries {secret}");
    }

    let o = cli(&[
        "ledger",
        "tail",
        "--root-dir",
        agent.state_dir().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("[redacted]"));
    for secret in [SECRET, SECRET_FILE] {
        assert!(!text.contains(secret), "the stream carries {secret}");
    }

    // the durable segments, once everything so far is on disk
    let last = agent.state().last_seq;
    agent.wait_for("the durable ledger to catch up", 30, |_| {
        let text = read_all_segments(&ledger_dir);
        text.contains(&format!("{{\"seq\":{last},")).then_some(())
    });
    let text = read_all_segments(&ledger_dir);
    assert!(text.contains("[redacted]"));
    for secret in [SECRET, SECRET_FILE] {
        assert!(!text.contains(secret), "a durable segment carries {secret}");
    }

    // the API status carries no clear value either (it is generated from the ledger)
    let status = serde_json::to_string(&admin.run(pods.get("app")).unwrap().status).unwrap();
    assert!(!status.contains(SECRET), "{status}");
    assert!(!status.contains(SECRET_FILE), "{status}");

    // the spans of the pod's syncs reached the collector, none with a clear value (rotel's
    // detailed log prints every attribute and event); the agent's stop flushes the rest
    rotel.wait_for("the pod's syncPod spans", 60, |spans| {
        spans
            .iter()
            .any(|s| s.name == "syncPod" && s.attributes.get("k8s.pod.uid") == Some(&uid))
            .then_some(())
    });
    let _ = admin.run(pods.delete("app", &Default::default()));
    agent.stop();
    let spans = std::fs::read_to_string(&rotel.log).unwrap();
    let log = agent.log();
    assert!(!log.is_empty(), "the agent's log is read");
    for secret in [SECRET, SECRET_FILE] {
        assert!(!spans.contains(secret), "a span carries {secret}");
        assert!(!log.contains(secret), "the agent's log carries {secret}");
    }
}
