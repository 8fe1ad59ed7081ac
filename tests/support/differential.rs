//! The differential status check: the same pod specs on a ledgerlet node and on a node run by
//! the real kubelet of the pinned release, in one cluster at the same time, each pod's API
//! status taken at the moment its spec names (the first version that reaches it, as a watch
//! sees them), normalised, and compared field by field.
//!
//! Normalising removes only what must differ between two nodes: times, container and image
//! IDs, IP addresses, the generated suffix of `kube-api-access-*` volumes, and the pod's and
//! node's names inside messages. Everything else the API shows is compared: phase, reason,
//! message, every condition (status, reason, message, observedGeneration), each container's
//! state, last state, restart count, ready, started, volume mounts, resources, the QoS class.
//!
//! Used by `tests/kubelet_differential.rs` (a small set, in CI) and by
//! `benches/compare_kubelet.rs` (the full set, `scripts/compare-kubelet.sh`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{json, Value};

/// The busybox image both nodes' containerd have imported (`scripts/build-test-images.sh`).
pub const IMAGE: &str = "ledgerlet.test/busybox:1";

/// When a spec's status is taken.
#[derive(Clone, Copy)]
pub enum Until {
    /// The first status for which the predicate holds.
    Status(fn(&Value) -> bool),
    /// Once the predicate holds the pod is deleted with this grace period; its status is the
    /// last one the watch shows (the deleted object).
    DeletedAfter(fn(&Value) -> bool, i64),
}

/// One pod spec of the check.
pub struct Spec {
    /// Names the pod (`<name>-l` on ledgerlet's node, `<name>-k` on the kubelet's).
    pub name: &'static str,
    /// What it pins: one line for the report.
    pub what: &'static str,
    /// The pod's `spec` (JSON; `nodeName` is set by the runner).
    pub spec: fn() -> Value,
    pub until: Until,
}

fn container(name: &str, script: &str) -> Value {
    json!({"name": name, "image": IMAGE, "imagePullPolicy": "IfNotPresent",
           "command": ["sh", "-c", script]})
}

fn restart(policy: &str, script: &str) -> Value {
    json!({"restartPolicy": policy, "terminationGracePeriodSeconds": 2,
           "containers": [container("app", script)]})
}

fn sleeper() -> Value {
    container("app", "sleep 3600")
}

fn statuses(s: &Value) -> Vec<&Value> {
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| s[*k].as_array())
        .flatten()
        .collect()
}

fn phase_is(s: &Value, phase: &str) -> bool {
    s["phase"] == phase
}

