//! The static pod source (`--pod-manifest-path`): parsing, defaulting, validation and the
//! directory watch, with real files in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ledgerlet::core::pod::{
    CONFIG_HASH_ANNOTATION, CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION,
};
use ledgerlet::core::record::Time;
use ledgerlet::sources::file::{FileSource, Limits, SourceChange};

const NODE: &str = "Node-A";

fn at(secs: i64) -> Time {
    Time::from_unix_secs(1_800_000_000 + secs)
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, body).unwrap();
    path
}

/// Writes through a hidden temporary file and a rename, as careful tools do, so that a
/// concurrent scan never sees a half-written file.
fn write_atomic(dir: &Path, name: &str, body: &str) -> PathBuf {
    let tmp = dir.join(format!(".{name}.tmp"));
    fs::write(&tmp, body).unwrap();
    let path = dir.join(name);
    fs::rename(&tmp, &path).unwrap();
    path
}

fn manifest(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: {image}
"
    )
}

fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap()
}

fn uid(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap()
}

fn annotation<'a>(p: &'a Pod, key: &str) -> &'a str {
    p.metadata.annotations.as_ref().unwrap()[key].as_str()
}

/// One line per change: `+ name uid`, `~ name uid`, `- name uid`, `! error`.
fn summary(changes: &[SourceChange]) -> Vec<String> {
    changes
        .iter()
        .map(|c| match c {
            SourceChange::Added(p) => format!("+ {} {}", name(p), uid(p)),
            SourceChange::Updated(p) => format!("~ {} {}", name(p), uid(p)),
            SourceChange::Removed(p) => format!("- {} {}", name(p), uid(p)),
            SourceChange::Rejected { path, error } => {
                assert_eq!(path, &error.path, "Rejected carries the error's path");
                format!("! {error}")
            }
        })
        .collect()
}

fn added(changes: &[SourceChange]) -> Vec<Arc<Pod>> {
    changes
        .iter()
        .map(|c| match c {
            SourceChange::Added(p) => p.clone(),
            other => panic!("expected only additions, got {other:?}"),
        })
        .collect()
}

fn only_added(changes: &[SourceChange]) -> Arc<Pod> {
    let pods = added(changes);
    assert_eq!(pods.len(), 1, "{:?}", summary(changes));
    pods[0].clone()
}

fn source(dir: &Path) -> FileSource {
    FileSource::new(dir, NODE)
}

/// Writes `web.yaml` with `body` into a fresh directory, scans, and returns the one
/// rejection's text with the file's path replaced by `<file>`.
fn rejection(body: &str) -> String {
    rejection_of("web.yaml", body)
}

fn rejection_of(file: &str, body: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), file, body);
    let changes = source(dir.path()).scan(at(0));
    match changes.as_slice() {
        [SourceChange::Rejected { error, .. }] => error
            .to_string()
            .replace(&path.display().to_string(), "<file>"),
        other => panic!("expected one rejection, got {:?}", summary(other)),
    }
}

// ---------------------------------------------------------------------------------------
// Parsing and defaulting

#[test]
fn yaml_manifest_becomes_a_pod_with_the_static_pod_defaults() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "web.yaml",
        "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  initContainers:
  - name: setup
    image: busybox
  containers:
  - name: app
    image: nginx:1.27
    ports:
    - containerPort: 80
