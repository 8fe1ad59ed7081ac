//! The daemon: wiring of sources, the engine and the shell into one running agent.
//!
//! Owns start-up and shutdown order. Must not decide anything: one task owns the `Engine`
//! (ledger + node) and runs append → fold → dispatch; sources and shell executors talk to it
//! through a bounded channel (`shell::Report`).
//!
//! Start-up: metrics, the container runtime (the embedded one unless
//! `--container-runtime-endpoint` is given), the CRI client, then the engine with a
//! `ConfigApplied` record, then the timers, the PLEG, the static pod source and the HTTP
//! server. Shutdown on SIGTERM/SIGINT: with `stop_pods_on_exit` (the default for the
//! embedded runtime, whose processes cannot outlive the agent) a `NodeShutdown` record kills
//! every pod within its grace period first; then the sources stop, the HTTP server stops, and
//! the embedded runtime kills anything left.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::{mpsc, watch};

use crate::core::command::Command;
use crate::core::config::{CoreConfig, PodSource};
use crate::core::record::event::{AgentRestarted, ConfigApplied, NodeShutdown};
use crate::core::record::{Event, Time};
use crate::cri::{CriClient, CriClientOptions};
use crate::engine::{Emitted, Engine};
use crate::http_server::{self as http, HttpState};
use crate::ledger::durable::{self, DurableConfig, DurableWriter};
use crate::ledger::LedgerConfig;
use crate::runtime::{EmbeddedRuntime, RuntimeOptions};
use crate::shell::api::events::EventSink;
use crate::shell::api::node_sync::NodeSync;
use crate::shell::api::{ApiClient, ApiLimits};
use crate::shell::cri_config::NodeContext;
use crate::shell::env::fetch::EnvResolver;
use crate::shell::events::EventLog;
use crate::shell::executor::Executor;
use crate::shell::machine::{self, MachineConfig};
use crate::shell::prober::Prober;
use crate::shell::redact::Redactor;
use crate::shell::runtime_health;
use crate::shell::{timers, Input, Report};
use crate::sources::pleg::{self, PlegHealth, PlegOptions};

/// Everything `ledgerlet run` needs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The node's name.
    pub node_name: String,
    /// The node's IP (host-network pods and `status.hostIP`).
    pub node_ip: String,
    /// Agent state: the embedded runtime's socket and state live here.
    pub root_dir: PathBuf,
    /// Root of the pod log layout (`<dir>/<ns>_<name>_<uid>/<container>/<n>.log`).
    pub pod_logs_dir: PathBuf,
    /// Static pod manifests (file or directory).
    pub pod_manifest_path: Option<PathBuf>,
    /// How often the manifest directory is rescanned.
    pub manifest_check_period_ms: u64,
    /// How often `emptyDir`s with a `sizeLimit` are measured (`evictionMonitoringPeriod`).
    pub eviction_monitoring_period_ms: u64,
    /// A kubeconfig: join that cluster (`None`: standalone, static pods only).
    pub kubeconfig: Option<PathBuf>,
    /// API client rate limit (kubelet `--kube-api-qps`/`--kube-api-burst`).
    pub api_limits: ApiLimits,
    /// Events' rate limit (kubelet `--event-qps`/`--event-burst`).
    pub event_limits: ApiLimits,
    /// A CRI endpoint; `None` starts the embedded runtime.
    pub container_runtime_endpoint: Option<String>,
    /// Per-call CRI timeout (kubelet `--runtime-request-timeout`, 2 min).
    pub runtime_request_timeout_ms: u64,
    /// The runtime is down (the node NotReady) after this long without a successful CRI
    /// `Status` (the kubelet's `maxWaitForContainerRuntime`).
    pub max_wait_for_container_runtime_ms: u64,
    /// HTTP address and port.
    pub address: IpAddr,
    /// The unauthenticated HTTP port (`--read-only-port`, 10255), always on loopback; 0 is off.
    pub read_only_port: u16,
    /// The authenticated HTTPS API (`--port`, TLS, authentication, authorization).
    pub api: crate::kubelet_api::options::ApiOptions,
    /// Containers without a seccomp profile get `RuntimeDefault` (`--seccomp-default`).
    pub seccomp_default: bool,
    /// Container log rotation (--container-log-max-size, -max-files, -max-workers,
    /// -monitor-period-ms).
    pub log_rotation: crate::shell::container_log_rotation::RotationPolicy,
    /// `--kube-reserved` and `--system-reserved`, subtracted from the node's allocatable.
    pub reserved: crate::shell::machine::allocatable::Reservations,
    /// Core knobs (timings, limits); `node_name` and `sources` are filled in here.
    pub core: CoreConfig,
    /// Ledger retention.
    pub ledger: LedgerConfig,
    /// PLEG settings.
    pub pleg: PlegOptions,
    /// Inputs buffered between sources and the engine.
    pub inbox_capacity: usize,
    /// Stop every pod when the agent is asked to exit.
    pub stop_pods_on_exit: bool,
    /// Kept Kubernetes Events for `/debug/events`.
    pub event_log_capacity: usize,
    /// Also serve the ledger stream (gRPC) on this loopback TCP address.
    pub ledger_grpc_address: Option<SocketAddr>,
    /// The durable ledger (`--ledger-dir`), if any.
    pub durable: Option<DurableConfig>,
    /// Pod DNS (`--cluster-dns`, `--cluster-domain`, `--resolv-conf`).
    pub dns: crate::shell::dns::DnsSettings,
}