fn condition(s: &Value, ty: &str) -> Option<String> {
    s["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)?["status"]
        .as_str()
        .map(str::to_string)
}

fn ready(s: &Value) -> bool {
    condition(s, "Ready").as_deref() == Some("True")
}

/// Terminal and settled: the node has also stopped the sandbox (before that, which of the
/// versions in between a watch sees depends on timing, not on the node).
fn terminal(s: &Value) -> bool {
    (phase_is(s, "Succeeded") || phase_is(s, "Failed"))
        && condition(s, "PodReadyToStartContainers").as_deref() == Some("False")
}

/// In back-off after its first restart.
fn crash_looping(s: &Value) -> bool {
    statuses(s).iter().any(|c| {
        c["restartCount"].as_i64() >= Some(1)
            && c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    })
}

fn restarted(s: &Value) -> bool {
    statuses(s)
        .iter()
        .any(|c| c["restartCount"].as_i64() >= Some(1))
}

fn running_and_started(s: &Value) -> bool {
    let cs = statuses(s);
    !cs.is_empty()
        && cs
            .iter()
            .all(|c| c["state"]["running"].is_object() && c["started"] == true)
}

fn image_pull_back_off(s: &Value) -> bool {
    statuses(s)
        .iter()
        .any(|c| c["state"]["waiting"]["reason"] == "ImagePullBackOff")
}

/// Every spec of the full set, in the order of the report.
pub fn all() -> Vec<Spec> {
    vec![
        Spec {
            name: "always-exit-0",
            what: "restartPolicy Always, the container exits 0: restarted, then in back-off",
            spec: || restart("Always", "exit 0"),
            until: Until::Status(crash_looping),
        },
        Spec {
            name: "always-exit-1",
            what: "restartPolicy Always, the container exits 1: restarted, then in back-off",
            spec: || restart("Always", "exit 1"),
            until: Until::Status(crash_looping),
        },
        Spec {
            name: "onfailure-exit-0",
            what: "restartPolicy OnFailure, exit 0: Succeeded",
            spec: || restart("OnFailure", "exit 0"),
            until: Until::Status(terminal),
        },
        Spec {
            name: "onfailure-exit-1",
            what: "restartPolicy OnFailure, exit 1: restarted, then in back-off",
            spec: || restart("OnFailure", "exit 1"),
            until: Until::Status(crash_looping),
        },
        Spec {
            name: "never-exit-0",
            what: "restartPolicy Never, exit 0: Succeeded",
            spec: || restart("Never", "exit 0"),
            until: Until::Status(terminal),
        },
        Spec {
            name: "never-exit-1",
            what: "restartPolicy Never, exit 1: Failed",
            spec: || restart("Never", "echo bye; exit 1"),
            until: Until::Status(terminal),
        },
        Spec {
            name: "init-fails-once",
            what: "an init container that fails once, then succeeds: the pod becomes Ready",
            spec: || {
                let mut init = container(
                    "init",
                    "if [ -f /work/once ]; then exit 0; fi; touch /work/once; exit 1",
                );
                init["volumeMounts"] = json!([{"name": "work", "mountPath": "/work"}]);
                json!({"terminationGracePeriodSeconds": 2,
                       "volumes": [{"name": "work", "emptyDir": {}}],
                       "initContainers": [init], "containers": [sleeper()]})
            },
            until: Until::Status(ready),
        },
        Spec {
            name: "sidecar",
            what: "a sidecar (an init container with restartPolicy Always) and a main container",
            spec: || {
                let mut side = container("sidecar", "sleep 3600");
                side["restartPolicy"] = json!("Always");
                json!({"terminationGracePeriodSeconds": 2,
                       "initContainers": [side], "containers": [sleeper()]})
            },
            until: Until::Status(ready),
        },
        Spec {
            name: "liveness-fails",
            what: "a liveness probe that always fails: the container is restarted",
            spec: || {
                let mut c = sleeper();
                c["livenessProbe"] = json!({"exec": {"command": ["false"]},
                                            "periodSeconds": 1, "failureThreshold": 1});
                json!({"terminationGracePeriodSeconds": 2, "containers": [c]})
            },
            until: Until::Status(restarted),
        },
        Spec {
            name: "readiness-fails",
            what: "a readiness probe that always fails: running, started, not ready",
            spec: || {
                let mut c = sleeper();
                c["readinessProbe"] = json!({"exec": {"command": ["false"]}, "periodSeconds": 1});
                json!({"terminationGracePeriodSeconds": 2, "containers": [c]})
            },
            until: Until::Status(running_and_started),
        },
        Spec {
            name: "startup-probe",
            what: "a startup probe that succeeds after about 2 s: the pod becomes Ready",
            spec: || {
                let mut c = container("app", "sleep 2; touch /tmp/up; sleep 3600");
                c["startupProbe"] = json!({"exec": {"command": ["test", "-f", "/tmp/up"]},
                                           "periodSeconds": 1, "failureThreshold": 30});
                json!({"terminationGracePeriodSeconds": 2, "containers": [c]})
            },
            until: Until::Status(ready),
        },
        Spec {
            name: "bad-image",
            what:
                "an image whose registry refuses connections: ErrImagePull, then ImagePullBackOff",
            spec: || {
                let mut c = sleeper();
                // nobody serves the loopback's port 1: the pull fails at once, the same way
                // on both nodes whatever the machine's DNS does
                c["image"] = json!("127.0.0.1:1/ledgerlet/absent:1");
                json!({"terminationGracePeriodSeconds": 2, "containers": [c]})
            },
            until: Until::Status(image_pull_back_off),
        },
        Spec {
            name: "term-ignored",
            what: "a container that ignores SIGTERM, deleted with grace 2 s: killed",
            spec: || restart("Always", "trap '' TERM; while true; do sleep 1; done"),
            until: Until::DeletedAfter(ready, 2),
        },
        Spec {
            name: "active-deadline",
            what: "activeDeadlineSeconds 3 on a long-running pod: Failed, DeadlineExceeded",
            spec: || {
                json!({"activeDeadlineSeconds": 3, "terminationGracePeriodSeconds": 2,
                       "containers": [sleeper()]})
            },
            until: Until::Status(terminal),
        },
        Spec {
            name: "oom-killed",
            what: "a container over its 32 MiB memory limit: OOMKilled, exit code 137",
            // `tail` holds what it reads and is OOM-killed; the container's shell exits a
            // second later with its status. Were the killed process the container's own,
            // the container would end as it is killed, and containerd 1.6's shim drops the
            // OOM event of a cgroup already removed (`pkg/oom/v1` `process`): the runtime's
            // reason, OOMKilled or Error, would be a race inside containerd on either node.
            spec: || {
                let mut c = container(
                    "app",
                    "head -c 512m /dev/zero | tail; status=$?; sleep 1; exit $status",
                );
                c["resources"] = json!({"limits": {"memory": "32Mi"}});
                json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
                       "containers": [c]})
            },
            until: Until::Status(terminal),
        },
    ]
}

