//! The pod lifecycle event generator: turns the runtime's state changes into
//! `RuntimeStatusObserved` and `PlegEvent` records.
//!
//! Owns the relist loop (kubelet generic PLEG: every `relist_period_ms`, list everything,
//! inspect the pods that changed, emit their new status then one event per change) and the
//! evented mode (kubelet Evented PLEG: the runtime's `GetContainerEvents` stream triggers an
//! inspection of the pod at once, and the relist slows to `evented_relist_period_ms` as a
//! fallback; if the stream is unsupported or breaks, generic relisting resumes and the
//! stream is retried). On a containerd without that stream (1.6), containerd's own task-exit
//! events inspect the pod of an exited container at once while relisting stays generic
//! (PL-13). Also owns PLEG health (PL-10). Must not decide what a change means: the core
//! folds the records.
//!
//! A deliberate difference from the kubelet (PL-06): events are never dropped when the
//! engine is behind; the PLEG waits on the bounded inbox instead, so relisting slows down.

pub mod diff;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::core::backoff::go_duration;
use crate::core::record::event::{PlegEvent, RuntimeStatusObserved};
use crate::core::record::{Event, Time};
use crate::core::runtime_status::{ContainerState, RuntimePodStatus, SandboxState};
use crate::core::Uid;
use crate::cri::CriClient;
use crate::shell::cri_config::POD_UID_LABEL;
use crate::shell::runtime_view::{self, ListedPod};
use crate::shell::Report;

/// PLEG settings; the kubelet's defaults.
///
/// Each mode pairs a relist period with the health threshold that goes with it, as the
/// kubelet does (`genericPlegRelistPeriod`/`genericPlegRelistThreshold`,
/// `eventedPlegRelistPeriod`/`eventedPlegRelistThreshold`): the threshold in force is the one
/// of the mode the PLEG is in, so a quiet node whose fallback relist runs every 300 s is not
/// declared unhealthy by the generic 3-minute threshold.
#[derive(Clone, Debug)]
pub struct PlegOptions {
    /// Generic relist period (kubelet `genericPlegRelistPeriod`: 1 s).
    pub relist_period_ms: u64,
    /// Unhealthy after this long without a relist in generic mode (kubelet
    /// `genericPlegRelistThreshold`: 3 min).
    pub relist_threshold_ms: u64,
    /// Use the runtime's container event stream when it has one.
    pub evented: bool,
    /// Relist period while the event stream works (kubelet `eventedPlegRelistPeriod`: 300 s).
    pub evented_relist_period_ms: u64,
    /// Unhealthy after this long without a relist or a container event while the event
    /// stream works (kubelet `eventedPlegRelistThreshold`: 10 min).
    pub evented_relist_threshold_ms: u64,
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
            relist_threshold_ms: 180_000,
            evented: true,
            evented_relist_period_ms: 300_000,
            evented_relist_threshold_ms: 600_000,
            event_stream_retry_ms: 5_000,
            node_name: String::new(),
        }
    }
}

impl PlegOptions {
    /// Refuses a threshold that a working PLEG of its mode could cross between two relists:
    /// such a node would turn unhealthy (and NotReady) while nothing is wrong. The error names
    /// the `ledgerlet run` flags the fields are set by.
    pub fn validate(&self) -> Result<(), String> {
        let pairs = [
            (
                "--relist-period-ms",
                self.relist_period_ms,
                "--relist-threshold-ms",
                self.relist_threshold_ms,
            ),
            (
                "--evented-relist-period-ms",
                self.evented_relist_period_ms,
                "--evented-relist-threshold-ms",
                self.evented_relist_threshold_ms,
            ),
        ];
        for (period_name, period, threshold_name, threshold) in pairs {
            if period == 0 {
                return Err(format!("{period_name} must be positive"));
            }
            if threshold <= period {
                return Err(format!(
                    "{threshold_name} ({threshold}) must be longer than {period_name} ({period}): \
                     a healthy PLEG would be reported unhealthy between two relists"
                ));
            }
        }
        Ok(())
    }
}