/// The agent stopped on SIGQUIT after the flight recorder wrote its file.
#[derive(Debug, thiserror::Error)]
#[error("stopped on SIGQUIT; the flight recorder wrote {}", .0.as_ref().map_or("nothing".to_string(), |p| p.display().to_string()))]
pub struct Quit(pub Option<PathBuf>);

struct Daemon {
    engine: Arc<Mutex<Engine>>,
    executor: Executor,
    prober: Prober,
    timers: mpsc::UnboundedSender<timers::Arm>,
    events: Arc<EventLog>,
    report: Report,
    /// The cluster connection, when the node joined one.
    cluster: Option<Cluster>,
    /// Scrubs secret values from every input before it is appended.
    redactor: Redactor,
    /// Fault injection for the flight recorder's tests: panic, holding the engine lock,
    /// when a record of this kind is appended (`LEDGERLET_FAULT_PANIC_ON_KIND`). Only in
    /// builds with the `fault-injection` feature, which the tests turn on; never in a
    /// release binary.
    #[cfg(feature = "fault-injection")]
    panic_on_kind: Option<String>,
}

/// What the daemon uses to talk to the API server.
struct Cluster {
    api: ApiClient,
    node_sync: NodeSync,
    events: EventSink,
}

impl Daemon {
    fn submit(&self, input: Input) -> Vec<Emitted> {
        let event = self.redactor.redact(input.event);
        let mut engine = self.engine.lock().expect("engine");
        #[cfg(feature = "fault-injection")]
        if self.panic_on_kind.as_deref() == Some(event.kind()) {
            panic!(
                "fault injection: LEDGERLET_FAULT_PANIC_ON_KIND={}",
                event.kind()
            );
        }
        let emitted = engine.submit(Time::from_system(), input.cause, input.trace, event);
        self.report.set_folded_seq(engine.ledger().last_seq());
        emitted
    }

    /// Folds `input` and hands its commands to the shell. Then, unless `more_waiting` says
    /// another input is already queued, tells the engine it is idle: the last record's turn
    /// ends (so it does not run on through whatever the shell does next, or through a wait)
    /// and buffered fold spans go to the export queue.
    fn handle(&self, input: Input, more_waiting: impl FnOnce() -> bool) {
        let emitted = self.submit(input);
        self.dispatch(emitted);
        if !more_waiting() {
            self.engine.lock().expect("engine").idle();
        }
    }

    /// Hands each command to the part of the shell that carries it out, inside the command's
    /// span (parented to the causing record's span) and with its metrics.
    fn dispatch(&self, emitted: Vec<Emitted>) {
        use crate::observe::command;
        for e in emitted {
            let cause = e.cause.seq;
            let cause_at = e.cause.at;
            let name = e.command.name();
            let op = command::operation_type(&e.command);
            let span = command::span(&e.command, e.parent.as_ref());
            let done = move || command::finished(name, op, cause_at);
            let exec = self.executor.clone();
            match e.command {
                Command::Append(_) => unreachable!("the engine folds derived events"),
                Command::SyncPod(c) => spawn_in(span, done, exec.sync_pod(c, cause)),
                Command::SyncTerminatingPod(c) => {
                    spawn_in(span, done, exec.sync_terminating_pod(c, cause))
                }
                Command::SyncTerminatingRuntimePod(c) => {
                    spawn_in(span, done, exec.sync_terminating_runtime_pod(c, cause))
                }
                Command::SyncTerminatedPod(c) => {
                    spawn_in(span, done, exec.sync_terminated_pod(c, cause))
                }
                Command::RemovePodContent(c) => {
                    spawn_in(span, done, exec.remove_pod_content(c, cause))
                }
                Command::CancelSync { uid, sync_id } => self.executor.cancel(&uid, sync_id),
                Command::InspectPod { uid } => spawn_in(span, done, exec.inspect(uid, cause)),
                Command::SetTimer(t) => {
                    let _ = self.timers.send((t, cause));
                }
                Command::RunProbe(c) => {
                    // each run is its own task: the fold never waits for a probe
                    let prober = self.prober.clone();
                    let report = self.report.clone();
                    spawn_in(span, done, async move {
                        let finished = prober.run(&c).await;
                        crate::observe::probe_metrics::record(&c, &finished);
                        report
                            .send(Event::ProbeFinished(finished), Some(cause))
                            .await;
                    })
                }
                Command::RecordEvent(ev) => {
                    let _entered = span.enter();
                    if let Some(c) = &self.cluster {
                        c.events.send(ev.clone());
                    }
                    self.events.record(ev);
                }
                Command::Node(c) => {
                    let Some(cluster) = &self.cluster else {
                        continue;
                    };
                    let node_sync = cluster.node_sync.clone();
                    let report = self.report.clone();
                    spawn_in(span, done, async move {
                        let finished = node_sync.execute(c).await;
                        report
                            .send(Event::NodeSyncFinished(finished), Some(cause))
                            .await;
                    })
                }
                Command::SyncPodStatus(c) => {
                    let Some(cluster) = &self.cluster else {
                        continue;
                    };
                    let api = cluster.api.clone();
                    let report = self.report.clone();
                    command::status_sync_started(c.changed_at);
                    spawn_in(span, done, async move {
                        let finished =
                            crate::shell::api::status_sync::sync_pod_status(&api, &c).await;
                        report
                            .send(Event::StatusSyncFinished(finished), Some(cause))
                            .await;
                    })
                }
            }
        }
    }
}