/// The specs CI runs (`tests/kubelet_differential.rs`).
pub const SMOKE: &[&str] = &[
    "never-exit-1",
    "onfailure-exit-0",
    "always-exit-1",
    "sidecar",
    "readiness-fails",
    "bad-image",
    "active-deadline",
];

/// What some specs' statuses must show on both nodes, besides agreeing: (spec, field,
/// value). Two nodes that agree on an outcome upstream does not have (both losing a reason
/// the runtime dropped, say) differ from this.
pub const EXPECTED: &[(&str, &str, &str)] = &[
    ("never-exit-0", "phase", "Succeeded"),
    ("never-exit-1", "phase", "Failed"),
    (
        "never-exit-1",
        "containerStatuses[app].state.terminated.exitCode",
        "1",
    ),
    ("onfailure-exit-0", "phase", "Succeeded"),
    ("active-deadline", "phase", "Failed"),
    ("active-deadline", "reason", "DeadlineExceeded"),
    ("oom-killed", "phase", "Failed"),
    (
        "oom-killed",
        "containerStatuses[app].state.terminated.reason",
        "OOMKilled",
    ),
    (
        "oom-killed",
        "containerStatuses[app].state.terminated.exitCode",
        "137",
    ),
];

/// The differences ledgerlet keeps on purpose (docs/kubelet-differences.md): (spec, or `*`
/// for every spec; the field, or a prefix of it ending in `.`; why).
pub const DELIBERATE: &[(&str, &str, &str)] = &[];

/// Why a difference is deliberate, or `None` when nothing explains it.
pub fn deliberate(d: &Difference) -> Option<&'static str> {
    DELIBERATE.iter().find_map(|(spec, field, why)| {
        let spec_matches = *spec == "*" || *spec == d.spec;
        let field_matches =
            *field == d.field || (field.ends_with('.') && d.field.starts_with(field));
        (spec_matches && field_matches).then_some(*why)
    })
}

/// A spec's outcome on one node.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The normalised status, flattened: `containerStatuses[app].state.terminated.reason` →
    /// `"Error"`.
    pub fields: BTreeMap<String, String>,
    /// `None` when the status was reached; otherwise why not (timed out, an API error).
    pub failure: Option<String>,
}

/// One field that differs: its path and the value on each node (`None`: absent).
#[derive(Debug, Clone)]
pub struct Difference {
    pub spec: &'static str,
    pub field: String,
    pub ledgerlet: Option<String>,
    pub kubelet: Option<String>,
}