/// PLEG health for `/healthz` and the node's Ready condition (PL-10): unhealthy before the
/// first relist, and after the threshold of the current mode without a relist (or, in
/// evented mode, a container event).
#[derive(Debug)]
pub struct PlegHealth {
    last_relist_unix_ms: AtomicI64,
    generic_threshold_ms: u64,
    evented_threshold_ms: u64,
    evented: AtomicBool,
}

impl PlegHealth {
    /// Health tracking with the thresholds of `opts`, starting in generic mode.
    pub fn new(opts: &PlegOptions) -> PlegHealth {
        PlegHealth {
            last_relist_unix_ms: AtomicI64::new(0),
            generic_threshold_ms: opts.relist_threshold_ms,
            evented_threshold_ms: opts.evented_relist_threshold_ms,
            evented: AtomicBool::new(false),
        }
    }

    /// The threshold in force: the evented one while the event stream is in use.
    pub fn threshold_ms(&self) -> u64 {
        if self.evented.load(Ordering::Relaxed) {
            self.evented_threshold_ms
        } else {
            self.generic_threshold_ms
        }
    }

    fn set_evented(&self, evented: bool) {
        self.evented.store(evented, Ordering::Relaxed);
    }

    fn touch(&self) {
        let now = Time::from_system();
        self.last_relist_unix_ms
            .store(now.unix_nanos() / 1_000_000, Ordering::Relaxed);
        metrics::gauge!("kubelet_pleg_last_seen_seconds").set(now.unix_secs() as f64);
    }

    /// `Healthy()`: Ok, or the kubelet's message.
    pub fn check(&self) -> Result<(), String> {
        self.check_at(Time::from_system().unix_nanos() / 1_000_000)
    }

    /// `Healthy()` at `now_unix_ms`.
    fn check_at(&self, now_unix_ms: i64) -> Result<(), String> {
        let last = self.last_relist_unix_ms.load(Ordering::Relaxed);
        if last == 0 {
            return Err("pleg has yet to be successful".into());
        }
        let ago = (now_unix_ms - last).max(0) as u64;
        let threshold_ms = self.threshold_ms();
        if ago > threshold_ms {
            return Err(format!(
                "pleg was last seen active {} ago; threshold is {}",
                go_duration(ago),
                go_duration(threshold_ms)
            ));
        }
        Ok(())
    }
}

/// A pod worker's request for a fresh read of its pod (`InspectPod`), answered by the PLEG
/// so that the read also becomes its view: the next relist does not read the same change
/// again, and the events of what changed go out with the answer. The kubelet's pod worker
/// waits for the next relist instead (`podCache.GetNewerThan`), up to a relist period.
#[derive(Debug)]
pub struct InspectRequest {
    /// The pod to read.
    pub uid: Uid,
    /// The record whose command asked: the answer's cause.
    pub cause: u64,
    /// The command's span: the answer's record is its child.
    pub span: tracing::Span,
    /// Told once the answer is with the engine.
    pub answered: tokio::sync::oneshot::Sender<()>,
}

/// Requests waiting for the PLEG, or read and not yet reported, at most; past it, the
/// executor's command waits.
pub const INSPECT_REQUESTS_BUFFERED: usize = 256;

/// The channel `InspectPod` commands reach the PLEG by.
pub fn inspect_requests() -> (
    tokio::sync::mpsc::Sender<InspectRequest>,
    tokio::sync::mpsc::Receiver<InspectRequest>,
) {
    tokio::sync::mpsc::channel(INSPECT_REQUESTS_BUFFERED)
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
    /// Task exits to inspect again (due, container ID, attempt), in due order.
    rechecks: std::collections::VecDeque<(Instant, String, u32)>,
    /// The ticket of the newest read begun (each read of the runtime takes the next one as it
    /// begins).
    last_ticket: u64,
    /// The ticket of the read each pod's view comes from: a read that began before it (a
    /// worker's request answered late) must not take the view back.
    view_ticket: BTreeMap<Uid, u64>,
    /// The tickets at the start of the last [`TICKETS_KEPT_RELISTS`] relists: the view
    /// tickets of pods gone for longer are forgotten.
    relist_tickets: std::collections::VecDeque<u64>,
}

