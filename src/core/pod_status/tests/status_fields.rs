//! PR-15 (started/ready), SM-19 (ordering), SM-01/SM-02 (start time), pod and host IPs, QoS
//! class, ephemeral containers, and GS-18…GS-20 (observed generation, volume mounts and
//! resources of container statuses).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EphemeralContainer, PodIP, PodStatus, ResourceRequirements, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::fixtures::*;
use crate::core::pod_status::conditions::{CONTAINERS_READY, INITIALIZED, READY};
use crate::core::pod_status::network::sort_pod_ips;
use crate::core::pod_status::qos::compute_pod_qos;
use crate::core::pod_status::{pod_qos_class, time_to_api};
use crate::core::probe_results::{ContainerProbes, ProbeOutcome::*};
use crate::core::record::time::Time;

#[test]
fn pr_15_started_and_ready_from_probe_results() {
    let p = pod(
        "Always",
        vec![container("I"), container("J"), sidecar("Y"), sidecar("Z")],
        vec![
            container("A"),
            container("B"),
            container("C"),
            container("D"),
            container("E"),
        ],
    );
    let rt = runtime(
        vec![
            rt_exited("I", "i1", 1, 0),
            rt_exited("J", "j1", 1, 1),
            rt_running("Y", "y1", 2),
            rt_running("Z", "z1", 2),
            rt_running("A", "a1", 3),
            rt_running("B", "b1", 3),
            rt_running("C", "c1", 3),
            rt_running("D", "d1", 3),
            rt_exited("E", "e1", 3, 0),
        ],
        vec![ready_sandbox("10.0.0.4")],
    );
    let mut f = Fixture::new(p, rt);
    let mut set = |id: &str, startup, readiness, liveness| {
        let probes = ContainerProbes {
            liveness,
            readiness,
            startup,
        };
        f.probes.set(id, probes)
    };
    // A: no probes. B: startup not yet successful. C: started, readiness failing.
    // D: readiness success. Y: sidecar readiness success. Z: sidecar startup failed.
    // (id, startup, readiness, liveness)
    set("b1", Some(Unknown), Some(Success), None);
    set("c1", Some(Success), Some(Failure), None);
    set("d1", None, Some(Success), Some(Failure));
    set("y1", None, Some(Success), None);
    set("z1", Some(Failure), None, None);
    // Results keyed by the full container ID are not ours: they must not be found.
    set("containerd://a1", None, Some(Failure), None);
    let s = f.generate();
    let got = |list: &Option<Vec<_>>, n: &str| {
        let c: &k8s_openapi::api::core::v1::ContainerStatus = find(list, n);
        (c.started, c.ready)
    };
    assert_eq!(got(&s.container_statuses, "A"), (Some(true), true));
    assert_eq!(got(&s.container_statuses, "B"), (Some(false), false));
    assert_eq!(got(&s.container_statuses, "C"), (Some(true), false));
    assert_eq!(got(&s.container_statuses, "D"), (Some(true), true));
    assert_eq!(got(&s.container_statuses, "E"), (Some(false), false));
    assert_eq!(got(&s.init_container_statuses, "I"), (Some(false), true));
    assert_eq!(got(&s.init_container_statuses, "J"), (Some(false), false));
    assert_eq!(got(&s.init_container_statuses, "Y"), (Some(true), true));
    assert_eq!(got(&s.init_container_statuses, "Z"), (Some(false), false));
    assert_eq!(
        condition(&s, CONTAINERS_READY).message.as_deref(),
        Some("containers with unready status: [Z B C E]")
    );
    // Initialized: a regular container runs, so the pod was initialized before.
    assert_eq!(condition(&s, INITIALIZED).status, "True");
}

#[test]
fn pr_15_all_ready_makes_the_pod_ready() {
    let rt = runtime(
        vec![rt_running("A", "a1", 1)],
        vec![ready_sandbox("10.0.0.5")],
    );
    let mut f = Fixture::new(simple_pod(&["A"]), rt);
    for (readiness, want) in [(Failure, "False"), (Success, "True")] {
        let probes = ContainerProbes {
            readiness: Some(readiness),
            ..Default::default()
        };
        f.probes.set("a1", probes);
        assert_eq!(
            condition(&f.generate(), READY).status,
            want,
            "{readiness:?}"
        );
    }
}