/// Runs `specs` on both nodes at once in namespace `ns` (which must exist) and returns every
/// difference, spec by spec. Each pod gets `timeout` to reach its moment.
pub async fn run(
    client: kube::Client,
    ns: &str,
    specs: &[&Spec],
    ledgerlet_node: &str,
    kubelet_node: &str,
    timeout: Duration,
) -> Vec<Difference> {
    let mut runs = Vec::new();
    for spec in specs {
        for (suffix, node) in [("l", ledgerlet_node), ("k", kubelet_node)] {
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            let name = format!("{}-{suffix}", spec.name);
            runs.push(observe(pods, name, node.to_string(), spec, timeout));
        }
    }
    let mut observed = futures::future::join_all(runs).await.into_iter();
    let mut differences = Vec::new();
    for spec in specs {
        let l = observed.next().unwrap();
        let k = observed.next().unwrap();
        differences.extend(compare(spec.name, &l, &k));
    }
    differences
}

/// Every field that differs between the two observations of `spec`, and every field of
/// [`EXPECTED`] on which both agree with a value other than the expected one (named
/// `<field> (expected <value>)`).
pub fn compare(spec: &'static str, l: &Observed, k: &Observed) -> Vec<Difference> {
    let mut out = Vec::new();
    if l.failure.is_some() || k.failure.is_some() {
        out.push(Difference {
            spec,
            field: "(reached)".into(),
            ledgerlet: Some(l.failure.clone().unwrap_or_else(|| "yes".into())),
            kubelet: Some(k.failure.clone().unwrap_or_else(|| "yes".into())),
        });
    }
    let keys: std::collections::BTreeSet<&String> =
        l.fields.keys().chain(k.fields.keys()).collect();
    for key in keys {
        let (a, b) = (l.fields.get(key), k.fields.get(key));
        if a != b {
            out.push(Difference {
                spec,
                field: key.clone(),
                ledgerlet: a.cloned(),
                kubelet: b.cloned(),
            });
        }
    }
    for (_, field, value) in EXPECTED.iter().filter(|(s, _, _)| *s == spec) {
        let (a, b) = (l.fields.get(*field), k.fields.get(*field));
        if a == b && a.map(String::as_str) != Some(*value) {
            out.push(Difference {
                spec,
                field: format!("{field} (expected {value})"),
                ledgerlet: a.cloned(),
                kubelet: b.cloned(),
            });
        }
    }
    out
}

async fn observe(
    pods: Api<Pod>,
    name: String,
    node: String,
    spec: &Spec,
    timeout: Duration,
) -> Observed {
    match tokio::time::timeout(timeout, watch_until(&pods, &name, &node, spec)).await {
        Ok(Ok(status)) => Observed {
            fields: normalise(&status, &name, &node),
            failure: None,
        },
        Ok(Err((last, why))) => Observed {
            fields: normalise(&last, &name, &node),
            failure: Some(why),
        },
        Err(_) => {
            let last = pods
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .map(|p| serde_json::to_value(p.status).unwrap_or(Value::Null))
                .unwrap_or(Value::Null);
            Observed {
                fields: normalise(&last, &name, &node),
                failure: Some(format!("not reached within {} s", timeout.as_secs())),
            }
        }
    }
}

