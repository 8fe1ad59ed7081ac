//! Which container instance a log request reads: the kubelet's `GetContainerSpec` check and
//! `validateContainerLogStatus`, from the pod and the node's status for it.
//!
//! Owns: the choice of the current or previous instance and the kubelet's refusals (with
//! its texts). Must not: call the runtime or read files.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// Why no instance can be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The pod spec has no such container (404).
    NotInSpec(String),
    /// The container exists but has no readable instance (400).
    NoInstance(String),
}

fn in_spec(pod: &Pod, container: &str) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.containers.iter().any(|c| c.name == container)
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.name == container)
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == container)
}

fn status_of<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    let s = pod.status.as_ref()?;
    [
        &s.container_statuses,
        &s.init_container_statuses,
        &s.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|c| c.name == container)
}

/// The runtime's ID (without the `type://` prefix) of the instance to read.
pub fn container_id(pod: &Pod, container: &str, previous: bool) -> Result<String, Refusal> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if !in_spec(pod, container) {
        return Err(Refusal::NotInSpec(format!(
            "container {container:?} not found in pod {name:?}"
        )));
    }
    let refuse =
        |why: &str| Refusal::NoInstance(format!("container {container:?} in pod {name:?} {why}"));
    let Some(c) = status_of(pod, container) else {
        return Err(refuse("is not available"));
    };
    let last = c
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.container_id.clone())
        .filter(|id| !id.is_empty());
    let state = c.state.clone().unwrap_or_default();
    let id = if previous {
        last.ok_or_else(|| {
            Refusal::NoInstance(format!(
                "previous terminated container {container:?} in pod {name:?} not found"
            ))
        })?
    } else if state.running.is_some() {
        c.container_id.clone().unwrap_or_default()
    } else if let Some(t) = &state.terminated {
        // the next instance did not start: the terminated one, or the one before it
        match t.container_id.clone().filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => last.ok_or_else(|| refuse("is terminated"))?,
        }
    } else if let Some(id) = last {
        id
    } else if let Some(w) = &state.waiting {
        let reason = w.reason.as_deref().unwrap_or_default();
        return Err(refuse(&match reason {
            "ErrImagePull" => "is waiting to start: image can't be pulled".to_string(),
            "ImagePullBackOff" => {
                "is waiting to start: trying and failing to pull image".to_string()
            }
            _ => format!("is waiting to start: {reason}"),
        }));
    } else {
        return Err(refuse("is waiting to start - no logs yet"));
    };
    match id.split_once("://") {
        Some((kind, id)) if !kind.is_empty() && !id.is_empty() => Ok(id.to_string()),
        _ => Err(refuse(&format!("has invalid container id {id:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting, PodSpec, PodStatus,
    };

    fn pod(status: Option<ContainerStatus>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.spec = Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        p.status = Some(PodStatus {
            container_statuses: status.map(|s| vec![s]),
            ..Default::default()
        });
        p
    }

    fn status(state: ContainerState, last: Option<&str>) -> ContainerStatus {
        ContainerStatus {
            name: "main".into(),
            container_id: Some("containerd://current".into()),
            state: Some(state),
            last_state: last.map(|id| ContainerState {
                terminated: Some(ContainerStateTerminated {
                    container_id: Some(id.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn running() -> ContainerState {
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_running_container_reads_its_current_instance() {
        let p = pod(Some(status(running(), Some("containerd://old"))));
        assert_eq!(container_id(&p, "main", false), Ok("current".into()));
    }

    #[test]
    fn previous_reads_the_last_terminated_instance() {
        let p = pod(Some(status(running(), Some("containerd://old"))));
        assert_eq!(container_id(&p, "main", true), Ok("old".into()));
    }

    #[test]
    fn previous_without_a_terminated_instance_is_refused_with_the_kubelets_text() {
        let p = pod(Some(status(running(), None)));
        let want = "previous terminated container \"main\" in pod \"web\" not found";
        assert_eq!(
            container_id(&p, "main", true),
            Err(Refusal::NoInstance(want.into()))
        );
    }

    #[test]
    fn a_container_not_in_the_spec_is_not_found() {
        let p = pod(None);
        let want = "container \"sidecar\" not found in pod \"web\"";
        assert_eq!(
            container_id(&p, "sidecar", false),
            Err(Refusal::NotInSpec(want.into()))
        );
    }

    #[test]
    fn a_waiting_container_is_refused_with_its_reason() {
        let p = pod(Some(status(waiting("ContainerCreating"), None)));
        let want = "container \"main\" in pod \"web\" is waiting to start: ContainerCreating";
        assert_eq!(
            container_id(&p, "main", false),
            Err(Refusal::NoInstance(want.into()))
        );
        let p = pod(Some(status(waiting("ImagePullBackOff"), None)));
        let e = container_id(&p, "main", false).unwrap_err();
        assert!(
            matches!(e, Refusal::NoInstance(m) if m.ends_with("trying and failing to pull image"))
        );
    }

    #[test]
    fn a_waiting_container_that_ran_before_reads_its_last_instance() {
        let p = pod(Some(status(
            waiting("CrashLoopBackOff"),
            Some("containerd://old"),
        )));
        assert_eq!(container_id(&p, "main", false), Ok("old".into()));
    }

    #[test]
    fn a_container_without_status_is_not_available() {
        let p = pod(None);
        let want = "container \"main\" in pod \"web\" is not available";
        assert_eq!(
            container_id(&p, "main", false),
            Err(Refusal::NoInstance(want.into()))
        );
    }
}
