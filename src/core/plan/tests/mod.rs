//! Tests of the runtime plan, named after the BEHAVIOUR IDs they pin (RT-01…RT-42).
//!
//! The fixtures mirror upstream's TestComputePodActions family: `base()` is pod foo/foo-ns
//! with foo1..foo3 all running with matching hashes and one ready sandbox (10.0.0.1,
//! attempt 0); `with_init()` and `with_sidecars()` replace the statuses with init or sidecar
//! ones. Expectations compare whole `PodActions` values, messages included.

mod grace;
mod helpers;
mod init;
mod regular;
mod sandbox;
mod sidecar;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    compute_pod_actions, container_hash, ContainerKind, ContainerToKill, KillReason, PodActions,
};
use crate::core::probe_results::{ContainerProbes, ProbeOutcome, ProbeResults};
use crate::core::record::Time;
use crate::core::runtime_status::{
    ContainerState, ContainerStatus, RuntimePodStatus, SandboxState, SandboxStatus,
};

/// A pod, what the runtime reports about it and the prober's results.
#[derive(Clone, Debug)]
struct Fx {
    pod: Pod,
    rt: RuntimePodStatus,
    probes: ProbeResults,
}

fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        ..Container::default()
    }
}

fn sidecar(name: &str, probes: bool) -> Container {
    Container {
        restart_policy: Some("Always".into()),
        liveness_probe: probes.then(Probe::default),
        startup_probe: probes.then(Probe::default),
        ..container(name, "bar-image")
    }
}

fn status(id: &str, c: &Container, state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        id: id.into(),
        name: c.name.clone(),
        state,
        created_at: Time::from_unix_secs(1_000),
        started_at: None,
        finished_at: None,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        image: c.image.clone().unwrap_or_default(),
        image_ref: String::new(),
        hash: container_hash(c),
        restart_count: 0,
    }
}

/// Upstream `makeBasePodAndStatus`.
fn base() -> Fx {
    let containers = vec![
        container("foo1", "busybox"),
        container("foo2", "busybox"),
        container("foo3", "busybox"),
    ];
    let statuses = containers
        .iter()
        .enumerate()
        .map(|(i, c)| status(&format!("id{}", i + 1), c, ContainerState::Running))
        .collect();
    Fx {
        pod: Pod {
            metadata: ObjectMeta {
                uid: Some("12345678".into()),
                name: Some("foo".into()),
                namespace: Some("foo-ns".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers,
                ..PodSpec::default()
            }),
            ..Pod::default()
        },
        rt: RuntimePodStatus {
            name: "foo".into(),
            namespace: "foo-ns".into(),
            ips: vec!["10.0.0.1".into()],
            sandboxes: vec![SandboxStatus {
                id: "sandboxID".into(),
                state: SandboxState::SandboxReady,
                created_at: Time::from_unix_secs(900),
                attempt: 0,
                ip: Some("10.0.0.1".into()),
                host_network: false,
            }],
            containers: statuses,
        },
        probes: ProbeResults::default(),
    }
}

/// Upstream `makeBasePodAndStatusWithInitContainers`: init1..init3 all exited 0, no
/// statuses for the regular containers.
fn with_init() -> Fx {
    let mut fx = base();
    let inits = vec![
        container("init1", "bar-image"),
        container("init2", "bar-image"),
        container("init3", "bar-image"),
    ];
    fx.rt.containers = inits
        .iter()
        .enumerate()
        .map(|(i, c)| status(&format!("initid{}", i + 1), c, ContainerState::Exited))
        .collect();
    fx.spec_mut().init_containers = Some(inits);
    fx
}

/// Upstream `makeBasePodAndStatusWithRestartableInitContainers`: three running sidecars,
/// the last two with liveness and startup probes that both succeeded; no statuses for the
/// regular containers.
fn with_sidecars() -> Fx {
    let mut fx = base();
    let inits = vec![
        sidecar("restartable-init-1", false),
        sidecar("restartable-init-2", true),
        sidecar("restartable-init-3", true),
    ];
    fx.rt.containers = inits
        .iter()
        .enumerate()
        .map(|(i, c)| status(&format!("initid{}", i + 1), c, ContainerState::Running))
        .collect();
    fx.spec_mut().init_containers = Some(inits);
    for id in ["initid2", "initid3"] {
        fx.set_probes(id, Some(ProbeOutcome::Success), Some(ProbeOutcome::Success));
    }
    fx
}

impl Fx {
    fn spec_mut(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_with(PodSpec::default)
    }

    fn policy(mut self, p: &str) -> Self {
        self.spec_mut().restart_policy = Some(p.into());
        self
    }

    /// The status of the runtime container with this ID.
    fn st(&mut self, id: &str) -> &mut ContainerStatus {
        self.rt
            .containers
            .iter_mut()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no container {id}"))
    }

    fn exited(&mut self, id: &str, code: i32) -> &mut Self {
        let s = self.st(id);
        s.state = ContainerState::Exited;
        s.exit_code = code;
        self
    }

    fn state(&mut self, id: &str, state: ContainerState) -> &mut Self {
        self.st(id).state = state;
        self
    }

    fn sandbox_not_ready(&mut self, attempt: u32) -> &mut Self {
        self.rt.sandboxes[0].state = SandboxState::SandboxNotready;
        self.rt.sandboxes[0].attempt = attempt;
        self
    }

    fn set_probes(
        &mut self,
        id: &str,
        liveness: Option<ProbeOutcome>,
        startup: Option<ProbeOutcome>,
    ) {
        self.probes.set(
            id,
            ContainerProbes {
                liveness,
                readiness: None,
                startup,
            },
        );
    }

    /// Appends running regular containers foo1..foo3 (ids id1..id3) with matching hashes.
    fn regulars(&mut self, state: ContainerState, exit_code: i32) -> &mut Self {
        let containers = self.pod.spec.as_ref().map(|s| s.containers.clone());
        for (i, c) in containers.unwrap_or_default().iter().enumerate() {
            let mut s = status(&format!("id{}", i + 1), c, state);
            s.exit_code = exit_code;
            self.rt.containers.push(s);
        }
        self
    }

    fn actions(&self) -> PodActions {
        compute_pod_actions(&self.pod, &self.rt, &self.probes)
    }
}

/// Upstream `noAction`: reuse the sandbox, do nothing.
fn no_action() -> PodActions {
    PodActions {
        sandbox_id: "sandboxID".into(),
        ..PodActions::default()
    }
}

/// Kill and recreate everything in a new sandbox with this attempt.
fn recreate(attempt: u32) -> PodActions {
    PodActions {
        kill_pod: true,
        create_sandbox: true,
        attempt,
        ..no_action()
    }
}

fn kills(
    list: &[(&str, &str, ContainerKind, KillReason, &str)],
) -> BTreeMap<String, ContainerToKill> {
    list.iter()
        .map(|(id, name, kind, reason, message)| {
            (
                id.to_string(),
                ContainerToKill {
                    name: name.to_string(),
                    kind: *kind,
                    reason: *reason,
                    message: message.to_string(),
                },
            )
        })
        .collect()
}