/// Runs a command's `work` as its own task inside the command's span, and `done` (the
/// command's metrics) when it ends.
fn spawn_in(
    span: tracing::Span,
    done: impl FnOnce() + Send + 'static,
    work: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use tracing::Instrument;
    let work = async move {
        work.await;
        done();
    };
    tokio::spawn(work.instrument(span));
}

/// The default root directory: `/var/lib/ledgerlet` for root, else under `$HOME`.
pub fn default_root_dir() -> PathBuf {
    if unsafe { libc::geteuid() } == 0 {
        PathBuf::from("/var/lib/ledgerlet")
    } else {
        let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
        PathBuf::from(home).join(".local/state/ledgerlet")
    }
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let mut quit = signal(SignalKind::quit()).expect("SIGQUIT handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = quit.recv() => "SIGQUIT",
    }
}

/// The engine, shared by the daemon, the HTTP server and the ledger stream, with the fold
/// observer when tracing is on and the flight recorder installed; and the `AgentRestarted`
/// record to append when the durable ledger holds a previous lifetime.
fn start_engine(opts: &RunOptions) -> anyhow::Result<(Arc<Mutex<Engine>>, Option<AgentRestarted>)> {
    let (mut engine, restarted) = load_engine(opts)?;
    if let Some(t) = crate::observe::otel::global() {
        engine.set_observer(crate::observe::fold::FoldObserver::new(Some(
            t.fold_tracer(),
        )));
    }
    let engine = Arc::new(Mutex::new(engine));
    crate::postmortem::flight_recorder::install(engine.clone(), &opts.root_dir);
    Ok((engine, restarted))
}

/// The engine: fresh, or continuing the durable ledger (then with the `AgentRestarted`
/// record to append when the ledger holds a previous lifetime).
fn load_engine(opts: &RunOptions) -> anyhow::Result<(Engine, Option<AgentRestarted>)> {
    let Some(cfg) = &opts.durable else {
        return Ok((Engine::new(opts.ledger.clone()), None));
    };
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("invalid durable ledger settings: {e}"))?;
    let loaded = durable::load::<crate::core::Node>(&cfg.dir)
        .with_context(|| format!("cannot read --ledger-dir {}", cfg.dir.display()))?;
    for t in &loaded.torn {
        tracing::warn!(damage = %t, "durable ledger: dropped a torn or unreadable tail at start-up");
    }
    let previous_seq = loaded.last_seq();
    let dropped = (!loaded.torn.is_empty()).then(|| {
        loaded
            .torn
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    });
    tracing::info!(
        dir = %cfg.dir.display(),
        snapshot_seq = loaded.snapshot.as_ref().map(|s| s.seq),
        records = loaded.records.len(),
        last_seq = previous_seq,
        "durable ledger loaded"
    );
    let writer = DurableWriter::start(cfg.clone(), loaded.current.clone())
        .with_context(|| format!("cannot write --ledger-dir {}", cfg.dir.display()))?;
    let restarted = (previous_seq > 0).then_some(AgentRestarted {
        previous_seq,
        dropped,
    });
    Ok((
        Engine::resume(opts.ledger.clone(), loaded, Some(writer)),
        restarted,
    ))
}