/// A worker's request, read apart from the PLEG's loop, back for reporting.
struct Answered {
    request: InspectRequest,
    /// The ticket taken when the request came (at or before the read began).
    ticket: u64,
    /// The newest record folded when the read began.
    folded: u64,
    read: Result<RuntimePodStatus, String>,
}

/// How many relists a gone pod's view ticket outlives.
const TICKETS_KEPT_RELISTS: usize = 10;

impl Pleg {
    /// The ticket of a read that begins now.
    fn take_ticket(&mut self) -> u64 {
        self.last_ticket += 1;
        self.last_ticket
    }

    /// Sends `event` to the engine; false if it has stopped.
    async fn send(&self, event: Event) -> bool {
        self.report.send(event, None).await
    }

    /// The pod a container or sandbox ID belongs to, as of the last view.
    fn pod_of(&self, id: &str) -> Option<Uid> {
        self.previous
            .iter()
            .find(|(_, p)| p.containers.contains_key(id) || p.sandboxes.contains_key(id))
            .map(|(uid, _)| uid.clone())
    }

    /// Containers (or sandboxes) whose own process exited, by containerd's task deletes,
    /// each with its attempt. An exit of a container the last view does not know of starts
    /// a relist. containerd's CRI plugin applies an exit to what it answers a moment after
    /// the delete event (it still shuts the task's shim down), so each exit the view still
    /// shows running is first checked with one status call; the pods whose exits show are
    /// inspected at once, together, and an exit not yet shown is checked again
    /// [`EXIT_RECHECK`] later, at most [`EXIT_RECHECKS`] times (then the relist sees it).
    /// Returns false if the engine has stopped.
    async fn on_task_exits(&mut self, exits: Vec<(String, u32)>) -> bool {
        // another node's container on a shared containerd, or one this node started since
        // its last relist
        let unknown = exits
            .iter()
            .any(|(id, attempt)| *attempt == 0 && self.pod_of(id).is_none());
        if unknown && !self.relist().await {
            return false;
        }
        let mut pending: Vec<(String, u32, Uid)> = Vec::new();
        for (id, attempt) in exits {
            let Some(uid) = self.pod_of(&id) else {
                continue;
            };
            if attempt == 0 {
                metrics::counter!(crate::observe::describe::PLEG_TASK_EXIT_EVENTS_TOTAL)
                    .increment(1);
            }
            let running = self.previous.get(&uid).is_some_and(|p| {
                p.containers.get(&id) == Some(&ContainerState::Running)
                    || p.sandboxes.get(&id) == Some(&true)
            });
            // else the relist that started above, or an earlier one, has reported it
            if running {
                pending.push((id, attempt, uid));
            }
        }
        let checks = pending.iter().map(|(id, _, uid)| self.exit_shown(uid, id));
        let shown = futures::future::join_all(checks).await;
        let mut uids: Vec<Uid> = Vec::new();
        for ((id, attempt, uid), shown) in pending.into_iter().zip(shown) {
            tracing::debug!(container_id = %id, attempt, shown, "PLEG: checked a deleted task");
            if shown {
                if !uids.contains(&uid) {
                    uids.push(uid);
                }
            } else if attempt < EXIT_RECHECKS && self.rechecks.len() < TASK_EXITS_BUFFERED {
                self.rechecks
                    .push_back((Instant::now() + EXIT_RECHECK, id, attempt + 1));
            }
        }
        self.inspect_all(&uids, "task_exit").await
    }