",
    );
    let pod = only_added(&source(dir.path()).scan(at(0)));

    assert_eq!(
        name(&pod),
        "web-node-a",
        "suffixed with the lowercased node name"
    );
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    let u = uid(&pod);
    assert_eq!(u.len(), 32);
    assert!(
        u.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{u}"
    );
    assert_eq!(annotation(&pod, CONFIG_HASH_ANNOTATION), u);
    assert_eq!(annotation(&pod, CONFIG_SOURCE_ANNOTATION), "file");
    assert_eq!(
        annotation(&pod, CONFIG_SEEN_ANNOTATION),
        "2027-01-15T08:00:00.000000000Z"
    );
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["app"], "web");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(NODE));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    let app = &spec.containers[0];
    assert_eq!(app.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        app.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(app.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(
        app.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    let setup = &spec.init_containers.as_ref().unwrap()[0];
    assert_eq!(
        setup.image_pull_policy.as_deref(),
        Some("Always"),
        "untagged image"
    );
    assert_eq!(setup.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    assert!(ledgerlet::core::pod::is_static(&pod));
}

#[test]
fn values_set_in_the_manifest_are_not_defaulted_over() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "etcd.yml",
        "apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  annotations: {team: infra}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 5
  dnsPolicy: Default
  containers:
  - name: etcd
    image: etcd:latest
    imagePullPolicy: Never
    terminationMessagePolicy: FallbackToLogsOnError
    ports:
    - containerPort: 2379
      protocol: UDP
",
    );
    let pod = only_added(&source(dir.path()).scan(at(0)));
    assert_eq!(name(&pod), "etcd-node-a");
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(annotation(&pod, "team"), "infra", "own annotations kept");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(spec.termination_grace_period_seconds, Some(5));
    assert_eq!(spec.dns_policy.as_deref(), Some("Default"));
    let c = &spec.containers[0];
    assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
    assert_eq!(
        c.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
    assert_eq!(
        c.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("UDP")
    );
}

#[test]
fn latest_or_untagged_images_default_to_pull_always() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &manifest("a", "registry:5000/app"));
    write(dir.path(), "b.yaml", &manifest("b", "app:latest"));
    write(dir.path(), "c.yaml", &manifest("c", "app@sha256:0123"));
    let pods = added(&source(dir.path()).scan(at(0)));
    let policies: Vec<&str> = pods
        .iter()
        .map(|p| {
            p.spec.as_ref().unwrap().containers[0]
                .image_pull_policy
                .as_deref()
                .unwrap()
        })
        .collect();
    assert_eq!(policies, ["Always", "Always", "IfNotPresent"]);
}

#[test]
fn json_manifest_is_one_pod() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "api.json",
        r#"{"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "api", "namespace": "kube-system"},
            "spec": {"containers": [{"name": "api", "image": "kube-apiserver:v1.35.0"}]}}"#,
    );
    let pod = only_added(&source(dir.path()).scan(at(0)));
    assert_eq!(name(&pod), "api-node-a");
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
}

#[test]
fn multi_document_yaml_gives_one_pod_per_document_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "# control plane\n{}---\n{}---\n{}---\n",
        manifest("one", "a:1"),
        manifest("two", "b:1"),
        manifest("three", "c:1")
    );
    write(dir.path(), "all.yaml", &body);
    let pods = added(&source(dir.path()).scan(at(0)));
    let names: Vec<&str> = pods.iter().map(|p| name(p)).collect();
    assert_eq!(names, ["one-node-a", "two-node-a", "three-node-a"]);
}

#[test]
fn identical_documents_get_distinct_uids() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest("web", "nginx:1");
    write(dir.path(), "a.yaml", &format!("{m}---\n{m}"));
    write(dir.path(), "b.yaml", &m);
    let pods = added(&source(dir.path()).scan(at(0)));
    assert_eq!(pods.len(), 3);
    assert_ne!(uid(&pods[0]), uid(&pods[1]), "document index is hashed");
    assert_ne!(uid(&pods[0]), uid(&pods[2]), "file path is hashed");
}

#[test]
fn same_content_gives_the_same_uid_in_another_scan_and_after_a_cosmetic_edit() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    let first = only_added(&source(dir.path()).scan(at(0)));
    // A restarted agent derives the same UID.
    let again = only_added(&source(dir.path()).scan(at(60)));
    assert_eq!(uid(&first), uid(&again));

    // Comments, quoting, flow style and key order do not change the UID.
    let mut src = source(dir.path());
    src.scan(at(0));
    write(
        dir.path(),
        "web.yaml",
        "# edited by hand
kind: Pod
apiVersion: \"v1\"
spec: {containers: [{image: 'nginx:1', name: app}]}
metadata: {name: web}
",
    );
    assert_eq!(summary(&src.scan(at(1))), Vec::<String>::new());
    assert_eq!(uid(src.pods().next().unwrap()), uid(&first));
}

#[test]
fn edited_manifest_gets_a_new_uid_the_old_pod_is_removed_then_the_new_added() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    let mut src = source(dir.path());
    let old = only_added(&src.scan(at(0)));
    write(dir.path(), "web.yaml", &manifest("web", "nginx:2"));
    let changes = src.scan(at(1));
    let new = src.pods().next().unwrap().clone();
    assert_ne!(uid(&new), uid(&old));
    assert_eq!(
        summary(&changes),
        [
            format!("- web-node-a {}", uid(&old)),
            format!("+ web-node-a {}", uid(&new)),
        ]
    );
    assert_eq!(
        annotation(&new, CONFIG_SEEN_ANNOTATION),
        at(1).to_string(),
        "the new version is stamped with the scan time"
    );
}

