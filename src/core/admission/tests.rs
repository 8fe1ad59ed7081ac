use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodSpec, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use super::{can_admit_pod, Admission, NodeView};

fn q(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

fn container(name: &str, requests: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: Some(q(requests)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(containers: Vec<Container>) -> Pod {
    Pod {
        metadata: serde_json::from_value(json!({"name": "p", "namespace": "ns", "uid": "u"}))
            .unwrap(),
        spec: Some(PodSpec {
            containers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Fixture {
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    allocatable: BTreeMap<String, Quantity>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            labels: BTreeMap::from([("disk".to_string(), "ssd".to_string())]),
            taints: vec![],
            allocatable: q(&[
                ("cpu", "2"),
                ("memory", "1Gi"),
                ("ephemeral-storage", "10Gi"),
                ("pods", "110"),
                ("example.com/gpu", "1"),
            ]),
        }
    }
    fn admit(&self, others: &[&Pod], p: &Pod) -> Admission {
        let node = NodeView {
            name: "node-a",
            labels: &self.labels,
            taints: &self.taints,
            allocatable: Some(&self.allocatable),
            max_pods: 110,
            os: "linux",
        };
        can_admit_pod(&node, others, p)
    }
}

fn rejected(reason: &str, message: &str) -> Admission {
    Admission::Reject {
        reason: reason.into(),
        message: message.into(),
    }
}

#[test]
fn a_pod_requesting_more_cpu_than_allocatable_fails_out_of_cpu() {
    let f = Fixture::new();
    let running = pod(vec![container("a", &[("cpu", "500m")])]);
    let p = pod(vec![container("c", &[("cpu", "1600m")])]);
    assert_eq!(
        f.admit(&[&running], &p),
        rejected(
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000"
        )
    );
    assert_eq!(f.admit(&[], &p), Admission::Admit);
}

#[test]
fn memory_and_ephemeral_storage_shortfalls_are_counted_in_bytes() {
    let f = Fixture::new();
    let p = pod(vec![container("c", &[("memory", "2Gi")])]);
    assert_eq!(
        f.admit(&[], &p),
        rejected(
            "OutOfmemory",
            "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"
        )
    );
    let p = pod(vec![container("c", &[("ephemeral-storage", "11Gi")])]);
    let Admission::Reject { reason, .. } = f.admit(&[], &p) else {
        panic!("admitted")
    };
    assert_eq!(reason, "OutOfephemeral-storage");
}

#[test]
fn init_containers_count_by_their_peak_and_sidecars_add_to_the_sum() {
    let f = Fixture::new();
    // regular 1 cpu; an init container of 1500m alone fits (max, not sum) ...
    let mut p = pod(vec![container("c", &[("cpu", "1")])]);
    p.spec.as_mut().unwrap().init_containers = Some(vec![container("i", &[("cpu", "1500m")])]);
    assert_eq!(f.admit(&[], &p), Admission::Admit);
    // ... but a sidecar of 1500m runs beside the regular container
    let mut sidecar = container("s", &[("cpu", "1500m")]);
    sidecar.restart_policy = Some("Always".into());
    p.spec.as_mut().unwrap().init_containers = Some(vec![sidecar]);
    let Admission::Reject { message, .. } = f.admit(&[], &p) else {
        panic!("admitted")
    };
    assert!(message.contains("requested: 2500"), "{message}");
}

#[test]
fn pod_overhead_adds_to_the_requests() {
    let f = Fixture::new();
    let mut p = pod(vec![container("c", &[("cpu", "1900m")])]);
    p.spec.as_mut().unwrap().overhead = Some(q(&[("cpu", "200m")]));
    let Admission::Reject { reason, message } = f.admit(&[], &p) else {
        panic!("admitted")
    };
    assert_eq!(reason, "OutOfcpu");
    assert!(message.contains("requested: 2100"), "{message}");
}

#[test]
fn extended_resources_the_node_lacks_are_ignored_and_known_ones_are_checked() {
    let f = Fixture::new();
    let p = pod(vec![container("c", &[("cluster.example/thing", "5")])]);
    assert_eq!(f.admit(&[], &p), Admission::Admit);
    let p = pod(vec![container("c", &[("example.com/gpu", "2")])]);
    assert_eq!(
        f.admit(&[], &p),
        rejected(
            "OutOfexample.com/gpu",
            "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"
        )
    );
}

#[test]
fn a_node_selector_the_node_does_not_match_fails_node_affinity() {
    let f = Fixture::new();
    let mut p = pod(vec![]);
    p.spec.as_mut().unwrap().node_selector =
        Some(BTreeMap::from([("disk".to_string(), "hdd".to_string())]));
    assert_eq!(
        f.admit(&[], &p),
        rejected(
            "NodeAffinity",
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
        )
    );
    p.spec.as_mut().unwrap().node_selector =
        Some(BTreeMap::from([("disk".to_string(), "ssd".to_string())]));
    assert_eq!(f.admit(&[], &p), Admission::Admit);
}

fn requirement(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

fn with_required_affinity(terms: Vec<NodeSelectorTerm>) -> Pod {
    let mut p = pod(vec![]);
    p.spec.as_mut().unwrap().affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: terms,
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    p
}

#[test]
fn required_node_affinity_terms_are_ored_and_their_requirements_anded() {
    let f = Fixture::new();
    let term = |exprs: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
        match_expressions: Some(exprs),
        match_fields: None,
    };
    let cases = [
        (
            vec![term(vec![requirement("disk", "In", &["ssd", "nvme"])])],
            true,
        ),
        (
            vec![term(vec![requirement("disk", "NotIn", &["ssd"])])],
            false,
        ),
        (vec![term(vec![requirement("zone", "NotIn", &["a"])])], true),
        (vec![term(vec![requirement("disk", "Exists", &[])])], true),
        (
            vec![term(vec![requirement("disk", "DoesNotExist", &[])])],
            false,
        ),
        (
            vec![
                term(vec![requirement("disk", "In", &["hdd"])]),
                term(vec![requirement("disk", "Exists", &[])]),
            ],
            true,
        ),
        (
            vec![term(vec![
                requirement("disk", "Exists", &[]),
                requirement("zone", "Exists", &[]),
            ])],
            false,
        ),
        (vec![term(vec![])], false),
        (
            vec![NodeSelectorTerm {
                match_expressions: None,
                match_fields: Some(vec![requirement("metadata.name", "In", &["node-a"])]),
            }],
            true,
        ),
    ];
    for (i, (terms, admitted)) in cases.into_iter().enumerate() {
        let verdict = f.admit(&[], &with_required_affinity(terms));
        assert_eq!(
            verdict == Admission::Admit,
            admitted,
            "case {i}: {verdict:?}"
        );
    }
}

#[test]
fn a_pod_bound_to_another_node_fails_node_name() {
    let f = Fixture::new();
    let mut p = pod(vec![]);
    p.spec.as_mut().unwrap().node_name = Some("node-b".into());
    assert_eq!(
        f.admit(&[], &p),
        rejected(
            "NodeName",
            "Predicate NodeName failed: node(s) didn't match the requested node name"
        )
    );
}

fn with_host_port(ip: Option<&str>, port: i32, protocol: Option<&str>) -> Pod {
    let mut c = container("c", &[]);
    c.ports = Some(vec![ContainerPort {
        container_port: 80,
        host_port: Some(port),
        host_ip: ip.map(String::from),
        protocol: protocol.map(String::from),
        ..Default::default()
    }]);
    pod(vec![c])
}

#[test]
fn a_host_port_in_use_by_an_active_pod_fails_node_ports() {
    let f = Fixture::new();
    let first = with_host_port(None, 8080, None);
    assert_eq!(
        f.admit(&[&first], &with_host_port(None, 8080, Some("TCP"))),
        rejected(
            "NodePorts",
            "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
        )
    );
    let specific = with_host_port(Some("10.0.0.1"), 8080, None);
    assert_ne!(f.admit(&[&first], &specific), Admission::Admit, "wildcard");
    let other_ip = with_host_port(Some("10.0.0.2"), 8080, None);
    assert_eq!(f.admit(&[&specific], &other_ip), Admission::Admit);
    let udp = with_host_port(None, 8080, Some("UDP"));
    assert_eq!(f.admit(&[&first], &udp), Admission::Admit);
}

#[test]
fn an_untolerated_no_execute_taint_fails_but_not_for_static_pods() {
    let mut f = Fixture::new();
    f.taints = vec![
        Taint {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoExecute".into(),
            ..Default::default()
        },
        Taint {
            key: "other".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        },
    ];
    let mut p = pod(vec![]);
    assert_eq!(
        f.admit(&[], &p),
        rejected(
            "TaintToleration",
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
        )
    );
    let tolerations = [
        (Some("dedicated"), Some("Equal"), Some("db"), None, true),
        (Some("dedicated"), None, Some("web"), None, false),
        (
            Some("dedicated"),
            Some("Exists"),
            None,
            Some("NoExecute"),
            true,
        ),
        (
            Some("dedicated"),
            Some("Exists"),
            None,
            Some("NoSchedule"),
            false,
        ),
        (None, Some("Exists"), None, None, true),
    ];
    for (i, (key, op, value, effect, admitted)) in tolerations.into_iter().enumerate() {
        p.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            key: key.map(String::from),
            operator: op.map(String::from),
            value: value.map(String::from),
            effect: effect.map(String::from),
            ..Default::default()
        }]);
        let verdict = f.admit(&[], &p);
        assert_eq!(
            verdict == Admission::Admit,
            admitted,
            "case {i}: {verdict:?}"
        );
    }
    let mut static_pod = pod(vec![]);
    static_pod.metadata.annotations = Some(BTreeMap::from([(
        "kubernetes.io/config.source".to_string(),
        "file".to_string(),
    )]));
    assert_eq!(f.admit(&[], &static_pod), Admission::Admit);
}

#[test]
fn resources_are_checked_before_affinity_and_the_first_failure_wins() {
    let f = Fixture::new();
    let mut p = pod(vec![container("c", &[("cpu", "3")])]);
    p.spec.as_mut().unwrap().node_selector =
        Some(BTreeMap::from([("disk".to_string(), "hdd".to_string())]));
    let Admission::Reject { reason, .. } = f.admit(&[], &p) else {
        panic!("admitted")
    };
    assert_eq!(reason, "OutOfcpu");
}

#[test]
fn a_request_that_is_not_a_quantity_is_rejected_naming_pod_and_field() {
    let f = Fixture::new();
    let p = pod(vec![container("c", &[("cpu", "lots")])]);
    let Admission::Reject { reason, message } = f.admit(&[], &p) else {
        panic!("admitted")
    };
    assert_eq!(reason, "UnexpectedAdmissionError");
    assert!(
        message.contains("p_ns") && message.contains("spec.containers[c].resources.requests[cpu]"),
        "{message}"
    );
}

#[test]
fn a_pod_labelled_for_another_os_is_rejected() {
    let f = Fixture::new();
    let mut p = pod(vec![]);
    p.metadata.labels = Some(BTreeMap::from([(
        "kubernetes.io/os".to_string(),
        "windows".to_string(),
    )]));
    let Admission::Reject { reason, .. } = f.admit(&[], &p) else {
        panic!("admitted")
    };
    assert_eq!(reason, "PodOSSelectorNodeLabelDoesNotMatch");
}
