//! The pod lifecycle event generator: turns the runtime's state changes into
//! `RuntimeStatusObserved` and `PlegEvent` records.
//!
//! Owns the relist loop (kubelet generic PLEG: every `relist_period_ms`, list everything,
//! inspect the pods that changed, emit their new status then one event per change) and the
//! evented mode (kubelet Evented PLEG: the runtime's `GetContainerEvents` stream triggers an
//! inspection of the pod at once, and the relist slows to `evented_relist_period_ms` as a
//! fallback; if the stream is unsupported or breaks, generic relisting resumes and the
//! stream is retried). Also owns PLEG health (PL-10). Must not decide what a change means:
//! the core folds the records.
//!
//! A deliberate difference from the kubelet (PL-06): events are never dropped when the
//! engine is behind; the PLEG waits on the bounded inbox instead, so relisting slows down.

pub mod diff;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::core::runtime_status::{RuntimePodStatus, SandboxState};
use crate::core::Uid;
use crate::cri::CriClient;
use crate::ledger::event::{PlegEvent, RuntimeStatusObserved};
use crate::ledger::{Event, Time};
use crate::shell::cri_config::POD_UID_LABEL;
use crate::shell::runtime_view::{self, ListedPod};
use crate::shell::Report;

/// PLEG settings; the kubelet's defaults.
#[derive(Clone, Debug)]
pub struct PlegOptions {
    /// Generic relist period (kubelet: 1 s).
    pub relist_period_ms: u64,
    /// Use the runtime's container event stream when it has one.
    pub evented: bool,
    /// Relist period while the event stream works (kubelet Evented PLEG: 300 s).
    pub evented_relist_period_ms: u64,
    /// Unhealthy after this long without a relist (kubelet: 3 min; evented: 10 min).
    pub relist_threshold_ms: u64,
    /// Wait before retrying a broken event stream.
    pub event_stream_retry_ms: u64,
    /// List only the pods this node created (`ledgerlet.dev/node`); empty lists every pod
    /// ledgerlet manages.
    pub node_name: String,
}

impl Default for PlegOptions {
    fn default() -> Self {
        PlegOptions {
            relist_period_ms: 1_000,
            evented: true,
            evented_relist_period_ms: 300_000,
            relist_threshold_ms: 180_000,
            event_stream_retry_ms: 5_000,
            node_name: String::new(),
        }
    }
}

/// PLEG health for `/healthz` (PL-10): unhealthy before the first relist and after
/// `relist_threshold_ms` without one.
#[derive(Debug)]
pub struct PlegHealth {
    last_relist_unix_ms: AtomicI64,
    threshold_ms: u64,
    evented: AtomicBool,
}