#[test]
fn explicit_uid_is_kept_and_an_edit_is_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let with_uid = |image: &str| {
        manifest("web", image).replace("  name: web\n", "  name: web\n  uid: 11111111-2222\n")
    };
    write(dir.path(), "web.yaml", &with_uid("nginx:1"));
    let mut src = source(dir.path());
    let pod = only_added(&src.scan(at(0)));
    assert_eq!(uid(&pod), "11111111-2222");
    assert_eq!(annotation(&pod, CONFIG_HASH_ANNOTATION), "11111111-2222");

    write(dir.path(), "web.yaml", &with_uid("nginx:2"));
    let changes = src.scan(at(1));
    assert_eq!(summary(&changes), ["~ web-node-a 11111111-2222"]);
    let SourceChange::Updated(updated) = &changes[0] else {
        unreachable!()
    };
    assert_eq!(
        updated.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:2")
    );
}

// ---------------------------------------------------------------------------------------
// Validation: every message names the file, the document when there are several, the
// field and what is wrong.

#[test]
fn missing_image_is_rejected_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n",
    );
    let changes = source(dir.path()).scan(at(0));
    assert_eq!(
        summary(&changes),
        [format!(
            "! {}: spec.containers[0].image: Required value",
            path.display()
        )]
    );
}

#[test]
fn missing_name_is_required() {
    assert_eq!(
        rejection(&manifest("''", "nginx:1")),
        "<file>: metadata.name: Required value"
    );
}

