//! Dashboards: every `dashboards/*.json` validates against the Grafana
//! dashboard JSON schema committed in `schemas/`, offline, with the `jsonschema`
//! validator (PyPI); every panel queries the selected data source, job and instance; and the
//! committed files are what `dashboards/generate.py` writes.

mod support;

#[path = "support/peers.rs"]
mod peers;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dashboard_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v
}

const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
bad = 0
for path in sys.argv[2:]:
    for e in sorted(v.iter_errors(json.load(open(path))), key=lambda e: list(e.path)):
        bad += 1
        print(f"{path}: /{'/'.join(str(p) for p in e.path)}: {e.message}")
sys.exit(1 if bad else 0)
"#;

/// `python3` with the `jsonschema` module, or None (loudly) / a panic under CI.
fn validator() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    peers::require(
        "python3 jsonschema (PyPI)",
        ok.then(|| PathBuf::from("python3")),
        "pip install jsonschema",
    )
}

fn validate(python: &Path, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(python)
        .arg("-c")
        .arg(VALIDATE)
        .arg(root().join("schemas/grafana-dashboard.schema.json"))
        .args(files)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn dashboards_01_every_dashboard_validates_against_the_grafana_schema_offline() {
    let Some(python) = validator() else { return };
    let files = dashboard_files();
    assert!(files.len() >= 3, "node sync, ledger and runtime dashboards");
    let (ok, report) = validate(&python, &files);
    assert!(ok, "schema violations:\n{report}");

    // the check can fail: a panel wider than the grid, a target without refId, a bad variable
    let dir = tempfile::tempdir().unwrap();
    let mut broken: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let panel = broken["panels"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["type"] != "row")
        .unwrap();
    panel["gridPos"]["w"] = 30.into();
    panel["targets"][0].as_object_mut().unwrap().remove("refId");
    broken["templating"]["list"][1]["type"] = "no-such-type".into();
    let bad = dir.path().join("broken.json");
    std::fs::write(&bad, serde_json::to_string(&broken).unwrap()).unwrap();
    let (ok, report) = validate(&python, &[bad]);
    assert!(!ok, "a broken dashboard must be rejected");
    for needle in ["gridPos/w", "refId", "templating/list/1/type"] {
        assert!(report.contains(needle), "{needle} not reported:\n{report}");
    }
}

#[test]
fn dashboards_02_every_panel_uses_the_datasource_job_and_instance_variables() {
    for f in dashboard_files() {
        let d: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let names: Vec<&str> = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["datasource", "job", "instance"], "{}", f.display());
        let mut ids = std::collections::BTreeSet::new();
        for p in d["panels"].as_array().unwrap() {
            assert!(
                ids.insert(p["id"].as_i64().unwrap()),
                "{}: duplicate panel id",
                f.display()
            );
            if p["type"] == "row" {
                continue;
            }
            assert_eq!(
                p["datasource"]["uid"],
                "${datasource}",
                "{}: {}",
                f.display(),
                p["title"]
            );
            for t in p["targets"].as_array().unwrap() {
                let e = t["expr"].as_str().unwrap();
                assert_eq!(t["datasource"]["uid"], "${datasource}");
                assert!(
                    e.contains("job=\"$job\"") && e.contains("instance=~\"$instance\""),
                    "{}: {}: {e}",
                    f.display(),
                    p["title"]
                );
            }
        }
    }
}

#[test]
fn dashboards_03_the_committed_files_are_what_generate_py_writes() {
    let Some(_) = peers::require(
        "python3",
        Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
            .then(|| PathBuf::from("python3")),
        "apt-get install python3",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let st = Command::new("python3")
        .arg(root().join("dashboards/generate.py"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    for f in dashboard_files() {
        let name = f.file_name().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).unwrap(),
            std::fs::read_to_string(&f).unwrap(),
            "{} differs from dashboards/generate.py's output: run python3 dashboards/generate.py",
            name.to_string_lossy()
        );
    }
}

#[test]
fn otel_stack_01_compose_collector_and_prometheus_configs_are_consistent_and_promtool_accepts_them()
{
    let otel = root().join("otel");
    let yaml = |name: &str| -> serde_yaml::Value {
        serde_yaml::from_str(&std::fs::read_to_string(otel.join(name)).unwrap())
            .unwrap_or_else(|e| panic!("otel/{name}: {e}"))
    };
    let compose = yaml("docker-compose.yaml");
    let services = &compose["services"];
    for s in ["jaeger", "otel-collector", "prometheus", "grafana"] {
        assert!(services[s]["image"].is_string(), "service {s}");
    }
    // every mounted file or directory exists in the repository
    for (_, svc) in services.as_mapping().unwrap() {
        for v in svc["volumes"].as_sequence().into_iter().flatten() {
            let host = v.as_str().unwrap().split(':').next().unwrap();
            assert!(otel.join(host).exists(), "volume source {host} missing");
        }
    }
    // OTLP in; Jaeger and Prometheus out
    let col = yaml("otel-collector.yaml");
    assert!(col["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
        .as_str()
        .unwrap()
        .ends_with(":4317"));
    let traces = &col["service"]["pipelines"]["traces"];
    let exporters: Vec<&str> = traces["exporters"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(exporters.contains(&"otlp/jaeger"), "{exporters:?}");
    assert!(col["exporters"]["otlp/jaeger"]["endpoint"].is_string());
    assert_eq!(
        col["service"]["pipelines"]["metrics"]["exporters"][0].as_str(),
        Some("prometheus")
    );
    // Grafana loads the dashboards of this repository
    let provider = yaml("grafana/provisioning/dashboards/ledgerlet.yaml");
    let path = provider["providers"][0]["options"]["path"]
        .as_str()
        .unwrap();
    let grafana_volumes = services["grafana"]["volumes"].as_sequence().unwrap();
    assert!(grafana_volumes
        .iter()
        .any(|v| v.as_str().unwrap() == format!("../dashboards:{path}:ro")));
    let ds = yaml("grafana/provisioning/datasources/datasources.yaml");
    assert_eq!(ds["datasources"][0]["type"].as_str(), Some("prometheus"));
    // the real promtool accepts the Prometheus config
    let Some(promtool) = peers::promtool() else {
        return;
    };
    let out = Command::new(promtool)
        .args(["check", "config"])
        .arg(otel.join("prometheus.yml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