impl PlegHealth {
    /// Health tracking with the given threshold.
    pub fn new(threshold_ms: u64) -> PlegHealth {
        PlegHealth {
            last_relist_unix_ms: AtomicI64::new(0),
            threshold_ms,
            evented: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let now = Time::from_system();
        self.last_relist_unix_ms
            .store(now.unix_nanos() / 1_000_000, Ordering::Relaxed);
        metrics::gauge!("kubelet_pleg_last_seen_seconds").set(now.unix_secs() as f64);
    }

    /// True while the event stream is in use.
    pub fn is_evented(&self) -> bool {
        self.evented.load(Ordering::Relaxed)
    }

    /// `Healthy()`: Ok, or the kubelet's message.
    pub fn check(&self) -> Result<(), String> {
        let last = self.last_relist_unix_ms.load(Ordering::Relaxed);
        if last == 0 {
            return Err("pleg has yet to be successful".into());
        }
        let now = Time::from_system().unix_nanos() / 1_000_000;
        let ago = (now - last).max(0) as u64;
        if ago > self.threshold_ms {
            return Err(format!(
                "pleg was last seen active {:.1}s ago; threshold is {}s",
                ago as f64 / 1000.0,
                self.threshold_ms / 1000
            ));
        }
        Ok(())
    }
}

fn listed(status: &RuntimePodStatus) -> ListedPod {
    ListedPod {
        sandboxes: status
            .sandboxes
            .iter()
            .map(|s| (s.id.clone(), s.state == SandboxState::SandboxReady))
            .collect(),
        containers: status
            .containers
            .iter()
            .map(|c| (c.id.clone(), c.state))
            .collect(),
    }
}

struct Pleg {
    cri: CriClient,
    report: Report,
    health: Arc<PlegHealth>,
    /// The last view reported per pod.
    previous: BTreeMap<Uid, ListedPod>,
    /// The last status reported per pod: an identical observation with no event is not
    /// reported again (several runtime events often describe one change).
    reported: BTreeMap<Uid, Arc<RuntimePodStatus>>,
    /// Pods whose inspection failed: inspect again at the next relist (PL-07).
    reinspect: BTreeSet<Uid>,
    last_relist: Option<Instant>,
    node_name: String,
}

impl Pleg {
    /// Inspects one pod and reports its status and the events since the previous view.
    /// Returns false if the engine has stopped.
    async fn inspect_and_report(&mut self, uid: &Uid) -> bool {
        match runtime_view::pod_status(&self.cri, uid).await {
            Ok(status) => {
                let new = listed(&status);
                let old = self.previous.get(uid);
                let events = diff::pod_events(old, Some(&new));
                let unchanged = match self.reported.get(uid) {
                    Some(r) => **r == status,
                    None => status.is_empty() && old.is_none(),
                };
                if !(unchanged && events.is_empty()) {
                    let status = if status.is_empty() {
                        self.reported.remove(uid);
                        None
                    } else {
                        let s = Arc::new(status);
                        self.reported.insert(uid.clone(), s.clone());
                        Some(s)
                    };
                    let observed = RuntimeStatusObserved {
                        uid: uid.clone(),
                        status,
                        error: None,
                    };
                    if !self
                        .report
                        .send(Event::RuntimeStatusObserved(observed), None)
                        .await
                    {
                        return false;
                    }
                }
                for (id, kind) in events {
                    let e = PlegEvent {
                        uid: uid.clone(),
                        kind,
                        container_id: Some(id),
                    };
                    if !self.report.send(Event::PlegEvent(e), None).await {
                        return false;
                    }
                }
                if new.sandboxes.is_empty() && new.containers.is_empty() {
                    self.previous.remove(uid);
                } else {
                    self.previous.insert(uid.clone(), new);
                }
                self.reinspect.remove(uid);
            }
            Err(e) => {
                metrics::counter!("ledgerlet_pleg_inspect_errors_total").increment(1);
                self.reported.remove(uid);
                let observed = RuntimeStatusObserved {
                    uid: uid.clone(),
                    status: None,
                    error: Some(e.to_string()),
                };
                if !self
                    .report
                    .send(Event::RuntimeStatusObserved(observed), None)
                    .await
                {
                    return false;
                }
                self.reinspect.insert(uid.clone());
            }
        }
        true
    }

    /// One generic relist. Returns false if the engine has stopped.
    async fn relist(&mut self) -> bool {
        let started = Instant::now();
        if let Some(last) = self.last_relist {
            metrics::histogram!("kubelet_pleg_relist_interval_seconds")
                .record(started.duration_since(last).as_secs_f64());
        }
        self.last_relist = Some(started);
        let current = match runtime_view::list_pods(&self.cri, &self.node_name).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "PLEG relist failed");
                return true;
            }
        };
        let mut changed: BTreeSet<Uid> = self.reinspect.clone();
        for (uid, pod) in &current {
            if self.previous.get(uid) != Some(pod) {
                changed.insert(uid.clone());
            }
        }
        for uid in self.previous.keys() {
            if !current.contains_key(uid) {
                changed.insert(uid.clone());
            }
        }
        for uid in changed {
            if !self.inspect_and_report(&uid).await {
                return false;
            }
        }
        let running_pods = current
            .values()
            .filter(|p| p.sandboxes.values().any(|ready| *ready))
            .count();
        metrics::gauge!("kubelet_running_pods").set(running_pods as f64);
        let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
        for p in current.values() {
            for s in p.containers.values() {
                use crate::core::runtime_status::ContainerState as S;
                let label = match s {
                    S::Created => "created",
                    S::Running => "running",
                    S::Exited => "exited",
                    S::Unknown => "unknown",
                };
                *by_state.entry(label).or_default() += 1;
            }
        }
        for state in ["created", "running", "exited", "unknown"] {
            metrics::gauge!("kubelet_running_containers", "container_state" => state)
                .set(by_state.get(state).copied().unwrap_or(0) as f64);
        }
        self.health.touch();
        metrics::histogram!("kubelet_pleg_relist_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        true
    }
}