    /// Whether the runtime already shows the end of container or sandbox `id` of pod `uid`,
    /// by one status call. An error counts as shown: the pod's inspection reports it.
    async fn exit_shown(&self, uid: &Uid, id: &str) -> bool {
        use crate::cri::v1;
        let view = self.previous.get(uid);
        let sandbox = view.is_some_and(|p| p.sandboxes.contains_key(id));
        if sandbox {
            let ready = v1::PodSandboxState::SandboxReady as i32;
            match self.cri.pod_sandbox_status(id, false).await {
                Ok(r) => r.status.is_none_or(|s| s.state != ready),
                Err(_) => true,
            }
        } else {
            let running = v1::ContainerState::ContainerRunning as i32;
            match self.cri.container_status(id, false).await {
                Ok(r) => r.status.is_none_or(|s| s.state != running),
                Err(_) => true,
            }
        }
    }

    /// Inspects one pod and reports its status and the events since the previous view.
    /// Returns false if the engine has stopped.
    async fn inspect_and_report(&mut self, uid: &Uid) -> bool {
        self.inspect_all(std::slice::from_ref(uid), "container_event")
            .await
    }

    /// Inspects the pods, at most [`INSPECTIONS_AT_ONCE`] at a time (the runtime answers
    /// them in parallel), and reports each in the order given. Returns false if the engine
    /// has stopped.
    async fn inspect_all(&mut self, uids: &[Uid], trigger: &'static str) -> bool {
        // what the answers are at least as fresh as: a relist can take a while, and a sync
        // can finish (and be folded) between a read and its record
        let read_after_seq = Some(self.report.folded_seq());
        let ticket = self.take_ticket();
        let reads = self.read_all(uids, trigger).await;
        for (uid, read) in uids.iter().zip(reads) {
            if !self
                .report_inspection(uid, read, read_after_seq, None, ticket)
                .await
            {
                return false;
            }
        }
        true
    }

    /// Reports a pod worker's request, read apart from the loop: always, even when nothing
    /// changed (the worker waits for a read newer than its last sync). Returns false if the
    /// engine has stopped.
    async fn answer(&mut self, answered: Answered) -> bool {
        let Answered {
            request,
            ticket,
            folded,
            read,
        } = answered;
        // the request was sent after its cause was folded, and the read began after the
        // request came
        let read_after_seq = Some(folded.max(request.cause));
        let uid = request.uid.clone();
        self.report_inspection(&uid, read, read_after_seq, Some(request), ticket)
            .await
    }

    /// Reads the pods' runtime status, at most [`INSPECTIONS_AT_ONCE`] at a time, counting
    /// them by what asked (`trigger`).
    async fn read_all(
        &self,
        uids: &[Uid],
        trigger: &'static str,
    ) -> Vec<Result<RuntimePodStatus, String>> {
        use futures::StreamExt;
        futures::stream::iter(uids.to_vec())
            .map(|uid| {
                let cri = self.cri.clone();
                async move { runtime_view::read_pod(&cri, &uid, trigger).await }
            })
            .buffered(INSPECTIONS_AT_ONCE)
            .collect()
            .await
    }

    /// Sends a status observation: as the answer to `request` (its cause, inside its
    /// span) when there is one.
    async fn send_observed(
        &self,
        observed: RuntimeStatusObserved,
        request: Option<InspectRequest>,
    ) -> bool {
        use tracing::Instrument;
        let event = Event::RuntimeStatusObserved(observed);
        let Some(request) = request else {
            return self.send(event).await;
        };
        let sent = self
            .report
            .send(event, Some(request.cause))
            .instrument(request.span)
            .await;
        let _ = request.answered.send(());
        sent
    }

