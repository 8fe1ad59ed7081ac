//! Builders shared by the pod-status tests (mirroring the upstream test helpers).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus as ApiContainerStatus, Pod, PodCondition, PodSpec,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::pod_status::{generate_api_pod_status, StatusInputs};
use crate::core::probe_results::ProbeResults;
use crate::core::reason_cache::StartFailure;
use crate::core::record::time::Time;
use crate::core::runtime_status::{
    ContainerState as RtState, ContainerStatus as RtContainer, RuntimePodStatus, SandboxState,
    SandboxStatus,
};

pub const NOW_SECS: i64 = 1_800_000_000;

/// `now` with a fractional part, so truncation is visible.
pub fn now() -> Time {
    Time::from_unix_nanos(NOW_SECS * 1_000_000_000 + 123_456_789)
}

pub fn container(name: &str) -> Container {
    Container {
        name: name.to_string(),
        image: Some(format!("{name}-image")),
        ..Container::default()
    }
}

pub fn sidecar(name: &str) -> Container {
    Container {
        restart_policy: Some("Always".into()),
        ..container(name)
    }
}

pub fn pod(policy: &str, inits: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("my-pod".into()),
            namespace: Some("ns".into()),
            uid: Some("uid-1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.to_string()),
            init_containers: (!inits.is_empty()).then_some(inits),
            containers,
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// `Always` with regular containers only.
pub fn simple_pod(names: &[&str]) -> Pod {
    pod(
        "Always",
        vec![],
        names.iter().map(|n| container(n)).collect(),
    )
}

pub fn deleted(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(crate::core::pod_status::time_to_api(now()));
    p
}

pub fn with_api_status(mut p: Pod, status: PodStatus) -> Pod {
    p.status = Some(status);
    p
}

// ---- API container statuses -------------------------------------------------------------

fn status(name: &str, state: ContainerState) -> ApiContainerStatus {
    ApiContainerStatus {
        name: name.to_string(),
        state: Some(state),
        last_state: Some(ContainerState::default()),
        ..ApiContainerStatus::default()
    }
}

pub fn running(name: &str) -> ApiContainerStatus {
    status(
        name,
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        },
    )
}

pub fn started(name: &str) -> ApiContainerStatus {
    ApiContainerStatus {
        started: Some(true),
        ..running(name)
    }
}

pub fn terminated_state(code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

pub fn succeeded(name: &str) -> ApiContainerStatus {
    status(name, terminated_state(0))
}

/// Upstream's `stoppedState` is a zero exit, like `succeeded`.
pub fn stopped(name: &str) -> ApiContainerStatus {
    succeeded(name)
}

pub fn failed(name: &str) -> ApiContainerStatus {
    status(name, terminated_state(-1))
}

pub fn waiting_reason(name: &str, reason: &str) -> ApiContainerStatus {
    status(
        name,
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: (!reason.is_empty()).then(|| reason.to_string()),
                message: None,
            }),
            ..ContainerState::default()
        },
    )
}

pub fn waiting(name: &str) -> ApiContainerStatus {
    waiting_reason(name, "")
}

/// Waiting after a zero exit (crash loop of a container that exited 0).
pub fn waiting_last_zero(name: &str) -> ApiContainerStatus {
    ApiContainerStatus {
        last_state: Some(terminated_state(0)),
        ..waiting(name)
    }
}

/// Waiting after a non-zero exit.
pub fn waiting_last_failed(name: &str) -> ApiContainerStatus {
    ApiContainerStatus {
        last_state: Some(terminated_state(-1)),
        ..waiting(name)
    }
}

pub fn ready(mut s: ApiContainerStatus) -> ApiContainerStatus {
    s.ready = true;
    s
}

// ---- reading results --------------------------------------------------------------------

pub fn find<'s>(
    statuses: &'s Option<Vec<ApiContainerStatus>>,
    name: &str,
) -> &'s ApiContainerStatus {
    statuses
        .iter()
        .flatten()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no status for {name}"))
}