#[test]
fn sm_19_statuses_sorted_by_name_init_in_spec_order() {
    let mut p = pod(
        "Always",
        vec![container("z-init"), container("a-init"), sidecar("m-side")],
        vec![container("c"), container("a"), container("b")],
    );
    p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![
        EphemeralContainer {
            name: "dbg-2".into(),
            image: Some("busybox".into()),
            ..Default::default()
        },
        EphemeralContainer {
            name: "dbg-1".into(),
            image: Some("busybox".into()),
            ..Default::default()
        },
    ]);
    let rt = runtime(
        vec![rt_running("dbg-1", "e1", 5), rt_running("b", "b1", 5)],
        vec![],
    );
    let s = Fixture::new(p, rt).generate();
    let names = |l: &Option<Vec<k8s_openapi::api::core::v1::ContainerStatus>>| -> Vec<String> {
        l.iter().flatten().map(|c| c.name.clone()).collect()
    };
    assert_eq!(names(&s.container_statuses), ["a", "b", "c"]);
    assert_eq!(
        names(&s.init_container_statuses),
        ["z-init", "a-init", "m-side"]
    );
    assert_eq!(names(&s.ephemeral_container_statuses), ["dbg-1", "dbg-2"]);
    let dbg = find(&s.ephemeral_container_statuses, "dbg-1");
    assert_eq!(dbg.container_id.as_deref(), Some("containerd://e1"));
    assert_eq!(
        (dbg.started, dbg.ready),
        (None, false),
        "no probes for ephemeral containers"
    );
    assert_eq!(
        waiting_reason_of(find(&s.ephemeral_container_statuses, "dbg-2")),
        Some("PodInitializing")
    );
}

#[test]
fn sm_01_start_time_defaults_to_now_in_whole_seconds() {
    let s = Fixture::new(simple_pod(&["A"]), runtime(vec![], vec![])).generate();
    assert_eq!(
        s.start_time,
        Some(time_to_api(Time::from_unix_secs(NOW_SECS)))
    );
}

#[test]
fn sm_02_start_time_is_kept_from_cached_then_api_status() {
    let at = |n: i64| Some(time_to_api(Time::from_unix_nanos(n)));
    let p = with_api_status(
        simple_pod(&["A"]),
        PodStatus {
            start_time: at(1_000_500_000_000),
            ..PodStatus::default()
        },
    );
    let mut f = Fixture::new(p, runtime(vec![], vec![]));
    assert_eq!(f.generate().start_time, at(1_000_000_000_000));
    f.cached = Some(PodStatus {
        start_time: at(2_000_700_000_000),
        ..PodStatus::default()
    });
    assert_eq!(f.generate().start_time, at(2_000_000_000_000));
}

#[test]
fn pod_ips_follow_the_node_family_and_fall_back_in_order() {
    let v4 = || "10.0.0.7".to_string();
    let v6 = || "fd00::7".to_string();
    assert_eq!(sort_pod_ips(&[v6(), v4()], None), [v4(), v6()]);
    assert_eq!(sort_pod_ips(&[v4(), v6()], Some("fd00::1")), [v6(), v4()]);
    assert_eq!(
        sort_pod_ips(
            &[v4(), "10.0.0.8".into(), "junk".into()],
            Some("192.168.0.1")
        ),
        [v4()]
    );

    // The runtime's IPs win over the sandbox's.
    let mut rt = runtime(vec![], vec![ready_sandbox("10.0.0.9")]);
    rt.ips = vec![v6(), v4()];
    let mut f = Fixture::new(simple_pod(&["A"]), rt);
    f.host_ip = Some("192.168.0.1".into());
    let s = f.generate();
    assert_eq!(s.pod_ip, Some(v4()));
    assert_eq!(
        s.pod_ips,
        Some(vec![PodIP { ip: v4() }, PodIP { ip: v6() }])
    );
    assert_eq!(s.host_ip.as_deref(), Some("192.168.0.1"));
    assert_eq!(
        s.host_ips.as_ref().map(|h| h[0].ip.as_str()),
        Some("192.168.0.1")
    );

    // No runtime IPs: the newest sandbox, if ready.
    let s = Fixture::new(
        simple_pod(&["A"]),
        runtime(vec![], vec![ready_sandbox("10.0.0.9")]),
    )
    .generate();
    assert_eq!(s.pod_ip.as_deref(), Some("10.0.0.9"));
    assert_eq!((s.host_ip, s.host_ips), (None, None));

    // Without a node IP the old host IPs are kept, not wiped.
    let mut f = Fixture::new(simple_pod(&["A"]), runtime(vec![], vec![]));
    f.cached = Some(PodStatus {
        host_ip: Some("192.168.0.9".into()),
        host_ips: Some(vec![k8s_openapi::api::core::v1::HostIP {
            ip: "192.168.0.9".into(),
        }]),
        ..PodStatus::default()
    });
    let s = f.generate();
    assert_eq!(s.host_ip.as_deref(), Some("192.168.0.9"));
    assert_eq!(s.host_ips.map(|h| h.len()), Some(1));
    f.host_ip = Some("192.168.0.1".into());
    assert_eq!(f.generate().host_ip.as_deref(), Some("192.168.0.1"));

    // A stopped pod keeps the IPs it had.
    let dead = sandbox(
        "sb",
        crate::core::runtime_status::SandboxState::SandboxNotready,
        Some("10.0.0.9"),
        1,
    );
    let mut f = Fixture::new(simple_pod(&["A"]), runtime(vec![], vec![dead]));
    assert_eq!(f.generate().pod_ip, None);
    f.cached = Some(PodStatus {
        pod_ip: Some("10.0.0.3".into()),
        pod_ips: Some(vec![PodIP {
            ip: "10.0.0.3".into(),
        }]),
        ..PodStatus::default()
    });
    assert_eq!(
        f.generate().pod_ips,
        Some(vec![PodIP {
            ip: "10.0.0.3".into()
        }])
    );
}