/// Runs the agent until SIGTERM or SIGINT (or SIGQUIT, which stops it without stopping
/// pods). The steps, in order, each a function below.
pub async fn run(opts: RunOptions) -> anyhow::Result<()> {
    prepare_directories(&opts)?;
    // the kubelet API's flags are checked before anything starts
    opts.api
        .effective_mode(opts.kubeconfig.is_some())
        .map_err(anyhow::Error::msg)?;
    let prometheus = crate::observe::metrics::install();
    metrics::gauge!("kubelet_node_name", "node" => opts.node_name.clone()).set(1.0);
    let runtime = connect_runtime(&opts).await?;
    let cluster = join_cluster(&opts).await?;
    let api_client = cluster.as_ref().map(|c| c.api.client());
    let (report, mut inbox) = Report::channel(opts.inbox_capacity);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (engine, restarted) = start_engine(&opts)?;
    let (mut daemon, timer_arms) =
        Daemon::new(&opts, engine.clone(), &runtime.cri, cluster, report.clone());
    // the embedded runtime's containers are host processes: no pod cgroups for them (in
    // process, or served apart by `ledgerlet runtime serve`)
    let embedded = runtime.version.runtime_name == crate::runtime::RUNTIME_NAME;
    daemon.executor.set_pod_cgroups(!embedded);
    daemon.apply_config(&opts, &runtime.version, restarted)?;
    tokio::spawn(timers::run(timer_arms, report.clone()));
    let listener = bind_read_only_port(&opts).await?;
    let secure = bind_kubelet_api(&opts, api_client).await?;
    daemon.observe_machine(&opts, &runtime.version, secure.port);
    let health = Arc::new(PlegHealth::new(&opts.pleg));
    let (inspections, inspection_requests) = pleg::inspect_requests();
    daemon.executor = daemon.executor.clone().with_pleg_inspections(inspections);
    start_sources(
        &opts,
        &daemon,
        &runtime.cri,
        &health,
        &report,
        inspection_requests,
        &shutdown_rx,
    );
    let ledger_stream = serve_ledger_stream(&opts, &engine, &shutdown_rx).await?;
    tokio::spawn(crate::shell::container_log_rotation::run(
        runtime.cri.clone(),
        opts.log_rotation.clone(),
        shutdown_rx.clone(),
    ));
    let state = HttpState {
        engine: engine.clone(),
        events: daemon.events.clone(),
        pleg: health,
        prometheus,
        stats: crate::shell::stats::StatsState::new(
            runtime.cri.clone(),
            opts.node_name.clone(),
            opts.root_dir.clone(),
        )
        .with_pod_logs_dir(opts.pod_logs_dir.clone()),
    };
    let server = listener.map(|l| tokio::spawn(serve_http(l, state.clone(), shutdown_rx.clone())));
    let extra = extra_routes(&engine, &runtime.cri, &opts.node_name);
    let secure_server = tokio::spawn(secure.serve(state, extra, shutdown_rx.clone()));

    let stopped = daemon.run_until_signal(&opts, &mut inbox).await;

    // shutdown: sources and servers stop, the ledger is flushed, the runtime goes last
    let _ = shutdown_tx.send(true);
    if let Some(server) = server {
        let _ = server.await;
    }
    let _ = secure_server.await;
    let _ = tokio::time::timeout(Duration::from_secs(2), ledger_stream.task).await;
    let _ = std::fs::remove_file(&ledger_stream.socket);
    {
        let mut engine = engine.lock().expect("engine");
        // the last record's turn ends and its span goes to the export queue, which the
        // tracing pipeline flushes on exit
        engine.idle();
        engine.flush_durable(Duration::from_secs(5));
    }
    if let Some(rt) = runtime.embedded {
        rt.shutdown()
            .await
            .context("the embedded runtime did not shut down cleanly")?;
    }
    match stopped {
        Stopped::Normally => Ok(()),
        Stopped::Quit(recording) => Err(Quit(recording).into()),
    }
}

/// How the main loop ended.
enum Stopped {
    /// The inputs closed, or a stop signal came (and the pods stopped, if they were to).
    Normally,
    /// SIGQUIT: the flight recorder wrote this file, if it could.
    Quit(Option<PathBuf>),
}

/// The root and pod log directories exist, and the ledger settings are valid.
fn prepare_directories(opts: &RunOptions) -> anyhow::Result<()> {
    std::fs::create_dir_all(&opts.root_dir)
        .with_context(|| format!("cannot create --root-dir {}", opts.root_dir.display()))?;
    std::fs::create_dir_all(&opts.pod_logs_dir).with_context(|| {
        format!(
            "cannot create the pod log directory {}",
            opts.pod_logs_dir.display()
        )
    })?;
    opts.ledger
        .validate()
        .context("invalid ledger configuration")
}

/// The container runtime the agent talks to.
struct Runtime {
    /// The embedded runtime, when no `--container-runtime-endpoint` was given.
    embedded: Option<EmbeddedRuntime>,
    /// The CRI client.
    cri: CriClient,
    /// What the runtime said it is.
    version: crate::cri::v1::VersionResponse,
}