    /// Reports one pod's inspection, read with `ticket`: its status and the events since the
    /// previous view. An unchanged status is reported only as the answer to a request. A
    /// read that began before the one the view comes from changes nothing: as an answer it
    /// is reported as it is (the core keeps the fresher cache entry), else dropped.
    async fn report_inspection(
        &mut self,
        uid: &Uid,
        read: Result<RuntimePodStatus, String>,
        read_after_seq: Option<u64>,
        request: Option<InspectRequest>,
        ticket: u64,
    ) -> bool {
        if self.view_ticket.get(uid).is_some_and(|&t| t > ticket) {
            let Some(request) = request else {
                return true;
            };
            let observed = RuntimeStatusObserved::from_read(uid.clone(), read, read_after_seq);
            return self.send_observed(observed, Some(request)).await;
        }
        match read {
            Ok(status) => {
                let new = listed(&status);
                let old = self.previous.get(uid);
                let events = diff::pod_events(old, Some(&new));
                let unchanged = match self.reported.get(uid) {
                    Some(r) => **r == status,
                    None => status.is_empty() && old.is_none(),
                };
                if !(unchanged && events.is_empty()) || request.is_some() {
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
                        read_after_seq,
                    };
                    if !self.send_observed(observed, request).await {
                        return false;
                    }
                }
                for (id, kind) in events {
                    let e = PlegEvent {
                        uid: uid.clone(),
                        kind,
                        container_id: Some(id),
                    };
                    if !self.send(Event::PlegEvent(e)).await {
                        return false;
                    }
                }
                if new.sandboxes.is_empty() && new.containers.is_empty() {
                    self.previous.remove(uid);
                } else {
                    self.previous.insert(uid.clone(), new);
                }
                self.view_ticket.insert(uid.clone(), ticket);
                self.reinspect.remove(uid);
            }
            Err(error) => {
                metrics::counter!("ledgerlet_pleg_inspect_errors_total").increment(1);
                self.reported.remove(uid);
                let observed =
                    RuntimeStatusObserved::from_read(uid.clone(), Err(error), read_after_seq);
                if !self.send_observed(observed, request).await {
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
        self.relist_tickets.push_back(self.last_ticket);
        if self.relist_tickets.len() > TICKETS_KEPT_RELISTS {
            if let Some(oldest) = self.relist_tickets.pop_front() {
                let previous = &self.previous;
                self.view_ticket
                    .retain(|uid, t| *t >= oldest || previous.contains_key(uid));
            }
        }
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
        let changed: Vec<Uid> = changed.into_iter().collect();
        if !self.inspect_all(&changed, "relist").await {
            return false;
        }
        let running_pods = current
            .values()
            .filter(|p| p.sandboxes.values().any(|ready| *ready))
            .count();
        metrics::gauge!("kubelet_running_pods").set(running_pods as f64);
        use crate::core::runtime_status::ContainerState as S;
        let states = [
            (S::Created, "created"),
            (S::Running, "running"),
            (S::Exited, "exited"),
            (S::Unknown, "unknown"),
        ];
        for (state, label) in states {
            let n = (current.values().flat_map(|p| p.containers.values()))
                .filter(|s| **s == state)
                .count();
            metrics::gauge!("kubelet_running_containers", "container_state" => label).set(n as f64);
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
    mut requests: tokio::sync::mpsc::Receiver<InspectRequest>,
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
        rechecks: Default::default(),
        last_ticket: 0,
        view_ticket: BTreeMap::new(),
        relist_tickets: Default::default(),
    };
    // workers' requests are read apart from the loop, so that none waits for a relist
    let (answers, mut answered) = tokio::sync::mpsc::channel::<Answered>(INSPECT_REQUESTS_BUFFERED);
    let reads_at_once = Arc::new(tokio::sync::Semaphore::new(INSPECTIONS_AT_ONCE));
    let mut requests_in_flight = 0usize;
    let mut stream: Option<tonic::Streaming<crate::cri::v1::ContainerEventResponse>> = None;
    let mut next_stream_attempt = Instant::now();
    let mut next_relist = Instant::now();
    let mut evented_supported = opts.evented;
    let stream_retry = Duration::from_millis(opts.event_stream_retry_ms);
    // containerd's task exits, listened to when the CRI stream is not there (PL-13)
    let mut exits: Option<tokio::sync::mpsc::Receiver<String>> = None;
    if !opts.evented {
        tracing::info!(
            "PLEG: generic mode, relisting every {} ms (evented PLEG disabled)",
            opts.relist_period_ms
        );
    }
    mode_gauge(false);
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
                    mode_gauge(true);
                    health.set_evented(true);
                    tracing::info!(
                        endpoint = cri.endpoint(),
                        "PLEG: evented mode (container event stream), relisting every {} ms as a fallback",
                        opts.evented_relist_period_ms
                    );
                    stream = Some(s);
                }
                Err(e) => {
                    metrics::counter!(
                        crate::observe::describe::EVENTED_PLEG_CONNECTION_ERRORS_TOTAL
                    )
                    .increment(1);
                    if e.code() == tonic::Code::Unimplemented {
                        // containerd 1.6, older CRI-O: no event stream, ever. Say so once and
                        // stop asking.
                        tracing::info!(
                            endpoint = cri.endpoint(),
                            "PLEG: generic mode, relisting every {} ms: the runtime does not implement GetContainerEvents",
                            opts.relist_period_ms
                        );
                        evented_supported = false;
                    } else {
                        tracing::info!(error = %e, "PLEG: generic relist every {} ms (the runtime's container event stream is not available; retrying in {} ms)", opts.relist_period_ms, opts.event_stream_retry_ms);
                        next_stream_attempt = Instant::now() + stream_retry;
                    }
                }
            }
        }
        if opts.evented && !evented_supported && exits.is_none() {
            let (tx, rx) = tokio::sync::mpsc::channel(TASK_EXITS_BUFFERED);
            tokio::spawn(forward_task_exits(cri.clone(), tx, stream_retry));
            exits = Some(rx);
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
                // After a fall-back from the event stream, the generic threshold applies
                // from the first generic relist on: switching before it would judge the
                // last evented relist, up to a whole evented period old, by the generic
                // threshold and flap the node to NotReady.
                health.set_evented(stream.is_some());
                next_relist = Instant::now() + Duration::from_millis(period);
            }
            Some(id) = next_task_exit(&mut exits) => {
                // the exits already waiting go with it
                let mut batch = vec![(id, 0)];
                while let Some(Ok(id)) = exits.as_mut().map(|rx| rx.try_recv()) {
                    batch.push((id, 0));
                    if batch.len() >= TASK_EXITS_BUFFERED { break; }
                }
                if !pleg.on_task_exits(batch).await { return; }
            }
            Some(request) = requests.recv(), if requests_in_flight < INSPECT_REQUESTS_BUFFERED => {
                requests_in_flight += 1;
                let ticket = pleg.take_ticket();
                let cri = cri.clone();
                let report = pleg.report.clone();
                let answers = answers.clone();
                let permits = reads_at_once.clone();
                tokio::spawn(async move {
                    let _permit = permits.acquire_owned().await;
                    let folded = report.folded_seq();
                    let read = runtime_view::read_pod(&cri, &request.uid, "request").await;
                    let _ = answers.send(Answered { request, ticket, folded, read }).await;
                });
            }
            Some(a) = answered.recv() => {
                requests_in_flight -= 1;
                if !pleg.answer(a).await { return; }
            }
            _ = next_recheck(&pleg.rechecks) => {
                let now = Instant::now();
                let mut batch = Vec::new();
                while pleg.rechecks.front().is_some_and(|(due, _, _)| *due <= now) {
                    let (_, id, attempt) = pleg.rechecks.pop_front().expect("checked");
                    batch.push((id, attempt));
                }
                if !pleg.on_task_exits(batch).await { return; }
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
                    mode_gauge(false);
                    next_relist = Instant::now();
                }
                Some(Err(status)) => {
                    tracing::warn!(error = %status, "PLEG: the container event stream broke; relisting every {} ms until it is back", opts.relist_period_ms);
                    stream = None;
                    mode_gauge(false);
                    next_stream_attempt = Instant::now() + stream_retry;
                    next_relist = Instant::now();
                }
                None => {
                    stream = None;
                    next_stream_attempt = Instant::now() + stream_retry;
                    next_relist = Instant::now();
                }
            }
        }
    }
}