#[test]
fn name_must_be_a_dns_subdomain() {
    assert_eq!(
        rejection(&manifest("Web_1", "nginx:1")),
        "<file>: metadata.name: Invalid value: \"Web_1-node-a\": a lowercase RFC 1123 \
         subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
         start and end with an alphanumeric character (e.g. 'example.com', regex used for \
         validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
}

#[test]
fn name_longer_than_253_characters_after_the_node_suffix_is_rejected() {
    // 247 + "-node-a" = 254
    let long = "a".repeat(247);
    assert_eq!(
        rejection(&manifest(&long, "nginx:1")),
        format!("<file>: metadata.name: Invalid value: \"{long}-node-a\": must be no more than 253 characters")
    );
    let fits = "a".repeat(246);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &manifest(&fits, "nginx:1"));
    assert_eq!(
        name(&only_added(&source(dir.path()).scan(at(0)))).len(),
        253
    );
}

#[test]
fn namespace_must_be_a_dns_label() {
    let body = manifest("web", "nginx:1")
        .replace("  name: web\n", "  name: web\n  namespace: kube.system\n");
    assert_eq!(
        rejection(&body),
        "<file>: metadata.namespace: Invalid value: \"kube.system\": a lowercase RFC 1123 \
         label must consist of lower case alphanumeric characters or '-', and must start and \
         end with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for \
         validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    );
}

#[test]
fn a_pod_needs_a_container() {
    assert_eq!(
        rejection("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n"),
        "<file>: spec.containers: Required value"
    );
    assert_eq!(
        rejection("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"),
        "<file>: spec.containers: Required value"
    );
}

#[test]
fn container_names_must_be_dns_labels() {
    assert_eq!(
        rejection(&manifest("web", "nginx:1").replace("name: app", "name: App")),
        "<file>: spec.containers[0].name: Invalid value: \"App\": a lowercase RFC 1123 label \
         must consist of lower case alphanumeric characters or '-', and must start and end \
         with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for \
         validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    );
}

#[test]
fn container_names_must_be_unique_across_init_and_app_containers() {
    let body = "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers:
  - {name: app, image: busybox}
  containers:
  - {name: app, image: nginx}
  - {name: side, image: nginx}
  - {name: side, image: nginx}
";
    assert_eq!(
        rejection(body),
        "<file>: [spec.containers[2].name: Duplicate value: \"side\", \
         spec.initContainers[0].name: Duplicate value: \"app\"]"
    );
}

#[test]
fn pod_restart_policy_must_be_always_on_failure_or_never() {
    let body = manifest("web", "nginx:1").replace("spec:\n", "spec:\n  restartPolicy: Sometimes\n");
    assert_eq!(
        rejection(&body),
        "<file>: spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \
         \"Always\", \"OnFailure\", \"Never\""
    );
}

#[test]
fn container_restart_policy_is_forbidden_on_app_containers() {
    let body = manifest("web", "nginx:1") + "    restartPolicy: Always\n";
    assert_eq!(
        rejection(&body),
        "<file>: spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"
    );
}

#[test]
fn init_container_restart_policy_may_only_be_always() {
    let body = |policy: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  initContainers:
  - {{name: sidecar, image: proxy, restartPolicy: {policy}}}
  containers:
  - {{name: app, image: nginx}}
"
        )
    };
    assert_eq!(
        rejection(&body("Never")),
        "<file>: spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": \
         supported values: \"Always\""
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &body("Always"));
    only_added(&source(dir.path()).scan(at(0)));
}

#[test]
fn negative_termination_grace_period_is_rejected() {
    let body = manifest("web", "nginx:1")
        .replace("spec:\n", "spec:\n  terminationGracePeriodSeconds: -1\n");
    assert_eq!(
        rejection(&body),
        "<file>: spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"
    );
}

#[test]
fn probe_thresholds_must_be_at_least_one_and_liveness_success_exactly_one() {
    let body = manifest("web", "nginx:1")
        + "    livenessProbe: {exec: {command: [ls]}, successThreshold: 2}
    readinessProbe: {exec: {command: [ls]}, successThreshold: 3, failureThreshold: 0}
    startupProbe: {exec: {command: [ls]}, successThreshold: 0}
";
    assert_eq!(
        rejection(&body),
        "<file>: [spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1, \
         spec.containers[0].readinessProbe.failureThreshold: Invalid value: 0: must be greater than or equal to 1, \
         spec.containers[0].startupProbe.successThreshold: Invalid value: 0: must be greater than or equal to 1]"
    );
}

#[test]
fn probes_on_init_containers_need_restart_policy_always() {
    let body = "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers:
  - name: setup
    image: busybox
    readinessProbe: {exec: {command: [ls]}}
  containers:
  - {name: app, image: nginx}
";
    assert_eq!(
        rejection(body),
        "<file>: spec.initContainers[0].readinessProbe: Forbidden: may not be set for init \
         containers without restartPolicy=Always"
    );
}

#[test]
fn probes_and_lifecycle_hooks_need_exactly_one_handler() {
    let body = manifest("web", "nginx:1")
        + "    livenessProbe: {periodSeconds: 1}
    readinessProbe: {exec: {command: [ls]}, tcpSocket: {port: 80}}
    lifecycle:
      postStart: {}
      preStop: {sleep: {seconds: 1}, httpGet: {port: 80}}
";
    assert_eq!(
        rejection(&body),
        "<file>: [spec.containers[0].livenessProbe: Required value: must specify a handler type, \
         spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type, \
         spec.containers[0].lifecycle.postStart: Required value: must specify a handler type, \
         spec.containers[0].lifecycle.preStop.sleep: Forbidden: may not specify more than 1 handler type]"
    );
}

#[test]
fn container_ports_must_be_valid() {
    let body = manifest("web", "nginx:1")
        + "    ports:\n    - {containerPort: 0}\n    - {containerPort: 80, protocol: tcp}\n";
    assert_eq!(
        rejection(&body),
        "<file>: [spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive, \
         spec.containers[0].ports[1].protocol: Unsupported value: \"tcp\": supported values: \"SCTP\", \"TCP\", \"UDP\"]"
    );
}

#[test]
fn image_with_surrounding_whitespace_is_rejected() {
    assert_eq!(
        rejection(&manifest("web", "' nginx'")),
        "<file>: spec.containers[0].image: Invalid value: \" nginx\": must not have leading or trailing whitespace"
    );
}

#[test]
fn an_error_in_the_second_document_names_the_document() {
    let body = format!("{}---\n{}", manifest("one", "a:1"), manifest("two", "''"));
    assert_eq!(
        rejection(&body),
        "<file>: document[1]: spec.containers[0].image: Required value"
    );
}

#[test]
fn yaml_syntax_error_names_the_file_line_and_column() {
    let body = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   bad: [\n";
    assert_eq!(
        rejection(body),
        "<file>: cannot parse YAML: mapping values are not allowed in this context at line 5 column 7"
    );
}

#[test]
fn a_field_of_the_wrong_type_names_the_field_line_and_column() {
    let body = manifest("web", "nginx:1") + "    ports:\n    - containerPort: http\n";
    assert_eq!(
        rejection(&body),
        "<file>: cannot parse YAML: spec.containers[0].ports[0].containerPort: invalid type: \
         string \"http\", expected i32 at line 10 column 22"
    );
}

#[test]
fn a_document_that_is_not_a_pod_is_rejected_with_its_index() {
    let body = format!(
        "{}---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\n",
        manifest("one", "a:1")
    );
    assert_eq!(
        rejection(&body),
        "<file>: document[1]: not a Pod: apiVersion \"apps/v1\", kind \"Deployment\" (want apiVersion \"v1\", kind \"Pod\")"
    );
    assert_eq!(
        rejection("metadata: {name: web}\n"),
        "<file>: not a Pod: apiVersion \"\", kind \"\" (want apiVersion \"v1\", kind \"Pod\")"
    );
}

#[test]
fn json_syntax_error_names_the_file_line_and_column() {
    assert_eq!(
        rejection_of(
            "web.json",
            "{\"apiVersion\": \"v1\",\n \"kind\": \"Pod\",,}"
        ),
        "<file>: cannot parse JSON: key must be a string at line 2 column 16"
    );
}

#[test]
fn an_empty_manifest_is_rejected_not_read_as_no_pods() {
    assert_eq!(rejection(""), "<file>: no pod in the manifest");
    assert_eq!(
        rejection("# nothing yet\n---\n"),
        "<file>: no pod in the manifest"
    );
    assert_eq!(
        rejection_of("web.json", " \n"),
        "<file>: no pod in the manifest"
    );
}

// ---------------------------------------------------------------------------------------
// Watching the directory

#[test]
fn hidden_files_other_extensions_and_subdirectories_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".web.yaml", &manifest("hidden", "a:1"));
    write(dir.path(), "web.yaml.bak", &manifest("backup", "a:1"));
    write(dir.path(), "README", "not a manifest");
    fs::create_dir(dir.path().join("sub.yaml")).unwrap();
    write(
        &dir.path().join("sub.yaml"),
        "inner.yaml",
        &manifest("inner", "a:1"),
    );
    write(dir.path(), "web.YML", &manifest("web", "a:1"));
    let pods = added(&source(dir.path()).scan(at(0)));
    let names: Vec<&str> = pods.iter().map(|p| name(p)).collect();
    assert_eq!(names, ["web-node-a"]);
}