/// Starts the embedded runtime unless an endpoint is given, connects the CRI client and
/// asks the runtime's version.
async fn connect_runtime(opts: &RunOptions) -> anyhow::Result<Runtime> {
    let mut embedded = None;
    let endpoint = match &opts.container_runtime_endpoint {
        Some(e) => e.clone(),
        None => {
            let socket = opts.root_dir.join("embedded-runtime.sock");
            let listen = format!("unix://{}", socket.display());
            let rt =
                EmbeddedRuntime::start(&listen, RuntimeOptions::new(opts.root_dir.join("runtime")))
                    .await
                    .with_context(|| format!("cannot start the embedded runtime on {listen}"))?;
            tracing::warn!(
                endpoint = %rt.endpoint(),
                "using the embedded runtime: containers are plain host processes and nothing is isolated; use containerd or CRI-O (--container-runtime-endpoint) in production"
            );
            let ep = rt.endpoint();
            embedded = Some(rt);
            ep
        }
    };
    let cri = CriClient::connect(
        &endpoint,
        CriClientOptions {
            request_timeout_ms: opts.runtime_request_timeout_ms,
            ..CriClientOptions::default()
        },
    )
    .await
    .with_context(|| format!("cannot connect to the container runtime at {endpoint}"))?;
    let version = cri
        .version()
        .await
        .with_context(|| format!("the container runtime at {endpoint} does not answer Version"))?;
    tracing::info!(runtime = %version.runtime_name, version = %version.runtime_version, api = %version.runtime_api_version, "connected to the container runtime");
    Ok(Runtime {
        embedded,
        cri,
        version,
    })
}

/// The API client, the node status writer and the event sink, when a kubeconfig is given.
async fn join_cluster(opts: &RunOptions) -> anyhow::Result<Option<Cluster>> {
    let Some(path) = &opts.kubeconfig else {
        return Ok(None);
    };
    let api = ApiClient::from_kubeconfig(path, opts.api_limits).await?;
    let events = crate::shell::api::events::spawn(
        api.with_limits(opts.event_limits),
        opts.node_name.clone(),
        1000,
    );
    Ok(Some(Cluster {
        node_sync: NodeSync::new(api.clone()),
        events,
        api,
    }))
}

impl Daemon {
    /// The daemon around `engine`: the executor (with secrets and projected volumes when
    /// the node joined a cluster), the prober and the event log; and the receiving end of
    /// the channel its commands arm timers on, for the timer task.
    fn new(
        opts: &RunOptions,
        engine: Arc<Mutex<Engine>>,
        cri: &CriClient,
        cluster: Option<Cluster>,
        report: Report,
    ) -> (Daemon, mpsc::UnboundedReceiver<timers::Arm>) {
        let redactor = Redactor::new();
        let (arm_tx, arm_rx) = mpsc::unbounded_channel();
        let mut executor = Executor::new(
            cri.clone(),
            NodeContext {
                pod_logs_dir: opts.pod_logs_dir.clone(),
                node_name: opts.node_name.clone(),
                node_ip: opts.node_ip.clone(),
                pods_dir: opts.root_dir.join("pods"),
                dns: opts.dns.clone(),
                managed_files: opts.container_runtime_endpoint.is_some(),
                seccomp_default: opts.seccomp_default,
            },
            report.clone(),
        );
        if let Some(c) = &cluster {
            let env = EnvResolver::new(c.api.clone(), redactor.clone(), opts.node_name.clone());
            executor = executor.with_env(env);
        }
        executor = executor.with_runtime_classes(crate::shell::runtime_class::RuntimeClasses::new(
            cluster.as_ref().map(|c| c.api.clone()),
        ));
        executor = executor.with_pull_secrets(crate::shell::pull_secrets::PullSecrets::new(
            cluster.as_ref().map(|c| c.api.clone()),
            redactor.clone(),
        ));
        let projector = crate::shell::projected::Projector::new(
            cluster.as_ref().map(|c| c.api.clone()),
            redactor.clone(),
            opts.root_dir.join("pods"),
        )
        .on_node(&opts.node_name)
        .with_refresh_period(Duration::from_millis(opts.core.resync_interval_ms));
        executor = executor.with_projector(projector.clone());
        executor = executor.with_mount_wait(crate::shell::executor::MountWait {
            retry_initial: Duration::from_millis(opts.core.volume_mount_retry_initial_ms),
            timeout: Duration::from_millis(opts.core.volume_mount_timeout_ms),
        });
        tokio::spawn(projector.run());
        let empty_dirs = crate::shell::empty_dir_usage::EmptyDirUsage::default();
        executor = executor.with_empty_dir_usage(empty_dirs.clone());
        tokio::spawn(empty_dirs.run(opts.eviction_monitoring_period_ms, report.clone()));
        let daemon = Daemon {
            engine,
            executor,
            prober: Prober::new(cri.clone()),
            timers: arm_tx,
            events: Arc::new(EventLog::new(opts.event_log_capacity)),
            report,
            cluster,
            redactor,
            #[cfg(feature = "fault-injection")]
            panic_on_kind: std::env::var("LEDGERLET_FAULT_PANIC_ON_KIND").ok(),
        };
        (daemon, arm_rx)
    }

    /// Appends `event` as an input of its own (no cause, no trace) and folds it.
    fn handle_event(&self, event: Event) {
        self.handle(
            Input {
                event,
                cause: None,
                trace: None,
            },
            || false,
        );
    }

