//! The differential status check in CI: a small set of pod specs run at once on a ledgerlet
//! node and on the real kubelet's node of the pinned release, in one cluster on containerd;
//! their API statuses must agree field by field after normalising names, IDs, IPs and times
//! (`support::differential`). The full set runs in `scripts/compare-kubelet.sh`. Behaviour
//! SB-01.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use serde_json::json;
use support::differential;
use support::real_cluster::RealCluster;

const NODE: &str = "ledgerlet-diff";
const KUBELET_NODE: &str = "kubelet-diff";

#[test]
fn sb_01_the_same_pod_specs_end_in_the_same_api_status_as_on_the_real_kubelet() {
    let Some(c) = RealCluster::shared_side_by_side(NODE, KUBELET_NODE) else {
        return;
    };
    let admin = c.admin();
    let all = differential::all();
    let specs: Vec<&differential::Spec> = all
        .iter()
        .filter(|s| differential::SMOKE.contains(&s.name))
        .collect();
    assert_eq!(
        specs.len(),
        differential::SMOKE.len(),
        "every smoke spec exists"
    );
    let differences = admin.run(async {
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "differential"}}))
                .unwrap();
        kube::Api::<Namespace>::all(admin.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create the namespace");
        differential::run(
            admin.client.clone(),
            "differential",
            &specs,
            NODE,
            KUBELET_NODE,
            Duration::from_secs(120),
        )
        .await
    });
    let report: Vec<String> = differences
        .iter()
        .map(|d| {
            format!(
                "{}: {}: ledgerlet {:?}, kubelet {:?}",
                d.spec, d.field, d.ledgerlet, d.kubelet
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "{} differences from the kubelet:\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn normalising_keeps_what_nodes_share_and_masks_what_they_cannot() {
    let s = json!({
        "phase": "Failed", "podIP": "10.0.0.1", "startTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "False", "reason": "PodFailed",
                        "lastTransitionTime": "x", "lastProbeTime": null}],
        "containerStatuses": [{"name": "app", "restartCount": 0, "lastState": {},
            "volumeMounts": [{"name": "kube-api-access-ab3x9", "mountPath": "/var/run"}],
            "state": {"terminated": {"exitCode": 1, "reason": "Error",
                                     "message": "pod p-l on n-1 (0f8e1c2a-1b2c-4d5e-8f90-a1b2c3d4e5f6)"}}}],
    });
    let f = differential::normalise(&s, "p-l", "n-1");
    assert_eq!(f["phase"], "Failed");
    assert_eq!(f["podIP"], "<set>");
    assert_eq!(f["conditions[Ready].reason"], "PodFailed");
    assert!(!f.contains_key("conditions[Ready].lastProbeTime"));
    assert_eq!(f["containerStatuses[app].state.terminated.exitCode"], "1");
    assert_eq!(
        f["containerStatuses[app].state.terminated.message"],
        "pod <pod> on <node> (<uid>)"
    );
    assert_eq!(f["containerStatuses[app].lastState"], "{}");
    assert_eq!(
        f["containerStatuses[app].volumeMounts[kube-api-access-*].mountPath"],
        "/var/run"
    );
}

#[test]
fn two_nodes_agreeing_on_an_outcome_upstream_does_not_have_still_differ() {
    let status = |reason: &str, code: i32| {
        let s = json!({"phase": "Failed", "containerStatuses": [{"name": "app",
            "state": {"terminated": {"exitCode": code, "reason": reason}}}]});
        differential::Observed {
            fields: differential::normalise(&s, "oom-killed-l", "n"),
            failure: None,
        }
    };
    let both_lost_the_oom =
        differential::compare("oom-killed", &status("Error", 137), &status("Error", 137));
    let fields: Vec<&str> = both_lost_the_oom.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(
        fields,
        ["containerStatuses[app].state.terminated.reason (expected OOMKilled)"]
    );
    assert!(differential::compare(
        "oom-killed",
        &status("OOMKilled", 137),
        &status("OOMKilled", 137)
    )
    .is_empty());
    // a disagreement is reported once, as the field that differs
    let one_lost_it = differential::compare(
        "oom-killed",
        &status("OOMKilled", 137),
        &status("Error", 137),
    );
    assert_eq!(one_lost_it.len(), 1);
    assert_eq!(
        one_lost_it[0].field,
        "containerStatuses[app].state.terminated.reason"
    );
}

#[test]
fn every_expected_outcome_names_a_spec_of_the_set() {
    let names: Vec<&str> = differential::all().iter().map(|s| s.name).collect();
    for (spec, field, _) in differential::EXPECTED {
        assert!(names.contains(spec), "{spec} ({field}) is not a spec");
    }
}