#[test]
fn an_unchanged_directory_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    write(dir.path(), "bad.yaml", "kind: [");
    let mut src = source(dir.path());
    assert_eq!(src.scan(at(0)).len(), 2);
    for i in 1..5 {
        assert!(src.scan(at(i)).is_empty(), "scan {i}");
    }
}

#[test]
fn removing_a_file_removes_its_pods() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!("{}---\n{}", manifest("one", "a:1"), manifest("two", "b:1"));
    let path = write(dir.path(), "pods.yaml", &body);
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    let mut src = source(dir.path());
    let pods = added(&src.scan(at(0)));
    fs::remove_file(path).unwrap();
    assert_eq!(
        summary(&src.scan(at(1))),
        [
            format!("- one-node-a {}", uid(&pods[0])),
            format!("- two-node-a {}", uid(&pods[1])),
        ]
    );
    assert_eq!(src.pods().count(), 1);
}

#[test]
fn an_invalid_edit_keeps_the_running_pod_and_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    let mut src = source(dir.path());
    let pod = only_added(&src.scan(at(0)));

    write(dir.path(), "web.yaml", &manifest("web", "''"));
    assert_eq!(
        summary(&src.scan(at(1))),
        [format!(
            "! {}: spec.containers[0].image: Required value",
            path.display()
        )]
    );
    assert!(
        src.scan(at(2)).is_empty(),
        "not reported again while unchanged"
    );
    let running: Vec<_> = src.pods().collect();
    assert_eq!(running.len(), 1);
    assert!(
        Arc::ptr_eq(running[0], &pod),
        "the last valid version keeps running"
    );

    // A different broken edit is reported again.
    write(dir.path(), "web.yaml", "kind: [");
    assert!(matches!(
        src.scan(at(3)).as_slice(),
        [SourceChange::Rejected { .. }]
    ));

    // Truncated (an editor caught mid-save) is a rejection too, not a removal.
    write(dir.path(), "web.yaml", "");
    assert_eq!(
        summary(&src.scan(at(4))),
        [format!("! {}: no pod in the manifest", path.display())]
    );
    assert_eq!(src.pods().count(), 1);
}

#[test]
fn fixing_a_rejected_manifest_replaces_the_pod_and_reverting_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    let mut src = source(dir.path());
    let old = only_added(&src.scan(at(0)));
    write(dir.path(), "web.yaml", "kind: [");
    src.scan(at(1));

    // Back to the exact previous content: same UID, nothing to do.
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    assert!(src.scan(at(2)).is_empty());

    write(dir.path(), "web.yaml", "kind: [");
    src.scan(at(3));
    write(dir.path(), "web.yaml", &manifest("web", "nginx:2"));
    let changes = src.scan(at(4));
    let new = src.pods().next().unwrap().clone();
    assert_eq!(
        summary(&changes),
        [
            format!("- web-node-a {}", uid(&old)),
            format!("+ web-node-a {}", uid(&new)),
        ]
    );
}