/// Runs the PLEG until `shutdown` turns true or the engine stops.
pub async fn run(
    cri: CriClient,
    opts: PlegOptions,
    report: Report,
    health: Arc<PlegHealth>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut pleg = Pleg {
        cri: cri.clone(),
        report,
        health: health.clone(),
        previous: BTreeMap::new(),
        reported: BTreeMap::new(),
        reinspect: BTreeSet::new(),
        last_relist: None,
        node_name: opts.node_name.clone(),
    };
    let mut stream: Option<tonic::Streaming<crate::cri::v1::ContainerEventResponse>> = None;
    let mut next_stream_attempt = Instant::now();
    let mut next_relist = Instant::now();
    let mut evented_supported = opts.evented;
    if !opts.evented {
        tracing::info!(
            "PLEG: generic mode, relisting every {} ms (evented PLEG disabled)",
            opts.relist_period_ms
        );
    }
    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "generic").set(1.0);
    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "evented").set(0.0);
    loop {
        if evented_supported && stream.is_none() && Instant::now() >= next_stream_attempt {
            let connect = Instant::now();
            match cri.get_container_events().await {
                Ok(s) => {
                    metrics::counter!(
                        crate::observe::describe::EVENTED_PLEG_CONNECTION_SUCCESSES_TOTAL
                    )
                    .increment(1);
                    metrics::histogram!("kubelet_evented_pleg_connection_latency_seconds")
                        .record(connect.elapsed().as_secs_f64());
                    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "evented").set(1.0);
                    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "generic").set(0.0);
                    health.evented.store(true, Ordering::Relaxed);
                    tracing::info!(
                        endpoint = cri.endpoint(),
                        "PLEG: evented mode (container event stream), relisting every {} ms as a fallback",
                        opts.evented_relist_period_ms
                    );
                    stream = Some(s);
                }
                Err(e) if e.code() == tonic::Code::Unimplemented => {
                    // containerd 1.6, older CRI-O: no event stream, ever. Say so once and
                    // stop asking.
                    metrics::counter!(
                        crate::observe::describe::EVENTED_PLEG_CONNECTION_ERRORS_TOTAL
                    )
                    .increment(1);
                    tracing::info!(
                        endpoint = cri.endpoint(),
                        "PLEG: generic mode, relisting every {} ms: the runtime does not implement GetContainerEvents",
                        opts.relist_period_ms
                    );
                    evented_supported = false;
                }
                Err(e) => {
                    metrics::counter!(
                        crate::observe::describe::EVENTED_PLEG_CONNECTION_ERRORS_TOTAL
                    )
                    .increment(1);
                    tracing::info!(error = %e, "PLEG: generic relist every {} ms (the runtime's container event stream is not available; retrying in {} ms)", opts.relist_period_ms, opts.event_stream_retry_ms);
                    next_stream_attempt =
                        Instant::now() + Duration::from_millis(opts.event_stream_retry_ms);
                }
            }
        }
        let period = if stream.is_some() {
            opts.evented_relist_period_ms
        } else {
            opts.relist_period_ms
        };
        let wait = next_relist.saturating_duration_since(Instant::now());
        tokio::select! {
            _ = shutdown.changed() => {
                if *shutdown.borrow() { return; }
            }
            _ = tokio::time::sleep(wait) => {
                if !pleg.relist().await { return; }
                next_relist = Instant::now() + Duration::from_millis(period);
            }
            event = next_event(&mut stream) => match event {
                Some(Ok(e)) => {
                    let uid = e.pod_sandbox_status.as_ref().and_then(|s| {
                        s.labels.get(POD_UID_LABEL).cloned()
                            .or_else(|| s.metadata.as_ref().map(|m| m.uid.clone()))
                    }).or_else(|| e.containers_statuses.iter().find_map(|c| c.labels.get(POD_UID_LABEL).cloned()));
                    if let Some(uid) = uid.filter(|u| !u.is_empty()) {
                        if !pleg.inspect_and_report(&Uid::new(uid)).await { return; }
                        health.touch();
                    }
                }
                Some(Err(status)) if status.code() == tonic::Code::Unimplemented => {
                    tracing::info!("PLEG: generic mode, relisting every {} ms: the runtime does not implement GetContainerEvents", opts.relist_period_ms);
                    stream = None;
                    evented_supported = false;
                    health.evented.store(false, Ordering::Relaxed);
                    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "evented").set(0.0);
                    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "generic").set(1.0);
                    next_relist = Instant::now();
                }
                Some(Err(status)) => {
                    tracing::warn!(error = %status, "PLEG: the container event stream broke; relisting every {} ms until it is back", opts.relist_period_ms);
                    stream = None;
                    health.evented.store(false, Ordering::Relaxed);
                    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "evented").set(0.0);
                    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "generic").set(1.0);
                    next_stream_attempt = Instant::now() + Duration::from_millis(opts.event_stream_retry_ms);
                    next_relist = Instant::now();
                }
                None => {
                    stream = None;
                    health.evented.store(false, Ordering::Relaxed);
                    next_stream_attempt = Instant::now() + Duration::from_millis(opts.event_stream_retry_ms);
                    next_relist = Instant::now();
                }
            }
        }
    }
}

async fn next_event(
    stream: &mut Option<tonic::Streaming<crate::cri::v1::ContainerEventResponse>>,
) -> Option<Result<crate::cri::v1::ContainerEventResponse, tonic::Status>> {
    match stream {
        Some(s) => s.message().await.transpose(),
        None => std::future::pending().await,
    }
}