/// `ledgerlet_pleg_mode`: 1 for the mode in use, 0 for the other.
fn mode_gauge(evented: bool) {
    let value = |on: bool| if on { 1.0 } else { 0.0 };
    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "evented").set(value(evented));
    metrics::gauge!("ledgerlet_pleg_mode", "mode" => "generic").set(value(!evented));
}

/// Pods the PLEG asks the runtime about at once (a relist after a burst, several exits).
const INSPECTIONS_AT_ONCE: usize = 8;

/// How long after a status call that did not yet show a task's exit it is asked again.
const EXIT_RECHECK: Duration = Duration::from_millis(20);
/// How many times at most: containerd 1.6 shows an exit up to about 200 ms after the task's
/// delete on a busy node; past this the next relist (within a second) sees it.
const EXIT_RECHECKS: u32 = 25;

async fn next_recheck(rechecks: &std::collections::VecDeque<(Instant, String, u32)>) {
    match rechecks.front() {
        Some((due, _, _)) => tokio::time::sleep_until((*due).into()).await,
        None => std::future::pending().await,
    }
}

/// Task exits the PLEG has not taken yet, at most; past it an exit is dropped (the next
/// relist, within `relist_period_ms`, sees it anyway).
const TASK_EXITS_BUFFERED: usize = 1024;

