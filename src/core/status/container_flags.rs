//! `SetContainerReadiness` and `SetContainerStartup` (SM-16, SM-17): a probe result changes one
//! container's `ready` or `started` flag in the cached status without a full status
//! regeneration.
//!
//! Owns the flag edits and the regeneration of the pod's Ready and ContainersReady conditions
//! after a readiness change. Must not create a status: a pod the status manager has not seen
//! yet, or a container it does not know, is ignored (the next full status carries the flag).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodStatus};

use super::super::pod_status::conditions::{containers_ready_condition, ready_condition};
use super::super::uid::Uid;
use super::store::{StatusStore, StatusUpdate};
use crate::core::record::Time;

/// `findContainerStatus`: regular, then init, then ephemeral statuses, by container ID.
fn find_by_id<'s>(
    status: &'s mut PodStatus,
    container_id: &str,
) -> Option<&'s mut ContainerStatus> {
    let lists = [
        status.container_statuses.as_mut(),
        status.init_container_statuses.as_mut(),
        status.ephemeral_container_statuses.as_mut(),
    ];
    lists
        .into_iter()
        .flatten()
        .flat_map(|l| l.iter_mut())
        .find(|c| c.container_id.as_deref() == Some(container_id))
}

fn set_condition(status: &mut PodStatus, condition: PodCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

impl StatusStore {
    /// `SetContainerReadiness(podUID, containerID, ready)`. `container_id` is the status'
    /// `containerID` (`<runtime>://<id>`).
    pub fn set_container_readiness(
        &mut self,
        uid: &Uid,
        p: &Pod,
        container_id: &str,
        ready: bool,
        now: Time,
    ) -> StatusUpdate {
        let Some(cached) = self.get(uid) else {
            return StatusUpdate::Unchanged;
        };
        let mut status = PodStatus::clone(&cached.status);
        let Some(c) = find_by_id(&mut status, container_id) else {
            return StatusUpdate::Unchanged;
        };
        if c.ready == ready {
            return StatusUpdate::Unchanged;
        }
        c.ready = ready;
        let all: Vec<ContainerStatus> = status
            .init_container_statuses
            .iter()
            .chain(status.container_statuses.iter())
            .flatten()
            .cloned()
            .collect();
        let phase = status.phase.clone().unwrap_or_default();
        let conditions = status.conditions.clone().unwrap_or_default();
        set_condition(
            &mut status,
            ready_condition(p, &conditions, Some(&all), &phase),
        );
        set_condition(
            &mut status,
            containers_ready_condition(p, Some(&all), &phase),
        );
        self.update_status_internal(uid, p, None, status, false, false, now)
    }

    /// `SetContainerStartup(podUID, containerID, started)`: an unset `started` becoming false
    /// is a change too.
    pub fn set_container_startup(
        &mut self,
        uid: &Uid,
        p: &Pod,
        container_id: &str,
        started: bool,
        now: Time,
    ) -> StatusUpdate {
        let Some(cached) = self.get(uid) else {
            return StatusUpdate::Unchanged;
        };
        let mut status = PodStatus::clone(&cached.status);
        let Some(c) = find_by_id(&mut status, container_id) else {
            return StatusUpdate::Unchanged;
        };
        if c.started == Some(started) {
            return StatusUpdate::Unchanged;
        }
        c.started = Some(started);
        self.update_status_internal(uid, p, None, status, false, false, now)
    }
}
