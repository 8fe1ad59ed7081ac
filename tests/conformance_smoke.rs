//! A smoke set of the upstream Kubernetes e2e conformance tests of the pinned release (the
//! suite nobody here wrote), run by `scripts/conformance.sh` against a fresh cluster whose
//! node is this build of ledgerlet on containerd: pods, logs, exec, env, volumes, init
//! containers, probes and security context. The full set is the script's default focus;
//! its figures are in docs/conformance.md.

use std::process::Command;

/// The tests, by their full ginkgo names.
const SMOKE: &[&str] = &[
    "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
    "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]",
    "[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [NodeConformance] [Conformance]",
    "[sig-node] Pods should support remote command execution over websockets [NodeConformance] [Conformance]",
    "[sig-node] Pods should support retrieving logs from the container over websockets [NodeConformance] [Conformance]",
    "[sig-node] Downward API should provide pod name, namespace and IP address as env vars [NodeConformance] [Conformance]",
    "[sig-node] Variable Expansion should allow composing env vars into new env vars [NodeConformance] [Conformance]",
    "[sig-node] Secrets should be consumable from pods in env vars [NodeConformance] [Conformance]",
    "[sig-node] ConfigMap should be consumable via environment variable [NodeConformance] [Conformance]",
    "[sig-storage] EmptyDir volumes should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]",
    "[sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]",
    "[sig-storage] Secrets should be consumable from pods in volume [NodeConformance] [Conformance]",
    "[sig-storage] Downward API volume should provide container's memory limit [NodeConformance] [Conformance]",
    "[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]",
    "[sig-node] InitContainer [NodeConformance] should not start app containers and fail the pod if init containers fail on a RestartNever pod [Conformance]",
    "[sig-node] Probing container with readiness probe that fails should never be ready and never restart [NodeConformance] [Conformance]",
    "[sig-node] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]",
    "[sig-node] Security Context When creating a pod with readOnlyRootFilesystem should run the container with readonly rootfs when readOnlyRootFilesystem=true [LinuxOnly] [NodeConformance]",
    "[sig-node] Containers should use the image defaults if command and args are blank [NodeConformance] [Conformance]",
    "[sig-node] Container Runtime blackbox test on terminated container should report termination message if TerminationMessagePath is set as non-root user and at a non-default path [NodeConformance] [Conformance]",
    "[sig-node] Kubelet when scheduling an agnhost Pod with hostAliases should write entries to /etc/hosts [NodeConformance] [Conformance]",
];

/// `name` as a regular expression that matches it literally (ginkgo's focus is RE2).
fn literal(name: &str) -> String {
    let mut out = String::with_capacity(name.len() * 2);
    for c in name.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_upstream_conformance_smoke_set_passes_on_a_ledgerlet_node() {
    let report = tempfile::tempdir().unwrap();
    let focus = SMOKE
        .iter()
        // ginkgo matches more than the name (labels after it, more before it): unanchored,
        // and the count below catches a name that matches a second test
        .map(|n| literal(n))
        .collect::<Vec<_>>()
        .join("|");
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/conformance.sh"
    ))
    .arg("--report")
    .arg(report.path())
    .args(["--focus", &focus, "--procs", "4"])
    .env("LEDGERLET_BIN", env!("CARGO_BIN_EXE_ledgerlet"))
    // apart from the other containerd clusters' pod networks
    .env("LEDGERLET_CLUSTER_CIDR", "10.251.0.0/16")
    .output()
    .expect("run scripts/conformance.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let why = format!(
            "scripts/conformance.sh could not run ({}):\n{stderr}",
            out.status
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("the conformance suite is required under CI=true: {why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(report.path().join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    let failures: Vec<String> = summary["failures"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{}\n    {}",
                f["name"],
                f["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let log = std::fs::read_to_string(report.path().join("e2e.log")).unwrap_or_default();
    assert!(
        failures.is_empty(),
        "failed upstream tests:\n{}\n\nthe suite's output ends:\n{}",
        failures.join("\n"),
        &log[log.len().saturating_sub(4000)..]
    );
    assert_eq!(
        summary["passed"].as_u64(),
        Some(SMOKE.len() as u64),
        "every smoke test ran and passed: {summary}\n{stderr}"
    );
    let last = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        last.lines().last(),
        Some(format!("{} passed, 0 failed, 0 skipped", SMOKE.len()).as_str())
    );
}