    /// The core's configuration: the agent's options, the node and runtime names and the
    /// pod sources in use, appended as `ConfigApplied` (after `AgentRestarted` when the
    /// durable ledger holds a previous lifetime).
    fn apply_config(
        &self,
        opts: &RunOptions,
        version: &crate::cri::v1::VersionResponse,
        restarted: Option<AgentRestarted>,
    ) -> anyhow::Result<()> {
        let mut core = opts.core.clone();
        core.node_name = opts.node_name.clone();
        core.node_ip = opts.node_ip.clone();
        core.runtime_name = version.runtime_name.clone();
        core.apparmor_enabled = crate::shell::security_context::host_apparmor_enabled();
        core.sources = Vec::new();
        if opts.pod_manifest_path.is_some() {
            core.sources.push(PodSource::File);
        }
        if self.cluster.is_some() {
            core.sources.push(PodSource::Api);
        }
        core.validate().context("invalid configuration")?;
        if let Some(r) = restarted {
            self.handle_event(Event::AgentRestarted(r));
        }
        self.handle_event(Event::ConfigApplied(ConfigApplied {
            config: Box::new(core),
        }));
        Ok(())
    }

    /// What this machine is, as the Node would register it (`NodeInfoObserved`).
    fn observe_machine(
        &self,
        opts: &RunOptions,
        version: &crate::cri::v1::VersionResponse,
        http_port: u16,
    ) {
        let info = machine::observe(&MachineConfig {
            node_name: opts.node_name.clone(),
            hostname: machine::system_hostname(),
            node_ip: opts.node_ip.clone(),
            max_pods: opts.core.max_pods,
            root_dir: opts.root_dir.clone(),
            http_port,
            runtime_name: version.runtime_name.clone(),
            runtime_version: version.runtime_version.clone(),
            reserved: opts.reserved.clone(),
        });
        self.handle_event(Event::NodeInfoObserved(info));
    }

    /// How long the loop waits for the pods after a `NodeShutdown`: the shutdown grace
    /// period when graceful node shutdown is on (the kubelet's inhibit delay), else the
    /// longest grace period of a pod plus 10 s.
    fn stop_pods_budget(&self, opts: &RunOptions) -> Duration {
        if opts.core.shutdown_grace_period_s > 0 {
            return Duration::from_secs(opts.core.shutdown_grace_period_s);
        }
        let engine = self.engine.lock().expect("engine");
        let max_grace_s = engine
            .node()
            .pod_manager
            .pods()
            .filter_map(|p| crate::core::pod::termination_grace_period_s(p))
            .max()
            .unwrap_or(30);
        Duration::from_secs(max_grace_s.max(0) as u64 + 10)
    }

    /// The main loop: folds inputs until a signal. On SIGTERM or SIGINT with
    /// `stop_pods_on_exit`, a `NodeShutdown` record stops every pod (graceful node shutdown
    /// with `--shutdown-grace-period`, see `core::node_shutdown`) and the loop waits until
    /// they stopped and the API server has their statuses, at most `stop_pods_budget`. On
    /// SIGQUIT the flight recorder writes its file and the loop ends at once.
    async fn run_until_signal(
        &self,
        opts: &RunOptions,
        inbox: &mut mpsc::Receiver<Input>,
    ) -> Stopped {
        let signal = shutdown_signal();
        tokio::pin!(signal);
        let mut stopping: Option<Instant> = None;
        let mut deadline = Instant::now();
        loop {
            if let Some(since) = stopping {
                let done = {
                    let engine = self.engine.lock().expect("engine");
                    let node = engine.node();
                    node.all_pods_stopped() && node.api_statuses_synced()
                };
                if done || Instant::now() >= deadline {
                    if !done {
                        tracing::warn!("pods did not all stop within the shutdown deadline; the runtime will kill what is left");
                    }
                    tracing::info!(
                        elapsed_ms = since.elapsed().as_millis() as u64,
                        "all pods stopped"
                    );
                    return Stopped::Normally;
                }
            }
            tokio::select! {
                input = inbox.recv() => {
                    let Some(input) = input else { return Stopped::Normally };
                    self.handle(input, || !inbox.is_empty());
                }
                sig = &mut signal, if stopping.is_none() => {
                    if sig == "SIGQUIT" {
                        // an abort for a postmortem: record, then stop without stopping pods
                        tracing::warn!("SIGQUIT: writing the flight recording and exiting");
                        return Stopped::Quit(crate::postmortem::flight_recorder::record("SIGQUIT"));
                    }
                    tracing::info!(signal = sig, "shutting down");
                    if !opts.stop_pods_on_exit {
                        return Stopped::Normally;
                    }
                    deadline = Instant::now() + self.stop_pods_budget(opts);
                    stopping = Some(Instant::now());
                    self.handle(Input { event: Event::NodeShutdown(NodeShutdown {}), cause: None, trace: None }, || !inbox.is_empty());
                }
                _ = tokio::time::sleep(Duration::from_millis(200)), if stopping.is_some() => {}
            }
        }
    }
}

