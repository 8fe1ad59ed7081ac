//! Selecting records by pod and kind, for followers, `ledger tail` and `/debug/ledger`.
//!
//! Owns the pod selector (a UID, or `NAMESPACE/NAME` resolved to the UIDs that carried that
//! name so far) and the kind set. Must not read the node's state itself: a caller that knows
//! UIDs for a name already (the live node) seeds them with [`RecordFilter::know_uid`].

use std::collections::BTreeSet;

use crate::core::record::event::Event;
use crate::core::record::Record;
use crate::core::{pod, Uid};

/// Which pod a filter selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodSelector {
    /// By UID.
    Uid(Uid),
    /// By namespace and name (every UID seen with that name matches).
    Name {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

impl std::str::FromStr for PodSelector {
    type Err = String;
    fn from_str(s: &str) -> Result<PodSelector, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(PodSelector::Name {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                })
            }
            Some(_) => Err(format!("{s:?} is neither a UID nor NAMESPACE/NAME")),
            None if !s.is_empty() => Ok(PodSelector::Uid(Uid::new(s))),
            None => Err("empty pod selector".into()),
        }
    }
}

/// A record filter. Matching by name learns UIDs from the records it sees, so it must see
/// records in seq order (it does not need to match them).
#[derive(Clone, Debug, Default)]
pub struct RecordFilter {
    pod: Option<PodSelector>,
    uids: BTreeSet<Uid>,
    kinds: BTreeSet<String>,
}

impl RecordFilter {
    /// A filter for `pod` (if any) and `kinds` (empty: all).
    pub fn new(pod: Option<PodSelector>, kinds: impl IntoIterator<Item = String>) -> Self {
        let mut uids = BTreeSet::new();
        if let Some(PodSelector::Uid(u)) = &pod {
            uids.insert(u.clone());
        }
        RecordFilter {
            pod,
            uids,
            kinds: kinds.into_iter().collect(),
        }
    }

    /// Unknown kinds, so a caller can reject a typo instead of streaming nothing.
    pub fn unknown_kinds(&self) -> Vec<String> {
        self.kinds
            .iter()
            .filter(|k| !Event::KINDS.contains(&k.as_str()))
            .cloned()
            .collect()
    }

    /// The name selector, if the filter selects by name.
    pub fn name(&self) -> Option<(&str, &str)> {
        match &self.pod {
            Some(PodSelector::Name { namespace, name }) => Some((namespace, name)),
            _ => None,
        }
    }

    /// Adds a UID known to carry the selected name.
    pub fn know_uid(&mut self, uid: Uid) {
        self.uids.insert(uid);
    }

    /// True when the filter selects every record.
    pub fn is_all(&self) -> bool {
        self.pod.is_none() && self.kinds.is_empty()
    }

    /// Whether `r` is selected (and, for name selectors, learns its UID).
    pub fn matches(&mut self, r: &Record) -> bool {
        if let Some(PodSelector::Name { namespace, name }) = &self.pod {
            if let Some(p) = r.event.pod() {
                if pod::namespace(p) == namespace && pod::name(p) == name {
                    self.uids.insert(pod::uid(p));
                }
            }
        }
        if !self.kinds.is_empty() && !self.kinds.contains(r.event.kind()) {
            return false;
        }
        match &self.pod {
            None => true,
            Some(_) => r
                .event
                .pod_uid()
                .is_some_and(|u| self.uids.contains(u.as_str())),
        }
    }
}