#[test]
fn changes_are_ordered_by_path_then_document() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "c.yaml", &manifest("c", "x:1"));
    write(
        dir.path(),
        "a.yaml",
        &format!("{}---\n{}", manifest("a0", "x:1"), manifest("a1", "x:1")),
    );
    write(dir.path(), "b.yaml", "kind: [");
    write(dir.path(), "d.json", "{}");
    let dir_s = dir.path().display().to_string();
    let changes = source(dir.path()).scan(at(0));
    let lines: Vec<String> = summary(&changes)
        .into_iter()
        .map(|l| {
            let l = l.replace(&dir_s, "");
            l.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
        })
        .collect();
    assert_eq!(
        lines,
        [
            "+ a0-node-a",
            "+ a1-node-a",
            "! /b.yaml:",
            "+ c-node-a",
            "! /d.json:"
        ]
    );
}

#[test]
fn two_files_with_the_same_pod_name_are_both_kept() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
    write(dir.path(), "web-copy.yaml", &manifest("web", "nginx:1"));
    let pods = added(&source(dir.path()).scan(at(0)));
    assert_eq!(pods.len(), 2);
    assert_eq!(name(&pods[0]), name(&pods[1]));
    assert_ne!(uid(&pods[0]), uid(&pods[1]));
}

fn with_uid(name: &str, uid: &str) -> String {
    manifest(name, "nginx:1").replace(
        &format!("  name: {name}\n"),
        &format!("  name: {name}\n  uid: {uid}\n"),
    )
}

#[test]
fn a_duplicate_explicit_uid_rejects_the_newcomer_and_keeps_the_running_pod() {
    let dir = tempfile::tempdir().unwrap();
    let b = write(dir.path(), "b.yaml", &with_uid("b", "same"));
    let mut src = source(dir.path());
    only_added(&src.scan(at(0)));

    // a.yaml sorts first but b.yaml was there first.
    let a = write(dir.path(), "a.yaml", &with_uid("a", "same"));
    assert_eq!(
        summary(&src.scan(at(1))),
        [format!(
            "! {}: metadata.uid: Duplicate value: \"same\": already declared by {}",
            a.display(),
            b.display()
        )]
    );
    assert!(src.scan(at(2)).is_empty(), "reported once");

    // Once b.yaml is gone, a.yaml's pod takes over the UID: one update, not a removal.
    fs::remove_file(&b).unwrap();
    assert_eq!(summary(&src.scan(at(3))), ["~ a-node-a same"]);
}

#[test]
fn duplicate_uids_between_new_files_keep_the_first_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &with_uid("a", "same"));
    let b = write(
        dir.path(),
        "b.yaml",
        &format!("{}---\n{}", manifest("b0", "x:1"), with_uid("b1", "same")),
    );
    let changes = source(dir.path()).scan(at(0));
    assert_eq!(
        summary(&changes),
        [
            "+ a-node-a same".to_string(),
            format!(
                "! {}: document[1]: metadata.uid: Duplicate value: \"same\": already declared by {}",
                b.display(),
                dir.path().join("a.yaml").display()
            ),
        ]
    );
}

#[test]
fn a_manifest_over_the_byte_limit_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let body = manifest("web", "nginx:1");
    let path = write(dir.path(), "web.yaml", &body);
    let limit = body.len() as u64 - 1;
    let mut src = source(dir.path()).with_limits(Limits {
        max_manifest_bytes: limit,
        ..Limits::default()
    });
    assert_eq!(
        summary(&src.scan(at(0))),
        [format!(
            "! {}: manifest is {} bytes, more than the limit of {limit} bytes",
            path.display(),
            body.len()
        )]
    );
    assert!(src.scan(at(1)).is_empty(), "reported once");
    assert_eq!(Limits::default().max_manifest_bytes, 10 * 1024 * 1024);
}

#[test]
fn files_over_the_count_limit_are_rejected_and_running_files_keep_their_place() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "b.yaml", &manifest("b", "x:1"));
    write(dir.path(), "c.yaml", &manifest("c", "x:1"));
    let d = write(dir.path(), "d.yaml", &manifest("d", "x:1"));
    let mut src = source(dir.path()).with_limits(Limits {
        max_manifests: 2,
        ..Limits::default()
    });
    let changes = src.scan(at(0));
    assert_eq!(
        summary(&changes)[2],
        format!(
            "! {}: more than 2 manifests in the directory; this one is ignored",
            d.display()
        )
    );
    assert_eq!(changes.len(), 3);
    assert!(src.scan(at(1)).is_empty(), "reported once");

    // a.yaml sorts first, but b and c are running: a is the one left out.
    let a = write(dir.path(), "a.yaml", &manifest("a", "x:1"));
    assert_eq!(
        summary(&src.scan(at(2))),
        [format!(
            "! {}: more than 2 manifests in the directory; this one is ignored",
            a.display()
        )]
    );
    // Room again: the first waiting file in path order gets it.
    fs::remove_file(dir.path().join("c.yaml")).unwrap();
    let lines = summary(&src.scan(at(3)));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("+ a-node-a"), "{lines:?}");
    assert!(lines[1].starts_with("- c-node-a"), "{lines:?}");
    assert_eq!(Limits::default().max_manifests, 1000);
}