/// Creates the pod and watches it until its spec's moment; the status at that moment.
async fn watch_until(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    spec: &Spec,
) -> Result<Value, (Value, String)> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(pods.clone(), config).boxed();
    // the watch is established (its initial list done) before the pod exists
    loop {
        match events.try_next().await {
            Ok(Some(Event::InitDone)) => break,
            Ok(Some(_)) => {}
            Ok(None) => return Err((Value::Null, "the watch ended".into())),
            Err(e) => return Err((Value::Null, format!("watch: {e}"))),
        }
    }
    let mut pod_spec = (spec.spec)();
    pod_spec["nodeName"] = json!(node);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"differential": spec.name}},
        "spec": pod_spec,
    }))
    .expect("a spec is a valid Pod");
    if let Err(e) = pods.create(&PostParams::default(), &pod).await {
        return Err((Value::Null, format!("create: {e}")));
    }
    let mut last = Value::Null;
    let mut deleting = false;
    while let Some(event) = events.next().await {
        let (pod, gone) = match event {
            Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => (p, false),
            Ok(Event::Delete(p)) => (p, true),
            Ok(_) => continue,
            Err(e) => return Err((last, format!("watch: {e}"))),
        };
        last = serde_json::to_value(pod.status).unwrap_or(Value::Null);
        match spec.until {
            Until::Status(reached) if reached(&last) => return Ok(last),
            Until::Status(_) if gone => return Err((last, "deleted".into())),
            Until::DeletedAfter(_, _) if gone => return Ok(last),
            Until::DeletedAfter(reached, grace) if !deleting && reached(&last) => {
                deleting = true;
                let dp = DeleteParams {
                    grace_period_seconds: Some(grace as u32),
                    ..DeleteParams::default()
                };
                if let Err(e) = pods.delete(name, &dp).await {
                    return Err((last, format!("delete: {e}")));
                }
            }
            _ => {}
        }
    }
    Err((last, "the watch ended".into()))
}

/// Keys whose values must differ between two nodes: replaced by a marker of presence.
const VOLATILE: &[&str] = &[
    "lastProbeTime",
    "lastTransitionTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "containerID",
    "imageID",
    "podIP",
    "ip",
    "hostIP",
];

/// The status, flattened to `path → value`, with what must differ between nodes replaced:
/// volatile keys by `<set>`, the pod's and the node's names in strings by `<pod>` and
/// `<node>`, `kube-api-access-xxxxx` by `kube-api-access-*`. Arrays of objects are keyed by
/// their `name`, `type` or `mountPath`, so an order difference is not reported as a change.
pub fn normalise(status: &Value, pod: &str, node: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    flatten(status, String::new(), pod, node, &mut out);
    out
}

fn flatten(v: &Value, path: String, pod: &str, node: &str, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            if m.is_empty() && !path.is_empty() {
                out.insert(path.clone(), "{}".into());
            }
            for (k, v) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if VOLATILE.contains(&k.as_str()) {
                    if !v.is_null() {
                        out.insert(p, "<set>".into());
                    }
                } else {
                    flatten(v, p, pod, node, out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let key = ["name", "type", "mountPath"]
                    .iter()
                    .find_map(|k| item[*k].as_str())
                    .map(|k| scrub(k, pod, node))
                    .unwrap_or_else(|| i.to_string());
                flatten(item, format!("{path}[{key}]"), pod, node, out);
            }
        }
        Value::Null => {}
        Value::String(s) => {
            out.insert(path, scrub(s, pod, node));
        }
        other => {
            out.insert(path, other.to_string());
        }
    }
}

/// Whether `s` starts with a UUID (8-4-4-4-12 hex digits).
fn starts_with_uuid(s: &[u8]) -> bool {
    let groups = [8, 4, 4, 4, 12];
    let mut i = 0;
    for (g, len) in groups.iter().enumerate() {
        if g > 0 {
            if s.get(i) != Some(&b'-') {
                return false;
            }
            i += 1;
        }
        for _ in 0..*len {
            if !s.get(i).is_some_and(|c| c.is_ascii_hexdigit()) {
                return false;
            }
            i += 1;
        }
    }
    true
}

fn scrub(s: &str, pod: &str, node: &str) -> String {
    let mut s = s.replace(pod, "<pod>").replace(node, "<node>");
    let mut i = 0;
    while i < s.len() {
        if s.is_char_boundary(i) && starts_with_uuid(&s.as_bytes()[i..]) {
            s.replace_range(i..i + 36, "<uid>");
            i += 5;
        } else {
            i += 1;
        }
    }
    while let Some(i) = s.find("kube-api-access-") {
        let start = i + "kube-api-access-".len();
        let end = s[start..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(s.len(), |e| start + e);
        if &s[start..end] == "*" || start == end {
            break;
        }
        s.replace_range(start..end, "*");
    }
    s
}