pub fn waiting_reason_of(s: &ApiContainerStatus) -> Option<&str> {
    s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

pub fn waiting_of(s: &ApiContainerStatus) -> &ContainerStateWaiting {
    s.state
        .as_ref()
        .and_then(|st| st.waiting.as_ref())
        .expect("waiting")
}

pub fn term(s: &Option<ContainerState>) -> Option<&ContainerStateTerminated> {
    s.as_ref()?.terminated.as_ref()
}

pub fn condition<'s>(status: &'s PodStatus, type_: &str) -> &'s PodCondition {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no condition {type_}"))
}

pub fn condition_types(s: &PodStatus) -> Vec<&str> {
    s.conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect()
}

/// The status's reason and message.
pub fn reason_message(s: &PodStatus) -> (Option<&str>, Option<&str>) {
    (s.reason.as_deref(), s.message.as_deref())
}

pub fn cond(type_: &str, status: &str) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        ..PodCondition::default()
    }
}

// ---- runtime -----------------------------------------------------------------------------

pub fn rt(name: &str, id: &str, state: RtState, created_secs: i64) -> RtContainer {
    RtContainer {
        id: id.to_string(),
        name: name.to_string(),
        state,
        created_at: Time::from_unix_secs(created_secs),
        started_at: (state != RtState::Created).then(|| Time::from_unix_secs(created_secs + 1)),
        finished_at: None,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        image: format!("{name}-image"),
        image_ref: format!("sha256:{name}"),
        hash: String::new(),
        restart_count: 0,
    }
}

pub fn rt_running(name: &str, id: &str, created_secs: i64) -> RtContainer {
    rt(name, id, RtState::Running, created_secs)
}

pub fn rt_exited(name: &str, id: &str, created_secs: i64, code: i32) -> RtContainer {
    RtContainer {
        exit_code: code,
        finished_at: Some(Time::from_unix_secs(created_secs + 5)),
        reason: if code == 0 { "Completed" } else { "Error" }.to_string(),
        ..rt(name, id, RtState::Exited, created_secs)
    }
}

pub fn sandbox(
    id: &str,
    state: SandboxState,
    ip: Option<&str>,
    created_secs: i64,
) -> SandboxStatus {
    SandboxStatus {
        id: id.to_string(),
        state,
        created_at: Time::from_unix_secs(created_secs),
        attempt: 0,
        ip: ip.map(str::to_string),
        host_network: false,
    }
}

pub fn ready_sandbox(ip: &str) -> SandboxStatus {
    sandbox("sb-1", SandboxState::SandboxReady, Some(ip), 100)
}

pub fn runtime(containers: Vec<RtContainer>, sandboxes: Vec<SandboxStatus>) -> RuntimePodStatus {
    RuntimePodStatus {
        name: "my-pod".into(),
        namespace: "ns".into(),
        ips: Vec::new(),
        sandboxes,
        containers,
    }
}

// ---- one generation ----------------------------------------------------------------------

/// Owned inputs for one `generate_api_pod_status` call.
pub struct Fixture {
    pub pod: Pod,
    pub runtime: RuntimePodStatus,
    pub cached: Option<PodStatus>,
    pub probes: ProbeResults,
    pub failures: BTreeMap<String, StartFailure>,
    pub terminal: bool,
    pub is_static: bool,
    pub host_ip: Option<String>,
    pub evict: Option<(String, String)>,
}

impl Fixture {
    pub fn new(pod: Pod, runtime: RuntimePodStatus) -> Fixture {
        Fixture {
            pod,
            runtime,
            cached: None,
            probes: ProbeResults::default(),
            failures: BTreeMap::new(),
            terminal: false,
            is_static: false,
            host_ip: None,
            evict: None,
        }
    }

    pub fn fail_start(mut self, container: &str, reason: &str, message: &str) -> Fixture {
        self.failures.insert(
            container.to_string(),
            StartFailure {
                reason: reason.to_string(),
                message: message.to_string(),
            },
        );
        self
    }

    pub fn generate(&self) -> PodStatus {
        generate_api_pod_status(&StatusInputs {
            pod: &self.pod,
            runtime: &self.runtime,
            cached: self.cached.as_ref(),
            probes: &self.probes,
            start_failures: Some(&self.failures),
            pod_is_terminal: self.terminal,
            is_static: self.is_static,
            now: now(),
            runtime_name: "containerd",
            host_ip: self.host_ip.as_deref(),
            evict: self.evict.as_ref().map(|(r, m)| (r.as_str(), m.as_str())),
        })
    }
}