#[test]
fn a_single_manifest_file_path_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "static-pod", &manifest("web", "nginx:1"));
    let mut src = FileSource::new(&path, NODE);
    only_added(&src.scan(at(0)));
    fs::remove_file(&path).unwrap();
    let changes = src.scan(at(1));
    assert_eq!(
        summary(&changes)[0],
        format!("! {}: path does not exist", path.display())
    );
    assert!(matches!(changes[1], SourceChange::Removed(_)));
}

#[test]
fn a_missing_directory_is_reported_once_and_removes_its_pods() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("manifests");
    let mut src = source(&dir);
    assert_eq!(
        summary(&src.scan(at(0))),
        [format!("! {}: path does not exist", dir.display())]
    );
    assert!(
        src.scan(at(1)).is_empty(),
        "reported once per change of state"
    );

    fs::create_dir(&dir).unwrap();
    write(&dir, "web.yaml", &manifest("web", "nginx:1"));
    let pod = only_added(&src.scan(at(2)));

    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        summary(&src.scan(at(3))),
        [
            format!("! {}: path does not exist", dir.display()),
            format!("- web-node-a {}", uid(&pod)),
        ]
    );
    assert!(src.scan(at(4)).is_empty());
}

#[test]
fn an_unreadable_manifest_path_keeps_the_pods() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("manifests");
    fs::create_dir(&dir).unwrap();
    write(&dir, "web.yaml", &manifest("web", "nginx:1"));
    let mut src = source(&dir);
    only_added(&src.scan(at(0)));

    // Tests run as root, so permissions cannot make it unreadable: put a socket there.
    fs::remove_dir_all(&dir).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(&dir).unwrap();
    assert_eq!(
        summary(&src.scan(at(1))),
        [format!(
            "! {}: the manifest path is neither a regular file nor a directory",
            dir.display()
        )]
    );
    assert!(src.scan(at(2)).is_empty(), "reported once");
    assert_eq!(src.pods().count(), 1, "pods kept");
}