#[test]
fn pod_ip_of_a_host_network_pod_is_the_node_ip() {
    let mut p = simple_pod(&["A"]);
    p.spec.as_mut().unwrap().host_network = Some(true);
    let mut sb = ready_sandbox("");
    sb.ip = None;
    sb.host_network = true;
    let mut f = Fixture::new(p, runtime(vec![], vec![sb]));
    f.host_ip = Some("192.168.0.1".into());
    let s = f.generate();
    assert_eq!(s.pod_ip.as_deref(), Some("192.168.0.1"));
    assert_eq!(condition(&s, "PodReadyToStartContainers").status, "True");
}

/// `NAME` (no resources) or `NAME:REQUESTS:LIMITS`, each `res=qty,…` (`full`: 100m CPU and
/// 1Gi memory requested, the same as 0.1 and 1024Mi of limits).
fn with_resources(spec: &str) -> Container {
    let spec = spec.replace(":full", ":cpu=100m,memory=1Gi:cpu=0.1,memory=1024Mi");
    let mut parts = spec.split(':');
    let name = parts.next().unwrap();
    let list = |l: Option<&str>| -> Option<BTreeMap<String, Quantity>> {
        let pairs = l.unwrap_or("").split(',').filter(|p| !p.is_empty());
        let to_q = |p: &str| {
            p.split_once('=')
                .map(|(k, v)| (k.into(), Quantity(v.into())))
        };
        let map: BTreeMap<_, _> = pairs.map(|p| to_q(p).unwrap()).collect();
        (!map.is_empty()).then_some(map)
    };
    let resources = (spec.contains(':')).then(|| ResourceRequirements {
        requests: list(parts.next()),
        limits: list(parts.next()),
        claims: None,
    });
    Container {
        resources,
        ..container(name)
    }
}

#[test]
fn qos_class_from_requests_and_limits() {
    // label | init containers | containers | QoS class
    for row in [
        "nothing | | A | BestEffort",
        "zero requests | | A:cpu=0: | BestEffort",
        "other resources only | | A:nvidia.com/gpu=1:nvidia.com/gpu=1 | BestEffort",
        "equal requests and limits | | A:full | Guaranteed",
        "limits only (defaulted requests) | | A::cpu=1,memory=1G | Guaranteed",
        "request below limit | | A:cpu=50m,memory=1Gi:cpu=100m,memory=1Gi | Burstable",
        "cpu limit only | | A::cpu=1 | Burstable",
        "one container without limits | | A:full B | Burstable",
        "init container without limits | I | A:full | Burstable",
        "init and app guaranteed | I:full | A:full | Guaranteed",
        "requests only | | A:memory=64Mi: | Burstable",
    ] {
        let f: Vec<&str> = row.split('|').map(str::trim).collect();
        let list = |l: &str| l.split_whitespace().map(with_resources).collect();
        let p = pod("Always", list(f[1]), list(f[2]));
        assert_eq!(compute_pod_qos(&p), f[3], "{}", f[0]);
    }
}