/// The tasks that feed the engine: runtime health, the API server's pods and the node's
/// pod CIDR (when joined), the PLEG and the static pod manifests.
fn start_sources(
    opts: &RunOptions,
    daemon: &Daemon,
    cri: &CriClient,
    health: &Arc<PlegHealth>,
    report: &Report,
    inspection_requests: mpsc::Receiver<pleg::InspectRequest>,
    shutdown_rx: &watch::Receiver<bool>,
) {
    {
        let pleg_health = health.clone();
        tokio::spawn(runtime_health::run(
            cri.clone(),
            runtime_health::DEFAULT_PERIOD_MS,
            opts.max_wait_for_container_runtime_ms,
            move || pleg_health.check(),
            report.clone(),
            shutdown_rx.clone(),
        ));
    }
    if let Some(c) = &daemon.cluster {
        tokio::spawn(crate::sources::api::run(
            c.api.client(),
            opts.node_name.clone(),
            report.clone(),
            shutdown_rx.clone(),
        ));
        tokio::spawn(crate::sources::node::run(
            c.api.client(),
            opts.node_name.clone(),
            report.clone(),
            shutdown_rx.clone(),
        ));
        tokio::spawn(crate::shell::pod_cidr::run(
            c.api.client(),
            cri.clone(),
            opts.node_name.clone(),
            crate::shell::pod_cidr::DEFAULT_RETRY_PERIOD_MS,
            shutdown_rx.clone(),
        ));
    }
    tokio::spawn(pleg::run(
        cri.clone(),
        PlegOptions {
            node_name: opts.node_name.clone(),
            ..opts.pleg.clone()
        },
        report.clone(),
        health.clone(),
        inspection_requests,
        shutdown_rx.clone(),
    ));
    if let Some(path) = &opts.pod_manifest_path {
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(crate::sources::file::run(
            path.clone(),
            opts.node_name.clone(),
            opts.manifest_check_period_ms,
            tx,
        ));
        let report = report.clone();
        let mut stop = shutdown_rx.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    e = rx.recv() => match e {
                        Some(e) => { if !report.send(e, None).await { return; } }
                        None => return,
                    },
                    r = stop.changed() => if r.is_err() || *stop.borrow() { return },
                }
            }
        });
    }
}

/// The ledger stream's server task and the unix socket it listens on.
struct LedgerStream {
    task: tokio::task::JoinHandle<()>,
    socket: PathBuf,
}

/// Serves the ledger stream (gRPC `ledgerlet.v1.Ledger`) on the root directory's socket
/// and, if asked, on a loopback TCP address.
async fn serve_ledger_stream(
    opts: &RunOptions,
    engine: &Arc<Mutex<Engine>>,
    shutdown_rx: &watch::Receiver<bool>,
) -> anyhow::Result<LedgerStream> {
    let socket = opts.root_dir.join(crate::stream::SOCKET_NAME);
    let unix = crate::stream::server::bind_unix(&socket).await?;
    let tcp = match opts.ledger_grpc_address {
        Some(a) => Some(crate::stream::server::bind_tcp(a).await?),
        None => None,
    };
    let tcp_addr = tcp.as_ref().and_then(|l| l.local_addr().ok());
    let task = tokio::spawn(crate::stream::server::serve(
        crate::stream::server::LedgerService::new(engine.clone(), shutdown_rx.clone()),
        unix,
        tcp,
        shutdown_rx.clone(),
    ));
    match tcp_addr {
        Some(a) => {
            tracing::info!(socket = %socket.display(), tcp = %a, "serving the ledger stream (gRPC ledgerlet.v1.Ledger)")
        }
        None => {
            tracing::info!(socket = %socket.display(), "serving the ledger stream (gRPC ledgerlet.v1.Ledger)")
        }
    }
    Ok(LedgerStream { task, socket })
}

/// Serves the HTTP endpoints on `listener` until shutdown.
async fn serve_http(
    listener: tokio::net::TcpListener,
    state: HttpState,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(listener, http::router(state))
        .with_graceful_shutdown(async move {
            while shutdown.changed().await.is_ok() {
                if *shutdown.borrow() {
                    break;
                }
            }
        })
        .await
}

/// Routers other pieces serve on the secure port (e.g. `/containerLogs`), each fully
/// stated; they get the same authentication and authorization as every other route.
fn extra_routes(engine: &Arc<Mutex<Engine>>, cri: &CriClient, node_name: &str) -> axum::Router {
    use crate::kubelet_api::{container_logs, streaming};
    let pods = Arc::new(container_logs::EnginePods(engine.clone()));
    container_logs::router(container_logs::ContainerLogsState {
        pods: pods.clone(),
        cri: cri.clone(),
    })
    .merge(streaming::router(streaming::StreamingState::new(
        pods,
        cri.clone(),
        node_name.to_string(),
    )))
}