#[test]
fn rejections_are_counted_by_reason() {
    use metrics::{
        Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    type Counts = Arc<Mutex<BTreeMap<String, u64>>>;
    struct One(String, Counts);
    impl CounterFn for One {
        fn increment(&self, value: u64) {
            *self.1.lock().unwrap().entry(self.0.clone()).or_default() += value;
        }
        fn absolute(&self, value: u64) {
            self.1.lock().unwrap().insert(self.0.clone(), value);
        }
    }
    #[derive(Default)]
    struct Rec(Counts);
    impl Recorder for Rec {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            Counter::from_arc(Arc::new(One(name, self.0.clone())))
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("m");
    fs::create_dir(&dir).unwrap();
    write(&dir, "a.yaml", "kind: [");
    write(&dir, "b.yaml", &manifest("b", "''"));
    write(&dir, "c.yaml", &"#".repeat(100));
    write(&dir, "d.yaml", &manifest("d", "x:1"));
    write(&dir, "e.yaml", &manifest("e", "x:1"));
    let rec = Rec::default();
    let mut src = source(&dir).with_limits(Limits {
        max_manifests: 4,
        max_manifest_bytes: 99,
    });
    metrics::with_local_recorder(&rec, || {
        src.scan(at(0));
        src.scan(at(1));
        fs::remove_dir_all(&dir).unwrap();
        src.scan(at(2));
    });
    let counts = rec.0.lock().unwrap().clone();
    let want: BTreeMap<String, u64> = [
        ("parse", 1),
        ("invalid", 1),
        ("too_large", 1),
        ("too_many", 1),
        ("io", 1),
    ]
    .into_iter()
    .map(|(r, n)| (format!("ledgerlet_manifest_errors_total{{reason={r}}}"), n))
    .collect();
    assert_eq!(counts, want);
}

// ---------------------------------------------------------------------------------------
// The async driver

mod driver {
    use super::*;
    use ledgerlet::core::config::PodSource;
    use ledgerlet::core::record::Event;
    use ledgerlet::sources::file::{change_event, run, ManifestError, Problem};
    use std::time::Duration;
    use tokio::sync::mpsc;

    async fn next(rx: &mut mpsc::Receiver<Event>) -> Event {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("an event within 10 s")
            .expect("the driver is running")
    }

    fn pod_of(e: &Event) -> &Pod {
        e.pod().unwrap_or_else(|| panic!("no pod in {e}"))
    }

    #[tokio::test]
    async fn sends_the_first_scan_then_source_ready_then_each_change_once() {
        let dir = tempfile::tempdir().unwrap();
        write_atomic(dir.path(), "web.yaml", &manifest("web", "nginx:1"));
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(run(dir.path().to_owned(), NODE.into(), 10, tx));

        let added = next(&mut rx).await;
        assert_eq!(added.kind(), "PodAdded");
        let Event::PodAdded(change) = &added else {
            unreachable!()
        };
        assert_eq!(change.source, PodSource::File);
        assert_eq!(name(pod_of(&added)), "web-node-a");
        let first_uid = uid(pod_of(&added)).to_owned();
        assert!(matches!(
            next(&mut rx).await,
            Event::SourceReady(r) if r.source == PodSource::File
        ));

        // An invalid edit: reported (once), the pod is not removed.
        let path = write_atomic(dir.path(), "web.yaml", &manifest("web", "''"));
        match next(&mut rx).await {
            Event::ManifestRejected(m) => {
                assert_eq!(m.path, path.display().to_string());
                assert_eq!(
                    m.error,
                    format!(
                        "{}: spec.containers[0].image: Required value",
                        path.display()
                    )
                );
            }
            other => panic!("expected ManifestRejected, got {other}"),
        }

        // A valid edit replaces the pod: the old UID goes first.
        write_atomic(dir.path(), "web.yaml", &manifest("web", "nginx:2"));
        let removed = next(&mut rx).await;
        assert_eq!(removed.kind(), "PodRemoved");
        assert_eq!(uid(pod_of(&removed)), first_uid);
        let added = next(&mut rx).await;
        assert_eq!(added.kind(), "PodAdded");
        let second_uid = uid(pod_of(&added)).to_owned();
        assert_ne!(second_uid, first_uid);

        fs::remove_file(&path).unwrap();
        let removed = next(&mut rx).await;
        assert_eq!(removed.kind(), "PodRemoved");
        assert_eq!(uid(pod_of(&removed)), second_uid);

        drop(rx);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the driver stops once the receiver is gone")
            .unwrap();
    }

    #[tokio::test]
    async fn a_missing_directory_is_reported_once_and_the_driver_keeps_scanning() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("manifests");
        let (tx, mut rx) = mpsc::channel(16);
        let _task = tokio::spawn(run(dir.clone(), NODE.into(), 5, tx));

        match next(&mut rx).await {
            Event::ManifestRejected(m) => {
                assert_eq!(m.error, format!("{}: path does not exist", dir.display()))
            }
            other => panic!("expected ManifestRejected, got {other}"),
        }
        assert_eq!(next(&mut rx).await.kind(), "SourceReady");

        // Let it poll a few times: nothing more may be reported.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "reported once, not every scan");

        // The directory appears (complete, by a rename).
        let staging = parent.path().join(".staging");
        fs::create_dir(&staging).unwrap();
        write(&staging, "web.yaml", &manifest("web", "nginx:1"));
        fs::rename(&staging, &dir).unwrap();
        let added = next(&mut rx).await;
        assert_eq!(added.kind(), "PodAdded");
        assert_eq!(name(pod_of(&added)), "web-node-a");
    }

    #[test]
    fn changes_map_to_the_ledger_events() {
        let pod = Arc::new(Pod::default());
        let kinds: Vec<&str> = [
            SourceChange::Added(pod.clone()),
            SourceChange::Updated(pod.clone()),
            SourceChange::Removed(pod),
            SourceChange::Rejected {
                path: "/m/web.yaml".into(),
                error: ManifestError::file("/m/web.yaml", Problem::Empty),
            },
        ]
        .into_iter()
        .map(|c| change_event(c).kind())
        .collect();
        assert_eq!(
            kinds,
            ["PodAdded", "PodUpdated", "PodRemoved", "ManifestRejected"]
        );
        let Event::ManifestRejected(m) = change_event(SourceChange::Rejected {
            path: "/m/web.yaml".into(),
            error: ManifestError::file("/m/web.yaml", Problem::Empty),
        }) else {
            unreachable!()
        };
        assert_eq!(m.path, "/m/web.yaml");
        assert_eq!(m.error, "/m/web.yaml: no pod in the manifest");
    }
}
