//! PLEG event generation from two relists (kubelet generic PLEG `generateEvents`).
//!
//! Owns the rules PL-01…PL-05: which state change of a container or sandbox yields which
//! event. Pure: given the previous and current view of one pod, returns its events in a
//! deterministic order. Must not talk to the runtime.

use std::collections::BTreeSet;

use crate::core::record::event::PlegEventKind;
use crate::core::runtime_status::ContainerState;
use crate::shell::runtime_view::ListedPod;

/// The PLEG's view of a container or sandbox state (`plegContainerState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlegState {
    /// Running (or a ready sandbox).
    Running,
    /// Exited (or a stopped sandbox).
    Exited,
    /// Unknown (and Created, which the kubelet does not distinguish).
    Unknown,
    /// Not in the runtime.
    NonExistent,
}

impl From<ContainerState> for PlegState {
    fn from(s: ContainerState) -> PlegState {
        match s {
            ContainerState::Running => PlegState::Running,
            ContainerState::Exited => PlegState::Exited,
            ContainerState::Created | ContainerState::Unknown => PlegState::Unknown,
        }
    }
}

/// `generateEvents`: the events for one ID moving from `old` to `new`. `ContainerChanged`
/// is generated for completeness; the relist filters it out (PL-01).
pub fn events_for(old: PlegState, new: PlegState) -> Vec<PlegEventKind> {
    if old == new {
        return vec![];
    }
    match new {
        PlegState::Running => vec![PlegEventKind::ContainerStarted],
        PlegState::Exited => vec![PlegEventKind::ContainerDied],
        PlegState::Unknown => vec![PlegEventKind::ContainerChanged],
        PlegState::NonExistent => match old {
            PlegState::Exited => vec![PlegEventKind::ContainerRemoved],
            _ => vec![
                PlegEventKind::ContainerDied,
                PlegEventKind::ContainerRemoved,
            ],
        },
    }
}

/// The events of one pod between two relists (sandboxes first, then containers, each by
/// ID), with `ContainerChanged` filtered out as the generic relist does.
pub fn pod_events(
    old: Option<&ListedPod>,
    new: Option<&ListedPod>,
) -> Vec<(String, PlegEventKind)> {
    let empty = ListedPod::default();
    let old = old.unwrap_or(&empty);
    let new = new.unwrap_or(&empty);
    let mut out = Vec::new();
    let sandbox_state = |m: &std::collections::BTreeMap<String, bool>, id: &str| match m.get(id) {
        Some(true) => PlegState::Running,
        Some(false) => PlegState::Exited,
        None => PlegState::NonExistent,
    };
    let ids: BTreeSet<&String> = old.sandboxes.keys().chain(new.sandboxes.keys()).collect();
    for id in ids {
        for e in events_for(
            sandbox_state(&old.sandboxes, id),
            sandbox_state(&new.sandboxes, id),
        ) {
            out.push((id.clone(), e));
        }
    }
    let state = |m: &std::collections::BTreeMap<String, ContainerState>, id: &str| {
        m.get(id)
            .map_or(PlegState::NonExistent, |s| PlegState::from(*s))
    };
    let ids: BTreeSet<&String> = old.containers.keys().chain(new.containers.keys()).collect();
    for id in ids {
        for e in events_for(state(&old.containers, id), state(&new.containers, id)) {
            out.push((id.clone(), e));
        }
    }
    out.retain(|(_, e)| *e != PlegEventKind::ContainerChanged);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use ContainerState::*;
    use PlegEventKind::*;

    fn pod(containers: &[(&str, ContainerState)]) -> ListedPod {
        let containers = containers.iter().map(|(id, s)| (id.to_string(), *s));
        ListedPod {
            sandboxes: BTreeMap::new(),
            containers: containers.collect(),
        }
    }

    fn evs(events: &[(&str, PlegEventKind)]) -> Vec<(String, PlegEventKind)> {
        events.iter().map(|(id, k)| (id.to_string(), *k)).collect()
    }

    #[test]
    fn pl_01_first_relist_reports_started_and_died_and_hides_unknown() {
        let p1234 = pod(&[("c1", Exited), ("c2", Running), ("c3", Unknown)]);
        let want = evs(&[("c1", ContainerDied), ("c2", ContainerStarted)]);
        assert_eq!(pod_events(None, Some(&p1234)), want);
        let p4567 = pod(&[("c1", Exited)]);
        let want = evs(&[("c1", ContainerDied)]);
        assert_eq!(pod_events(None, Some(&p4567)), want);
    }

    #[test]
    fn pl_02_an_unchanged_relist_reports_nothing() {
        let p = pod(&[("c1", Exited), ("c2", Running), ("c3", Unknown)]);
        assert!(pod_events(Some(&p), Some(&p)).is_empty());
    }

    #[test]
    fn pl_03_third_relist_changes() {
        let old = pod(&[("c1", Exited), ("c2", Running), ("c3", Unknown)]);
        let new = pod(&[("c2", Exited), ("c3", Running), ("c4", Running)]);
        let want = evs(&[
            ("c1", ContainerRemoved),
            ("c2", ContainerDied),
            ("c3", ContainerStarted),
            ("c4", ContainerStarted),
        ]);
        assert_eq!(pod_events(Some(&old), Some(&new)), want);
        let old4567 = pod(&[("c1", Exited)]);
        let want = evs(&[("c1", ContainerRemoved)]);
        assert_eq!(pod_events(Some(&old4567), None), want);
    }

    #[test]
    fn pl_04_a_running_container_that_vanishes_died_and_was_removed() {
        let (old, gone) = (pod(&[("c1", Running), ("c2", Exited)]), pod(&[]));
        let want = evs(&[
            ("c1", ContainerDied),
            ("c1", ContainerRemoved),
            ("c2", ContainerRemoved),
        ]);
        assert_eq!(pod_events(Some(&old), Some(&gone)), want);
        // the whole pod disappearing gives the same
        assert_eq!(pod_events(Some(&old), None), want);
    }

    #[test]
    fn pl_05_sandboxes_produce_events_with_their_id() {
        let mut old = ListedPod::default();
        old.sandboxes.insert("sb1".into(), true);
        let mut new = ListedPod::default();
        new.sandboxes
            .extend([("sb1".into(), false), ("sb2".into(), true)]);
        let want = evs(&[("sb1", ContainerDied), ("sb2", ContainerStarted)]);
        assert_eq!(pod_events(Some(&old), Some(&new)), want);
        let want = evs(&[
            ("sb1", ContainerRemoved),
            ("sb2", ContainerDied),
            ("sb2", ContainerRemoved),
        ]);
        assert_eq!(pod_events(Some(&new), None), want);
    }
}