#[test]
fn qos_class_already_in_the_status_is_kept() {
    let p = with_api_status(
        simple_pod(&["A"]),
        PodStatus {
            qos_class: Some("Guaranteed".into()),
            ..PodStatus::default()
        },
    );
    assert_eq!(pod_qos_class(&p), "Guaranteed");
    let s = Fixture::new(p, runtime(vec![], vec![])).generate();
    assert_eq!(s.qos_class.as_deref(), Some("Guaranteed"));
    assert_eq!(pod_qos_class(&simple_pod(&["A"])), "BestEffort");
}

#[test]
fn gs_18_the_status_and_the_kubelets_conditions_carry_the_pods_generation() {
    let mut p = simple_pod(&["A"]);
    p.metadata.generation = Some(3);
    let rt = runtime(
        vec![rt_running("A", "a1", 10)],
        vec![ready_sandbox("10.0.0.1")],
    );
    let mut f = Fixture::new(p, rt);
    let s = f.generate();
    assert_eq!(s.observed_generation, Some(3));
    let conditions = s.conditions.unwrap();
    assert_eq!(conditions.len(), 5, "the five the kubelet generates");
    assert!(conditions.iter().all(|c| c.observed_generation == Some(3)));
    // never lowered below the old status's
    f.cached = Some(PodStatus {
        observed_generation: Some(5),
        ..Default::default()
    });
    assert_eq!(f.generate().observed_generation, Some(5));
    // a pod without a generation (a static pod) shows none
    f.pod.metadata.generation = None;
    f.cached = None;
    let s = f.generate();
    assert_eq!(s.observed_generation, None);
    assert!(s
        .conditions
        .unwrap()
        .iter()
        .all(|c| c.observed_generation.is_none()));
}

fn mount(name: &str, path: &str, read_only: Option<bool>, rro: Option<&str>) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only,
        recursive_read_only: rro.map(str::to_string),
        ..VolumeMount::default()
    }
}

#[test]
fn gs_19_a_default_status_lists_the_specs_mounts_and_a_runtime_one_keeps_the_old_list() {
    let mut c = container("A");
    c.volume_mounts = Some(vec![
        mount("data", "/data", None, None),
        mount("token", "/var/run/secrets", Some(true), None),
        mount("rro", "/rro", Some(true), Some("Enabled")),
    ]);
    let p = pod("Always", vec![], vec![c]);
    let waiting = Fixture::new(p.clone(), runtime(vec![], vec![])).generate();
    let a = find(&waiting.container_statuses, "A");
    let mounts = a.volume_mounts.clone().expect("the spec's mounts");
    let shown: Vec<_> = mounts
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.read_only,
                m.recursive_read_only.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("data", None, None),
            ("token", Some(true), Some("Disabled")),
            ("rro", Some(true), Some("Enabled")),
        ]
    );
    // from a runtime instance: the old status's list, none without an old status
    let rt = runtime(
        vec![rt_running("A", "a1", 10)],
        vec![ready_sandbox("10.0.0.1")],
    );
    let mut f = Fixture::new(p, rt);
    assert_eq!(
        find(&f.generate().container_statuses, "A").volume_mounts,
        None
    );
    f.cached = Some(waiting);
    assert_eq!(
        find(&f.generate().container_statuses, "A").volume_mounts,
        Some(mounts)
    );
}

#[test]
fn gs_20_a_status_from_a_runtime_instance_has_the_specs_resources_and_requests() {
    let q = |s: &str| Quantity(s.into());
    let mut limited = container("A");
    limited.resources = Some(ResourceRequirements {
        limits: Some([("memory".to_string(), q("32Mi"))].into()),
        requests: Some([("memory".to_string(), q("32Mi"))].into()),
        ..ResourceRequirements::default()
    });
    let p = pod("Always", vec![], vec![limited, container("B")]);
    let rt = runtime(
        vec![rt_running("A", "a1", 10), rt_exited("B", "b1", 10, 0)],
        vec![ready_sandbox("10.0.0.1")],
    );
    let s = Fixture::new(p.clone(), rt).generate();
    let a = find(&s.container_statuses, "A");
    let r = a.resources.clone().expect("resources");
    assert_eq!(r.limits.unwrap()["memory"], q("32Mi"));
    assert_eq!(a.allocated_resources.clone().unwrap()["memory"], q("32Mi"));
    let b = find(&s.container_statuses, "B");
    assert_eq!(
        b.resources,
        Some(ResourceRequirements::default()),
        "`{{}}` when none"
    );
    assert_eq!(b.allocated_resources, None);
    // a container the runtime has not reported has neither
    let waiting = Fixture::new(p, runtime(vec![], vec![])).generate();
    assert_eq!(find(&waiting.container_statuses, "A").resources, None);
}