/// The read-only port's listener, on loopback whatever `--address` says (it is
/// unauthenticated); `None` with `--read-only-port 0`, which turns it off as in the kubelet.
async fn bind_read_only_port(opts: &RunOptions) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    if opts.read_only_port == 0 {
        tracing::info!("the read-only port is off (--read-only-port 0)");
        return Ok(None);
    }
    let ip = crate::http_server::read_only_address(opts.address);
    if ip != opts.address {
        tracing::info!(address = %opts.address, read_only = %ip, "the read-only port stays on loopback; --address is for the kubelet API");
    }
    let addr = SocketAddr::new(ip, opts.read_only_port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (--read-only-port)"))?;
    let bound = listener.local_addr()?;
    tracing::info!(address = %bound, "serving /healthz, /metrics, /metrics/probes, /metrics/resource, /stats/summary, /pods, /debug/ledger, /debug/state");
    Ok(Some(listener))
}

/// The kubelet API, bound and configured, not yet serving.
struct KubeletApiServer {
    listener: tokio::net::TcpListener,
    /// The port bound (what the node reports in `daemonEndpoints`).
    port: u16,
    tls: Arc<rustls::ServerConfig>,
    api: Arc<crate::kubelet_api::KubeletApi>,
    configz: serde_json::Value,
}

/// Binds `--address`:`--port` and loads (or makes) the serving certificate; authentication
/// and authorization as the flags say, reviews through `client` (the node's API client).
async fn bind_kubelet_api(
    opts: &RunOptions,
    client: Option<kube::Client>,
) -> anyhow::Result<KubeletApiServer> {
    use crate::kubelet_api::{authn, authz, options::AuthorizationMode, tls};
    let mode = opts
        .api
        .effective_mode(client.is_some())
        .map_err(anyhow::Error::msg)?;
    let names = [
        opts.node_name.clone(),
        machine::system_hostname(),
        opts.node_ip.clone(),
    ];
    let (chain, key, cert_path) = tls::serving_pair(&opts.api.tls, &opts.root_dir, &names)?;
    let tls = Arc::new(tls::server_config(&opts.api.tls, chain, key)?);
    let addr = SocketAddr::new(opts.address, opts.api.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (--address/--port)"))?;
    let port = listener.local_addr()?.port();
    let authz = match (mode, &client) {
        (AuthorizationMode::Webhook, Some(c)) => authz::Authorizer::webhook(c.clone()),
        _ => authz::Authorizer::AlwaysAllow,
    };
    let tokens = match (&client, opts.api.token_webhook) {
        (Some(c), true) => Some(authn::TokenReviewer::new(c.clone())),
        _ => None,
    };
    let api = Arc::new(crate::kubelet_api::KubeletApi {
        node_name: opts.node_name.clone(),
        authn: authn::Authenticator {
            tokens,
            anonymous: opts.api.anonymous_auth,
        },
        authz,
    });
    let mut configz = opts.api.configz(mode, port);
    if let Some(c) = configz.as_object_mut() {
        c.insert("address".into(), opts.address.to_string().into());
        c.insert("readOnlyPort".into(), opts.read_only_port.into());
        c.insert("nodeName".into(), opts.node_name.clone().into());
        c.insert("maxPods".into(), opts.core.max_pods.into());
        c.insert(
            "podLogsDir".into(),
            opts.pod_logs_dir.display().to_string().into(),
        );
        c.insert(
            "staticPodPath".into(),
            opts.pod_manifest_path
                .as_ref()
                .map(|p| p.display().to_string())
                .into(),
        );
        c.insert(
            "clusterDNS".into(),
            opts.dns
                .cluster_dns
                .iter()
                .map(|ip| serde_json::Value::from(ip.to_string()))
                .collect::<Vec<_>>()
                .into(),
        );
        c.insert(
            "clusterDomain".into(),
            opts.dns.cluster_domain.clone().into(),
        );
        c.insert("seccompDefault".into(), opts.seccomp_default.into());
        c.insert("kubeAPIQPS".into(), opts.api_limits.qps.into());
        c.insert("kubeAPIBurst".into(), opts.api_limits.burst.into());
    }
    tracing::info!(kubelet_api = %SocketAddr::new(opts.address, port), certificate = %cert_path.display(), authorization = mode.as_str(), token_webhook = opts.api.token_webhook, anonymous = opts.api.anonymous_auth, "serving the kubelet API (HTTPS)");
    Ok(KubeletApiServer {
        listener,
        port,
        tls,
        api,
        configz,
    })
}

impl KubeletApiServer {
    /// Serves the shared endpoints, `/configz` and `extra` until shutdown.
    async fn serve(self, state: HttpState, extra: axum::Router, shutdown: watch::Receiver<bool>) {
        use crate::kubelet_api::{guarded, routes, serve, Limits};
        let limits = Limits::default();
        let app = guarded(
            self.api,
            routes::routes(state, routes::Configz(self.configz), extra),
            limits,
        );
        serve(self.listener, self.tls, app, limits, shutdown).await;
    }
}
