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

/// Statuses `{prefix}1`, `{prefix}2`, … for these containers, all in `state`.
fn statuses(prefix: &str, cs: &[Container], state: ContainerState) -> Vec<ContainerStatus> {
    let id = |i: usize| format!("{prefix}{}", i + 1);
    cs.iter()
        .enumerate()
        .map(|(i, c)| status(&id(i), c, state))
        .collect()
}

/// Upstream `makeBasePodAndStatus`.
fn base() -> Fx {
    let containers: Vec<_> = (1..=3)
        .map(|i| container(&format!("foo{i}"), "busybox"))
        .collect();
    let sandbox = SandboxStatus {
        id: "sandboxID".into(),
        state: SandboxState::SandboxReady,
        created_at: Time::from_unix_secs(900),
        attempt: 0,
        ip: Some("10.0.0.1".into()),
        host_network: false,
    };
    let meta = ObjectMeta {
        uid: Some("12345678".into()),
        name: Some("foo".into()),
        namespace: Some("foo-ns".into()),
        ..ObjectMeta::default()
    };
    Fx {
        rt: RuntimePodStatus {
            name: "foo".into(),
            namespace: "foo-ns".into(),
            ips: vec!["10.0.0.1".into()],
            sandboxes: vec![sandbox],
            containers: statuses("id", &containers, ContainerState::Running),
        },
        pod: Pod {
            metadata: meta,
            spec: Some(PodSpec {
                containers,
                ..PodSpec::default()
            }),
            ..Pod::default()
        },
        probes: ProbeResults::default(),
    }
}

/// `base()` with these init containers (statuses initid1… in `state`) and no statuses for
/// the regular containers.
fn with_inits(inits: Vec<Container>, state: ContainerState) -> Fx {
    let mut fx = base();
    fx.rt.containers = statuses("initid", &inits, state);
    fx.spec_mut().init_containers = Some(inits);
    fx
}

/// Upstream `makeBasePodAndStatusWithInitContainers`: init1..init3 all exited 0.
fn with_init() -> Fx {
    let inits = (1..=3).map(|i| container(&format!("init{i}"), "bar-image"));
    with_inits(inits.collect(), ContainerState::Exited)
}

/// Upstream `makeBasePodAndStatusWithRestartableInitContainers`: three running sidecars,
/// the last two with liveness and startup probes that both succeeded.
fn with_sidecars() -> Fx {
    let inits = (1..=3).map(|i| sidecar(&format!("restartable-init-{i}"), i > 1));
    let ok = Some(ProbeOutcome::Success);
    with_inits(inits.collect(), ContainerState::Running)
        .probed("initid2", ok, ok)
        .probed("initid3", ok, ok)
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

    fn exited(mut self, id: &str, code: i32) -> Self {
        let s = self.st(id);
        s.state = ContainerState::Exited;
        s.exit_code = code;
        self
    }

    fn state(mut self, id: &str, state: ContainerState) -> Self {
        self.st(id).state = state;
        self
    }

    fn sandbox_not_ready(mut self, attempt: u32) -> Self {
        self.rt.sandboxes[0].state = SandboxState::SandboxNotready;
        self.rt.sandboxes[0].attempt = attempt;
        self
    }

    /// Keeps only the first `n` runtime container statuses.
    fn keep(mut self, n: usize) -> Self {
        self.rt.containers.truncate(n);
        self
    }

    fn probed(
        mut self,
        id: &str,
        liveness: Option<ProbeOutcome>,
        startup: Option<ProbeOutcome>,
    ) -> Self {
        let probes = ContainerProbes {
            liveness,
            startup,
            ..ContainerProbes::default()
        };
        self.probes.set(id, probes);
        self
    }

    fn with_regulars(mut self, state: ContainerState) -> Self {
        self.regulars(state, 0);
        self
    }

    /// Appends regular containers foo1..foo3 (ids id1..id3) with matching hashes.
    fn regulars(&mut self, state: ContainerState, exit_code: i32) -> &mut Self {
        let containers = self.pod.spec.as_ref().map(|s| s.containers.clone());
        let mut added = statuses("id", &containers.unwrap_or_default(), state);
        added.iter_mut().for_each(|s| s.exit_code = exit_code);
        self.rt.containers.extend(added);
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

/// `no_action()` starting these init and regular containers.
fn starts(init: &[usize], regular: &[usize]) -> PodActions {
    PodActions {
        init_containers_to_start: init.to_vec(),
        containers_to_start: regular.to_vec(),
        ..no_action()
    }
}

/// Kill the pod without a new sandbox (`attempt` is the next sandbox attempt).
fn kill_pod(attempt: u32) -> PodActions {
    PodActions {
        kill_pod: true,
        attempt,
        ..no_action()
    }
}

/// `actions` plus one container to kill.
fn killing(
    actions: PodActions,
    (id, name, kind, reason): (&str, &str, ContainerKind, KillReason),
    message: &str,
) -> PodActions {
    let kill = ContainerToKill {
        name: name.into(),
        kind,
        reason,
        message: message.into(),
    };
    PodActions {
        containers_to_kill: BTreeMap::from([(id.to_string(), kill)]),
        ..actions
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