async fn next_task_exit(exits: &mut Option<tokio::sync::mpsc::Receiver<String>>) -> Option<String> {
    match exits {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The container whose own process an event says was deleted after its exit (`None` for an
/// exec'd process: a probe or `kubectl exec`, which change nothing the PLEG reports).
fn own_process_deleted(e: &crate::cri::containerd_events::Envelope) -> Option<String> {
    use prost::Message;
    let any = e.event.as_ref()?;
    if !any.type_url.ends_with("containerd.events.TaskDelete") {
        return None;
    }
    let delete = crate::cri::containerd_events::TaskDelete::decode(any.value.as_slice()).ok()?;
    (delete.id.is_empty() || delete.id == delete.container_id).then_some(delete.container_id)
}

/// Forwards the exits of containers' own processes to the PLEG (PL-13), as containerd's task
/// deletes: the CRI plugin of containerd 1.6 applies an exit to its answers only after it
/// deleted the task, 100–200 ms after the exit on a busy node, so inspecting at the exit
/// itself would read the container still running. Subscribes again `retry` after the
/// stream breaks, until the runtime says it has no such service (not containerd) or the PLEG
/// is gone.
async fn forward_task_exits(
    cri: CriClient,
    tx: tokio::sync::mpsc::Sender<String>,
    retry: Duration,
) {
    loop {
        match cri.subscribe_task_deletes().await {
            Ok(mut events) => {
                tracing::info!(
                    endpoint = cri.endpoint(),
                    "PLEG: containerd's task-exit events (task deletes) inspect an exited container's pod at once"
                );
                loop {
                    match events.message().await {
                        Ok(Some(e)) => {
                            if let Some(id) = own_process_deleted(&e) {
                                if tx.is_closed() {
                                    return;
                                }
                                // full: the next relist sees the exit
                                let _ = tx.try_send(id);
                            }
                        }
                        Ok(None) => break,
                        Err(status) => {
                            tracing::warn!(error = %status, "PLEG: containerd's task-exit event stream broke; subscribing again in {} ms", retry.as_millis());
                            break;
                        }
                    }
                }
            }
            // not containerd: relisting only
            Err(e) if e.code() == tonic::Code::Unimplemented => return,
            Err(e) => {
                tracing::info!(error = %e, "PLEG: containerd's task-exit events are not available; retrying in {} ms", retry.as_millis());
            }
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(retry).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn touched_at(opts: &PlegOptions, unix_ms: i64, evented: bool) -> PlegHealth {
        let h = PlegHealth::new(opts);
        h.last_relist_unix_ms.store(unix_ms, Ordering::Relaxed);
        h.set_evented(evented);
        h
    }

    #[test]
    fn pl_10_each_pleg_mode_pairs_its_relist_period_with_the_kubelets_threshold() {
        let d = PlegOptions::default();
        // genericPlegRelistPeriod / genericPlegRelistThreshold
        let generic = (d.relist_period_ms, d.relist_threshold_ms);
        assert_eq!(generic, (1_000, 180_000));
        // eventedPlegRelistPeriod / eventedPlegRelistThreshold
        let evented = (d.evented_relist_period_ms, d.evented_relist_threshold_ms);
        assert_eq!(evented, (300_000, 600_000));
        assert_eq!(d.validate(), Ok(()));
    }

    #[test]
    fn pl_10_a_quiet_evented_pleg_is_healthy_between_its_fallback_relists() {
        let d = PlegOptions::default();
        let last = 1_000_000;
        // just before the next fallback relist: 299.9 s since the last one
        let h = touched_at(&d, last, true);
        assert_eq!(h.check_at(last + 299_900), Ok(()));
        assert_eq!(h.threshold_ms(), 600_000);
        // a missed fallback relist is not yet a failure; two are
        assert_eq!(h.check_at(last + 600_000), Ok(()));
        let want = "pleg was last seen active 10m0.001s ago; threshold is 10m0s";
        assert_eq!(h.check_at(last + 600_001), Err(want.into()));
    }

    #[test]
    fn pl_10_a_generic_pleg_is_unhealthy_three_minutes_after_its_last_relist() {
        let d = PlegOptions::default();
        let last = 1_000_000;
        let h = touched_at(&d, last, false);
        assert_eq!(h.check_at(last + 180_000), Ok(()));
        let e = h.check_at(last + 183_100).unwrap_err();
        assert_eq!(e, "pleg was last seen active 3m3.1s ago; threshold is 3m0s");
    }

    #[test]
    fn pl_10_a_pleg_that_never_relisted_is_unhealthy() {
        let h = PlegHealth::new(&PlegOptions::default());
        assert_eq!(h.check_at(5), Err("pleg has yet to be successful".into()));
    }

    fn envelope(type_name: &str, value: Vec<u8>) -> crate::cri::containerd_events::Envelope {
        crate::cri::containerd_events::Envelope {
            event: Some(crate::cri::containerd_events::Any {
                type_url: format!("containerd.events.{type_name}"),
                value,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pl_13_a_containers_own_task_delete_names_it_and_an_exec_or_an_exit_does_not() {
        use crate::cri::containerd_events::{TaskDelete, TaskExit};
        use prost::Message;
        let delete = |id: &str| {
            let d = TaskDelete {
                container_id: "c1".into(),
                id: id.into(),
                ..Default::default()
            };
            envelope("TaskDelete", d.encode_to_vec())
        };
        assert_eq!(own_process_deleted(&delete("")), Some("c1".into()));
        assert_eq!(own_process_deleted(&delete("c1")), Some("c1".into()));
        assert_eq!(own_process_deleted(&delete("exec-7")), None);
        // the exit itself comes before the CRI plugin shows it: not a trigger
        let exit = TaskExit {
            container_id: "c1".into(),
            id: "c1".into(),
            ..Default::default()
        };
        assert_eq!(
            own_process_deleted(&envelope("TaskExit", exit.encode_to_vec())),
            None
        );
    }

    /// Why `PlegOptions::validate` refuses the defaults changed by `change`.
    fn refusal(change: impl FnOnce(&mut PlegOptions)) -> String {
        let mut o = PlegOptions::default();
        change(&mut o);
        o.validate().unwrap_err()
    }

    #[test]
    fn pl_10_a_threshold_a_working_pleg_could_cross_is_refused_naming_the_flags() {
        let e = refusal(|o| o.evented_relist_threshold_ms = 180_000);
        let want = "--evented-relist-threshold-ms (180000) must be longer than --evented-relist-period-ms (300000)";
        assert!(e.starts_with(want), "{e}");
        let e = refusal(|o| o.relist_threshold_ms = 1_000);
        assert!(e.starts_with("--relist-threshold-ms"), "{e}");
        let e = refusal(|o| o.relist_period_ms = 0);
        assert_eq!(e, "--relist-period-ms must be positive");
    }
}
